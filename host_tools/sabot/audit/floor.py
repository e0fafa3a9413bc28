"""A floor's database servers as streaming replication makes them (docs/FLOOR.md): which answer,
which is the primary, its standbys, and whether a commit waits for a synchronous standby that
is not there; a standby promoted, the old primary fenced first; a primary made to wait for its
standby again once one streams.

Server-level SQL only (replication, settings, sessions): nothing here knows the audit store's
tables. Every server is named as HOST:PORT, never by its URL, so no password is ever printed."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from sabot.errors import NotVerified, SabotError

CONNECT_S = 5  # a server that does not answer a new connection within this is taken as down
PROMOTE_S = 60  # pg_promote's own wait
CATCH_UP_S = 10.0  # how long a promotion waits for the standby to replay the fenced primary
SETTLE_S = 10.0  # how long a reloaded setting or a promotion takes to show on new connections

Say = Callable[[str], None]
GRANTS = " (the role needs the grants docs/FLOOR.md gives)"


class Server:
    """One server of a (possibly multi-host) libpq URL: its own connection string, and how lines
    name it."""

    def __init__(self, conninfo: str, shown: str) -> None:
        self.conninfo = conninfo
        self.shown = shown

    def connect(self) -> psycopg.Connection[Any]:
        """A connection (autocommit); psycopg.Error when the server does not answer."""
        return psycopg.connect(make_conninfo(self.conninfo, connect_timeout=str(CONNECT_S)),
                               autocommit=True)

    def must_connect(self, what: str = "") -> psycopg.Connection[Any]:
        try:
            return self.connect()
        except psycopg.Error as e:
            raise SabotError(f"{self.shown} {not_answering(reason(e))}{what}") from None

    @contextmanager
    def session(self, not_done: str = "",
                failed: str = GRANTS) -> Iterator[psycopg.Connection[Any]]:
        """A connection to work on, closed after: a server that does not answer says so, then
        `not_done`; an error of the server's on it is one line naming it, then `failed`."""
        con = self.must_connect(not_done)
        try:
            yield con
        except psycopg.Error as e:
            raise SabotError(f"{self.shown}: {reason(e)}{failed}") from None
        finally:
            con.close()


def not_answering(why: str) -> str:
    """A server that gave no connection, said as what it was: one that answered and refused
    this login (pg_hba.conf, the password) is not one that does not answer."""
    low = why.lower()
    if "pg_hba.conf" in low or "password authentication" in low or "permission denied" in low:
        return f"answers but refuses this login ({why})"
    return f"does not answer ({why})"


def reason(e: BaseException) -> str:
    """A server's error in one line: its first line, without libpq's 'connection to ...' prefix
    (which names the server already named)."""
    lines = [line for line in str(e).strip().splitlines() if line.strip()]
    text = lines[0] if lines else type(e).__name__
    text = re.sub(r"^connection (failed|is bad): ", "", text)
    return re.sub(r'^connection to server (at|on|on socket) "[^"]*"(, port \d+)? failed: ', "",
                  text)


def servers(url: str) -> list[Server]:
    """Each host of `url` (libpq's URL or key=value string, its hosts and ports comma-separated)
    as a Server of its own: reached whatever it is (target_session_attrs=any)."""
    try:
        given = conninfo_to_dict(url)
    except psycopg.Error as e:
        raise SabotError(f"not a PostgreSQL URL ({reason(e)}): postgresql://USER@HOST[:PORT]"
                         "[,HOST[:PORT]...]/DATABASE") from None
    # no host named: libpq's own default (PGHOST, or this machine's socket), named so
    hosts = str(given.get("host") or os.environ.get("PGHOST") or "").split(",")
    ports = str(given.get("port") or os.environ.get("PGPORT") or "5432").split(",")
    addrs = str(given["hostaddr"]).split(",") if given.get("hostaddr") else []
    if len(ports) == 1:
        ports *= len(hosts)
    if len(ports) != len(hosts) or (addrs and len(addrs) != len(hosts)):
        raise SabotError("the URL names a different number of hosts and ports")
    out = []
    for i, (host, port) in enumerate(zip(hosts, ports)):
        one = {"port": port or "5432", "target_session_attrs": "any",
               "application_name": "sabot floor"}
        if host:
            one["host"] = host
        if addrs:
            one["hostaddr"] = addrs[i]
        name = host or (addrs[i] if addrs else "the local socket")
        out.append(Server(make_conninfo(url, **one), f"{name}:{port or '5432'}"))
    return out


def one_server(url: str, option: str) -> Server:
    found = servers(url)
    if len(found) != 1:
        raise SabotError(f"{option} names {len(found)} servers "
                         f"({', '.join(s.shown for s in found)}): name one")
    return found[0]


def required_standbys(names: str) -> int:
    """How many synchronous standbys each commit waits for under synchronous_standby_names."""
    if not names.strip():
        return 0
    m = re.match(r"(?i)\s*(?:(?:first|any)\s+)?(\d+)\s*\(", names)
    return int(m.group(1)) if m else 1


def survey_one(server: Server) -> dict[str, Any]:
    """What one server says of itself: whether it answers, primary or standby, fenced (refusing
    writes), its synchronous_standby_names and its standbys, or where it streams from."""
    out: dict[str, Any] = {"server": server.shown, "answers": False, "error": None}
    try:
        con = server.connect()
    except psycopg.Error as e:
        out["error"] = reason(e)
        return out
    try:
        standby, fenced, names = con.execute(
            "SELECT pg_is_in_recovery(), current_setting('default_transaction_read_only'),"
            " current_setting('synchronous_standby_names')").fetchone() or (None, None, None)
        names = str(names)
        out.update(answers=True, role="standby" if standby else "primary",
                   fenced=fenced == "on", synchronous_standby_names=names)
        if standby:
            row = con.execute("SELECT status, sender_host, sender_port FROM"
                              " pg_stat_wal_receiver").fetchone()
            out["upstream"] = ({"status": row[0], "server": f"{row[1]}:{row[2]}"
                                if row[1] else None} if row else None)
        else:
            out["standbys"] = [
                {"name": name, "address": addr, "state": state, "sync_state": sync}
                for name, addr, state, sync in con.execute(
                    "SELECT application_name, host(client_addr), state, sync_state"
                    " FROM pg_stat_replication ORDER BY application_name")]
            out["waits_for"] = required_standbys(names)
            out["synchronous"] = sum(1 for s in out["standbys"] if s["state"] == "streaming"
                                     and s["sync_state"] in ("sync", "quorum"))
            # without pg_monitor the server shows its standbys' rows but none of their states
            out["hidden"] = any(s["state"] is None for s in out["standbys"])
    except psycopg.Error as e:
        out.update(answers=False, error=reason(e))
    finally:
        con.close()
    return out


def describe(s: dict[str, Any]) -> str:
    """One server's line."""
    if not s["answers"]:
        return f"{s['server']}: {not_answering(s['error'])}"
    if s["role"] == "standby":
        up = s.get("upstream")
        if up and up["status"] == "streaming":
            return f"{s['server']}: standby, streaming from {up['server'] or 'its primary'}"
        why = up["status"] if up else "no WAL receiver"
        return f"{s['server']}: standby, receiving nothing ({why})"
    line = f"{s['server']}: primary, " + ("FENCED (refuses writes)" if s["fenced"]
                                          else "takes writes")
    names = s["synchronous_standby_names"]
    if s["waits_for"]:
        line += (f"; each commit waits for {s['waits_for']} synchronous standby"
                 f"{'s' if s['waits_for'] > 1 else ''} (synchronous_standby_names = '{names}')")
    else:
        line += "; commits wait for no standby (synchronous_standby_names = '')"
    standbys = [f"{x['name'] or '?'} ({x['address'] or '?'}) {x['state'] or '?'}, "
                f"{x['sync_state'] or '?'}" for x in s["standbys"]]
    return line + ("; standbys: " + "; ".join(standbys) if standbys else "; no standby connected")


def verdict(states: list[dict[str, Any]]) -> tuple[bool | None, str]:
    """Whether the floor records (a commit on its one writable primary returns), and in words
    why, or what is wrong and what to do; None: the role may not see it."""
    up = [s for s in states if s["answers"]]
    writable = [s for s in up if s["role"] == "primary" and not s["fenced"]]
    if len(writable) > 1:
        names = " and ".join(s["server"] for s in writable)
        return False, (f"the floor is NOT safe: {names} both take writes (two primaries): a pit "
                       "may write to either and the two histories part; fence the one that is "
                       "not the primary now (docs/FLOOR.md) before anything else")
    if not writable:
        said = "; ".join(f"{s['server']} " + ("does not answer" if not s["answers"] else
                                              "is fenced" if s["role"] == "primary" else
                                              "is a standby") for s in states)
        return False, (f"the floor is NOT recording: no server takes writes ({said}); fail over "
                       "to the standby: sabot floor promote (docs/FLOOR.md)")
    p = writable[0]
    if p["hidden"]:
        return None, (f"cannot tell whether the floor records: {p['server']} does not show this "
                      "role its standbys' states (it needs pg_monitor: docs/FLOOR.md)")
    if p["synchronous"] < p["waits_for"]:
        return False, (
            f"the floor is NOT recording: every commit on {p['server']} waits for "
            f"{p['waits_for']} synchronous standby{'s' if p['waits_for'] > 1 else ''} "
            f"(synchronous_standby_names = '{p['synchronous_standby_names']}') and "
            f"{p['synchronous'] or 'none'} {'is' if p['synchronous'] < 2 else 'are'} connected, "
            "so no round is acknowledged: bring the standby back, or knowingly stop waiting "
            "for it (docs/FLOOR.md, \"When db2, the standby, dies\")")
    if p["waits_for"]:
        return True, (f"the floor records: each commit is on {p['server']} and on its "
                      "synchronous standby before a shoe hears of it")
    if p["standbys"]:
        return True, (f"the floor records, but {p['server']}'s standby is not synchronous: "
                      "losing it may lose the last acknowledged rounds; sabot floor sync "
                      "requires the standby again")
    return True, (f"the floor records, on {p['server']} alone: no standby holds its commits, "
                  "so losing it loses what it acknowledged since; rejoin a standby, then "
                  "sabot floor sync (docs/FLOOR.md)")


def status(url: str) -> dict[str, Any]:
    """Every server of `url` surveyed, and the verdict (None when no server answers)."""
    states = [survey_one(s) for s in servers(url)]
    recording, words = verdict(states) if any(s["answers"] for s in states) else (None, None)
    return {"servers": states, "recording": recording, "verdict": words}


def _one(con: psycopg.Connection[Any], sql: str, args: tuple[Any, ...] | None = None) -> Any:
    row = con.execute(sql, args).fetchone()
    return row[0] if row else None


def _until(check: Callable[[], bool], seconds: float, pause: float = 0.1) -> bool:
    end = time.monotonic() + seconds
    while True:
        if check():
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(pause)


def _fresh(server: Server, sql: str) -> Any:
    """`sql`'s value on a new connection (a reload shows there once the server has read it)."""
    con = server.must_connect()
    try:
        return _one(con, sql)
    finally:
        con.close()


def fenced(server: Server) -> bool:
    """Whether `server` answers and refuses writes now (fenced, or a standby)."""
    try:
        return _fresh(server, "SHOW transaction_read_only") == "on"
    except (psycopg.Error, SabotError):
        return False


def fence_one(url: str, floor_url: str, say: Say) -> None:
    """One server fenced (two primaries: the old one back on its own), once another server of
    the floor is seen to take writes."""
    target = one_server(url, "--db")
    others = [s for s in status(floor_url)["servers"] if s["server"] != target.shown]
    if not any(s["answers"] and s["role"] == "primary" and not s["fenced"] for s in others):
        raise SabotError(f"no other server of --floor takes writes: fencing {target.shown} "
                         "would stop the floor recording; nothing fenced (sabot floor status)")
    with target.session(": nothing fenced", "") as con:
        if _one(con, "SELECT pg_is_in_recovery()"):
            raise SabotError(f"{target.shown} is a standby: it takes no writes; nothing fenced")
    _fence(target, say)


def fence(old: Server, standby: psycopg.Connection[Any], say: Say) -> None:
    """The old primary fenced (_fence) if it answers; then the standby given the time to replay
    all it wrote."""
    try:
        con = old.connect()
    except psycopg.Error as e:
        say(f"the old primary {old.shown} does not answer ({reason(e)}): NOT fenced. It must "
            "not start again as a primary: keep it off (or off the network) until it has "
            "rejoined as the standby (docs/FLOOR.md)")
        return
    try:
        if _one(con, "SELECT pg_is_in_recovery()"):
            say(f"{old.shown} is a standby, not a primary: nothing to fence there")
            return
    except psycopg.Error as e:
        raise SabotError(f"{old.shown}: {reason(e)}: nothing promoted") from None
    finally:
        con.close()
    lsn = _fence(old, say, "nothing promoted", f"the old primary {old.shown}")
    caught = _until(lambda: bool(_one(standby, "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn",
                                      (lsn,))), CATCH_UP_S)
    if caught:
        say(f"the standby has replayed everything {old.shown} wrote (up to {lsn})")
    else:
        say(f"the standby has not replayed everything {old.shown} wrote (up to {lsn}) after "
            f"{CATCH_UP_S:g} s: promoting it anyway; what only {old.shown} holds is undone when "
            "it rejoins (a round in doubt is written again by its pit)")


def _fence(server: Server, say: Say, not_done: str = "nothing fenced", label: str = "") -> str:
    """`server` made to refuse writes (so target_session_attrs=read-write skips it), for good
    (ALTER SYSTEM: its postgresql.auto.conf), its client sessions ended (they reconnect, to the
    server that takes writes); the WAL position it had then."""
    with server.session(f": {not_done}", f"{GRANTS}: {not_done}") as con:
        con.execute(b"ALTER SYSTEM SET default_transaction_read_only = on")
        con.execute(b"SELECT pg_reload_conf()")
        if not _until(lambda: _fresh(server, "SHOW default_transaction_read_only") == "on",
                      SETTLE_S):
            raise SabotError(f"{server.shown} did not take default_transaction_read_only = on "
                             f"within {SETTLE_S:g} s: {not_done}")
        ended = _one(con, "SELECT count(*) FILTER (WHERE pg_terminate_backend(a.pid))"
                     " FROM pg_stat_activity a LEFT JOIN pg_roles r ON r.oid = a.usesysid"
                     " WHERE a.backend_type = 'client backend' AND a.pid <> pg_backend_pid()"
                     " AND (NOT coalesce(r.rolsuper, false) OR (SELECT rolsuper FROM pg_roles"
                     " WHERE rolname = current_user))")
        say(f"fenced {label or server.shown}: it refuses writes (default_transaction_read_only "
            f"= on, kept in its postgresql.auto.conf across restarts); {ended} client "
            f"session{'' if ended == 1 else 's'} there ended, to reconnect to the primary")
        return str(_one(con, "SELECT pg_current_wal_lsn()::text"))


def promote(standby_url: str, old_url: str | None, say: Say) -> None:
    """Fail over: the old primary fenced if it answers, the standby made to wait for no
    synchronous standby (it has none until one rejoins) and promoted."""
    new = one_server(standby_url, "--db")
    old = one_server(old_url, "--old") if old_url else None
    if old and old.shown == new.shown:
        raise SabotError(f"--db and --old both name {new.shown}")
    with new.session(": nothing promoted") as con:
        if not _one(con, "SELECT pg_is_in_recovery()"):
            raise SabotError(f"{new.shown} is not a standby: it is a primary already, so "
                             "nothing was promoted or fenced (sabot floor status shows the floor)")
        receiving = con.execute(b"SELECT status, sender_host, sender_port FROM"
                                b" pg_stat_wal_receiver").fetchone()
        if old:
            fence(old, con, say)
        else:
            say("no --old given: the old primary was not fenced; it must be down and must not "
                "start again as a primary (docs/FLOOR.md)")
        if receiving and receiving[0] == "streaming" and not (old and fenced(old)):
            # its primary is up and sends it every change: promoting now makes two primaries
            raise SabotError(f"{new.shown} is streaming from a primary that is up "
                             f"({receiving[1]}:{receiving[2]}): nothing promoted. Fence that "
                             "one first (--old HOST:PORT naming it as it answers), or stop it")
        if _one(con, "SHOW default_transaction_read_only") == "on":
            con.execute(b"ALTER SYSTEM RESET default_transaction_read_only")
            say(f"{new.shown} had been fenced: default_transaction_read_only reset")
        # before it is a primary: it has no standby of its own, so it must not wait for one
        con.execute(b"ALTER SYSTEM SET synchronous_standby_names = ''")
        con.execute(b"SELECT pg_reload_conf()")
        if not _one(con, f"SELECT pg_promote(true, {PROMOTE_S})"):
            raise SabotError(f"{new.shown} did not finish promoting within {PROMOTE_S} s "
                             "(its log says why)")
    if not _until(lambda: _fresh(new, "SELECT NOT pg_is_in_recovery() AND current_setting("
                                      "'transaction_read_only') = 'off' AND current_setting("
                                      "'synchronous_standby_names') = ''"), SETTLE_S):
        raise SabotError(f"{new.shown} was promoted but new connections do not see it take "
                         f"writes within {SETTLE_S:g} s (sabot floor status)")
    say(f"promoted {new.shown}: it is the primary and takes writes, and its commits wait for "
        "no standby (synchronous_standby_names = '') until one streams from it and sabot floor "
        "sync requires it")
    # pg_rewind reads the new timeline from the control file, which only a checkpoint writes
    with new.session(failed=" (the role needs the grants docs/FLOOR.md gives; pg_rewind cannot "
                     "rejoin the old primary until a CHECKPOINT is made)") as con:
        con.execute(b"CHECKPOINT")
    say(f"checkpointed {new.shown}: its control file names its new timeline, which pg_rewind "
        "needs when the old primary rejoins")


def sync(url: str, wait: float, say: Say) -> None:
    """The primary of `url` made to wait at each commit for a synchronous standby, once one
    streams from it; NotVerified, nothing changed, when none does within `wait` seconds."""
    states = status(url)["servers"]
    writable = [s for s in states if s["answers"] and s["role"] == "primary" and not s["fenced"]]
    if len(writable) > 1:
        raise SabotError(f"{' and '.join(s['server'] for s in writable)} both take writes: "
                         "fence one first (docs/FLOOR.md)")
    if not writable:
        raise SabotError("no server there takes writes: " + "; ".join(map(describe, states)))
    p = next(s for s in servers(url) if s.shown == writable[0]["server"])
    with p.session() as con:
        def streaming() -> list[tuple[str, str]]:
            return con.execute(b"SELECT application_name, host(client_addr) FROM"
                               b" pg_stat_replication WHERE state = 'streaming'").fetchall()

        if not _until(lambda: bool(streaming()), wait, 0.2):
            names = _one(con, "SHOW synchronous_standby_names")
            now = (f"every commit there waits already (synchronous_standby_names = '{names}'): "
                   "the floor is NOT recording" if required_standbys(names) else
                   "its commits go on waiting for no standby")
            raise NotVerified(f"no standby streams from {p.shown} after {wait:g} s, so none is "
                              f"required (that would stop every commit); {now}. Start the "
                              "standby (docs/FLOOR.md), then run this again")
        con.execute(b"ALTER SYSTEM SET synchronous_standby_names = '*'")
        con.execute(b"SELECT pg_reload_conf()")
        sync_rows: list[Any] = []

        def synchronous() -> bool:
            sync_rows[:] = con.execute(
                b"SELECT application_name, host(client_addr) FROM pg_stat_replication"
                b" WHERE state = 'streaming' AND sync_state = 'sync'").fetchall()
            return bool(sync_rows)

        if not _until(synchronous, SETTLE_S):
            raise NotVerified(f"{p.shown} now waits for a synchronous standby but none became "
                              f"one within {SETTLE_S:g} s: the floor may NOT be recording "
                              "(sabot floor status)")
    name, addr = sync_rows[0]
    say(f"{p.shown}: each commit now waits for its synchronous standby {name or '?'} (from "
        f"{addr or '?'}): both servers hold every round before a shoe hears of it")

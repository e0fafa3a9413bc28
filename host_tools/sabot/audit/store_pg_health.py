"""What a floor's PostgreSQL server says of sabot's writers (audit/store_pg.py): why a writer's
commit is not confirmed (a synchronous standby waited for and none connected, another writer's
commit holding the chain's lock, no answer at all), which writers it holds up (for another
host's floor page), who holds a shoe's claim; and a database error in one short line. Asked on
connections of their own, read-only, a few seconds at most: nothing here writes, and nothing
knows the audit store's tables."""

from __future__ import annotations

import hashlib
import re
import time
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo


def shoe_key(shoe_id: int) -> int:
    return int.from_bytes(hashlib.sha256(b"sabot shoe %d" % shoe_id).digest()[:8], "big",
                          signed=True)

_HOST_FAILED = re.compile(r'connection to server at "([^"]*)", port (\d+) failed: ([^\n]*)')
_PLAIN = (("connection refused", "refused the connection (no server there)"),
          ("read-only", "is read-only (a standby, or fenced)"),
          ("hot standby", "is read-only (a standby, or fenced)"),
          ("timeout expired", "did not answer in time"),
          ("timed out", "did not answer in time"),
          ("no route to host", "cannot be reached"),
          ("network is unreachable", "cannot be reached"),
          ("starting up", "is starting up"), ("shutting down", "is shutting down"),
          ("recovery mode", "is recovering"),
          ("closed the connection", "closed the connection"),
          ("password authentication failed", "refused the password"),
          ("does not exist", "has no such database or role"))


def short_reason(e: BaseException) -> str:
    """A database error in one short line: each server tried and what it said, in plain words
    ("127.0.0.1:5432 refused the connection (no server there); 127.0.0.1:5433 is read-only (a
    standby, or fenced)"); libpq's own text, one line of it, otherwise."""
    said: dict[str, str] = {}
    for host, port, why in _HOST_FAILED.findall(str(e)):
        low = why.lower()
        said[f"{host}:{port}"] = next((w for k, w in _PLAIN if k in low), why.strip()[:80])
    if said:
        return "; ".join(f"{where} {why}" for where, why in said.items())[:300]
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    return (lines[0][:200] if lines else type(e).__name__)


def holder(store: Any, shoe_id: int) -> str:
    """Who holds a shoe's claim, as the server knows it: its name, address and since when."""
    key = shoe_key(shoe_id) & 0xFFFF_FFFF_FFFF_FFFF
    try:
        row = store.db.execute(
            "SELECT a.application_name, host(a.client_addr), a.pid,"
            " EXTRACT(EPOCH FROM a.backend_start) FROM pg_locks l JOIN pg_stat_activity a"
            " ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.objsubid = 1"
            " AND l.granted AND l.classid = ? AND l.objid = ? AND l.database = (SELECT oid"
            " FROM pg_database WHERE datname = current_database())",
            ((key >> 32) & 0xFFFF_FFFF, key & 0xFFFF_FFFF)).fetchone()
    except psycopg.Error:
        row = None
    if not row:
        return "another validator"
    name, addr, pid, since = row
    when = time.strftime("%H:%M:%S", time.localtime(float(since))) if since else "?"
    return (f"{name or 'a program that gave no name'} (from {addr or 'this server'}, "
            f"server pid {pid}, connected since {when})")

def stall_cause(store: Any, wait: float = 2.0) -> str:
    """Why this writer's commit is not confirmed, asked of the server it reached on a
    connection of its own (at most `wait` seconds): waiting for a synchronous standby
    (none connected, or none confirming), for a lock, or no answer at all."""
    if store.db.lost_since is not None:
        return (f"the database server was lost and is being tried again "
                f"({store.db.lost_reason or 'no answer yet'})")
    host, port, pid = store.db.server
    try:
        con = psycopg.connect(make_conninfo(
            store.url, host=host, port=port, connect_timeout=str(max(1, round(wait))),
            target_session_attrs="any", application_name="sabot recording watch"),
            autocommit=True)
    except psycopg.Error as e:
        return (f"the database server {host}:{port} does not answer a new connection within "
                f"{max(1, round(wait))} s ({short_reason(e)}): stopped, overloaded or cut off")
    try:
        con.execute(b"SET statement_timeout = 2000")
        row = con.execute(
            "SELECT a.state, a.wait_event_type, a.wait_event,"
            " current_setting('synchronous_standby_names'),"
            " (SELECT count(*) FROM pg_stat_replication),"
            " pg_blocking_pids(a.pid) FROM pg_stat_activity a WHERE a.pid = %s",
            (pid,)).fetchone()
        # what holds the lock it waits for: another writer's commit may itself wait for
        # the synchronous standby (the chain's lock is held through every commit)
        blockers = con.execute(
            "SELECT pid, application_name, wait_event FROM pg_stat_activity"
            " WHERE pid = ANY(%s)", (list(row[5] or []) if row else [],)).fetchall()
    except psycopg.Error as e:
        return f"the database server {host}:{port} did not say ({short_reason(e)})"
    finally:
        con.close()
    if row is None:
        return (f"the database server {host}:{port} has no session of this writer: its "
                "connection was cut, and it is being tried again")
    state, kind, event, names, streaming, blocking = row
    if event == "SyncRep":
        if not streaming:
            return (f"the database server {host}:{port} waits for a synchronous standby "
                    f"(synchronous_standby_names = '{names}') and no standby is connected:"
                    " bring the standby back, or stop waiting for it (docs/FLOOR.md)")
        return (f"the database server {host}:{port} waits for its synchronous standby to "
                f"confirm ({streaming} streaming, synchronous_standby_names = '{names}')")
    held_by_sync = [b for b in blockers if b[2] == "SyncRep"]
    if held_by_sync:
        who = ", ".join(f"{name or 'a session'} (server pid {bpid})"
                        for bpid, name, _ in held_by_sync)
        return (f"the commit waits for another writer's, {who}, which waits on "
                f"{host}:{port} for a synchronous standby (synchronous_standby_names = "
                f"'{names}')" + (" and no standby is connected: bring the standby back, or "
                                 "stop waiting for it (docs/FLOOR.md)" if not streaming
                                 else ""))
    if kind == "Lock" or blocking:
        return (f"the commit waits for a lock on {host}:{port} held by server pid"
                f"{'s' if len(blocking or []) > 1 else ''} "
                f"{', '.join(map(str, blocking or [])) or '?'}")
    return (f"the database server {host}:{port} is still at it (state {state or '?'}"
            f"{f', waiting on {kind} {event}' if event else ''})")

def stalled_writers(store: Any, bound: float) -> dict[str, tuple[float, str]]:
    """Writers (sabot serve's connections, by name) whose statement has waited `bound`
    seconds or longer on the server: name -> (since when, epoch seconds; why, in words)."""
    with store._reading():
        rows = store.db.execute(
            "SELECT application_name, EXTRACT(EPOCH FROM query_start), wait_event_type,"
            " wait_event, current_setting('synchronous_standby_names'),"
            " (SELECT count(*) FROM pg_stat_replication)"
            " FROM pg_stat_activity WHERE datname = current_database()"
            " AND left(application_name, 11) = 'sabot serve' AND state = 'active'"
            " AND query_start < now() - make_interval(secs => ?)", (bound,)).fetchall()
    out: dict[str, tuple[float, str]] = {}
    for name, since, kind, event, names, streaming in rows:
        if event == "SyncRep":
            why = ("its commit waits for a synchronous standby "
                   f"(synchronous_standby_names = '{names}')"
                   + ("" if streaming else " and none is connected"))
        else:
            why = f"its statement waits on the server ({kind or 'working'} {event or ''})"
        at = float(since)
        if name not in out or at < out[name][0]:
            out[name] = (at, why.strip())
    return out

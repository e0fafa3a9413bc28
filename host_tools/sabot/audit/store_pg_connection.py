"""A PostgreSQL store's connection (audit/store_pg.py): psycopg with the SQLite store's calling
convention, and a lost server waited out: every host of a multi-host URL tried again until one
answers (`target_session_attrs=read-write` finds the one that is now the primary), the session's
state (its settings, the shoes it claimed) made again on it. The password of a URL is never
printed: shown_url() leaves it out."""

from __future__ import annotations

import contextlib
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence
from typing import Any

import psycopg
import psycopg.sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from sabot.audit.store_pg_health import short_reason
from sabot.errors import SabotError


def shown_url(url: str) -> str:
    """The URL as a line may print it: its password left out."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.hostname or ""
    if parts.username:
        netloc = f"{parts.username}@{netloc}"
    if parts.port:
        netloc += f":{parts.port}"
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))



# libpq's settings where the URL names none: a server that vanishes mid-statement (a primary's
# machine gone, not just its process) is noticed within seconds, not at TCP's own two hours
_LINK_DEFAULTS = {"connect_timeout": "5", "keepalives": "1", "keepalives_idle": "5",
                  "keepalives_interval": "2", "keepalives_count": "3",
                  "tcp_user_timeout": "10000"}
RECONNECT_S = 60.0  # how long a lost server is tried again before a read or write is refused
RETRY_PAUSE = 0.2  # seconds between tries
SAY_EVERY = 10.0  # seconds between lines while a server stays away


def _say(text: str) -> None:
    """A line of the command's log, as its others (sabot serve's: `sabot serve: TIME ...`, or
    one record of the format --log-format chose)."""
    from sabot.service import log

    log(text, "warning")


class _ClaimHeld(SabotError):
    """A shoe's claim held by another session as a connection's state is made again."""


class Connection:
    """psycopg with the SQLite store's calling convention: `?` placeholders, execute() giving a
    cursor (the store's SQL has no `?` or `%` of its own); and a lost server tried again (every
    host of the URL, every RETRY_PAUSE) with the session's state made again: `setup` holds the
    statements that made it, each (sql, args, whether its one value must come back true)."""

    def __init__(self, url: str, shown: str = "", name: str | None = None) -> None:
        self.url = url
        self.shown = shown or url
        given = conninfo_to_dict(url)
        self.params = {k: v for k, v in _LINK_DEFAULTS.items() if k not in given}
        if name and "application_name" not in given:  # from the connection's first moment
            self.params["application_name"] = name[:63]
        self.setup: list[tuple[str, tuple[Any, ...], bool]] = []
        self.in_tx = False
        self.say: Callable[[str], None] | None = _say  # None: nothing said (a page's reader)
        self.patience = RECONNECT_S  # how long a lost server is tried again, each time
        self.lost_since: float | None = None  # when the server was found lost (monotonic)
        self.lost_reason = ""  # what the servers said when last tried, while lost
        self.server: tuple[str, str, int] = ("", "", 0)  # the server reached: host, port, pid
        self.stopping: threading.Event | None = None
        self.schema: str | None = None
        self.con = self._connect()

    def _connect(self) -> psycopg.Connection[Any]:
        con = psycopg.connect(make_conninfo(self.url, **self.params), autocommit=True)
        self.server = (con.info.host, str(con.info.port), con.info.backend_pid)
        # the store's schema as the URL and the server's settings name it (at the first
        # connection; every later one keeps it), alone: the catalog, left unnamed, is searched
        # before it, and temporary tables after it. So nothing of the same name in the store's
        # schema (a view pg_trigger, a function pg_get_triggerdef) stands for the catalog's, as
        # it would under a search_path of "public, pg_catalog", nor a temporary table for the
        # store's.
        if self.schema is None:
            row = con.execute(b"SELECT pg_catalog.current_schema()").fetchone()
            self.schema = row[0] if row else None
        if self.schema is not None:
            con.execute(psycopg.sql.SQL("SET search_path = {}, pg_temp")
                        .format(psycopg.sql.Identifier(self.schema)))
        return con

    def lost(self) -> bool:
        """The server is gone (or this connection to it): what reconnect() is for."""
        return bool(self.con.closed or self.con.broken)

    def execute(self, sql: str, args: Sequence[Any] | None = None) -> Any:
        word = sql.split(None, 1)[0].upper()
        if not self.in_tx:
            if self.lost():
                self.reconnect()
            if word != "BEGIN":  # a statement on its own: tried again on the new server
                try:
                    return self._run(sql, args)
                except psycopg.OperationalError:
                    if not self.lost():
                        raise
                self.reconnect()
                return self._run(sql, args)
        if word == "BEGIN":
            self.in_tx = True
        elif word in ("COMMIT", "ROLLBACK"):
            self.in_tx = False
        return self._run(sql, args)

    def _run(self, sql: str, args: Sequence[Any] | None) -> Any:
        if args is None:
            return self.con.execute(sql.encode())  # no placeholders to read: sent as it is
        return self.con.execute(sql.replace("?", "%s"), args)

    def executemany(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        with self.con.cursor() as cur:
            cur.executemany(sql.replace("?", "%s"), rows)

    def keep(self, sql: str, args: tuple[Any, ...] = (), must: bool = False) -> Any:
        """Run a statement that makes the session's state, and make it again on every new
        connection."""
        self.setup.append((sql, args, must))
        return self.execute(sql, args)

    def reconnect(self, deadline: float | None = None) -> None:
        """A connection again (until `deadline`, time.monotonic(); RECONNECT_S from now by
        default), its session state made again; psycopg.OperationalError when none came in
        time, SabotError when another writer claimed one of this one's shoes meanwhile."""
        self.in_tx = False
        with contextlib.suppress(Exception):
            self.con.close()
        start = time.monotonic()
        if self.lost_since is None:
            self.lost_since = start
        deadline = deadline if deadline is not None else start + self.patience
        said = 0.0 if self.say is not None else float("inf")
        while True:
            con = None
            try:
                con = self._connect()
                self._remake(con)
                break
            except _ClaimHeld as e:
                # this writer's own session on the server, cut from it, may hold the claim
                # until the server sees its connection gone (its TCP keepalive): waited for
                if time.monotonic() >= deadline or (self.stopping is not None
                                                    and self.stopping.is_set()):
                    raise SabotError(str(e)) from None
                if self.say is not None and time.monotonic() - said >= SAY_EVERY:
                    self.say(f"{e}: waiting for it (this writer's old session holds it until "
                             "the server sees that connection gone)")
                    said = time.monotonic()
                time.sleep(RETRY_PAUSE)
                continue
            except psycopg.OperationalError as e:
                if con is not None:
                    if not (con.closed or con.broken):  # the server answered: no loss to wait out
                        con.close()
                        raise
                    con.close()  # lost again while its session was made: tried again whole
                now = time.monotonic()
                if now >= deadline or (self.stopping is not None and self.stopping.is_set()):
                    raise
                self.lost_reason = short_reason(e)
                if self.say is not None and now - said >= SAY_EVERY:
                    self.say(f"audit database {self.shown} lost ({self.lost_reason}); trying it "
                             "again (nothing is acknowledged meanwhile: the shoes keep it)")
                    said = now
                time.sleep(RETRY_PAUSE)
        self.con = con
        if self.say is not None and self.lost_since is not None and self.lost_reason:
            # (a connection found dead and made again at the first try was never said lost)
            self.say(f"audit database {self.shown} back after "
                     f"{time.monotonic() - self.lost_since:.1f} s")
        self.lost_since, self.lost_reason = None, ""

    def _remake(self, con: psycopg.Connection[Any]) -> None:
        """The session's state made again on a new connection (reconnect())."""
        for sql, args, must in self.setup:
            cur = con.execute(sql.replace("?", "%s"), args) if args else \
                con.execute(sql.encode())
            if must and not (cur.fetchone() or (False,))[0]:
                con.close()
                raise _ClaimHeld(f"audit database {self.shown}: after the server came back, "
                                 "another session holds one of this writer's shoes")

    def close(self) -> None:
        self.con.close()


"""The audit store in a SQLite file (`--db PATH`): a back-end of the store's contract
(audit/store.py: the tables, rows, row chain and methods; open_store() opens this one for a path).
WAL, durable commits (synchronous=FULL), append-only by triggers that refuse UPDATE and DELETE.

What differs from a server's store: one validator writes a file at a time (a lock file beside it
says which), so that writer numbers its rows from its own last batch; readers open it read-only
and never write to a file that is not a sabot database; a database fault is worded for the person
at the terminal."""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import threading
import urllib.parse
from collections.abc import Sequence
from typing import Any

from sabot.audit.store import (
    COLUMNS,
    GENESIS,
    INDEXES,
    SCHEMA_VERSION,
    AuditStore,
    not_this_schema,
    row_hash,
    table_sql,
)
from sabot.errors import SabotError
from sabot.locks import try_lock

TRIGGERS = {f"{t}_append_only_{op[0].lower()}":
            f"CREATE TRIGGER IF NOT EXISTS {t}_append_only_{op[0].lower()} BEFORE {op} ON {t} "
            f"BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END"
            for t in COLUMNS for op in ("UPDATE", "DELETE")}


def _sqlite_reason(e: sqlite3.Error) -> str:
    """One line for a database fault, worded for the person at the terminal."""
    text = str(e)
    if "disk is full" in text or "database or disk is full" in text:
        return "the disk is full"
    if "malformed" in text or "not a database" in text:
        return f"the file is damaged ({text})"
    if "locked" in text or "busy" in text:
        return f"it is locked by another process ({text})"
    return text


def _lock_path(path: str) -> str:
    return os.path.realpath(path) + ".lock"  # one lock whatever the path's spelling


SQLITE_MAGIC = b"SQLite format 3\x00"


def refuse_unwritable_file(path: str) -> None:
    """refuse_unwritable for a file: a directory, a directory that does not exist, a store
    another validator holds, a file that is not a sabot audit store of this schema; found without
    creating or changing any file, so a foreign SQLite file keeps its journal mode and gets no
    lock file. (A store whose tables only its WAL holds yet passes; opening checks again.)"""
    if os.path.isdir(path):
        raise SabotError(f"audit database {path} is a directory")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise SabotError(f"audit database {path}: no directory {parent}")
    _refuse_held(path)  # first: a store being written is not read as a plain file below
    try:
        with open(path, "rb") as f:
            magic = f.read(len(SQLITE_MAGIC))
    except FileNotFoundError:
        return  # a new store
    except OSError as e:
        raise SabotError(f"audit database {path}: {e.strerror}") from None
    if not magic:
        return  # an empty file is an empty database: it becomes the store
    if magic != SQLITE_MAGIC:
        raise SabotError(f"{path} is not a sabot audit database (not even SQLite): a validator "
                         "writes only its own store")
    # immutable: read as a plain file, no journal, -wal, -shm or lock touched or made
    uri = f"file:{urllib.parse.quote(os.path.abspath(path))}?mode=ro&immutable=1"
    try:
        con = sqlite3.connect(uri, uri=True)
        try:
            have = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            row = (con.execute("SELECT value FROM meta WHERE name='schema'").fetchone()
                   if "meta" in have else None)
        finally:
            con.close()
    except sqlite3.Error as e:
        raise SabotError(f"{path} is not a sabot audit database ({_sqlite_reason(e)})") from None
    if have and "meta" not in have:
        raise SabotError(f"{path} is not a sabot audit database (its tables are another "
                         "program's): a validator writes only its own store")
    if row and row[0] != SCHEMA_VERSION:
        raise SabotError(not_this_schema(path, row[0]))


def _refuse_held(path: str) -> None:
    """Refused when a writer holds the store's lock (the lock file is never made here)."""
    try:
        fd = os.open(_lock_path(path), os.O_RDONLY)
    except FileNotFoundError:
        return
    except OSError as e:
        raise SabotError(f"audit database {path}: cannot open its lock file ({e.strerror})"
                         ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = os.read(fd, 32).decode(errors="replace").strip() or "another process"
        raise SabotError(f"audit database {path} is in use by another validator (pid {holder})"
                         ) from None
    finally:
        os.close(fd)  # and with it a lock taken here


def _text(data: bytes) -> str | bytes:
    """A TEXT value as its str; one that is not UTF-8 (no validator writes it: a hand-edited
    file) as its bytes, as a BLOB there reads, for the row's reader to name (its JSON not UTF-8,
    its row hash not the chain's), where sqlite3 would fail the whole read naming no row."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data


class SqliteAuditStore(AuditStore):
    """The store in a SQLite file. `threads=True` opens a connection any thread may use (one at a
    time: the caller serialises them, as `sabot serve` does with one lock over its validators)."""

    db: sqlite3.Connection
    ERRORS: tuple[type[BaseException], ...] = (sqlite3.Error,)  # the database's own faults
    ROW_ERRORS: tuple[type[BaseException], ...] = (sqlite3.IntegrityError,)  # a trigger's too
    BEGIN_WRITE = "BEGIN IMMEDIATE"  # a batch's transaction, taking the write lock at once
    BEGIN_SNAPSHOT = "BEGIN"  # a read transaction: WAL keeps its snapshot to the end

    def __init__(self, path: str, durable: bool = True, writer: bool = True,
                 threads: bool = False) -> None:
        super().__init__(str(path), writer)
        self._lock: int | None = None
        self.created = writer and not os.path.exists(self.path)
        if writer:
            # before the lock file and WAL: a foreign file untouched
            refuse_unwritable_file(self.path)
            lock_existed = os.path.exists(_lock_path(self.path))
            self._take_lock()
            try:
                self.db = sqlite3.connect(self.path, isolation_level=None, timeout=10,
                                          check_same_thread=not threads)
                self.db.execute("PRAGMA journal_mode=WAL")
                self.db.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
                self._create()
            except (sqlite3.Error, SabotError) as e:
                self.close()
                if not lock_existed:  # a refused open leaves no lock file it made
                    with contextlib.suppress(OSError):
                        os.remove(_lock_path(self.path))
                if isinstance(e, SabotError):
                    raise
                raise SabotError(f"audit database {self.path}: {_sqlite_reason(e)}") from None
        else:
            if not os.path.exists(self.path):
                raise SabotError(f"no audit database at {self.path}")
            try:
                self.db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True,
                                          isolation_level=None, timeout=10,
                                          check_same_thread=not threads)
                version = self.db.execute(
                    "SELECT value FROM meta WHERE name='schema'").fetchone()
            except sqlite3.Error:
                version = None
            if not version or version[0] != SCHEMA_VERSION:
                with contextlib.suppress(Exception):
                    self.db.close()
                raise SabotError(not_this_schema(self.path, version and version[0]))
        self.db.text_factory = _text
        try:
            self.head_no, self.head_hash = self._chain_head()
        except sqlite3.Error as e:
            self.close()
            raise SabotError(f"audit database {self.path} is damaged: {e}") from None

    def _reason(self, e: BaseException) -> str:
        return _sqlite_reason(e) if isinstance(e, sqlite3.Error) else str(e)

    def claim(self, shoe_id: int) -> None:
        """Nothing to do: a file has one writer (its lock file's) whatever the shoes."""

    def validators(self, shoe_ids: Sequence[int]) -> dict[int, str] | None:
        return None  # a file cannot tell: its one writer is its lock file's

    def assign_pit(self, role: str, shoe_ids: Sequence[int]) -> None:
        raise SabotError(f"{self.path} is a SQLite file, with one writer: row security per pit "
                         "is for a floor's PostgreSQL store (--db postgresql://...)")

    def pits(self) -> dict[int, str]:
        return {}

    def stalled_writers(self, bound: float) -> dict[str, tuple[float, str]]:
        return {}  # none that a file could tell

    def wait_only_until(self, stopping: threading.Event) -> None:
        """Nothing to do: a file is never lost as a server is."""

    def expected_triggers(self) -> dict[str, str]:
        return TRIGGERS

    def _take_lock(self) -> None:
        lock_path = _lock_path(self.path)
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise SabotError(f"audit database {self.path}: cannot create its lock file "
                             f"({e.strerror})") from None
        holder = try_lock(fd)
        if holder is not None:
            os.close(fd)
            raise SabotError(f"audit database {self.path} is in use by another validator "
                             f"(pid {holder})")
        self._lock = fd

    def _create(self) -> None:
        have = {r[0] for r in self.db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if have and "meta" not in have:
            raise SabotError(f"{self.path} is not a sabot audit database (or an older one)")
        if have:
            row = self.db.execute("SELECT value FROM meta WHERE name='schema'").fetchone()
            if row and row[0] != SCHEMA_VERSION:
                raise SabotError(not_this_schema(self.path, row[0]))
        self.db.execute(self.BEGIN_WRITE)
        for t in COLUMNS:
            self.db.execute(table_sql(t))
        for sql in INDEXES:
            self.db.execute(sql)
        if not have:
            for sql in TRIGGERS.values():
                self.db.execute(sql)
        self.db.execute("COMMIT")
        if not have:
            self.head_no, self.head_hash = 0, GENESIS
            self.begin()
            self._add("meta", ("schema", SCHEMA_VERSION))
            self.commit()

    def _numbered(self) -> tuple[int, bytes, dict[str, list[tuple[Any, ...]]], dict[str, int]]:
        """The batch's rows as inserted, each with its id, its place after the chain's head and
        its hash: (the new head's place and hash, rows by table, each table's next id). The one
        writer of a SQLite file knows the head and the ids from its own last batch."""
        no, prev = self.head_no, self.head_hash
        rows: dict[str, list[tuple[Any, ...]]] = {}
        next_id = dict(self._next_ids)
        for table, values in self._pending:
            no += 1
            cols = COLUMNS[table]
            if table == "frames":
                rid = values[-1]  # frames keep the ids the validator already handed out
            else:
                rid = next_id.get(table) or self._max_id(table) + 1
            next_id[table] = rid + 1
            prev = row_hash(prev, table, no, rid, values[: len(cols)])
            rows.setdefault(table, []).append((rid, no, *values[: len(cols)], prev))
        return no, prev, rows, next_id

    def stall_cause(self, wait: float = 2.0) -> str:
        """A file is asked for its write lock."""
        try:
            probe = sqlite3.connect(self.path, timeout=0, isolation_level=None)
        except sqlite3.Error as e:
            return f"the file cannot be opened ({_sqlite_reason(e)})"
        try:
            probe.execute("BEGIN IMMEDIATE")
            probe.execute("ROLLBACK")
        except sqlite3.Error as e:
            if "locked" in str(e) or "busy" in str(e):
                return ("its write lock is taken: by another program holding the file (a backup "
                        "or an editor that writes it), or by this commit on a disk that has not "
                        "finished the write")
            return _sqlite_reason(e)
        finally:
            probe.close()
        return f"the disk holding {self.path} has not finished the write"

    def tables(self) -> set[str]:
        with self._reading():
            return {r[0] for r in self.db.execute(
                "SELECT name FROM sqlite_master WHERE type='table'")}

    def triggers(self) -> dict[str, str]:
        """As stored: each trigger's SQL."""
        with self._reading():
            return dict(self.db.execute(
                "SELECT name, sql FROM sqlite_master WHERE type='trigger'").fetchall())

    def discard_if_unused(self) -> None:
        """The file, its WAL and its lock file removed when unused."""
        unused = self.created and self.head_no <= 1 and not self._pending
        lock = _lock_path(self.path)
        self.close()
        if unused:
            for p in (self.path, self.path + "-wal", self.path + "-shm", lock):
                with contextlib.suppress(OSError):
                    os.remove(p)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.db.close()
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None


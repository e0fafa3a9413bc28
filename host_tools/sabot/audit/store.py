"""The validator's audit store: append-only and tamper-evident, in a SQLite file or a PostgreSQL
server's database; open_store(db) opens the one `--db` names.

Every frame received is kept raw with its verdict; accepted rounds and events are kept decoded (so
`sabot history` can reconstruct any hand in a dispute, 627a.11(c), 631a.12(c)), with the alarms
raised on them, the validator's link state after each read and the operator log (who started a
shoe or gave a resolution, naming the signed frame that shows it). Every row of every table
carries a place in one chain (`chain_no`) and a hash over its content and the previous row's hash:
an inserted, altered or deleted row breaks the chain, and triggers refuse UPDATE and DELETE
outright. `sabot audit verify` (audit/verify.py) re-checks all of it from the raw frames.

This module is the store's contract: the schema, the row chain and AuditStore, whose methods are
every write and query the validator, the pages, soak and `audit verify` need, the same on both
back-ends, which hold only what differs (the connection, the SQL dialect, the locking, what the
database says of itself): audit/store_sqlite.py for a file, audit/store_pg.py for a server. With
audit/store_queries.py, they are the only code that knows the schema."""

from __future__ import annotations

import abc
import contextlib
import hashlib
import heapq
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from sabot.audit.store_queries import RecordQueries, StoredRecord, stored_object
from sabot.errors import SabotError

__all__ = ["AuditStore", "StoreRefused", "StoreUnreadable", "StoredRecord", "open_store",
           "refuse_unwritable", "row_hash", "shown_db"]

SCHEMA_VERSION = "sabot-audit/5"  # 5: witnesses' cosignatures; 4: the operator log in the
# chain; 3: protocol v2
# what an older store lacks, for the line that refuses it (an append-only chained store is not
# migrated: its own triggers forbid rewriting its schema row, and an old operator log names no
# frame that audit verify could check it against)
OLDER = {"sabot-audit/3": "its operator log is a file beside it, outside the row chain",
         "sabot-audit/4": "it has no place for the witnesses' cosignatures of the shoes' logs"}
GENESIS = bytes(32)  # the hash before the first row

# Each table's columns, in the order they are hashed (after chain_no, before row_hash).
COLUMNS = {
    "meta": ("name", "value"),
    "frames": ("received_at", "raw", "key_id", "shoe_id", "boot", "seq", "type", "verdict",
               "reason"),
    "records": ("frame_id", "key_id", "shoe_id", "seq", "kind", "shoe", "round", "record"),
    "alarms": ("frame_id", "raised_at", "key_id", "shoe_id", "shoe", "round", "kind", "detail"),
    "link_state": ("key_id", "shoe_id", "last_seq", "last_digest", "last_boot", "host_counter",
                   "inventory"),
    "integrity_checks": ("checked_at", "shoe_id", "seed", "expected", "answer", "integrity",
                         "result"),
    # the operator log: `entry` is the JSON object `history --operations` prints; (shoe_id, seq)
    # names the shoe's signed frame that shows what the operator did
    "operations": ("logged_at", "shoe_id", "seq", "operation", "entry"),
    # a witness's cosignature (its signature line) of the shoe's checkpoint stored as frame_id,
    # a checkpoint of its log at `size` frames (audit/cosign.py)
    "cosignatures": ("cosigned_at", "shoe_id", "size", "frame_id", "witness", "cosignature"),
}
_TYPES = {"received_at": "REAL NOT NULL", "raised_at": "REAL NOT NULL",
          "checked_at": "REAL NOT NULL", "logged_at": "REAL NOT NULL",
          "cosigned_at": "REAL NOT NULL", "witness": "TEXT NOT NULL",
          "cosignature": "TEXT NOT NULL",
          "operation": "TEXT NOT NULL", "entry": "TEXT NOT NULL",
          "raw": "BLOB NOT NULL", "last_digest": "BLOB NOT NULL", "verdict": "TEXT NOT NULL",
          "kind": "TEXT NOT NULL", "record": "TEXT NOT NULL", "name": "TEXT NOT NULL UNIQUE",
          "result": "TEXT NOT NULL", "inventory": "TEXT NOT NULL"}


def table_sql(name: str, typed: Callable[[str], str] = lambda t: t) -> str:
    """A table's CREATE TABLE; `typed` turns each column's SQLite type into another database's
    (audit/store_pg.py)."""
    cols = ", ".join(f"{c} {typed(_TYPES.get(c, 'INTEGER' if c in _INTS else 'TEXT'))}"
                     for c in COLUMNS[name])
    extra = ", UNIQUE (key_id, shoe_id, seq)" if name == "records" else ""
    return (f"CREATE TABLE IF NOT EXISTS {name} (id {typed('INTEGER PRIMARY KEY')}, "
            f"chain_no {typed('INTEGER NOT NULL UNIQUE')}, {cols}, "
            f"row_hash {typed('BLOB NOT NULL')}{extra})")


_INTS = {"key_id", "shoe_id", "boot", "seq", "frame_id", "shoe", "round", "last_seq", "last_boot",
         "host_counter", "size"}
INDEXES = ("CREATE INDEX IF NOT EXISTS records_by_round ON records (shoe_id, shoe, round)",
           "CREATE INDEX IF NOT EXISTS link_by_shoe ON link_state (key_id, shoe_id, id)",
           "CREATE INDEX IF NOT EXISTS alarms_by_shoe ON alarms (shoe_id, shoe, round)")


def row_hash(prev: bytes, table: str, chain_no: int, rid: int, values: Sequence[Any]) -> bytes:
    """The hash that chains a row to the one before it: over the table, its place, its id and its
    content, each value length-prefixed and typed so no two rows encode alike."""
    parts = [prev, f"{table}:{chain_no}:{rid}".encode()]  # hashed as one: fewer calls
    add = parts.append
    for v in values:
        if v is None:
            add(b"N")
            continue
        if isinstance(v, bytes):
            add(b"B")
            data = v
        else:
            add(b"V")
            data = repr(v).encode()
        n = len(data)
        add(_LENGTHS[n] if n < 256 else n.to_bytes(4, "big"))
        add(data)
    return hashlib.sha256(b"".join(parts)).digest()


_LENGTHS = [n.to_bytes(4, "big") for n in range(256)]  # row_hash's prefixes, made once
# json.dumps(..., sort_keys=True) without a new encoder for each record: the same text
_SORTED_JSON = json.JSONEncoder(sort_keys=True).encode


class FrameHeader(Protocol):
    """The parsed frame fields the store records (a protocol.Frame has them)."""

    @property
    def type(self) -> int: ...
    @property
    def key_id(self) -> int: ...
    @property
    def shoe_id(self) -> int: ...
    @property
    def boot(self) -> int: ...
    @property
    def seq(self) -> int: ...
    @property
    def raw(self) -> bytes: ...


def open_store(db: str, *, writer: bool = True, durable: bool = True, threads: bool = False,
               name: str = "sabot") -> AuditStore:
    """The audit store `--db` names: a `postgresql://` URL, a server's database
    (audit/store_pg.py); any other value, a SQLite file's path (audit/store_sqlite.py).
    `writer=False` opens it read-only (refused when it is not a store of this schema);
    `durable=False` commits without waiting for the disk; `threads=True` lets any thread use
    it, one at a time (the caller serialises them, as `sabot serve` does with one lock over its
    validators); `name` is the writer's as the database shows it (a server's floor page)."""
    if is_server_url(db):
        from sabot.audit.store_pg import PgAuditStore

        return PgAuditStore(str(db), durable=durable, writer=writer, name=name)
    from sabot.audit.store_sqlite import SqliteAuditStore

    return SqliteAuditStore(str(db), durable=durable, writer=writer, threads=threads)


def refuse_unwritable(db: str) -> None:
    """A one-line SabotError when `db` cannot become (or stay) this validator's store, found
    without creating or changing anything, so a command refuses before it opens a shoe's port. A
    file: not a directory, its directory there, no other validator holding it, empty or a sabot
    audit store of this schema (audit/store_sqlite.py). A `postgresql://` URL: its server
    answers, and the database is empty or a store of this schema (audit/store_pg.py)."""
    if is_server_url(db):
        from sabot.audit.store_pg import refuse_unwritable_url

        refuse_unwritable_url(db)
        return
    from sabot.audit.store_sqlite import refuse_unwritable_file

    refuse_unwritable_file(db)


def not_this_schema(path: str, version: Any) -> str:
    """The one line refusing a database this sabot does not read or write."""
    if not isinstance(version, str) or not version.startswith("sabot-audit/"):
        return f"{path} is not a sabot audit database"
    why = OLDER.get(version, "an older link protocol")
    return (f"{path} is a {version} audit database ({why}); this sabot reads and writes "
            f"{SCHEMA_VERSION}: validate into a new database, and read or verify that one with "
            "the sabot that wrote it")


class StoreRefused(SabotError):
    """A batch the database refused: nothing of it stored (and so nothing acknowledged); the
    shoe sends it again when asked. (A commit whose outcome is in doubt is none.)"""


class StoreUnreadable(SabotError):
    """A read the database refused (a damaged page, a file locked or gone): `reason` is the
    database's own words."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"audit database {path} cannot be read ({reason})")
        self.reason = reason


def is_server_url(path: object) -> bool:
    """Whether `--db` names a PostgreSQL server's database rather than a SQLite file."""
    return str(path).startswith(("postgresql://", "postgres://"))


def shown_db(path: str) -> str:
    """`--db` as a line may print it: a server URL without its password."""
    if not is_server_url(path):
        return path
    from sabot.audit.store_pg_connection import shown_url

    return shown_url(path)


class AuditStore(RecordQueries, abc.ABC):
    """The audit store's contract, opened by open_store(): the same tables, rows, chain and
    methods whichever database holds them. A batch (one read from the link) is begun, filled
    (add_frame, add_record, ...) and committed as one durable transaction; the reads give back
    the same values from either back-end, so every row hash is computed alike on both.

    A back-end gives its connection (`db`: execute() with `?` placeholders, giving a cursor), its
    own faults (ERRORS), how a batch's and a snapshot's transactions begin, how a batch's rows
    are numbered after the chain's head (_numbered), and the abstract methods below."""

    ERRORS: tuple[type[BaseException], ...]  # the database's own faults
    ROW_ERRORS: tuple[type[BaseException], ...]  # ... of them, those a row's content causes
    BEGIN_WRITE: str  # a batch's transaction
    BEGIN_SNAPSHOT: str  # a read transaction that keeps its snapshot to the end

    # Whether the store is recording (sabot serve's watch, pit/recording.py): since when a batch
    # has waited for its commit to be confirmed (None: every batch begun is committed), the
    # database's words for the latest refused one, and when the latest commit was confirmed.
    unconfirmed_since: float | None = None
    refusal: str | None = None
    row_refused = False  # the latest refusal was for a row (a constraint, row security, a trigger)
    confirmed_at: float | None = None

    def __init__(self, path: str, writer: bool) -> None:
        self.path = path  # as lines print it (a server URL without its password)
        self.writer = writer
        self.created = False  # this run made the store (discard_if_unused)
        self._pending: list[tuple[str, tuple[Any, ...]]] = []
        self._next_frame_id: int | None = None
        self._batch_raw: dict[tuple[int, int, int], bytes] = {}
        self._next_ids: dict[str, int] = {}
        self.head_no, self.head_hash = 0, GENESIS
        # each shoe's newest link state row as this writer stored it (one validator a shoe, so
        # no other writer adds to it), and the ones of the open batch: no read asks the database
        self._links: dict[tuple[int, int], tuple[Any, ...] | None] = {}
        self._batch_links: dict[tuple[int, int], tuple[Any, ...]] = {}

    # ---- what each back-end gives --------------------------------------------------------------
    @abc.abstractmethod
    def _reason(self, e: BaseException) -> str:
        """A database fault in one line, for the person at the terminal."""

    @abc.abstractmethod
    def _numbered(self) -> tuple[int, bytes, dict[str, list[tuple[Any, ...]]], dict[str, int]]:
        """The batch's rows as inserted, each with its id, its place after the chain's head and
        its hash: (the new head's place and hash, rows by table, each table's next id)."""

    @abc.abstractmethod
    def claim(self, shoe_id: int) -> None:
        """This writer validates `shoe_id` (a Validator says so as it starts)."""

    @abc.abstractmethod
    def validators(self, shoe_ids: Sequence[int]) -> dict[int, str] | None:
        """Of these shoes, those a live writer validates now, each with the writer's name (its
        `name` as opened, e.g. "sabot serve PIT"); None where the database cannot tell (a SQLite
        file: its one writer is its lock file's)."""

    @abc.abstractmethod
    def assign_pit(self, role: str, shoe_ids: Sequence[int]) -> None:
        """Row security per pit (a PostgreSQL store's): `role` inserts these shoes' rows only."""

    @abc.abstractmethod
    def pits(self) -> dict[int, str]:
        """shoe id -> the role that alone inserts its rows (assign_pit)."""

    @abc.abstractmethod
    def stalled_writers(self, bound: float) -> dict[str, tuple[float, str]]:
        """Writers whose statements the database has held `bound` seconds or longer (a server's
        store: by their connection's name); none that a SQLite file could tell."""

    @abc.abstractmethod
    def wait_only_until(self, stopping: threading.Event) -> None:
        """A lost database server is waited for only until `stopping` is set (a SQLite file is
        never lost so)."""

    @abc.abstractmethod
    def stall_cause(self, wait: float = 2.0) -> str:
        """Why a commit of this writer has not been confirmed, in the database's words where it
        can tell (a server's store asks the server on a connection of its own, `wait` seconds
        at most; a file is asked for its write lock)."""

    @abc.abstractmethod
    def tables(self) -> set[str]:
        """The names of the tables the database holds."""

    @abc.abstractmethod
    def triggers(self) -> dict[str, str]:
        """name -> the definition of every trigger the database holds (and, a server's, what
        else keeps it append-only), as the database gives it back."""

    @abc.abstractmethod
    def expected_triggers(self) -> dict[str, str]:
        """name -> the definition every trigger of this store must have (audit verify)."""

    @abc.abstractmethod
    def discard_if_unused(self) -> None:
        """Close, and remove what this run created if it stored nothing in it (a port nobody
        answered on leaves no empty database behind)."""

    @abc.abstractmethod
    def close(self) -> None:
        """The connection closed (and a writer's lock with it)."""

    def _chain_head(self) -> tuple[int, bytes]:
        """The newest row's place in the chain and its hash, as the database holds them."""
        head = self.db.execute(
            " UNION ALL ".join(f"SELECT chain_no, row_hash FROM {t}" for t in COLUMNS)
            + " ORDER BY chain_no DESC LIMIT 1").fetchone()
        return (head[0], bytes(head[1])) if head else (0, GENESIS)

    # ---- writing: one batch (one read from the link) is one durable transaction -----------
    def begin(self) -> None:
        self._pending = []
        self.row_refused = False
        self._batch_links = {}
        self._batch_raw = {}
        self._now = time.time()  # the receive time of the batch's rows (stamp(): a read's own)
        if self.unconfirmed_since is None:
            self.unconfirmed_since = self._now
        if self._next_frame_id is None:
            last = self.db.execute("SELECT MAX(id) FROM frames").fetchone()[0]
            self._next_frame_id = (last or 0) + 1

    def stamp(self) -> None:
        """The rows queued from now on carry this moment as their receive time: a read that
        joins a batch other reads opened (GroupCommit) is stamped when it is taken."""
        self._now = time.time()

    def _add(self, table: str, values: tuple[Any, ...]) -> None:
        self._pending.append((table, values))

    def commit(self) -> None:
        """Write the batch's rows, chained, then make them durable. A database fault raises a
        SabotError with one line: nothing of the batch is then stored (so nothing of it may be
        acknowledged), and the store is left as it was before the batch."""
        try:
            no, prev, next_id = self._write()
        except self.ERRORS as e:
            raise self._refused(e) from None
        self._written(no, prev, next_id)

    def _write(self) -> tuple[int, bytes, dict[str, int]]:
        """The batch's one transaction: numbered, inserted, committed (the database's own fault
        raised as it is)."""
        self.db.execute(self.BEGIN_WRITE)
        no, prev, rows, next_id = self._numbered()
        for table, batch in rows.items():
            cols = COLUMNS[table]
            marks = ", ".join("?" * (len(cols) + 3))
            self.db.executemany(f"INSERT INTO {table} (id, chain_no, {', '.join(cols)},"
                                f" row_hash) VALUES ({marks})", batch)
        self.db.execute("COMMIT")
        return no, prev, next_id

    def _refused(self, e: BaseException) -> StoreRefused:
        """The batch undone after a fault, as the one line that says so."""
        with contextlib.suppress(*self.ERRORS):
            self.db.execute("ROLLBACK")
        self.rollback()
        self.refusal = self._reason(e)
        self.row_refused = isinstance(e, self.ROW_ERRORS)
        return StoreRefused(f"audit database {self.path}: {self.refusal}; "
                            "nothing of this read was stored or acknowledged")

    def _written(self, no: int, prev: bytes, next_id: dict[str, int]) -> None:
        self._links.update(self._batch_links)
        self._batch_links = {}
        self.head_no, self.head_hash = no, prev
        self._next_ids = next_id
        self._pending = []
        self.unconfirmed_since, self.refusal = None, None
        self.confirmed_at = time.time()

    def savepoint(self) -> tuple[int, int | None, int, dict[tuple[int, int], tuple[Any, ...]]]:
        """Where the open batch stands: back_to() drops what was queued after it (one
        validator's read out of a batch it shares with others, GroupCommit)."""
        return len(self._pending), self._next_frame_id, len(self._batch_raw), \
            dict(self._batch_links)

    def back_to(self, point: tuple[int, int | None, int,
                                   dict[tuple[int, int], tuple[Any, ...]]]) -> None:
        rows, frame_id, raws, links = point
        del self._pending[rows:]
        self._next_frame_id = frame_id
        for key in list(self._batch_raw)[raws:]:
            del self._batch_raw[key]
        self._batch_links = links

    def _max_id(self, table: str) -> int:
        return int(self.db.execute(f"SELECT COALESCE(MAX(id), 0) FROM {table}").fetchone()[0])

    def rollback(self) -> None:
        self._batch_links = {}
        self._next_frame_id = None
        self._next_ids = {}
        self._pending = []

    def add_frame(self, raw: bytes, frame: FrameHeader | None, verdict: str,
                  reason: str | None = None, type_name: str | None = None) -> int:
        """Queue a received frame for this batch; `frame` is its parse (None when unparsable)."""
        fid = self._next_frame_id
        assert fid is not None, "add_frame outside begin()"
        self._next_frame_id = fid + 1
        f = frame
        values = (self._now, raw, f and f.key_id, f and f.shoe_id, f and f.boot, f and f.seq,
                  type_name, verdict, reason, fid)  # the id rides last: frames keep their ids
        self._add("frames", values)
        return fid

    def add_record(self, frame: FrameHeader, frame_id: int, kind: str,
                   record: Mapping[str, Any]) -> None:
        self._add("records", (frame_id, frame.key_id, frame.shoe_id, frame.seq, kind,
                              record.get("shoe"), record.get("round"),
                              _SORTED_JSON(record)))
        self._batch_raw[(frame.key_id, frame.shoe_id, frame.seq)] = frame.raw

    def add_alarm(self, frame_id: int | None, key_id: int | None, shoe_id: int | None,
                  alarm: Mapping[str, Any]) -> None:
        self._add("alarms", (frame_id, self._now, key_id, shoe_id, alarm.get("shoe"),
                             alarm.get("round"), alarm["kind"], alarm.get("detail", "")))

    def save_link(self, key_id: int, shoe_id: int, st: Mapping[str, Any]) -> None:
        """The validator's state for a shoe after this batch (a new row: the table is a log)."""
        values = (key_id, shoe_id, st["last_seq"], st["last_digest"], st["last_boot"],
                  st["host_counter"], _SORTED_JSON(st["inventory"]))
        key = (key_id, shoe_id)
        if key in self._batch_links:
            current: tuple[Any, ...] | None = self._batch_links[key]
        elif key in self._links:
            current = self._links[key]
        else:
            current = self._links[key] = self.link(key_id, shoe_id, raw=True)
        if current != values:
            self._add("link_state", values)
            self._batch_links[key] = values

    def log_operation(self, entry: Mapping[str, Any], shoe_id: int, seq: int) -> None:
        """One operator action, durable before the command returns: `entry` as `history
        --operations` prints it (who, from which login and host, what), and the seq of the
        shoe's signed frame that shows it was done (its resolution, its new shoe's start)."""
        self.begin()
        self.add_operation(entry, shoe_id, seq)
        self.commit()

    def add_operation(self, entry: Mapping[str, Any], shoe_id: int, seq: int) -> None:
        """An operator entry queued in this batch, that of the frame `seq` it names."""
        self._add("operations", (self._now, shoe_id, seq, entry["operation"], json.dumps(entry)))

    def add_cosignature(self, frame_id: int, shoe_id: int, size: int, witness: str,
                        line: str) -> None:
        """A witness's cosignature line of the checkpoint stored as frame_id (in this batch)."""
        self._add("cosignatures", (self._now, shoe_id, size, frame_id, witness, line))

    def checkpoints(self, shoe_id: int) -> list[dict[str, Any]]:
        """The shoe's stored checkpoints of its log, smallest first: {frame_id, size, raw,
        cosignatures: {witness: its signature line}}."""
        with self._reading():
            rows = self.db.execute(
                "SELECT id, seq, raw FROM frames WHERE shoe_id=? AND type='checkpoint' AND"
                " verdict='accepted' ORDER BY seq, id", (shoe_id,)).fetchall()
            sigs = self.db.execute(
                "SELECT frame_id, witness, cosignature FROM cosignatures WHERE shoe_id=?"
                " ORDER BY id", (shoe_id,)).fetchall()
        by_frame: dict[int, dict[str, str]] = {}
        for fid, witness, line in sigs:
            by_frame.setdefault(fid, {}).setdefault(witness, line)
        return [{"frame_id": fid, "size": size, "raw": bytes(raw),
                 "cosignatures": by_frame.get(fid, {})} for fid, size, raw in rows]

    def log_integrity(self, r: Mapping[str, Any]) -> None:
        self.begin()
        self._add("integrity_checks", (time.time(), r["shoe_id"], r["seed"], r["expected"],
                                       r["answer"], r["integrity"], r["result"]))
        self.commit()

    # ---- reading ------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        """A database fault while reading becomes StoreUnreadable: one line, never a traceback."""
        try:
            yield
        except self.ERRORS as e:
            raise StoreUnreadable(self.path, str(e).strip().splitlines()[0]) from None

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """Every read inside sees the store as it stood at one moment: a batch another writer
        commits meanwhile is not half seen (audit verify reads each table on its own, and would
        take a live store's newest rows, in one table and not yet in another, for deletions)."""
        with self._reading():
            self.db.execute(self.BEGIN_SNAPSHOT)
        try:
            yield
        finally:
            with contextlib.suppress(*self.ERRORS):
                self.db.execute("ROLLBACK")  # it read only

    def stored_raw(self, key_id: int, shoe_id: int, seq: int) -> bytes | None:
        if (key_id, shoe_id, seq) in self._batch_raw:  # stored earlier in this same batch
            return self._batch_raw[(key_id, shoe_id, seq)]
        with self._reading():
            row = self.db.execute(
                "SELECT f.raw FROM records r JOIN frames f ON f.id = r.frame_id"
                " WHERE r.key_id=? AND r.shoe_id=? AND r.seq=?",
                (key_id, shoe_id, seq)).fetchone()
        return row[0] if row else None

    def chained_frames(self, shoe_id: int, types: Sequence[str]) -> Iterator[tuple[int, bytes]]:
        """(seq, raw) of the shoe's accepted frames of these types, in the order stored (seq
        order, for the chained types): the leaves of its log (firmware/shoe/tree.py)."""
        marks = ", ".join("?" * len(types))
        with self._reading():
            rows = self.db.execute(
                "SELECT seq, raw FROM frames WHERE shoe_id=? AND verdict='accepted' AND type IN"
                f" ({marks}) ORDER BY id", (shoe_id, *types)).fetchall()
        yield from ((seq, bytes(raw)) for seq, raw in rows)

    def link(self, key_id: int, shoe_id: int, raw: bool = False) -> Any:
        pending = [v for t, v in self._pending if t == "link_state" and v[:2] == (key_id, shoe_id)]
        if pending:
            row = pending[-1][2:]
        else:
            with self._reading():
                row = self.db.execute(
                    "SELECT last_seq, last_digest, last_boot, host_counter, inventory"
                    " FROM link_state WHERE key_id=? AND shoe_id=? ORDER BY id DESC LIMIT 1",
                    (key_id, shoe_id)).fetchone()
        if raw:
            return (key_id, shoe_id, *row) if row else None
        if not row:
            return None
        return {"last_seq": row[0], "last_digest": row[1], "last_boot": row[2],
                "host_counter": row[3],
                "inventory": stored_object(row[4], "link_state", None,
                                           f"newest link state of shoe {shoe_id:#010x}")}

    def rows(self) -> Iterator[tuple[str, int, int, tuple[Any, ...], bytes]]:
        """Every row of every table in chain order: (table, id, chain_no, values, row_hash)."""

        def table_rows(t: str) -> Iterator[tuple[int, str, int, tuple[Any, ...], bytes]]:
            cols = ", ".join(COLUMNS[t])
            for r in self.db.execute(f"SELECT chain_no, id, {cols}, row_hash FROM {t}"
                                     " ORDER BY chain_no"):
                yield r[0], t, r[1], tuple(r[2:-1]), r[-1]

        with self._reading():
            for no, table, rid, values, h in heapq.merge(*(table_rows(t) for t in COLUMNS)):
                # the same type from either database (a value no hash is: none, which no row's
                # hash matches)
                yield table, rid, no, values, bytes(h) if isinstance(
                    h, (bytes, bytearray, memoryview)) else b""

    def chain_counts(self) -> dict[str, tuple[int, int]]:
        """table -> (its rows, the distinct places in the chain they hold): equal unless a row
        reuses another's chain_no, outside the chain."""
        with self._reading():
            return {t: (self.db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0],
                        self.db.execute(f"SELECT COUNT(DISTINCT chain_no) FROM {t}")
                        .fetchone()[0]) for t in COLUMNS}

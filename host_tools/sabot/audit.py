"""The validator's audit store: SQLite, WAL, durable commits, append-only. Every frame received is
kept raw with its verdict; accepted rounds and events are kept decoded, so `sabot history` can
reconstruct any hand in a dispute (627a.11(c), 631a.12(c))."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from .errors import SabotError
from .protocol import TYPES

if TYPE_CHECKING:
    from _typeshed import StrPath

SCHEMA = """
CREATE TABLE IF NOT EXISTS frames (
    id INTEGER PRIMARY KEY, received_at REAL NOT NULL, raw BLOB NOT NULL,
    key_id INTEGER, shoe_id INTEGER, boot INTEGER, seq INTEGER, type TEXT,
    verdict TEXT NOT NULL, reason TEXT);
CREATE TABLE IF NOT EXISTS records (
    key_id INTEGER NOT NULL, shoe_id INTEGER NOT NULL, seq INTEGER NOT NULL,
    frame_id INTEGER NOT NULL, kind TEXT NOT NULL,
    shoe INTEGER, round INTEGER, record TEXT NOT NULL,
    PRIMARY KEY (key_id, shoe_id, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS link (
    key_id INTEGER NOT NULL, shoe_id INTEGER NOT NULL, last_seq INTEGER NOT NULL,
    last_mac BLOB NOT NULL, last_boot INTEGER NOT NULL, host_counter INTEGER NOT NULL,
    inventory TEXT NOT NULL,
    PRIMARY KEY (key_id, shoe_id));
CREATE TABLE IF NOT EXISTS integrity_checks (
    id INTEGER PRIMARY KEY, checked_at REAL NOT NULL, shoe_id INTEGER, seed TEXT, expected TEXT,
    answer TEXT, integrity TEXT, result TEXT NOT NULL);
CREATE TRIGGER IF NOT EXISTS frames_append_only_u BEFORE UPDATE ON frames
    BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS frames_append_only_d BEFORE DELETE ON frames
    BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS records_append_only_u BEFORE UPDATE ON records
    BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS records_append_only_d BEFORE DELETE ON records
    BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
"""


class FrameHeader(Protocol):
    """The parsed frame fields the store records (a frames.Frame has them)."""

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


class AuditStore:
    def __init__(self, path: StrPath, durable: bool = True) -> None:
        try:
            self.db = sqlite3.connect(path, isolation_level=None, timeout=10)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
            self.db.executescript(SCHEMA)
        except sqlite3.Error as e:
            raise SabotError(f"cannot open audit database {path}: {e}") from None
        self.path = path
        self._next_id: int | None = None
        self._frames: list[tuple[Any, ...]] = []
        self._records: list[tuple[Any, ...]] = []

    def begin(self) -> None:
        self._frames, self._records = [], []
        self._now = time.time()  # one receive time per batch: the frames of one read
        if self._next_id is None:
            last = self.db.execute("SELECT MAX(id) FROM frames").fetchone()[0]
            self._next_id = (last or 0) + 1
        try:
            self.db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as e:
            raise SabotError(
                f"audit database {self.path}: {e} (is another validator using it?)"
            ) from None

    def commit(self) -> None:
        """Write the batch's frames and records, then make them durable."""
        self.db.executemany(
            "INSERT INTO frames"
            " (id, received_at, raw, key_id, shoe_id, boot, seq, type, verdict, reason)"
            " VALUES (?,?,?,?,?,?,?,?,?,?)",
            self._frames,
        )
        self.db.executemany(
            "INSERT INTO records (key_id, shoe_id, seq, frame_id, kind, shoe, round, record)"
            " VALUES (?,?,?,?,?,?,?,?)",
            self._records,
        )
        self.db.execute("COMMIT")
        self._frames, self._records = [], []

    def rollback(self) -> None:
        self.db.execute("ROLLBACK")
        self._next_id = None
        self._frames, self._records = [], []

    def add_frame(
        self,
        raw: bytes,
        frame: FrameHeader | str | None,
        verdict: str,
        reason: str | None = None,
    ) -> int:
        """Queue a received frame for this batch; `frame` is the parse, or its failure reason."""
        f = frame if frame is not None and not isinstance(frame, str) else None
        fid = self._next_id
        assert fid is not None, "add_frame outside begin()"
        self._next_id = fid + 1
        self._frames.append((
            fid, self._now, raw,
            f and f.key_id, f and f.shoe_id, f and f.boot, f and f.seq, f and _type_name(f.type),
            verdict, reason,
        ))
        return fid

    def add_record(
        self, frame: FrameHeader, frame_id: int, kind: str, record: Mapping[str, Any]
    ) -> None:
        self._records.append((
            frame.key_id, frame.shoe_id, frame.seq, frame_id, kind,
            record.get("shoe"), record.get("round"), json.dumps(record),
        ))

    def stored_raw(self, key_id: int, shoe_id: int, seq: int) -> bytes | None:
        for r in self._records:  # stored earlier in this same batch
            if r[:3] == (key_id, shoe_id, seq):
                return next(f[2] for f in self._frames if f[0] == r[3])
        row = self.db.execute(
            "SELECT f.raw FROM records r JOIN frames f ON f.id = r.frame_id"
            " WHERE r.key_id=? AND r.shoe_id=? AND r.seq=?",
            (key_id, shoe_id, seq),
        ).fetchone()
        return row[0] if row else None

    def link(self, key_id: int, shoe_id: int) -> dict[str, Any] | None:
        row = self.db.execute(
            "SELECT last_seq, last_mac, last_boot, host_counter, inventory FROM link"
            " WHERE key_id=? AND shoe_id=?",
            (key_id, shoe_id),
        ).fetchone()
        if not row:
            return None
        return {
            "last_seq": row[0],
            "last_mac": row[1],
            "last_boot": row[2],
            "host_counter": row[3],
            "inventory": json.loads(row[4]),
        }

    def save_link(self, key_id: int, shoe_id: int, st: Mapping[str, Any]) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO link"
            " (key_id, shoe_id, last_seq, last_mac, last_boot, host_counter, inventory)"
            " VALUES (?,?,?,?,?,?,?)",
            (
                key_id, shoe_id, st["last_seq"], st["last_mac"], st["last_boot"],
                st["host_counter"], json.dumps(st["inventory"]),
            ),
        )

    def records(
        self,
        kinds: Sequence[str] | None = None,
        shoe: int | None = None,
        round_no: int | None = None,
    ) -> list[tuple[str, dict[str, Any]]]:
        """Decoded records in the order the shoe sent them."""
        q = "SELECT kind, record FROM records WHERE 1=1"
        args: list[object] = []
        if kinds:
            q += f" AND kind IN ({','.join('?' * len(kinds))})"
            args.extend(kinds)
        if shoe is not None:
            q += " AND shoe=?"
            args.append(shoe)
        if round_no is not None:
            q += " AND round=?"
            args.append(round_no)
        rows = self.db.execute(q + " ORDER BY key_id, shoe_id, seq", args)
        return [(r[0], json.loads(r[1])) for r in rows]

    def log_integrity(self, r: Mapping[str, Any]) -> None:
        self.db.execute(
            "INSERT INTO integrity_checks"
            " (checked_at, shoe_id, seed, expected, answer, integrity, result)"
            " VALUES (?,?,?,?,?,?,?)",
            (
                time.time(), r["shoe_id"], r["seed"], r["expected"], r["answer"],
                r["integrity"], r["result"],
            ),
        )

    def close(self) -> None:
        self.db.close()


def _type_name(t: int) -> str:
    return TYPES.get(t, f"0x{t:02x}")

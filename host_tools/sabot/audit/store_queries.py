"""The audit store's queries of its decoded rows, as the pit's pages, the shift report, soak,
settlement and receipts read them: records, alarms and operator entries (by row, by shoe and
round, or by the time they were stored), each shoe's newest frame and accounting. A part of the
store (audit/store.py), the only code that knows its schema: AuditStore takes them in, for a
SQLite file and a server's database alike."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple, TypeVar

from sabot.errors import SabotError, parse_json


class UnreadableRow(SabotError):
    """A stored row whose JSON no validator wrote (not UTF-8, not JSON, a number too long, nested
    too deep, not an object): a hand-edited store. Which row, in one line; `table` and `row_id`
    (None for a row named otherwise) for a reader that goes past it."""

    def __init__(self, table: str, row_id: int | None, problem: str) -> None:
        super().__init__(f"{problem} (no validator writes that: altered? sabot audit verify "
                         "checks the store)")
        self.table, self.row_id = table, row_id


def stored_object(text: str | bytes, table: str, row_id: int | None,
                  name: str | None = None) -> dict[str, Any]:
    """A stored JSON object (a record, an operator entry, a shoe's accounting), read as
    errors.parse_json reads what a user gives: UnreadableRow naming its row (`name`, else its
    table and id) for anything else."""
    what = f"the audit store's {name or f'{table} id {row_id}'}"
    try:
        value = parse_json(text, what)
    except SabotError as e:
        raise UnreadableRow(table, row_id, str(e)) from None
    if not isinstance(value, dict):
        raise UnreadableRow(table, row_id, f"{what}: not a JSON object")
    return value


class StoredRecord(NamedTuple):
    """A decoded record as the pages follow it: its row id, and when its frame was received."""

    id: int
    kind: str
    record: dict[str, Any]  # carries its shoe_id, as records() gives it
    shoe_id: int
    received_at: float


class RecordQueries:
    """The queries; AuditStore gives them its connection (`db`) and `_reading()`, which turns a
    database fault into one line."""

    db: Any

    def _reading(self) -> contextlib.AbstractContextManager[None]:
        raise NotImplementedError

    def latest_inventory(self, shoe_id: int) -> dict[str, Any] | None:
        """The validator's accounting of the shoe device's current shoe after its latest stored
        read (new_shoe_accounts' shape), or None before any."""
        with self._reading():
            row = self.db.execute("SELECT id, inventory FROM link_state WHERE shoe_id=?"
                                  " ORDER BY id DESC LIMIT 1", (shoe_id,)).fetchone()
        return stored_object(row[1], "link_state", row[0]) if row else None

    def records(self, kinds: Sequence[str] | None = None, shoe: int | None = None,
                round_no: int | None = None,
                shoe_id: int | None = None) -> list[tuple[str, dict[str, Any]]]:
        """Decoded records in the order the shoe sent them; each carries its shoe_id."""
        q = "SELECT id, kind, record, shoe_id FROM records WHERE 1=1"
        args: list[object] = []
        if kinds:
            q += f" AND kind IN ({','.join('?' * len(kinds))})"
            args.extend(kinds)
        for col, val in (("shoe", shoe), ("round", round_no), ("shoe_id", shoe_id)):
            if val is not None:
                q += f" AND {col}=?"
                args.append(val)
        with self._reading():
            rows = self.db.execute(q + " ORDER BY key_id, shoe_id, seq", args).fetchall()
        return [(kind, stored_object(text, "records", rid) | {"shoe_id": shoe_id})
                for rid, kind, text, shoe_id in rows]

    def round_frames(self, shoe_id: int, shoe: int, round_no: int) -> dict[str, tuple[int, bytes]]:
        """kind -> (seq, raw) of the stored frames of one round (initial_cards, result; a
        blackjack round's blackjack_result), the last of each kind stored (a round voided and
        dealt again keeps its number)."""
        with self._reading():
            rows = self.db.execute(
                "SELECT r.kind, r.seq, f.raw FROM records r JOIN frames f ON f.id = r.frame_id"
                " WHERE r.shoe_id=? AND r.shoe=? AND r.round=? AND r.kind IN"
                " ('initial_cards', 'result', 'blackjack_result') ORDER BY r.seq",
                (shoe_id, shoe, round_no)
            ).fetchall()
        return {kind: (seq, bytes(raw)) for kind, seq, raw in rows}

    def records_since(self, record_id: int,
                      unreadable: list[UnreadableRow] | None = None) -> list[StoredRecord]:
        """The records stored after row id `record_id`, in the order they were stored.
        `unreadable`: where a row that is not a record goes, left out (a reader that follows the
        store goes past it); without it, that row is UnreadableRow."""
        with self._reading():
            rows = self.db.execute(
                "SELECT r.id, r.kind, r.record, r.shoe_id, f.received_at FROM records r"
                " JOIN frames f ON f.id = r.frame_id WHERE r.id > ? ORDER BY r.id",
                (record_id,)).fetchall()
        return _decoded(((rid, text, (rid, kind, shoe_id, at)) for rid, kind, text, shoe_id, at
                         in rows), "records", unreadable,
                        lambda rec, row: StoredRecord(row[0], row[1], rec | {"shoe_id": row[2]},
                                                      row[2], row[3]))

    def result_records(self) -> list[tuple[int, dict[str, Any]]]:
        """(frame id, record) of every stored result, in the order stored; each record exactly
        as its frame decoded."""
        with self._reading():
            rows = self.db.execute("SELECT id, frame_id, record FROM records WHERE"
                                   " kind='result' ORDER BY id").fetchall()
        return [(fid, stored_object(text, "records", rid)) for rid, fid, text in rows]

    def alarms(self, shoe_id: int | None = None, shoe: int | None = None) -> list[dict[str, Any]]:
        q = "SELECT kind, shoe_id, shoe, round, detail, frame_id FROM alarms WHERE 1=1"
        args: list[object] = []
        for col, val in (("shoe_id", shoe_id), ("shoe", shoe)):
            if val is not None:
                q += f" AND {col}=?"
                args.append(val)
        with self._reading():
            rows = self.db.execute(q + " ORDER BY id", args).fetchall()
        return [{"kind": r[0], "shoe_id": r[1], "shoe": r[2], "round": r[3], "detail": r[4],
                 "frame_id": r[5]} for r in rows]

    def alarms_since(self, alarm_id: int) -> list[dict[str, Any]]:
        """The alarms stored after row id `alarm_id`, in the order stored: alarms()'s keys, the
        row's `id`, when it was raised (`raised_at`, epoch seconds) and the shoe's seq of the
        frame it was raised on (`seq`, None for none)."""
        return self._alarm_rows("a.id > ?", (alarm_id,))

    def alarms_between(self, start: float, end: float) -> list[dict[str, Any]]:
        """alarms_since()'s rows of the alarms raised from `start` to before `end`."""
        return self._alarm_rows("a.raised_at >= ? AND a.raised_at < ?", (start, end))

    def _alarm_rows(self, where: str, args: tuple[Any, ...]) -> list[dict[str, Any]]:
        with self._reading():
            rows = self.db.execute(
                "SELECT a.id, a.kind, a.shoe_id, a.shoe, a.round, a.detail, a.frame_id,"
                " a.raised_at, f.seq FROM alarms a LEFT JOIN frames f ON f.id = a.frame_id"
                f" WHERE {where} ORDER BY a.id", args).fetchall()
        return [{"id": r[0], "kind": r[1], "shoe_id": r[2], "shoe": r[3], "round": r[4],
                 "detail": r[5], "frame_id": r[6], "raised_at": r[7], "seq": r[8]}
                for r in rows]

    def frames_since(self, frame_id: int) -> tuple[int, dict[int, tuple[float, int | None]]]:
        """What was stored after frame row `frame_id`: (the newest frame row's id, {shoe id:
        (when its newest authentic frame was stored, that frame's seq)}). A shoe's statuses,
        which answer the host's hellos every few seconds, count: a live link's shoe is never
        quiet here; refused frames (another shoe's, a forger's) do not."""
        with self._reading():
            rows = self.db.execute(
                "SELECT f.shoe_id, f.id, f.received_at, f.seq FROM frames f JOIN (SELECT"
                " shoe_id, MAX(id) AS id FROM frames WHERE id > ? AND shoe_id IS NOT NULL"
                " AND verdict <> 'rejected' GROUP BY shoe_id) newest ON newest.id = f.id",
                (frame_id,)).fetchall()
            top = self.db.execute("SELECT MAX(id) FROM frames").fetchone()[0]
        return (max(int(top or 0), frame_id),
                {sid: (at, seq) for sid, _, at, seq in rows if isinstance(sid, int)})

    def records_between(self, start: float, end: float) -> list[StoredRecord]:
        """records_since()'s records whose frames were stored from `start` to before `end`,
        each with its frame's seq in the record (`seq`)."""
        with self._reading():
            rows = self.db.execute(
                "SELECT r.id, r.kind, r.record, r.shoe_id, f.received_at, r.seq FROM records r"
                " JOIN frames f ON f.id = r.frame_id WHERE f.received_at >= ?"
                " AND f.received_at < ? ORDER BY r.id", (start, end)).fetchall()
        return [StoredRecord(rid, kind, stored_object(text, "records", rid)
                             | {"shoe_id": shoe_id, "seq": seq}, shoe_id, at)
                for rid, kind, text, shoe_id, at, seq in rows]

    def operations_since(self, op_id: int, until: float | None = None,
                         unreadable: list[UnreadableRow] | None = None) -> list[dict[str, Any]]:
        """The operator log's entries after row `op_id` (logged before `until`, when given),
        oldest first: each entry as logged, with its row `id`, `logged_at` (epoch seconds),
        `seq` and `shoe_id` columns. `unreadable`: as records_since's."""
        q = "SELECT id, logged_at, shoe_id, seq, entry FROM operations WHERE id > ?"
        args: list[Any] = [op_id]
        if until is not None:
            q, args = q + " AND logged_at < ?", [*args, until]
        with self._reading():
            rows = self.db.execute(q + " ORDER BY id", args).fetchall()
        return _decoded(((rid, text, (rid, at, sid, seq)) for rid, at, sid, seq, text in rows),
                        "operations", unreadable,
                        lambda entry, row: entry | dict(zip(("id", "logged_at", "shoe_id", "seq"),
                                                            row, strict=True)))

    def alarmed_frame_ids(self) -> set[int | None]:
        """The frame id of every stored alarm (None for an alarm on no frame)."""
        with self._reading():
            return {fid for (fid,) in self.db.execute("SELECT frame_id FROM alarms")}

    def operations(self, shoe_id: int | None = None) -> list[dict[str, Any]]:
        """The operator log in the order written, each entry as it was logged, with `seq`: the
        shoe's signed frame that shows it done."""
        q, args = "SELECT id, seq, entry FROM operations", []
        if shoe_id is not None:
            q, args = q + " WHERE shoe_id=?", [shoe_id]
        with self._reading():
            rows = self.db.execute(q + " ORDER BY id", args).fetchall()
        return [stored_object(text, "operations", rid) | {"seq": seq} for rid, seq, text in rows]


Columns = TypeVar("Columns")
Decoded = TypeVar("Decoded")


def _decoded(rows: Iterable[tuple[int, Any, Columns]], table: str,
             unreadable: list[UnreadableRow] | None,
             make: Callable[[dict[str, Any], Columns], Decoded]) -> list[Decoded]:
    """make(object, columns) of each (row id, stored JSON, columns) of `table`; a row whose JSON
    is no object appended to `unreadable` and left out, or, without it, raised."""
    out: list[Decoded] = []
    for rid, text, columns in rows:
        try:
            obj = stored_object(text, table, rid)
        except UnreadableRow as e:
            if unreadable is None:
                raise
            unreadable.append(e)
            continue
        out.append(make(obj, columns))
    return out

"""The rows `sabot audit verify` finds stored with each frame (audit/verify.py walks the store):
its record, exactly the alarms its validator raised and the link state a read left, and the rows
of their own (the schema, verify-firmware's answers, the operator log, the witnesses'
cosignatures). A mixin of the walk: the walk opens a frame (`frame`), these close it."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, NamedTuple

from sabot import protocol as pr
from sabot.audit.derived import Broken, DerivedShoe, differ, sid, type_name
from sabot.audit.operator_log import OperatorLog
from sabot.audit.store import COLUMNS, SCHEMA_VERSION
from sabot.audit.witness_check import Cosignatures
from sabot.errors import NOTICES  # watch.py's, not derived here

# the alarms a frame's content raises: derived again from the frames, they must be those stored
CONTENT_ALARMS = frozenset((
    "rules_mismatch", "announcement_mismatch", "burn_mismatch", "missing_burn",
    "round_out_of_order", "initial_cards_mismatch", "dummy_mismatch", "resolution_mismatch",
    "inventory_exceeded", "inventory_mismatch", "config_mismatch", "malformed_payload",
    "missing_shoe_end", "missing_initial_cards", "round_after_shoe_end", "firmware_update",
    "update_refused", "rekey"))
DERIVED = CONTENT_ALARMS | {"sequence_gap", "tilt", "checkpoint_mismatch", "counter_low"}
FRAMELESS = frozenset(("missing_shoe_end",))  # a capture ending mid-shoe (Validator.finish)
_GAP = re.compile(r"frames (\d+)\.\.(\d+) were never seen here")


class OpenFrame(NamedTuple):
    """An accepted frame being checked: the rows stored with it follow it in the chain."""

    id: int
    frame: pr.Frame
    shoe: DerivedShoe
    received_at: float
    record: tuple[Any, ...] | None  # the record row it must have, or None
    derived: list[tuple[Any, ...]]  # (kind, shoe, round, detail) of the alarms it raises


def alarm_key(kind: str, shoe: Any, rnd: Any, detail: Any) -> tuple[Any, ...]:
    if kind == "sequence_gap":  # the range is derived; the reason in brackets is the validator's
        m = _GAP.match(detail) if isinstance(detail, str) else None
        detail = (int(m[1]), int(m[2])) if m else detail
    return (kind, shoe, rnd, detail)


def gap_text(detail: Any) -> str:
    return f"frames {detail[0]}..{detail[1]}" if isinstance(detail, tuple) else repr(detail)


class FrameRows:
    """The walk's state these read (set by audit/verify.py's walk)."""

    frame: OpenFrame | None
    stored_alarms: list[tuple[int, tuple[Any, ...]]]
    record_seen: bool
    optional: tuple[Any, ...] | None
    operator_log: OperatorLog
    meta: list[tuple[Any, ...]]
    cosignatures: Cosignatures
    shoes: dict[int, DerivedShoe]

    def _end_of_read(self, at: Any) -> None:
        raise NotImplementedError

    def _shoe(self, shoe_id: int) -> DerivedShoe:
        raise NotImplementedError

    def _close_frame(self) -> None:
        """The rows stored with the frame before: exactly its record and its alarms."""
        fr = self.frame
        if fr is None:
            return
        self.frame = None
        if fr.record is not None and not self.record_seen:
            raise Broken(f"frame id {fr.id} (shoe {sid(fr.frame.shoe_id)} seq {fr.frame.seq}) "
                         "has no record (deleted?)")
        if not fr.derived and not self.stored_alarms:
            return  # (most frames)
        derived = Counter(alarm_key(*a) for a in fr.derived)
        stored = Counter(key for _, key in self.stored_alarms)
        if self.optional is not None and stored[self.optional] == derived[self.optional] + 1:
            derived[self.optional] += 1
        if derived == stored:
            return
        kinds_d = Counter(k[0] for k in derived.elements())
        kinds_s = Counter(k[0] for k in stored.elements())
        where = (f"frame id {fr.id} (shoe {sid(fr.frame.shoe_id)} seq {fr.frame.seq} "
                 f"{type_name(fr.frame)})")
        for key in sorted(derived - stored, key=repr):
            if key[0] == "sequence_gap" and kinds_d[key[0]] > kinds_s[key[0]]:
                raise Broken(f"{where} shows {gap_text(key[3])} of the shoe were never stored "
                             "here, and no sequence_gap alarm says so (deleted?)")
            if kinds_d[key[0]] > kinds_s[key[0]]:
                raise Broken(f"{where} raises a {key[0]} alarm ({self._say(key)}) the store does "
                             "not hold (deleted?)")
        for key in sorted(stored - derived, key=repr):
            if kinds_s[key[0]] > kinds_d[key[0]]:
                raise Broken(f"the store holds a {key[0]} alarm on {where} that its frames do "
                             "not raise (inserted?)")
            want = next(k for k in derived if k[0] == key[0] and derived[k] > stored[k])
            raise Broken(f"the {key[0]} alarm on {where} is not what its frame raises: stored "
                         f"{self._say(key)}; derived {self._say(want)}")

    @staticmethod
    def _say(key: tuple[Any, ...]) -> str:
        kind, shoe, rnd, detail = key
        text = gap_text(detail) if kind == "sequence_gap" else repr(detail)
        return f"shoe {shoe}, round {rnd}: {text}"

    # ---- the rows stored with a frame ----------------------------------------------------
    def _records(self, rid: int, values: tuple[Any, ...]) -> None:
        fr = self.frame
        if fr is None or values[0] != fr.id or fr.record is None or self.record_seen:
            raise Broken(f"records id {rid} (frame id {values[0]}, shoe {sid(values[2])} seq "
                         f"{values[3]}) is not the record of the frame stored before it: a record "
                         "no accepted frame says (inserted or moved?)")
        if values != fr.record:
            raise Broken(f"the record of frame id {fr.id} (shoe {sid(fr.frame.shoe_id)} seq "
                         f"{fr.frame.seq}) is not what the frame says: it differs in "
                         f"{differ(COLUMNS['records'], values, fr.record)}")
        self.record_seen = True

    def _alarms(self, rid: int, values: tuple[Any, ...]) -> None:
        frame_id, raised_at, key_id, shoe_id, shoe, rnd, kind, detail = values
        if frame_id is None:  # a capture that ended mid-shoe: raised after its last frame
            self._close_frame()
            self._end_of_read(raised_at)
            if kind not in FRAMELESS:
                raise Broken(f"alarm id {rid}: a {kind} alarm on no frame (inserted?)")
            # a validator names its shoe; a pit's role may insert rows naming none
            if shoe_id is None:
                raise Broken(f"alarm id {rid}: a {kind} alarm on no frame and no shoe "
                             "(inserted?)")
            self.operator_log.alarm(rid, shoe_id, kind, None, raised_at)
            return
        fr = self.frame
        if fr is None or frame_id != fr.id:
            raise Broken(f"alarm id {rid} ({kind} on frame id {frame_id}) is not stored with "
                         "that accepted frame (inserted or moved?)")
        if (raised_at, key_id, shoe_id) != (fr.received_at, fr.frame.key_id, fr.frame.shoe_id):
            raise Broken(f"the {kind} alarm id {rid} on frame id {frame_id} does not carry its "
                         "frame's shoe id, key version and receive time (moved or altered?)")
        if kind in DERIVED:
            self.stored_alarms.append((rid, alarm_key(kind, shoe, rnd, detail)))
        elif kind not in NOTICES:
            raise Broken(f"alarm id {rid}: {kind!r} is no alarm a validator raises (inserted?)")
        self.operator_log.alarm(rid, shoe_id, kind, fr.frame.seq, raised_at)

    def _link_state(self, rid: int, values: tuple[Any, ...]) -> None:
        shoe = self._shoe(values[1])
        want = shoe.link_values()
        if values != want:
            raise Broken(f"link_state id {rid} (shoe {sid(values[1])}) is not the link state its "
                         "frames leave the validator in at that point: it differs in "
                         f"{differ(COLUMNS['link_state'], values, want)}")
        if values == shoe.row:
            raise Broken(f"link_state id {rid} (shoe {sid(values[1])}) repeats the link state "
                         "stored before it, which no validator stores twice (inserted?)")
        shoe.row = values
        shoe.linked = True

    # ---- rows of their own ---------------------------------------------------------------
    def _meta(self, rid: int, values: tuple[Any, ...]) -> None:
        self._close_frame()
        self._end_of_read(None)
        if self.meta or tuple(values) != ("schema", SCHEMA_VERSION):
            raise Broken(f"meta id {rid} {values!r} is not the store's schema row (inserted?)")
        self.meta.append(values)

    def _integrity_checks(self, rid: int, values: tuple[Any, ...]) -> None:
        self._close_frame()  # verify-firmware's answers: no shoe frame is stored with them
        self._end_of_read(None)

    def _operations(self, rid: int, values: tuple[Any, ...]) -> None:
        """An operator entry, against what was stored before it (audit/operator_log.py)."""
        self._close_frame()
        self._end_of_read(None)
        self.operator_log.entry(rid, values, self.shoes)

    def _cosignatures(self, rid: int, values: tuple[Any, ...]) -> None:
        self._close_frame()
        self._end_of_read(None)
        self.cosignatures.row(rid, values)

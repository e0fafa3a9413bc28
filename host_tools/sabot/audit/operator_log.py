"""`sabot audit verify`'s check of the operator log (the store's `operations` table), entry by
entry where the walk over the store has come to (audit/verify.py).

Two kinds of entry:
- an operation the shoe signed (`new_shoe`, `resolve`): the entry names the shoe's frame that
  shows it done, says what that frame says, and is that frame's only entry; every resolution the
  shoe signed as given from the host has one;
- an operation of the pit that no shoe signs (`sign_on`, `sign_off`, `acknowledge`,
  `serve_alarm`, written by `sabot serve`): its word is the host's alone, so what can be checked
  is where it stands — the seq it names is its shoe's newest frame stored before it (as serve
  logs it; 0 before any), an acknowledged alarm is a row stored before it, of that shoe and
  kind, raised no later than the acknowledgement was logged, and acknowledged once; the entry
  has the shape serve writes. Several may name one frame.
Any other operation is none sabot logs."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sabot.audit.derived import Broken, DerivedShoe, sid
from sabot.errors import SabotError, parse_json
from sabot.protocol import BY_LEN

SIGNED = frozenset(("new_shoe", "resolve"))
HOSTED = frozenset(("sign_on", "sign_off", "acknowledge", "serve_alarm"))
SERVE_ALARMS = frozenset(("not_recording", "link_silent", "not_witnessed"))
DEALER_MAX = BY_LEN  # characters of a dealer's name: an account's, a signed command's `by`
NOTE_MAX = 200  # characters of an acknowledgement's note


def _iso(value: Any) -> bool:
    """Whether `value` is an ISO 8601 time with its offset."""
    try:
        return isinstance(value, str) and datetime.fromisoformat(value).tzinfo is not None
    except ValueError:
        return False


def _text(value: Any, low: int, high: int) -> bool:
    return isinstance(value, str) and low <= len(value) <= high and value.isprintable()


def serve_shape(entry: Mapping[str, Any], operation: str) -> str | None:
    """What keeps `entry` from being a `operation` entry as serve writes it, or None."""
    for key in ("by", "role", "from", "table"):
        if not isinstance(entry.get(key), str):
            return f"it has no {key}"
    if entry.get("via") != "serve":
        return "it was not given via serve"
    if not _iso(entry.get("at")):
        return "its time (at) is no ISO 8601 time with an offset"
    if operation in ("sign_on", "sign_off"):
        if not _text(entry.get("dealer"), 1, DEALER_MAX):
            return f"its dealer is no name of 1 to {DEALER_MAX} printable characters"
    elif operation == "acknowledge":
        alarm = entry.get("alarm")
        if not isinstance(alarm, dict) or not isinstance(alarm.get("kind"), str) \
                or not isinstance(alarm.get("detail"), str) or not _iso(alarm.get("raised_at")):
            return "its alarm is not one with a kind, a detail and an ISO 8601 time raised"
        aid = alarm.get("id")
        if aid is not None and (isinstance(aid, bool) or not isinstance(aid, int)):
            return "its alarm's id is no row id"
        if not isinstance(entry.get("note"), str) or len(entry["note"]) > NOTE_MAX:
            return f"its note is no text of up to {NOTE_MAX} characters"
    elif entry.get("kind") not in SERVE_ALARMS:
        return "its kind is no alarm serve raises (not_recording, link_silent, not_witnessed)"
    elif not (_iso(entry.get("raised_at"))
              and (entry.get("cleared_at") is None or _iso(entry.get("cleared_at")))
              and isinstance(entry.get("detail"), str)):
        return ("it lacks the alarm's detail or its ISO 8601 times raised and cleared (null: "
                "open when serve stopped)")
    return None


class OperatorLog:
    """The operator entries met so far, and the alarm rows they may acknowledge."""

    def __init__(self) -> None:
        self.claimed: set[tuple[int, int]] = set()  # (shoe id, seq) a signed operation's entry
        # alarm id -> (shoe id, kind, the seq of the frame it was raised on or None, raised at)
        self.alarms: dict[int, tuple[Any, str, int | None, Any]] = {}
        self.acknowledged: set[tuple[Any, ...]] = set()  # each alarm acknowledged once

    def alarm(self, rid: int, shoe_id: Any, kind: str, seq: int | None,
              raised_at: Any = None) -> None:
        """An alarm row, stored where the walk is now."""
        self.alarms[rid] = (shoe_id, kind, seq, raised_at)

    def entry(self, rid: int, values: tuple[Any, ...],
              shoes: Mapping[int, DerivedShoe]) -> None:
        """An operator entry, checked against the frames and alarms stored before it."""
        _, shoe_id, seq, operation, text = values
        where = f"operator entry id {rid}"
        try:
            entry = parse_json(text, where)
        except SabotError:  # not JSON, or nested past the parser's depth: an altered row
            entry = None
        if not isinstance(entry, dict) or entry.get("operation") != operation \
                or entry.get("shoe_id") != shoe_id:
            raise Broken(f"{where} is not the entry its columns say (altered?)")
        if operation in HOSTED:
            self._hosted(where, entry, shoe_id, seq, operation, shoes.get(shoe_id), values[0])
            return
        if operation not in SIGNED:
            raise Broken(f"{where} is a {operation!r} entry, no operation sabot logs "
                         "(inserted or altered?)")
        by = entry.get("by")
        shoe = shoes.get(shoe_id)
        effect = shoe.effects.get(seq) if shoe is not None else None
        if effect is None or effect[0] != operation:
            raise Broken(f"{where} ({operation} by {by}) names frame seq {seq} of shoe "
                         f"{sid(shoe_id)}, which is no {operation} the shoe signed before it "
                         "(inserted?)")
        rec = effect[1]
        said: tuple[Any, ...]
        signed: tuple[Any, ...]
        if operation == "resolve":
            said = tuple(entry.get(k) for k in ("resolution", "shoe", "round", "irregularity",
                                                "card", "source"))
            signed = (rec["resolution"], rec["shoe"], rec["round"], rec["kind"], rec["card"],
                      rec["source"])
        else:
            said = (entry.get("shoe"), entry.get("ended_shoe"))
            signed = (rec["shoe"], effect[2] if effect[2] is not None else entry.get("ended_shoe"))
        if said != signed:
            raise Broken(f"{where} ({operation} by {by}) says {said}, the shoe signed {signed} "
                         "(altered?)")
        if (shoe_id, seq) in self.claimed:
            raise Broken(f"{where} ({operation} by {by}) is a second entry for the shoe's frame "
                         f"seq {seq} (inserted?)")
        self.claimed.add((shoe_id, seq))

    def _hosted(self, where: str, entry: dict[str, Any], shoe_id: Any, seq: Any,
                operation: str, shoe: DerivedShoe | None, logged_at: Any) -> None:
        """An entry of the pit's own word: where it stands in the chain is what can be checked."""
        problem = serve_shape(entry, operation)
        if problem is not None:
            raise Broken(f"{where} ({operation}) is no entry serve writes: {problem} (altered or "
                         "inserted?)")
        where += f" ({operation} by {entry['by']})"
        alarm = entry["alarm"] if operation == "acknowledge" else None
        if alarm is not None:
            once = (("stored", alarm["id"]) if alarm["id"] is not None
                    else ("serve", alarm["kind"], alarm["raised_at"], shoe_id))
            if once in self.acknowledged:
                raise Broken(f"{where} acknowledges an alarm acknowledged before it (inserted?)")
            self.acknowledged.add(once)
        if alarm is not None and alarm["id"] is not None:
            row = self.alarms.get(alarm["id"])
            if row is None:
                raise Broken(f"{where} acknowledges alarm id {alarm['id']}, which is no alarm "
                             "stored before it (inserted or moved?)")
            if row[:2] != (shoe_id, alarm["kind"]):
                raise Broken(f"{where} acknowledges alarm id {alarm['id']} as a {alarm['kind']} "
                             f"of shoe {sid(shoe_id)}: that row is a {row[1]} of shoe "
                             f"{sid(row[0])} (altered?)")
            if (isinstance(row[3], (int, float)) and isinstance(logged_at, (int, float))
                    and logged_at < row[3]):
                raise Broken(f"{where} is logged before alarm id {alarm['id']} it acknowledges "
                             "was raised (inserted, or its time altered?)")
            if row[2] is not None:  # raised on a frame of the shoe: the entry names that frame
                if seq != row[2]:
                    raise Broken(f"{where} names frame seq {seq}, not seq {row[2]}, which the "
                                 f"alarm id {alarm['id']} it acknowledges was raised on "
                                 "(altered or moved?)")
                return
        newest = (shoe.st["last_seq"] or 0) if shoe is not None else 0
        if seq != newest:
            raise Broken(f"{where} names frame seq {seq} of shoe {sid(shoe_id)}, not its newest "
                         f"frame stored before the entry (seq {newest}), as serve logs it "
                         "(inserted or moved?)")

    def finish(self, shoes: Mapping[int, DerivedShoe]) -> None:
        """Every resolution a shoe signed as given from the host has its entry."""
        for shoe_id, shoe in sorted(shoes.items()):
            for seq, effect in sorted(shoe.effects.items()):
                if effect[0] == "resolve" and (shoe_id, seq) not in self.claimed:
                    rec = effect[1]
                    raise Broken(f"the shoe's signed {rec['resolution']} (shoe {sid(shoe_id)} "
                                 f"seq {seq}: shoe {rec['shoe']} round {rec['round']}), given "
                                 "from the host, has no operator entry (deleted, or never "
                                 "logged: a command whose session ended before the frame was "
                                 "stored)")

"""How records, alarms and refusals are shown at the terminal, and the one-line failure that
ends a command whose record did not verify."""

from __future__ import annotations

import json
import sys
from typing import Any

from sabot.errors import NotVerified


def shoe_id_text(shoe_id: Any) -> str:
    """A shoe id as every command prints it: 0x followed by 8 hex digits."""
    return f"{shoe_id:#010x}" if isinstance(shoe_id, int) else str(shoe_id)


def format_round(rec: dict[str, Any]) -> str:
    flags = f"  ({', '.join(rec['flags'])})" if rec["flags"] else ""
    dummy = "  [dummy hand, no bets]" if rec.get("dummy") else ""
    said = "".join(f'  "{a}"' for a in rec.get("announcements", []))
    device = f"[shoe id {shoe_id_text(rec['shoe_id'])}] " if "shoe_id" in rec else ""
    return (f"{device}shoe {rec['shoe']} round {rec['round']:>3}: "
            f"player {' '.join(rec['player']):<9} "
            f"{rec['player_total']}  banker {' '.join(rec['banker']):<9} {rec['banker_total']}  "
            f"-> {rec['winner']}{flags}{dummy}{said}")


def record_json(kind: str, rec: dict[str, Any]) -> str:
    from sabot.audit.validator import contract_round

    return json.dumps(contract_round(rec) if kind == "result" else rec)


def format_event(rec: dict[str, Any]) -> str:
    rest = {k: v for k, v in rec.items() if k not in ("event", "inventory") and v is not None}
    return f"{rec['event']}: " + " ".join(f"{k}={v}" for k, v in rest.items())


def print_records(records: list[tuple[str, dict[str, Any]]], as_json: bool) -> None:
    for kind, rec in records:
        if as_json:
            print(record_json(kind, rec))
        elif kind == "result":
            print(format_round(rec))
        else:
            print(format_event(rec))


def print_alarm(alarm: dict[str, Any]) -> None:
    """An alarm, as it happens, for the supervisor watching the terminal."""
    # an alarm of no shoe of cards (an update, a rekey) is the shoe device's own
    where = (f"shoe {alarm['shoe']}, " if alarm.get("shoe") is not None else "") + (
        f"round {alarm['round']}, " if alarm.get("round") else "")
    print(f"ALARM {alarm['kind']} ({where}shoe id {shoe_id_text(alarm['shoe_id'])}): "
          f"{alarm['detail']}", file=sys.stderr, flush=True)


def alarm_below(alarm: dict[str, Any]) -> None:
    """An alarm on a line of its own, below the demo's progress line (which ends in \r)."""
    sys.stderr.write("\n")
    print_alarm(alarm)


def group_rejections(rejections: list[dict[str, Any]]) -> str:
    """"193 x unknown_shoe_or_key, 2 x bad_signature": one line however many frames were
    refused (as a validation session says them)."""
    from sabot.link.session import group_rejections as grouped

    return grouped(rejections)


# Game-protection notices: what is dealt, not whether the shoe or the record holds. Printed,
# stored, counted and shown; they change the exit status only with --fail-on-notice.
NOTICES = frozenset(("player_advantage", "repeated_sequence"))


def fail_on(rejections: list[dict[str, Any]], alarms: list[dict[str, Any]],
            more: str = "", fail_on_notice: bool = False) -> None:
    """Exit 1 (NotVerified), with one line, on any rejected frame or integrity or content alarm
    (CONTRACTS); game-protection notices only with `fail_on_notice`."""
    notices = [a for a in alarms if a["kind"] in NOTICES]
    if notices and not fail_on_notice:
        kinds = sorted({a["kind"] for a in notices})
        print(f"{len(notices)} game-protection notices ({', '.join(kinds)}): the exit status is "
              "not changed by them (--fail-on-notice)", file=sys.stderr)
        alarms = [a for a in alarms if a["kind"] not in NOTICES]
    parts = []
    if rejections:
        parts.append(f"{len(rejections)} frames rejected ({group_rejections(rejections)})")
    if alarms:
        kinds = sorted({a["kind"] for a in alarms})
        parts.append(f"{len(alarms)} alarms ({', '.join(kinds)})")
    if more:
        parts.append(more)
    if parts:
        raise NotVerified("; ".join(parts))

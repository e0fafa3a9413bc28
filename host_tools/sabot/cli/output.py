"""How records, alarms and refusals are shown at the terminal, and the one-line failure that
ends a command whose record did not verify."""

from __future__ import annotations

import json
import sys
from collections.abc import Container, Sequence

from sabot.errors import NOTICES, NotVerified
from sabot.pit.words import plural

TYPE_CHECKING = False  # not typing's: importing typing would slow every command's start
if TYPE_CHECKING:
    from typing import Any


def shoe_id_text(shoe_id: Any) -> str:
    """A shoe id as every command prints it (protocol.shoe_id_text: 0x and 8 hex digits)."""
    from sabot.protocol import shoe_id_text as text  # lazily: `sabot analyze` never needs it

    return text(shoe_id)


# What a round line names only where the table has it (as game/settle.Table offers the wagers):
# Dragon 7 and Panda 8 on EZ tables, Lucky Six on commission-free ones (631c.5).
VARIANT_FLAGS = {"dragon7": "ez", "panda8": "ez", "lucky_six": "commission_free"}


def round_flags(flags: list[str], variant: dict[str, Any] | None) -> list[str]:
    """The round's flags a line shows at a table of this variant (all of them where the variant
    is not known); the JSON record keeps every flag."""
    if variant is None:
        return list(flags)
    return [f for f in flags if f not in VARIANT_FLAGS or variant.get(VARIANT_FLAGS[f])]


def variant_text(variant: dict[str, Any]) -> str:
    """"baccarat, EZ", "minibaccarat, commission-free, squeeze", "blackjack, h17, no hole
    card", "21-baccarat, ace=1_or_11, player_draws_below=17, ...": a shoe_start's variant."""
    if variant.get("game") == "blackjack":
        return ", ".join(["blackjack", str(variant.get("dealer"))]
                         + ([] if variant.get("hole_card") else ["no hole card"]))
    if variant.get("game") == "21-baccarat":  # "21-baccarat, ace=1_or_11, ...": its settings
        return ", ".join(["21-baccarat"] + [f"{k}={v}" for k, v in variant.items()
                                             if k != "game"])
    return ", ".join([str(variant.get("game"))] + [
        name for key, name in (("ez", "EZ"), ("commission_free", "commission-free"),
                               ("squeeze", "squeeze")) if variant.get(key)])


def _cards(cards: Sequence[str | None]) -> str:
    return " ".join(c if c is not None else "--" for c in cards)  # -- a card not read


def _device(rec: dict[str, Any]) -> str:
    return f"[shoe id {shoe_id_text(rec['shoe_id'])}] " if "shoe_id" in rec else ""


def format_round(rec: dict[str, Any], variant: dict[str, Any] | None = None) -> str:
    """One line per round: its cards and totals, the winner, the flags the table's `variant`
    has, and what the shoe announced (the announcements it signed)."""
    flags = round_flags(rec["flags"], variant)
    shown = f"  ({', '.join(flags)})" if flags else ""
    dummy = "  [dummy hand, no bets]" if rec.get("dummy") else ""
    said = "".join(f'  "{a}"' for a in rec.get("announcements", []))
    return (f"{_device(rec)}shoe {rec['shoe']} round {rec['round']:>3}: "
            f"player {_cards(rec['player']):<9} "
            f"{rec['player_total']}  banker {_cards(rec['banker']):<9} {rec['banker_total']}  "
            f"-> {rec['winner']}{shown}{dummy}{said}")


def format_blackjack_round(rec: dict[str, Any]) -> str:
    """One line per blackjack round: each hand from the dealer's left (its seat, cards and
    total, doubled, split), then the dealer's, as the host's own rules follow the round's signed
    seats and events; a voided round names its cards only."""
    from sabot.game.blackjack import round_of, total_text

    head = f"{_device(rec)}shoe {rec['shoe']} round {rec['round']:>3}: "
    if rec.get("voided"):
        cards = [c for k, c in rec["events"] if k == "card"]
        return head + f"voided by the supervisor (its cards: {_cards(cards)})"

    def hand(cards: list[str], first_two: bool) -> str:
        return f"{_cards(cards)} {total_text(cards, first_two)}"

    r = round_of(rec)
    seats = [f"seat {h['seat']} " + hand(h["cards"], not h["split"])
             + (" doubled" if h["doubled"] else "") + (" split" if h["split"] else "")
             for h in r["hands"]]
    dealer = hand(r["dealer"], True) + f" ({len(r['dealer'])} cards)"
    return head + "  ".join(seats) + f"  dealer {dealer}"


def record_json(kind: str, rec: dict[str, Any]) -> str:
    from sabot.audit.records import contract_round

    return json.dumps(contract_round(rec) if kind == "result" else rec)


def _value(key: str, value: Any) -> str:
    """A record's field as a line shows it: cards and lists comma-separated, never a repr."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        if key == "variant":
            return variant_text(value)
        return ",".join(f"{k}:{_value(k, v)}" for k, v in value.items()) or "none"
    if isinstance(value, (list, tuple)):
        return ",".join("--" if v is None else _value(key, v) for v in value) or "none"
    return str(value)


def format_event(rec: dict[str, Any]) -> str:
    """An event (shoe start, burn, irregularity, resolution, shoe end, ...) on one line:
    `[shoe id 0x...] burn: shoe=1 cards=5C,TH,8H`."""
    first = [k for k in ("shoe", "round", "player", "banker") if k in rec]
    rest = first + [k for k in rec if k not in first]
    fields = " ".join(f"{k}={_value(k, rec[k])}" for k in rest
                      if k not in ("event", "inventory", "shoe_id") and rec[k] is not None)
    return f"{_device(rec)}{rec['event']}: {fields}"


def print_records(records: list[tuple[str, dict[str, Any]]], as_json: bool,
                  variant: dict[str, Any] | None = None,
                  shown: Container[str] | None = None) -> None:
    """Each record of `shown` kinds (default: all) as a line, or a JSON object a line. Round
    lines follow `variant` (the registry's word on the table), else the variant of the shoe's
    own shoe_start record among `records`."""
    started: dict[Any, dict[str, Any]] = {}  # (shoe id, shoe) -> the variant it started with
    for kind, rec in records:
        if kind == "shoe_start":
            started[rec.get("shoe_id"), rec["shoe"]] = rec["variant"]
        if shown is not None and kind not in shown:
            continue
        if as_json:
            print(record_json(kind, rec))
        elif kind == "result":
            print(format_round(rec, variant or started.get((rec.get("shoe_id"), rec["shoe"]))))
        elif kind == "blackjack_result":
            print(format_blackjack_round(rec))
        else:
            print(format_event(rec))


def witnessed_line(summary: dict[str, Any], witnessed: bool = False) -> str:
    """What a session's summary says of the shoe's log: its newest checkpoint that held against
    the stored frames, and (`witnessed`: --witness was given) the witnesses that cosigned one."""
    if not summary["checkpoint"]:
        return ("shoe's log: no checkpoint checked in this session (none came, or this store "
                "does not hold the shoe's log from its first frame), so none was sent to the "
                "witnesses" if witnessed else "shoe's log: no checkpoint checked")
    line = (f"shoe's log: its element signed a checkpoint of {summary['checkpoint']} frames, "
            "and its root is that of the frames stored")
    c = summary.get("cosigned")
    if c:
        line += f"; cosigned at {c['size']} frames by {', '.join(c['witnesses'])}"
    elif witnessed:
        line += "; no witness cosigned one in this session (the lines above say why)"
    return line


# What the frame counts the commands print hold. A session's `verified` are the frames it took
# that were new to the store: shoe frames, statuses (answers to the link's hellos) and
# checkpoints. Audit verify's `frames` are the shoe frames alone, of every session and shoe the
# store holds; the rest it counts apart.
def verified_text(counts: dict[str, Any]) -> str:
    """`150 frames verified (new to the store: ...)`, then the frames a session took that were
    not new, where there were any: resent copies, deferred ones, one awaiting its seal."""
    text = (f"{counts['verified']} frames verified (new to the store: shoe frames, statuses "
            "and checkpoints)")
    for key, what in (("resent", "resent copies of frames stored before"),
                      ("deferred", "deferred until sent again"),
                      ("pending", "unsigned awaiting its seal")):
        if counts.get(key):
            text += f", {counts[key]} {what}"
    return text


def served_line(summary: dict[str, Any]) -> str:
    """The line `sabot serve` ends with, from its Validation.summary() (pit/serve.py): the
    frames its validators verified (their `logs`' counts) and what else they took, the rounds,
    the rejected frames and the alarms."""
    counts = {"verified": summary["verified"]}
    for key in ("resent", "deferred", "pending"):
        counts[key] = sum(v.get(key, 0) for _, v in summary["logs"])
    return (f"served: {verified_text(counts)}, {summary['rounds']} rounds, "
            f"{len(summary['rejections'])} rejected, {len(summary['alarms'])} alarms")


def validated_line(summary: dict[str, Any], ended: Any = None) -> str:
    """The summary line `sabot validate` ends with, from link/session.validate's summary and the
    shoe it saw end (None: none)."""
    return (f"validated: {verified_text(summary)}, {summary['rounds']} rounds, "
            f"{summary['rejected']} rejected, {len(summary['alarms'])} alarms"
            + (f"; shoe {ended[0]} ended" if ended else "")
            + ("; none acknowledged (the shoe refuses our command key)"
               if summary.get("command_key") == "refused" else ""))


def stored_text(r: dict[str, Any]) -> str:
    """`sabot audit verify`'s count of what a store holds (audit/verify.verify's): `139 frames,
    68 rounds (the shoe frames of 1 shoe device, each once; also stored: 4 statuses, ...; 367 rows
    chained)`."""
    also = [plural(r[key], one, many) for key, one, many in (
        ("statuses", "status", "statuses"), ("checkpoints", "checkpoint", None),
        ("integrity_answers", "answer to verify-firmware", "answers to verify-firmware"),
        ("resent", "resent copy", "resent copies"), ("deferred", "deferred frame", None),
        ("rejected", "rejected frame", None)) if r.get(key)]
    return (f"{r['frames']} frames, {r['rounds']} rounds (the shoe frames of "
            f"{plural(r['shoes'], 'shoe device')}, each once"
            + (f"; also stored: {', '.join(also)}" if also else "")
            + f"; {r['rows']} rows chained)")


def alarm_text(alarm: dict[str, Any]) -> str:
    """`kind (shoe 2, round 5, shoe id 0x...): detail`; an alarm of no shoe of cards (an update, a
    rekey) is the shoe device's own: `kind (shoe id 0x...): detail`."""
    where = (f"shoe {alarm['shoe']}, " if alarm.get("shoe") is not None else "") + (
        f"round {alarm['round']}, " if alarm.get("round") else "")
    return (f"{alarm['kind']} ({where}shoe id {shoe_id_text(alarm.get('shoe_id'))}): "
            f"{alarm['detail']}")


def print_alarm(alarm: dict[str, Any]) -> None:
    """An alarm, as it happens, for the supervisor watching the terminal."""
    print(f"ALARM {alarm_text(alarm)}", file=sys.stderr, flush=True)


def alarm_below(alarm: dict[str, Any]) -> None:
    """An alarm on a line of its own, below the demo's progress line (which ends in \r)."""
    sys.stderr.write("\n")
    print_alarm(alarm)


def group_rejections(rejections: list[dict[str, Any]]) -> str:
    """"193 x unknown_shoe_or_key, 2 x bad_signature": one line however many frames were
    refused (as a validation session says them)."""
    from sabot.link.session import group_rejections as grouped

    return grouped(rejections)


def fail_on(rejections: list[dict[str, Any]], alarms: list[dict[str, Any]],
            more: str = "", fail_on_notice: bool = False) -> None:
    """Exit 1 (NotVerified), with one line, on any rejected frame or integrity or content alarm
    (docs/INTERFACES.md); game-protection notices only with `fail_on_notice`."""
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

"""What the pit's human pages say, in plain words: times and ages, the tables' states, holds,
alarms, results and edges (the API keeps its keys; these are for people). Any stored value is
made text here (`shown`): an edited store's value of any shape is shown as it is, never a
server error."""

from __future__ import annotations

import re
import time
from datetime import datetime
from typing import Any

LONGEST = 1000  # characters of one stored value shown: an edited store's megabyte is cut


# ---- times -----------------------------------------------------------------------------------
def clock(at: float) -> str:
    """14:02:11, the server's local time ("?" for no time a clock shows: an edited store's)."""
    try:
        return time.strftime("%H:%M:%S", time.localtime(at))
    except (OverflowError, OSError, ValueError, TypeError):
        return "?"


def iso(at: float | None) -> str | None:
    """ISO 8601 with the server's offset, to the second (None stays None, and so does a
    number no date is)."""
    if at is None:
        return None
    try:
        return datetime.fromtimestamp(at).astimezone().isoformat(timespec="seconds")
    except (OverflowError, OSError, ValueError, TypeError):
        return None


def iso_text(value: Any) -> str | None:
    """A stored time as ISO 8601: a number (epoch seconds) formatted, text (an operator entry's,
    written as ISO 8601 already) kept, anything else None."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return iso(float(value))
    return value if isinstance(value, str) else None


def plural(n: int, one: str, many: str | None = None) -> str:
    """"1 round", "4 rounds", "2 statuses"."""
    return f"{n} {one if n == 1 else many or one + 's'}"


def ago(seconds: float) -> str:
    """12 s, 3 min, 2 h 05 min."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def since(at: float, now: float) -> str:
    """since 14:02:11, 3 min."""
    return f"since {clock(at)}, {ago(now - at)}"


def shift_time(value: Any) -> str:
    """A stored time (ISO 8601 text, or epoch seconds) as the pit reads times: 14:02:11."""
    if isinstance(value, str):
        try:
            return clock(datetime.fromisoformat(value).timestamp())
        except ValueError:
            return value
    return clock(value) if isinstance(value, (int, float)) else "?"


def zone() -> str:
    """The server's time zone as it names it, and its offset."""
    return time.strftime("%Z (UTC%z)")


# ---- any stored value as text ------------------------------------------------------------------
def shown(value: Any) -> str:
    """Any stored value as page text (the builders escape it), whatever its type."""
    try:
        text = value if isinstance(value, str) else str(value)
    except (RecursionError, ValueError):  # nested past repr's depth, or an int too long to print
        text = "…"
    return text if len(text) <= LONGEST else text[:LONGEST] + "…"


def cards_text(cards: Any) -> str:
    return " ".join(map(shown, cards)) if isinstance(cards, list) else shown(cards)


def money(cents: int) -> str:
    """$25, $2.50, $5,000: whole dollars without cents."""
    dollars, rest = divmod(cents, 100)
    return f"${dollars:,}" + (f".{rest:02d}" if rest else "")


def percent(n: int, total: int) -> str:
    return f"{100 * n / total:.0f}%" if total else "-"


# ---- the game's words ------------------------------------------------------------------------
WAGER_NAMES = {"banker": "Banker", "player": "Player", "tie": "Tie", "dragon7": "Dragon 7",
               "panda8": "Panda 8", "lucky_six": "Lucky Six", "player_pair": "Player pair",
               "banker_pair": "Banker pair", "ez_banker": "Banker (EZ)",
               "nocomm_banker": "Banker (no commission)", "house_money": "House Money",
               "dragon_bonus_player": "Dragon Bonus Player",
               "dragon_bonus_banker": "Dragon Bonus Banker", "player_bonus": "Player Bonus",
               "banker_bonus": "Banker Bonus"}
FLAG_NAMES = {"player_natural": "Player natural", "banker_natural": "Banker natural",
              "player_pair": "Player pair", "banker_pair": "Banker pair",
              "dragon7": "Dragon 7", "panda8": "Panda 8", "lucky_six": "Lucky Six",
              "player_suited_pair": "Player suited pair",
              "banker_suited_pair": "Banker suited pair"}


def told(side_wagers: Any) -> frozenset[str]:
    """The flags a table's result is said with: naturals and pairs, and the side wagers it
    offers (not a Lucky Six where no one can bet on it)."""
    return frozenset(("player_natural", "banker_natural", "player_pair", "banker_pair",
                      *side_wagers))


def wager_name(wager: Any) -> str:
    return WAGER_NAMES.get(wager, shown(wager).replace("_", " ")) if isinstance(wager, str) \
        else shown(wager)


def result_words(rec: dict[str, Any], told: frozenset[str] | set[str] | None = None) -> str:
    """"Player 9 beats Banker 3", "Tie at 5", "Banker 7 beats Player 3 — Dragon 7": the
    winner first, then the flags players are told of (`told`: all when None)."""
    winner, p, b = rec.get("winner"), rec.get("player_total"), rec.get("banker_total")
    if winner == "player":
        line = f"Player {shown(p)} beats Banker {shown(b)}"
    elif winner == "banker":
        line = f"Banker {shown(b)} beats Player {shown(p)}"
    elif winner == "tie" and p == b:
        line = f"Tie at {shown(p)}"
    else:
        line = f"{shown(winner)}: Player {shown(p)}, Banker {shown(b)}"
    flags = rec.get("flags")
    named = [FLAG_NAMES.get(f, shown(f)) for f in (flags if isinstance(flags, list) else [])
             if told is None or (isinstance(f, str) and f in told)]
    return line + (" — " + ", ".join(named) if named else "")


def edge_words(wager: Any, edge: float) -> str:
    """"Banker edge 1.06%"; a wager the players have the edge on says so."""
    name = wager_name(wager)
    if edge < 0:
        return f"{name}: players ahead by {-edge:.2%}"
    return f"{name} edge {edge:.2%}"


# ---- holds, resolutions, alarms --------------------------------------------------------------
HOLD_WORDS = {
    "card_not_due": "a card came out that was not due",
    "unreadable_card": "a card could not be read",
    "two_cards": "two cards came out at once",
    "inventory_exceeded": "a card beyond the shoe's decks came out",
    "foreign_card": "a card not of the shoe's decks came out",
    "card_missing": "a due card did not come",
    "cards_exhausted": "no cards left",
    "unreadable_burn_card": "a burn card could not be read",
    "cut_card_in_burn": "the cut card came out in the burn",
    "second_cut_card": "a second cut card came out",
    "press_refused": "a button press the hand does not allow",
    "disputed": "the dealer disputed the hands shown",
}
RESOLUTION_WORDS = {"void_card": "the card voided", "keep_dummy": "the card kept as a dummy hand",
                    "void_round": "the round voided", "end_shoe": "the shoe ended"}
ALARM_WORDS = {
    "not_recording": "not recording",
    "link_silent": "the shoe is silent",
    "not_witnessed": "its rounds are not witnessed",
    "rules_mismatch": "the shoe's result is not what the rules deal",
    "announcement_mismatch": "the shoe's announcement does not fit the game",
    "burn_mismatch": "the burn did not follow the procedure",
    "missing_burn": "the shoe started without its burn",
    "round_out_of_order": "a round came out of order",
    "initial_cards_mismatch": "a result's first cards differ from those dealt",
    "missing_initial_cards": "a result came without its first cards",
    "dummy_mismatch": "a dummy hand came without a supervisor keeping it",
    "resolution_mismatch": "a resolution named another card",
    "inventory_exceeded": "more copies of a card than the decks hold",
    "inventory_mismatch": "the shoe's card count at its end differs",
    "config_mismatch": "the shoe is not configured as registered",
    "malformed_payload": "a signed frame the host cannot read",
    "missing_shoe_end": "a shoe ended without its end",
    "round_after_shoe_end": "a round came after the shoe's end",
    "firmware_update": "the shoe's firmware was updated",
    "update_refused": "the shoe refused an update",
    "rekey": "the shoe made a new result key",
    "sequence_gap": "frames this store will never see",
    "tilt": "the shoe's code does not match its release: out of play",
    "checkpoint_mismatch": "the shoe's log does not match the stored frames",
    "counter_low": "the shoe's command counter is half used",
    "player_advantage": "players have the edge on a wager",
    "repeated_sequence": "cards came out in an order seen before",
}


def hold_words(kind: Any) -> str:
    return HOLD_WORDS.get(kind, shown(kind).replace("_", " ")) if isinstance(kind, str) \
        else shown(kind)


def alarm_words(kind: Any) -> str:
    return ALARM_WORDS.get(kind, shown(kind).replace("_", " ")) if isinstance(kind, str) \
        else shown(kind)


# the watch's player_advantage detail (audit/watch.py, stored as it is: audit verify derives it)
_ADVANTAGE = re.compile(r"(\w+) \((\w+)\) house edge (-?[0-9.]+)% with (\d+) cards left: .*")


def alarm_detail_words(kind: Any, detail: Any) -> str:
    """An alarm's stored detail as the pit reads it: the players' edge in the words of the
    edges column ("Tie: players ahead by 40.00% with 6 cards left"), any other as stored."""
    text = shown(detail)
    m = _ADVANTAGE.fullmatch(text) if kind == "player_advantage" else None
    if m is None:
        return text
    wager, _, edge, cards = m.groups()
    return f"{edge_words(wager, float(edge) / 100)} with {cards} cards left"


def resolution_words(resolution: Any) -> str:
    return RESOLUTION_WORDS.get(resolution, shown(resolution).replace("_", " ")) \
        if isinstance(resolution, str) else shown(resolution)


STATE_WORDS = {"dealing": "dealing", "waiting": "waiting for a shoe", "ended": "shoe ended",
               "held": "held", "tilted": "out of play (tilt)", "link lost": "link lost",
               "not recording": "not recording", "silent": "silent",
               "wrong shoe": "not the registered shoe",
               "no validator": "no validator"}


def state_words(state: str, held: Any = None) -> str:
    """A table's state for the pit: "held: no cards left — resolve"."""
    if state == "held" and held:
        return f"held: {hold_words(held)} — resolve"
    return STATE_WORDS.get(state, state)

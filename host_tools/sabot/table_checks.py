"""What a table's configuration may hold, checked before a registry entry takes it (registry.py
ShoeEntry.check) or `sabot provision` touches a shoe: its name, its wagers and the settlement's
own check of them, its limits and its scoreboard's languages. Each answers in one line what is
wrong, or None."""

from __future__ import annotations

from typing import Any

from sabot.errors import SabotError
from sabot.game.baccarat21 import GAME as B21
from sabot.game.settle import SIDE_WAGERS, Table

TABLE_NAME_MAX = 64  # characters of a table name: it heads the pit's pages and names its API path
TIE_ODDS_MAX = 100  # the regulation sets no top (at least 8 to 1); no table pays near this
LANGUAGES = ("en", "zh")  # the players' scoreboard's: English, Chinese


def languages_ok(langs: Any) -> bool:
    """A table's `languages`: one or both of LANGUAGES, each once."""
    return (isinstance(langs, list) and bool(langs) and all(x in LANGUAGES for x in langs)
            and len(set(langs)) == len(langs))




def shown(value: object, most: int = 40) -> str:
    """A value from a registry, as an error line quotes it: escaped, and cut short."""
    text = repr(value[:most] if isinstance(value, str) else value)
    return text if len(text) <= most + 2 else text[:most] + "..."


def wagers_problem(cfg: dict[str, Any]) -> str | None:
    """What is wrong with a table's wagers (ShoeEntry.table_config), or None: each side wager
    known, once, and offered where the game has it (Dragon 7 and Panda 8 on EZ tables, Lucky
    Six on commission-free ones, Dragon Bonus with its paytable), the tie's odds 8 to
    TIE_ODDS_MAX (8 on a commission-free table): what settlement (settle.Table) takes. A
    blackjack table's: what its settlement (blackjack_settle.BlackjackTable) takes."""
    side = cfg["side_wagers"]
    if cfg["game"] in (B21, "blackjack"):
        from sabot.game.baccarat21_settle import table_of
        from sabot.game.blackjack_settle import BlackjackTable

        if len(set(side)) < len(side):
            return "a side wager is listed twice"
        resets = {k for k in cfg if k.endswith("_reset_cents")}
        unknown = sorted(resets - {"hit_and_run_reset_cents", "straight_jack_reset_cents"})
        if unknown:
            return (f"meter_reset_cents names {unknown[0].removesuffix('_reset_cents')!r}: "
                    "only hit_and_run and straight_jack have meters")
        try:
            table_of(cfg) if cfg["game"] == B21 else BlackjackTable(cfg)
        except SabotError as e:
            return str(e).removeprefix("table.")
        return None
    for w in side:
        if not isinstance(w, str) or w not in SIDE_WAGERS:
            return f"unknown side wager {shown(w)}"
    if len(set(side)) < len(side):
        return "a side wager is listed twice"
    odds = cfg["tie_odds"]
    if isinstance(odds, int) and not isinstance(odds, bool) and odds > TIE_ODDS_MAX:
        return f"tie_odds must be 8 to {TIE_ODDS_MAX}"
    if "dragon_bonus_paytable" in cfg and not any(w.startswith("dragon_bonus") for w in side):
        return "a dragon_bonus_paytable is named but the table offers no Dragon Bonus wager"
    try:
        Table(cfg)
    except SabotError as e:
        return str(e).removeprefix("table: ")
    return None


def limits_problem(low: object, high: object) -> str | None:
    """What is wrong with a table's limits (min_bet_cents, max_bet_cents), or None: both or
    neither, whole numbers of cents from 1, the minimum no more than the maximum."""
    if low is None and high is None:
        return None
    for name, v in (("min_bet_cents", low), ("max_bet_cents", high)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            return f"{name} must be a whole number of cents from 1 (both limits, or neither)"
    assert isinstance(low, int) and isinstance(high, int)
    if low > high:
        return f"the minimum bet ({low} cents) is above the maximum ({high} cents)"
    return None


def table_name_problem(name: object) -> str | None:
    """What is wrong with a table name, or None: a table name is 1 to TABLE_NAME_MAX printable
    characters (no control character, line break or bidirectional override: it is printed on
    one line and heads the pit's pages, which escape any markup), no space at either end (two
    names that look alike)."""
    if not isinstance(name, str):
        return "table must be a name"
    if not 1 <= len(name) <= TABLE_NAME_MAX:
        return f"table name {shown(name)} must be 1 to {TABLE_NAME_MAX} characters"
    if not name.isprintable():
        return f"table name {shown(name)} holds a control or other unprintable character"
    if name != name.strip():
        return f"table name {shown(name)} must not begin or end with a space"
    return None

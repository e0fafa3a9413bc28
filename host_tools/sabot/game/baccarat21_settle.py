"""Settlement of a 21 Baccarat round (`sabot settle` with `"game": "21-baccarat"`): every wager of
§ 681a.6 in integer cents, by the rules of game/baccarat21.py and the table's configuration.

- The Player's Hand and the Banker's Hand pay 1 to 1 (the text at hand gives no odds: the common
  even money); a Banker win less 5% (rounded up to 25 cents, as § 627a.12(c) words it for
  baccarat) where the table's `banker_commission` is `five_percent`.
- A tie: the Tie Wager pays `tie_odds` to 1; the Player and Banker wagers push, or lose where
  `tie_main` is `lose`.
- A Bonus Wager pays the table's `bonus_paytable` odds for its hand's best bonus hand, and loses
  otherwise.
- The Tie and the Bonus Wagers are taken only where the table offers them (`side_wagers`: `tie`,
  `player_bonus`, `banker_bonus`; § 681a.6(d)), and only from a seat that wagers on the Player's
  or the Banker's Hand (§ 681a.6(c)).
- Losing wagers are collected first, then the rest paid seat by seat from the highest number
  down, as baccarat's § 627a.11(b) orders it (§ 681a's own order is not at hand)."""

from __future__ import annotations

from typing import Any

from sabot.errors import SabotError
from sabot.game import baccarat21 as b21
from sabot.game.cards import parse_card
from sabot.game.settle import vigorish

MAIN = ("player", "banker")
OPTIONAL = ("tie", "player_bonus", "banker_bonus")
SEATS = 14  # sabot's bound on a table's seats (the text at hand names none)


def table_of(cfg: object) -> tuple[b21.Rules, list[str]]:
    if not isinstance(cfg, dict):
        raise SabotError("table: expected an object")
    offered = cfg.get("side_wagers", [])
    if not isinstance(offered, list) or any(w not in OPTIONAL for w in offered):
        raise SabotError(f"table.side_wagers of a 21 Baccarat table are among "
                         f"{', '.join(OPTIONAL)}")
    return b21.Rules.from_config(cfg), list(offered)


def _round(rec: object, rules: b21.Rules) -> dict[str, Any]:
    if not isinstance(rec, dict):
        raise SabotError("round: expected a round record object")
    try:
        player = [parse_card(c) for c in rec["player"]]
        banker = [parse_card(c) for c in rec["banker"]]
    except (KeyError, TypeError):
        raise SabotError("round: needs player and banker card lists") from None
    dealt = b21.redeal(player, banker, rules)
    if dealt is None:
        raise SabotError("round: the table's drawing rules want a card these hands do not have")
    if dealt != (player, banker):
        raise SabotError(f"round: not a round the table's rules deal; from these cards they deal "
                         f"player {' '.join(dealt[0])}, banker {' '.join(dealt[1])}")
    got = b21.outcome(player, banker, rules)
    for k in ("player_total", "banker_total", "winner"):
        if k in rec and rec[k] != got[k]:
            raise SabotError(f"round: {k} {rec[k]!r} disagrees with the cards ({got[k]!r})")
    return got


def _wagers(items: object, offered: list[str]) -> list[dict[str, Any]]:
    if not isinstance(items, list):
        raise SabotError("wagers: expected a list")
    main_seats = {w.get("seat") for w in items if isinstance(w, dict) and w.get("wager") in MAIN}
    for i, w in enumerate(items):
        if not isinstance(w, dict):
            raise SabotError(f"wagers[{i}]: expected an object with seat, wager, amount_cents")
        seat, wager, amount = w.get("seat"), w.get("wager"), w.get("amount_cents")
        if not isinstance(seat, int) or isinstance(seat, bool) or not 1 <= seat <= SEATS:
            raise SabotError(f"wagers[{i}]: seat must be 1 to {SEATS}")
        if wager not in MAIN + OPTIONAL:
            raise SabotError(f"wagers[{i}]: {wager!r} is no wager of 21 Baccarat "
                             f"({', '.join(MAIN + OPTIONAL)})")
        if wager in OPTIONAL and wager not in offered:
            raise SabotError(f"wagers[{i}]: this table does not offer {wager} (§ 681a.6(d): "
                             "only as its Rules Submission says)")
        if wager in OPTIONAL and seat not in main_seats:
            raise SabotError(f"wagers[{i}]: seat {seat} has no Player or Banker wager: an "
                             "optional wager is only for a player in the round (§ 681a.6(c))")
        if not isinstance(amount, int) or isinstance(amount, bool) or amount <= 0:
            raise SabotError(f"wagers[{i}]: amount_cents must be a positive whole number")
    return items


def result_of(wager: str, amount: int, rules: b21.Rules, got: dict[str, Any]
              ) -> tuple[str, int, int]:
    """(result, win_cents, vigorish_cents) of one wager on a round of this outcome."""
    won = got["winner"]
    if wager in MAIN:
        if won == "tie":
            return ("push", 0, 0) if rules.tie_main == "push" else ("lose", 0, 0)
        if won != wager:
            return "lose", 0, 0
        vig = vigorish(amount) if wager == "banker" and \
            rules.banker_commission == "five_percent" else 0
        return "win", amount, vig
    if wager == "tie":
        return ("win", amount * rules.tie_odds, 0) if won == "tie" else ("lose", 0, 0)
    odds = b21.bonus_odds(got[wager], rules)
    return ("win", amount * odds, 0) if odds else ("lose", 0, 0)


def settle(request: dict[str, Any]) -> dict[str, Any]:
    """The `sabot settle` answer (docs/INTERFACES.md) for a 21 Baccarat request; nothing is
    settled unless everything in it holds."""
    rules, offered = table_of(request.get("table", {}))
    got = _round(request.get("round"), rules)
    items = _wagers(request.get("wagers", []), offered)
    results = []
    for w in items:
        result, win, vig = result_of(w["wager"], w["amount_cents"], rules, got)
        results.append({"seat": w["seat"], "wager": w["wager"], "result": result,
                        "win_cents": win, "vigorish_cents": vig})
    losing = [e for e in results if e["result"] == "lose"]
    others = sorted((e for e in results if e["result"] != "lose"), key=lambda e: -e["seat"])
    return {"settlements": losing + others, "round": got}

"""Every wager's resolution, from the regulation text: 627a.7 / 631a.8 (wagers), 627a.12 / 631a.13
(odds, vigorish), 631c.5 (commission-free). One definition serves the analyzer and settlement.

A round is described by a Summary; `resolve(wager, s)` answers (result, odds, vigorish_rate):
result is "win", "lose" or "push"; a win pays `odds` to 1, less `vigorish_rate` of the amount
won."""

from __future__ import annotations

from fractions import Fraction
from typing import NamedTuple, TypeAlias


class Summary(NamedTuple):
    player_total: int
    banker_total: int
    player_cards: int
    banker_cards: int
    player_pair: bool
    banker_pair: bool


# (result, odds to 1, vigorish rate): what `resolve` answers.
Resolution: TypeAlias = tuple[str, int | Fraction, int | Fraction]

WIN, LOSE, PUSH = "win", "lose", "push"
FIVE_PERCENT = Fraction(5, 100)

# 627a.12(e): Dragon Bonus paytables, odds to 1 by winning margin
# (a non-natural win by 4-9 points).
DRAGON_BONUS_PAYTABLES = {
    "a": {9: 30, 8: 10, 7: 6, 6: 4, 5: 2, 4: 1},
    "b": {9: 20, 8: 8, 7: 7, 6: 4, 5: 3, 4: 1},
    "c": {9: 30, 8: 10, 7: 4, 6: 4, 5: 2, 4: 2},
}

# Pair and House Money wagers depend on the first four cards only (settled before any third card).
PAIR_WAGERS = ("player_pair", "banker_pair", "house_money")


def natural(total: int, cards: int) -> bool:
    return cards == 2 and total >= 8


def winner(s: Summary) -> str:
    if s.player_total > s.banker_total:
        return "player"
    if s.banker_total > s.player_total:
        return "banker"
    return "tie"


def is_dragon7(s: Summary) -> bool:
    return s.banker_cards == 3 and s.banker_total == 7 and s.player_total < 7


def is_panda8(s: Summary) -> bool:
    return s.player_cards == 3 and s.player_total == 8 and s.banker_total < 8


def _dragon_bonus(
    paytable: str, own_total: int, own_cards: int, other_total: int, other_cards: int
) -> Resolution:
    """627a.7(a)(4): natural win 1:1, natural tie push; a non-natural win by 4+ pays the
    paytable."""
    own_nat, other_nat = natural(own_total, own_cards), natural(other_total, other_cards)
    if own_nat:
        if other_nat and own_total == other_total:
            return PUSH, 0, 0
        if own_total > other_total:
            return WIN, 1, 0
        return LOSE, 0, 0
    margin = own_total - other_total
    if margin >= 4:
        return WIN, DRAGON_BONUS_PAYTABLES[paytable][margin], 0
    return LOSE, 0, 0


def _even_money(
    s: Summary, side: str, ez: bool = False, commission_free: bool = False
) -> Resolution:
    w = winner(s)
    if w == "tie":
        return PUSH, 0, 0
    if w != side:
        return LOSE, 0, 0
    if side == "player":
        return WIN, 1, 0
    if ez:  # EZ Baccarat: no vigorish; a Banker win with a Dragon 7 pushes
        return (PUSH, 0, 0) if is_dragon7(s) else (WIN, 1, 0)
    if commission_free:  # 631c.5(i): a Banker win with a point count of 6 pays 1 to 2
        return WIN, (Fraction(1, 2) if s.banker_total == 6 else 1), 0
    return WIN, 1, FIVE_PERCENT  # 627a.12(c): 5% vigorish on a winning Banker wager


def _yes(flag: bool, odds: int) -> Resolution:
    return (WIN, odds, 0) if flag else (LOSE, 0, 0)


def resolve(wager: str, s: Summary) -> Resolution:
    if wager == "banker":
        return _even_money(s, "banker")
    if wager == "player":
        return _even_money(s, "player")
    if wager == "tie":
        return _yes(winner(s) == "tie", 8)
    if wager == "ez_banker":
        return _even_money(s, "banker", ez=True)
    if wager == "nocomm_banker":
        return _even_money(s, "banker", commission_free=True)
    if wager == "dragon7":
        return _yes(is_dragon7(s), 40)
    if wager == "panda8":
        return _yes(is_panda8(s), 25)
    if wager == "lucky_six":  # 631c.5(k): 12:1 with two Banker cards, 20:1 with three
        won = s.banker_total == 6 and s.player_total < 6
        return _yes(won, 12 if s.banker_cards == 2 else 20)
    if wager == "player_pair":
        return _yes(s.player_pair, 11)
    if wager == "banker_pair":
        return _yes(s.banker_pair, 11)
    if wager == "house_money":  # 627a.12(h): 15:1 both pairs, 3:1 either pair
        if s.player_pair and s.banker_pair:
            return WIN, 15, 0
        return _yes(s.player_pair or s.banker_pair, 3)
    if wager.startswith("dragon_bonus_"):
        _, _, paytable, hand = wager.split("_")
        if hand == "player":
            return _dragon_bonus(
                paytable, s.player_total, s.player_cards, s.banker_total, s.banker_cards
            )
        return _dragon_bonus(
            paytable, s.banker_total, s.banker_cards, s.player_total, s.player_cards
        )
    raise KeyError(wager)


ANALYZED_WAGERS = (
    "banker", "player", "tie", "ez_banker", "dragon7", "panda8", "nocomm_banker", "lucky_six",
    "player_pair", "banker_pair", "house_money",
    *(f"dragon_bonus_{t}_{h}" for t in "abc" for h in ("player", "banker")),
)


def net_return(wager: str, s: Summary, tie_odds: int = 8) -> Fraction:
    """The player's net result per unit wagered, exactly (tie paying `tie_odds` to 1)."""
    result, odds, vig = resolve(wager, s)
    if wager == "tie" and result == WIN:
        odds = tie_odds
    if result == WIN:
        return Fraction(odds) * (1 - vig)
    return Fraction(-1) if result == LOSE else Fraction(0)

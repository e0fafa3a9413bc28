"""Exact analysis of a 21 Baccarat shoe (`sabot analyze --game 21-baccarat`): the probability of
each outcome and each wager's house edge for the table's rules and a composition (a full shoe of N
decks, less the cards seen).

Counting convention. The round's cards are the first cards of a random ordering of the shoe. Each
hand's drawing depends on its own cards alone (a Banker chasing the Player: on the Player's final
total), so the Player's cards, in their order, and then the Banker's are distributed as two
sequences drawn one after the other without replacement, whichever positions the dealing order
gives them. Every sequence a hand can end with is enumerated once; its probability depends only on
its multiset of card values, so sequences are grouped by multiset (their count kept), and each
pair of Player and Banker multisets is weighted by the falling factorials of the composition
(computed in floating point over the whole Banker side at once: each probability is the exact
combinatorial sum, to double precision). The Bonus Wagers depend on a hand's first two cards only,
and are exact fractions of the composition's ranks and suits.

tests/test_baccarat21.py checks it against a brute-force walk of every deal of a small shoe and
against a simulation of dealt rounds."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from sabot.errors import SabotError
from sabot.game import baccarat21 as b21
from sabot.game.cards import RANKS, SUITS, left_in_shoe

VALUES = 10  # a hand's drawing sees values 1 (an ace) to 10


def _sequences(counts: Sequence[int], draws: Any, rules: b21.Rules
               ) -> dict[tuple[int, ...], tuple[int, int]]:
    """Every ordered sequence of card values a hand ends with, drawing while `draws(cards)`, from
    `counts`: {its multiset (a count per value): (its final total, how many sequences)}. Counted
    by multiset, length by length: the ways to hold a multiset still drawing are the sum of the
    ways to hold it less one card still drawing."""
    done: dict[tuple[int, ...], tuple[int, int]] = {}
    drawing: dict[tuple[int, ...], int] = {(0,) * VALUES: 1}
    while drawing:
        after: dict[tuple[int, ...], int] = defaultdict(int)
        for held, ways in drawing.items():
            for v in range(VALUES):
                if held[v] == counts[v]:
                    continue
                more = held[:v] + (held[v] + 1,) + held[v + 1:]
                cards = [_CARD[u] for u in range(VALUES) for _ in range(more[u])]
                if len(cards) >= 2 and not draws(cards):
                    total, many = done.get(more, (b21.total(cards, rules)[0], 0))
                    done[more] = (total, many + ways)
                else:
                    after[more] += ways
        drawing = after
    return done


_CARD = ["AS", "2S", "3S", "4S", "5S", "6S", "7S", "8S", "9S", "TS"]  # a card of each value


def _falling(n: int, k: int) -> float:
    out = 1.0
    for i in range(k):
        out *= n - i
    return out


def outcomes(counts: Sequence[int], rules: b21.Rules) -> dict[str, float]:
    """{"player", "banker", "tie"}: the probability each wins, for value counts (ace first, then
    2 to 9, then every card of value 10)."""
    import numpy as np

    n_all = sum(counts)
    if n_all < 4:
        raise SabotError("fewer than four cards: no round can be dealt")
    player = _sequences(counts, lambda cards: b21.player_draws(cards, rules), rules)
    p_draws = rules.banker_rule == "fixed"
    banker_by_target: dict[int | None, dict[tuple[int, ...], tuple[int, int]]] = {}
    if p_draws:
        banker_by_target[None] = _sequences(
            counts, lambda cards: b21.banker_draws(cards, [], rules), rules)
    longest = max(sum(k) for k in player) + 11
    table = np.array([[_falling(c, k) for k in range(longest + 1)]
                      for c in range(max(counts) + 1)])
    wins = {"player": 0.0, "banker": 0.0, "tie": 0.0}
    arrays: dict[int | None, tuple[Any, Any, Any, Any]] = {}  # a Banker side's, once each
    masks: dict[tuple[int | None, int], dict[str, Any]] = {}  # its winners, by Player total
    for pk, (pt, pn) in player.items():
        target = None if p_draws else pt
        if target not in arrays:
            banker = banker_by_target.get(target) or _sequences(
                counts, lambda cards, pt=pt: _chases(cards, pt, rules), rules)
            ks = np.array(list(banker), dtype=np.int64)
            totals = np.array([banker[k][0] for k in banker])
            arrays[target] = (ks, totals, np.array([banker[k][1] for k in banker], dtype=float),
                              ks.sum(axis=1))
        ks, totals, many, lens = arrays[target]
        if (target, pt) not in masks:
            said = np.array([b21.winner(pt, int(t)) for t in totals])
            masks[(target, pt)] = {who: said == who for who in wins}
        left = [c - r for c, r in zip(counts, pk, strict=True)]
        n_left = n_all - sum(pk)
        p_player = float(pn)
        for c, r in zip(counts, pk, strict=True):
            p_player *= _falling(c, r)
        p_player /= _falling(n_all, sum(pk))
        w = many.copy()
        for v in range(VALUES):
            w *= table[left[v], ks[:, v]]
        ways = np.array([_falling(n_left, x) for x in range(longest + 1)])[lens]
        # a Banker's hand longer than the cards left has no way (its count is 0 already)
        w = np.divide(w, ways, out=np.zeros_like(w), where=ways > 0)
        for who, mask in masks[(target, pt)].items():
            wins[who] += p_player * float(w[mask].sum())
    return wins


def _chases(cards: Sequence[str], player_total: int, rules: b21.Rules) -> bool:
    b, _ = b21.total(cards, rules)
    return player_total <= 21 and b < player_total and len(cards) < b21.MOST_CARDS


def bonus(left: dict[str, int]) -> dict[str, Fraction]:
    """The chance a hand's first two cards are a suited pair (the same card), or a pair of
    another suit (the same rank only): exact, of the composition's cards."""
    n = sum(left.values())
    pairs = n * (n - 1)
    suited = sum(c * (c - 1) for c in left.values())
    ranks = sum(s * (s - 1) for s in (sum(left[r + x] for x in SUITS) for r in RANKS))
    return {"suited_pair": Fraction(suited, pairs), "pair": Fraction(ranks - suited, pairs)}


def analyze(decks: int, seen: Sequence[str], rules: b21.Rules,
            offered: Sequence[str] = ("tie", "player_bonus", "banker_bonus")) -> dict[str, Any]:
    """The docs/INTERFACES.md `sabot analyze --game 21-baccarat` object."""
    if not 1 <= decks <= 8:
        raise SabotError("a 21 Baccarat shoe here holds 1 to 8 decks")
    left = left_in_shoe(decks, seen)
    counts = [0] * VALUES  # by value, an ace 1
    for card, n in left.items():
        counts[b21.card_value(card) - 1] += n
    won = outcomes(counts, rules)
    tie_main = 0.0 if rules.tie_main == "push" else -won["tie"]
    commission = 0.95 if rules.banker_commission == "five_percent" else 1.0
    edges = {"player": -(won["player"] - won["banker"] + tie_main),
             "banker": -(commission * won["banker"] - won["player"] + tie_main),
             "tie": -(rules.tie_odds * won["tie"] - (1 - won["tie"]))}
    b = bonus(left)
    pays = {hand: b21.bonus_odds(hand, rules) or 0 for hand in b21.BONUS_HANDS}
    win_bonus = sum(float(p) * pays[h] for h, p in b.items() if pays[h])
    lose_bonus = 1 - sum(float(p) for h, p in b.items() if pays[h])
    for side in ("player_bonus", "banker_bonus"):
        edges[side] = -(win_bonus - lose_bonus)
    return {"game": b21.GAME, "decks": decks, "cards": sum(left.values()),
            "outcomes": won, "bonus_hands": {h: float(p) for h, p in b.items()},
            "house_edges": {w: e for w, e in edges.items() if w in ("player", "banker")
                            or w in offered}}

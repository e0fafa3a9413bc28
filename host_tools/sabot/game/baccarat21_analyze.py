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


# the dealing settings an enumeration depends on (the wagers' do not)
DEALING = ("ace", "player_draws_below", "player_draws_soft", "banker_draws_below",
           "banker_draws_soft", "banker_rule")
MOST = (32,) * 9 + (128,)  # each value's cards in eight decks: every composition here fits


class Hands:
    """Every Player's and Banker's final multiset under one table's dealing settings, for any
    composition of up to eight decks (enumerated once, against MOST: a multiset a composition
    cannot hold weighs 0): the Player's, each with its sequences and total; the Banker's in
    groups, one for the fixed rule or one per Player total it chases."""

    def __init__(self, rules: b21.Rules) -> None:
        self.rules = rules
        player = _sequences(MOST, lambda cards: b21.player_draws(cards, rules), rules)
        self.player = list(player.items())
        targets: list[int | None] = [None]
        if rules.banker_rule != "fixed":
            targets = [*sorted({t for t, _ in player.values()})]
        self.groups: list[list[tuple[tuple[int, ...], tuple[int, int]]]] = []
        self.group_of: dict[int | None, int] = {}
        for target in targets:
            draws: Any = ((lambda cards: b21.banker_draws(cards, [], rules)) if target is None
                          else (lambda cards, pt=target: _chases(cards, pt, rules)))
            self.group_of[target] = len(self.groups)
            self.groups.append(list(_sequences(MOST, draws, rules).items()))
        self._arrays: Any = None

    def target(self, player_total: int) -> int:
        return self.group_of[None if self.rules.banker_rule == "fixed" else player_total]

    def arrays(self, ctypes: Any) -> Any:
        """The kernel's arrays (made once)."""
        if self._arrays is None:
            from array import array

            def of(kind: str, ctype: Any, items: Any) -> Any:
                a = array(kind, items)  # (an empty one: a 1-element array, never read)
                return (ctype * len(a)).from_buffer_copy(a) if a else (ctype * 1)()

            i8, i32, f64 = ctypes.c_int8, ctypes.c_int32, ctypes.c_double
            banker = [b for g in self.groups for b in g]
            starts, at = [], 0
            for g in self.groups:
                starts.append(at)
                at += len(g)
            starts.append(at)
            entries, entry_start = [], [0]
            for k, _ in banker:
                for v, n in enumerate(k):
                    if n:
                        entries += [v, n]
                entry_start.append(len(entries) // 2)
            winners = [("player", "banker", "tie").index(b21.winner(p, b)) + 1
                       for p in range(32) for b in range(32)]
            self._arrays = (
                len(self.player), of("b", i8, [n for k, _ in self.player for n in k]),
                of("d", f64, [float(w) for _, (_, w) in self.player]),
                of("i", i32, [t for _, (t, _) in self.player]),
                of("i", i32, [self.target(t) for _, (t, _) in self.player]), of("i", i32, starts),
                of("i", i32, entry_start), of("b", i8, entries),
                of("d", f64, [float(w) for _, (_, w) in banker]),
                of("i", i32, [t for _, (t, _) in banker]),
                of("i", i32, [sum(k) for k, _ in banker]), of("b", i8, winners))
        return self._arrays


_HANDS: dict[tuple[Any, ...], Hands] = {}


def hands(rules: b21.Rules) -> Hands:
    key = tuple(getattr(rules, f) for f in DEALING)
    if key not in _HANDS:
        if len(_HANDS) > 32:
            _HANDS.clear()
        _HANDS[key] = Hands(rules)
    return _HANDS[key]


def outcomes(counts: Sequence[int], rules: b21.Rules) -> dict[str, float]:
    """{"player", "banker", "tie"}: the probability each wins, for value counts (ace first, then
    2 to 9, then every card of value 10): summed by the compiled kernel where it is built
    (game/outcomes.c sabot_b21_wins), else in Python (numpy), the same sum."""
    if sum(counts) < 4:
        raise SabotError("fewer than four cards: no round can be dealt")
    if any(c > m for c, m in zip(counts, MOST, strict=True)):
        raise SabotError("a composition of more than eight decks")
    h = hands(rules)
    from sabot.game.outcome_kernel import b21_wins

    got = b21_wins(counts, h)
    return got if got is not None else _outcomes_python(counts, h)


def _outcomes_python(counts: Sequence[int], h: Hands) -> dict[str, float]:
    import numpy as np

    n_all = sum(counts)
    longest = max(sum(k) for k, _ in h.player) + b21.MOST_CARDS
    table = np.array([[_falling(c, k) for k in range(longest + 1)]
                      for c in range(max(counts) + 1)])
    wins = {"player": 0.0, "banker": 0.0, "tie": 0.0}
    arrays: dict[int, tuple[Any, Any, Any, Any]] = {}  # a Banker group's, once each
    masks: dict[tuple[int, int], dict[str, Any]] = {}  # its winners, by Player total
    for pk, (pt, pn) in h.player:
        if any(r > c for c, r in zip(counts, pk, strict=True)):
            continue  # a hand this composition cannot hold
        g = h.target(pt)
        if g not in arrays:
            banker = h.groups[g]
            ks = np.array([k for k, _ in banker], dtype=np.int64)
            arrays[g] = (ks, np.array([t for _, (t, _) in banker]),
                         np.array([float(n) for _, (_, n) in banker]), ks.sum(axis=1))
        ks, totals, many, lens = arrays[g]
        if (g, pt) not in masks:
            said = np.array([b21.winner(pt, int(t)) for t in totals])
            masks[(g, pt)] = {who: said == who for who in wins}
        left = [c - r for c, r in zip(counts, pk, strict=True)]
        n_left = n_all - sum(pk)
        p_player = float(pn)
        for c, r in zip(counts, pk, strict=True):
            p_player *= _falling(c, r)
        p_player /= _falling(n_all, sum(pk))
        fits = (ks <= np.array(left)).all(axis=1)  # a Banker hand the cards left cannot hold
        w = np.where(fits, many, 0.0)
        for v in range(VALUES):
            w *= table[left[v], np.minimum(ks[:, v], left[v])]
        ways = np.array([_falling(n_left, x) for x in range(longest + 1)])[lens]
        w = np.divide(w, ways, out=np.zeros_like(w), where=ways > 0)
        for who, mask in masks[(g, pt)].items():
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
    got = of_left(left_in_shoe(decks, seen), rules, offered)
    return {"game": got["game"], "decks": decks, **got}


def of_left(left: dict[str, int], rules: b21.Rules,
            offered: Sequence[str] = ("tie", "player_bonus", "banker_bonus")) -> dict[str, Any]:
    """The analysis of the cards `left` ({card: copies}): each winner's chance, the bonus
    hands', and the house edge of the main wagers and the `offered` ones."""
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
    return {"game": b21.GAME, "cards": sum(left.values()),
            "outcomes": won, "bonus_hands": {h: float(p) for h, p in b.items()},
            "house_edges": {w: e for w, e in edges.items() if w in ("player", "banker")
                            or w in offered}}

"""Live house edges of a shoe as cards leave it: the same exact numbers as `analyze.analyze`, in a
few milliseconds per recompute.

The counting is analyze.py's (first four cards grouped by their multiset of values, third cards by
the sums S0, S1[v], S2[v][w] over the classes with the same two-card totals); the speed comes from
doing the integer work in a few wide integers instead of many small ones:

* every class's contribution to S0, S1[0..9] and S2[0..9][0..9] is one integer holding 111 fields
  of 64 bits (1, m_v, m_v*m_w for its multiplicities m), so a cell's sums are a plain sum of
  (class weight x that integer) over its classes. Fields never carry: every field of every sum
  stays below 2**64 (S2 <= 16 * n**4 < 2**43 for n <= 416);
* the third-card counts for all ten Banker third cards w are likewise one 10-field integer,
  c_w-weighted (c_w*A - c_v*S1[w] + S2[v][w], exact since each final field is a count < 2**63);
* class weights prod falling(c_v, m_v) are recomputed only for classes holding a value whose
  count changed since the last recompute;
* each wager's net return per outcome is a fixed integer table (returns times a common
  denominator), so an edge is one exact integer dot product; Fraction and float only at the end.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fractions import Fraction
from functools import lru_cache
from math import lcm
from operator import mul
from struct import Struct
from typing import NamedTuple

from sabot.errors import SabotError
from sabot.game import rules, wagers
from sabot.game.analyze import RANK_VALUE, falling, first_four_classes, pair_counts, shoe_counts
from sabot.game.cards import RANKS, parse_card

BITS = 64
MASK = (1 << BITS) - 1
ROW = 10 * BITS  # one 10-field vector over a third card's value
MASK_ROW = (1 << ROW) - 1
S1_AT = 1  # field of S1[v] is S1_AT + v
S2_AT = 11  # field of S2[v][w] is S2_AT + 10 v + w
FIELDS = 111
# outcome index: kind * 100 + player_total * 10 + banker_total, kind = 2*(pc-2) + (bc-2)
K22, K23, K32, K33 = 0, 100, 200, 300
PAIR_OUTCOMES = ((True, True), (True, False), (False, True), (False, False))


class _Tables(NamedTuple):
    # per class: ((value, multiplicity), ...) and its packed moment integer
    parts: list[tuple[tuple[int, int], ...]]
    moments: list[int]
    # classes holding each value
    by_value: list[list[int]]
    # non-natural cells (p2 * 8 + b2): [(cell, orderings, class indices)]
    groups: list[tuple[int, int, tuple[int, ...]]]
    # natural cells: [(outcome index, orderings, class indices)]
    natural: list[tuple[int, int, tuple[int, ...]]]


@lru_cache(maxsize=1)
def _tables() -> _Tables:
    classes = first_four_classes()
    parts, moments = [], []
    by_value: list[list[int]] = [[] for _ in range(10)]
    grouped: dict[tuple[int, int], list[int]] = {}
    natural: dict[tuple[int, int], list[int]] = {}
    for i, (nonzero, splits) in enumerate(classes):
        parts.append(tuple(nonzero))
        packed = 1
        for v, m in nonzero:
            by_value[v].append(i)
            packed |= m << (BITS * (S1_AT + v))
            for w, mw in nonzero:
                packed |= (m * mw) << (BITS * (S2_AT + 10 * v + w))
        moments.append(packed)
        for p2, b2, orderings in splits:
            if p2 >= 8 or b2 >= 8:
                natural.setdefault((K22 + 10 * p2 + b2, orderings), []).append(i)
            else:
                grouped.setdefault((p2 * 8 + b2, orderings), []).append(i)
    return _Tables(
        parts, moments, by_value,
        [(cell, o, tuple(ix)) for (cell, o), ix in sorted(grouped.items())],
        [(key, o, tuple(ix)) for (key, o), ix in sorted(natural.items())],
    )


@lru_cache(maxsize=8)
def _return_tables(tie_odds: int) -> tuple[int, list[list[int]], list[list[int]]]:
    """(denominator D, per main wager its net return x D for each of the 400 outcome indices,
    per pair wager its net return x D for PAIR_OUTCOMES)."""
    main_names = [w for w in wagers.ANALYZED_WAGERS if w not in wagers.PAIR_WAGERS]
    main: list[list[Fraction]] = [[Fraction(0)] * 400 for _ in main_names]
    for kind, (pc, bc) in enumerate(((2, 2), (2, 3), (3, 2), (3, 3))):
        for p in range(10):
            for b in range(10):
                s = wagers.Summary(p, b, pc, bc, False, False)
                for row, name in zip(main, main_names):
                    row[kind * 100 + 10 * p + b] = wagers.net_return(name, s, tie_odds)
    pairs = [[wagers.net_return(name, wagers.Summary(0, 0, 2, 2, pp, bp), tie_odds)
              for pp, bp in PAIR_OUTCOMES] for name in wagers.PAIR_WAGERS]
    den = lcm(*(f.denominator for row in main + pairs for f in row))
    return (den, [[int(f * den) for f in row] for row in main],
            [[int(f * den) for f in row] for row in pairs])


_TEN = Struct("<10Q")


def _fields(packed: int) -> tuple[int, ...]:
    """The ten 64-bit fields of a packed vector (each field non-negative and below 2**64)."""
    return _TEN.unpack(packed.to_bytes(80, "little"))


class RemainingShoe:
    """A shoe's remaining cards by rank, updated as cards leave (cards out stay out), with the
    exact house edge of every analyzed wager (CONTRACTS `sabot analyze`) on demand."""

    def __init__(self, decks: int = 8, seen: Sequence[str] = (), tie_odds: int = 8) -> None:
        self.decks = decks
        self.rank_counts = shoe_counts(decks, seen)
        if not isinstance(tie_odds, int) or tie_odds < 8:
            raise SabotError("--tie-odds must be a whole number of at least 8 (627a.12(b))")
        self.tie_odds = tie_odds
        self.value_counts = [0] * 10
        for r, cnt in enumerate(self.rank_counts):
            self.value_counts[RANK_VALUE[r]] += cnt
        t = _tables()
        self._weights = [0] * len(t.parts)
        self._weighted = [0] * len(t.parts)
        self._dirty = set(range(10))
        self._cached: dict[str, Fraction] | None = None

    @property
    def cards(self) -> int:
        return sum(self.rank_counts)

    def remove(self, card: str) -> None:
        """One card has left the shoe (dealt, burned or otherwise out for good)."""
        code = parse_card(card)
        r = RANKS.index(code[0])
        if not self.rank_counts[r]:
            raise SabotError(f"no {code[0]} is left in the shoe to remove ({code})")
        self.rank_counts[r] -= 1
        self.value_counts[RANK_VALUE[r]] -= 1
        self._dirty.add(RANK_VALUE[r])
        self._cached = None

    def remove_all(self, cards: Iterable[str]) -> None:
        for card in cards:
            self.remove(card)

    def _refresh_weights(self) -> None:
        t = _tables()
        c = self.value_counts
        fall = [[falling(cv, m) for m in range(5)] for cv in c]
        todo: set[int] = set()
        for v in self._dirty:
            todo.update(t.by_value[v])
        weights, weighted, parts, moments = self._weights, self._weighted, t.parts, t.moments
        for i in todo:
            w = 1
            for v, m in parts[i]:
                w *= fall[v][m]
            weights[i] = w
            weighted[i] = w * moments[i]
        self._dirty.clear()

    def outcome_counts(self) -> list[int]:
        """Sequences for each outcome index kind * 100 + player_total * 10 + banker_total,
        kind 0..3 for (player cards, banker cards) = (2,2), (2,3), (3,2), (3,3)."""
        if self.cards < 6:
            raise SabotError(
                f"only {self.cards} cards left: a round needs 6 in this counting convention")
        self._refresh_weights()
        t = _tables()
        c = self.value_counts
        n = sum(c)
        ff2, ff1 = falling(n - 4, 2), n - 5
        out = [0] * 400
        weights, weighted = self._weights, self._weighted
        for key, o, ix in t.natural:
            out[key] += o * ff2 * sum(map(weights.__getitem__, ix))
        acc = [0] * 64
        for cell, o, ix in t.groups:
            acc[cell] += o * sum(map(weighted.__getitem__, ix))
        packed_c = 0
        for w in range(9, -1, -1):
            packed_c = (packed_c << BITS) | c[w]
        rows23 = [0] * 100  # (p2 * 10 + b2): packed over the Banker's third card
        rows33 = [0] * 100  # (pt * 10 + b2): packed over the Banker's third card
        for cell in range(64):
            total = acc[cell]
            if not total:
                continue
            p2, b2 = divmod(cell, 8)
            s0 = total & MASK
            row1 = (total >> (BITS * S1_AT)) & MASK_ROW
            if not rules.player_draws(p2):
                if rules.banker_draws(b2, None):
                    rows23[p2 * 10 + b2] += (s0 * packed_c - row1) * ff1
                else:
                    out[K22 + 10 * p2 + b2] += s0 * ff2
                continue
            s1 = _fields(row1)
            for v in range(10):
                pt = (p2 + v) % 10
                a = c[v] * s0 - s1[v]
                if rules.banker_draws(b2, v):
                    row2 = (total >> (BITS * (S2_AT + 10 * v))) & MASK_ROW
                    rows33[pt * 10 + b2] += (a * packed_c - (a << (BITS * v)) - c[v] * row1
                                             + row2)
                else:
                    out[K32 + 10 * pt + b2] += a * ff1
        for base, rows in ((K23, rows23), (K33, rows33)):
            for i, packed in enumerate(rows):
                if not packed:
                    continue
                pt, b2 = divmod(i, 10)
                for w, cnt in enumerate(_fields(packed)):
                    out[base + 10 * pt + (b2 + w) % 10] += cnt
        if sum(out) != falling(n, 6):
            raise AssertionError("outcome counts do not add up to the number of sequences")
        return out

    def exact_edges(self) -> dict[str, Fraction]:
        """House edge of every wager in wagers.ANALYZED_WAGERS, as an exact fraction."""
        if self._cached is not None:
            return dict(self._cached)
        counts = self.outcome_counts()
        sequences = falling(self.cards, 6)
        den, main, pair_rows = _return_tables(self.tie_odds)
        pc = pair_counts(self.rank_counts)
        pair_list = [pc[k] for k in PAIR_OUTCOMES]
        expected: dict[str, int] = {}
        main_names = (w for w in wagers.ANALYZED_WAGERS if w not in wagers.PAIR_WAGERS)
        for name, row in zip(main_names, main):
            expected[name] = sum(map(mul, counts, row))
        for name, row in zip(wagers.PAIR_WAGERS, pair_rows):
            expected[name] = sum(map(mul, pair_list, row))
        edges = {name: Fraction(-expected[name], den * sequences)
                 for name in wagers.ANALYZED_WAGERS}
        self._cached = edges
        return dict(edges)

    def outcomes(self) -> dict[str, int]:
        """Sequences won by the Banker, the Player and tied (analyze's "outcomes")."""
        tally = {"banker": 0, "player": 0, "tie": 0}
        for i, cnt in enumerate(self.outcome_counts()):
            p, b = divmod(i % 100, 10)
            tally["player" if p > b else "banker" if b > p else "tie"] += cnt
        return tally

    def house_edges(self) -> dict[str, float]:
        """House edge of every analyzed wager, as `analyze` prints it (the same floats)."""
        return {name: float(e) for name, e in self.exact_edges().items()}

    def player_favorable(self) -> list[str]:
        return [name for name, e in self.exact_edges().items() if e < 0]

"""The exact edges' outcome counts in Python, in a few wide integers instead of many small ones:
every class of first four cards contributes to S0, S1[0..9] and S2[0..9][0..9] one integer of 111
fields of 64 bits, so a cell's sums are a plain sum of (class weight x that integer); fields
never carry (S2 <= 16 * n**4 < 2**43 for n <= 416). The same integers as the compiled kernel's
(outcome_kernel.py), about 60 times slower."""

from __future__ import annotations

from functools import lru_cache
from struct import Struct

from sabot.game import rules
from sabot.game.edge_tables import K22, K23, K32, K33, falling, first_four_classes

BITS = 64
MASK = (1 << BITS) - 1
ROW = 10 * BITS  # one 10-field vector over a third card's value
MASK_ROW = (1 << ROW) - 1
S1_AT = 1  # field of S1[v] is S1_AT + v
S2_AT = 11  # field of S2[v][w] is S2_AT + 10 v + w
FIELDS = 111


class _Tables:
    """The Python counting's tables."""

    def __init__(self, parts: list[tuple[tuple[int, int], ...]], moments: list[int],
                 by_value: list[list[int]], groups: list[tuple[int, int, tuple[int, ...]]],
                 natural: list[tuple[int, int, tuple[int, ...]]]) -> None:
        # per class: ((value, multiplicity), ...) and its packed moment integer
        self.parts, self.moments = parts, moments
        self.by_value = by_value  # classes holding each value
        # non-natural cells (p2 * 8 + b2): [(cell, orderings, class indices)]
        self.groups = groups
        # natural cells: [(outcome index, orderings, class indices)]
        self.natural = natural


@lru_cache(maxsize=1)
def _tables() -> _Tables:
    parts, moments = [], []
    by_value: list[list[int]] = [[] for _ in range(10)]
    grouped: dict[tuple[int, int], list[int]] = {}
    natural: dict[tuple[int, int], list[int]] = {}
    for i, (nonzero, splits) in enumerate(first_four_classes()):
        parts.append(nonzero)
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


_TEN = Struct("<10Q")


def _fields(packed: int) -> tuple[int, ...]:
    """The ten 64-bit fields of a packed vector (each field non-negative and below 2**64)."""
    return _TEN.unpack(packed.to_bytes(80, "little"))


class WideCounting:
    """One shoe's Python counting: class weights prod falling(c_v, m_v), recomputed only for
    classes holding a value whose count changed."""

    def __init__(self) -> None:
        self._weights: list[int] = []  # made at the first count
        self._weighted: list[int] = []
        self._dirty = set(range(10))

    def changed(self, value: int) -> None:
        """The count of cards of this point value changed."""
        self._dirty.add(value)

    def _refresh_weights(self, c: list[int]) -> None:
        t = _tables()
        if not self._weights:
            self._weights = [0] * len(t.parts)
            self._weighted = [0] * len(t.parts)
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

    def count(self, c: list[int], n: int) -> list[int]:
        """Sequences for each outcome index of a shoe of n cards, c of each point value."""
        self._refresh_weights(c)
        t = _tables()
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

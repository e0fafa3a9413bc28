"""Exact house edges of a shoe's remaining cards: the one counting that `sabot analyze`, the
validator's watch and the pit's pages use.

Counting convention: a round is an ordered sequence of six cards P1 B1 P2 B2 P3 B3 (undealt ones
too). Only point values 0-9 matter for the main outcome, so the first four cards are grouped by
their multiset of values (715 classes); the depletion of the third cards by the first four is
carried in closed form by the sums S0 = sum W, S1[v] = sum W*k_v, S2[v][w] = sum W*k_v*k_w over
the classes with the same two-card totals. Pair wagers depend on ranks and are counted directly.
Each wager's net return per outcome is a fixed integer table (returns times a common
denominator), so an edge is one exact integer dot product: expected / (denominator * sequences).

Two implementations of that arithmetic, the same integers (tests/test_analyze.py holds them to
each other and to brute force):

* outcomes.c, built by the Makefile into _outcomes.so beside this file and loaded with ctypes:
  all outcome counts and every main wager's expected return in about 20 µs. It holds arithmetic
  only; the classes and the drawing rule (rules.player_draws, rules.banker_draws) are handed to it
  as tables at load, so the rules stay in rules.py. It is used only when built from the source
  beside it (its CRC-32 is compiled in).
* Python, in a few wide integers instead of many small ones (about 1.4 ms): every class's
  contribution to S0, S1[0..9] and S2[0..9][0..9] is one integer of 111 fields of 64 bits, so a
  cell's sums are a plain sum of (class weight x that integer); fields never carry (S2 <= 16 *
  n**4 < 2**43 for n <= 416). Class weights prod falling(c_v, m_v) are recomputed only for
  classes holding a value whose count changed.

The class table and the return tables are outcome_tables.py, generated from this module's
derivations (derive_first_four_classes, derive_return_tables: wagers.py is the rule) and checked
against them by a test, so no command derives them at start.
"""

from __future__ import annotations

import _thread
import os
from array import array
from collections.abc import Iterable, Sequence
from functools import lru_cache
from itertools import chain
from operator import mul
from struct import Struct

from sabot.errors import SabotError
from sabot.game import outcome_tables, rules
from sabot.game.cards import RANKS, SUITS, parse_card

TYPE_CHECKING = False  # typing's, without importing typing for `sabot analyze` (mypy: True)
if TYPE_CHECKING:
    from fractions import Fraction
    from typing import Any

RANK_VALUE = [1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 0, 0, 0]
MIN_CARDS = 6  # a round needs six cards in this counting convention
MAX_CARDS = 416  # 8 decks: the kernel's 64-bit bounds hold up to here

# The wagers, in the order of wagers.ANALYZED_WAGERS (outcome_tables is checked against it).
ANALYZED_WAGERS: tuple[str, ...] = outcome_tables.ANALYZED_WAGERS
PAIR_WAGERS: tuple[str, ...] = outcome_tables.PAIR_WAGERS
MAIN_WAGERS: tuple[str, ...] = tuple(w for w in ANALYZED_WAGERS if w not in PAIR_WAGERS)
_MAIN_INDEX = {w: i for i, w in enumerate(MAIN_WAGERS)}
_PAIR_INDEX = {w: i for i, w in enumerate(PAIR_WAGERS)}

BITS = 64
MASK = (1 << BITS) - 1
ROW = 10 * BITS  # one 10-field vector over a third card's value
MASK_ROW = (1 << ROW) - 1
S1_AT = 1  # field of S1[v] is S1_AT + v
S2_AT = 11  # field of S2[v][w] is S2_AT + 10 v + w
FIELDS = 111
# outcome index: kind * 100 + player_total * 10 + banker_total, kind = 2*(pc-2) + (bc-2)
K22, K23, K32, K33 = 0, 100, 200, 300
KINDS = ((2, 2), (2, 3), (3, 2), (3, 3))
PAIR_OUTCOMES = ((True, True), (True, False), (False, True), (False, False))


def falling(n: int, k: int) -> int:
    r = 1
    for i in range(k):
        r *= n - i
    return r


# One class of first four cards: ((value, multiplicity), ...), ((p2, b2, orderings), ...).
ValueClass = tuple[tuple[tuple[int, int], ...], tuple[tuple[int, int, int], ...]]


def derive_first_four_classes() -> tuple[ValueClass, ...]:
    """For every multiset of four values (combinations_with_replacement order): its
    multiplicities and [(p2, b2, orderings)], orderings counting the distinct (P1, B1, P2, B2)
    value tuples with those two-card totals (a Player pair {a, b} and a Banker pair {c, d} give
    (2 if a != b else 1) * (2 if c != d else 1) of them)."""
    from itertools import combinations_with_replacement

    combos = list(combinations_with_replacement(range(10), 4))
    index = {c: i for i, c in enumerate(combos)}
    tally: list[dict[tuple[int, int], int]] = [{} for _ in combos]
    twos = list(combinations_with_replacement(range(10), 2))
    for a, b in twos:
        player = 1 if a == b else 2
        for c, d in twos:
            w, x, y, z = sorted((a, b, c, d))
            t = tally[index[w, x, y, z]]
            cell = ((a + b) % 10, (c + d) % 10)
            t[cell] = t.get(cell, 0) + player * (1 if c == d else 2)
    out = []
    for combo, t in zip(combos, tally):
        parts = tuple((v, combo.count(v)) for v in sorted(set(combo)))
        out.append((parts, tuple((p, b, o) for (p, b), o in sorted(t.items()))))
    return tuple(out)


@lru_cache(maxsize=1)
def first_four_classes() -> tuple[ValueClass, ...]:
    """derive_first_four_classes, from outcome_tables' flat form (the kernel's)."""
    flat = outcome_tables.CLASS_PARTS
    splits: list[list[tuple[int, int, int]]] = [[] for _ in range(len(flat) // 8)]
    x = outcome_tables.SPLITS
    for e in range(0, len(x), 4):
        splits[x[e]].append((x[e + 1], x[e + 2], x[e + 3]))
    return tuple((tuple((flat[j], flat[j + 1]) for j in range(8 * i, 8 * i + 8, 2)
                        if flat[j + 1]), tuple(s)) for i, s in enumerate(splits))


def derive_return_tables(tie_odds: int = 8) -> tuple[int, list[list[int]], list[list[int]]]:
    """(denominator D, per main wager its net return x D for each of the 400 outcome indices,
    per pair wager its net return x D for PAIR_OUTCOMES), from wagers.net_return."""
    from math import lcm

    from sabot.game import wagers

    main = [[wagers.net_return(name, wagers.Summary(p, b, pc, bc, False, False), tie_odds)
             for pc, bc in KINDS for p in range(10) for b in range(10)] for name in MAIN_WAGERS]
    pairs = [[wagers.net_return(name, wagers.Summary(0, 0, 2, 2, pp, bp), tie_odds)
              for pp, bp in PAIR_OUTCOMES] for name in PAIR_WAGERS]
    den = lcm(*(f.denominator for row in main + pairs for f in row))
    return (den, [[int(f * den) for f in row] for row in main],
            [[int(f * den) for f in row] for row in pairs])


@lru_cache(maxsize=8)
def return_tables(tie_odds: int = 8) -> tuple[int, list[list[int]], list[list[int]]]:
    """derive_return_tables, from outcome_tables: only the Tie's row depends on the tie odds
    (a whole number, so the denominator stays), and another odds derives that row alone."""
    den = outcome_tables.DENOMINATOR
    main = [list(row) for row in outcome_tables.MAIN_RETURNS]
    pairs = [list(row) for row in outcome_tables.PAIR_RETURNS]
    if tie_odds != outcome_tables.TIE_ODDS:
        from sabot.game import wagers

        main[_MAIN_INDEX["tie"]] = [
            int(wagers.net_return("tie", wagers.Summary(p, b, pc, bc, False, False), tie_odds)
                * den) for pc, bc in KINDS for p in range(10) for b in range(10)]
    return den, main, pairs


def tables_source() -> str:
    """outcome_tables.py as derived here now (tests/test_analyze.py compares the two)."""
    from sabot.game import wagers

    den, main, pairs = derive_return_tables(8)
    classes = derive_first_four_classes()

    def wrapped(ints: Iterable[int], width: int = 99) -> list[str]:
        out, line = [], "   "
        for x in ints:
            if len(line) + len(str(x)) + 2 > width:
                out.append(line)
                line = "   "
            line += f" {x},"
        return [*out, line]

    lines = [
        "# ruff: noqa: E501  (generated: a wager's returns a line)",
        '"""Generated by sabot.game.edges.tables_source() from its derivations (the classes of',
        "first four cards, wagers.net_return at Tie odds 8): do not edit. Regenerate with",
        "    python -c 'from sabot.game import edges; print(edges.tables_source(), end=\"\")' \\",
        "        > host_tools/sabot/game/outcome_tables.py",
        'tests/test_analyze.py fails when this file differs from a fresh derivation."""',
        "",
        f"ANALYZED_WAGERS: tuple[str, ...] = {tuple(wagers.ANALYZED_WAGERS)!r}",
        f"PAIR_WAGERS: tuple[str, ...] = {tuple(wagers.PAIR_WAGERS)!r}",
        "TIE_ODDS = 8",
        f"DENOMINATOR = {den}",
        "# per wager of ANALYZED_WAGERS but the pair wagers: net return x DENOMINATOR for each",
        "# outcome index kind * 100 + player_total * 10 + banker_total",
        "MAIN_RETURNS: tuple[tuple[int, ...], ...] = (",
        *(f"    {tuple(row)!r}," for row in main),
        ")",
        "# per pair wager: for (both pairs, Player pair only, Banker pair only, no pair)",
        "PAIR_RETURNS: tuple[tuple[int, ...], ...] = (",
        *(f"    {tuple(row)!r}," for row in pairs),
        ")",
        "# per multiset of four values (combinations_with_replacement order): four (value,",
        "# multiplicity) pairs, multiplicity 0 for none",
        "CLASS_PARTS: tuple[int, ...] = (",
        *wrapped(x for parts, _ in classes
                 for pair in (*parts, *((0, 0),) * (4 - len(parts))) for x in pair),
        ")",
        "# (class, p2, b2, orderings): the distinct (P1, B1, P2, B2) value orderings of a class",
        "# with two-card totals p2 and b2",
        "SPLITS: tuple[int, ...] = (",
        *wrapped(x for i, (_, splits) in enumerate(classes) for sp in splits
                 for x in (i, *sp)),
        ")",
    ]
    return "\n".join(lines) + "\n"


def pair_counts(rank_counts: Sequence[int]) -> dict[tuple[bool, bool], int]:
    """{(player_pair, banker_pair): sequences} at rank level."""
    n = sum(rank_counts)
    pairs = [c * (c - 1) for c in rank_counts]
    one = sum(pairs) * falling(n - 2, 4)
    both = (
        sum(pairs) ** 2
        - sum(p * p for p in pairs)
        + sum(c * (c - 1) * (c - 2) * (c - 3) for c in rank_counts)
    ) * falling(n - 4, 2)
    total = falling(n, 6)
    return {
        (True, True): both,
        (True, False): one - both,
        (False, True): one - both,
        (False, False): total - 2 * one + both,
    }


def shoe_counts(decks: int, seen: Sequence[str] = ()) -> list[int]:
    if not isinstance(decks, int) or not 1 <= decks <= 8:
        raise SabotError(f"--decks must be a whole number from 1 to 8 (got {decks})")
    rules.check_inventory(seen, decks)
    counts = [4 * decks] * 13
    for card in seen:
        counts[RANKS.index(card[0])] -= 1
    if sum(counts) < MIN_CARDS:
        raise SabotError(
            f"only {sum(counts)} cards left: a round needs 6 in this counting convention"
        )
    return counts


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


class _Kernel:
    """_outcomes.so, loaded and handed its tables."""

    def __init__(self, lib: Any, ctypes: Any) -> None:
        self.ctypes = ctypes
        i32, i64, u64 = ctypes.c_int32, ctypes.c_int64, ctypes.c_uint64
        p32, p64, pu64 = (ctypes.POINTER(t) for t in (i32, i64, u64))
        lib.sabot_outcomes_init.argtypes = [ctypes.c_int, p32, ctypes.c_int, p32, p32]
        lib.sabot_outcomes_init.restype = ctypes.c_int
        lib.sabot_outcomes.argtypes = [p64, p64, ctypes.c_int, p64, p64, pu64]
        lib.sabot_outcomes.restype = i64
        lib.sabot_returns.argtypes = [p64, ctypes.c_int, p64, p64, pu64]
        lib.sabot_returns.restype = None
        table = [rules.player_draws(p) for p in range(8)] + [
            rules.banker_draws(b, None) for b in range(8)] + [
            rules.banker_draws(b, v) for b in range(8) for v in range(10)]

        def c_array(ints: Sequence[int]) -> Any:
            a = array("i", ints)
            return (i32 * len(a)).from_buffer_copy(a)

        if lib.sabot_outcomes_init(
                len(outcome_tables.CLASS_PARTS) // 8, c_array(outcome_tables.CLASS_PARTS),
                len(outcome_tables.SPLITS) // 4, c_array(outcome_tables.SPLITS),
                c_array(table)) != 0:
            raise OSError("the kernel refused its tables")
        self.count = lib.sabot_outcomes
        self.dot = lib.sabot_returns

    @lru_cache(maxsize=64)  # noqa: B019  (one kernel per process: it lives as long)
    def returns(self, tie_odds: int, names: tuple[str, ...]) -> Any:
        """The return rows of these main wagers as one int64 array, or None when one does not
        fit in 64 bits (a Tie paying beyond 2**58 to 1: Python sums it)."""
        _, main, _ = return_tables(tie_odds)
        try:
            flat = array("q", chain.from_iterable(main[_MAIN_INDEX[name]] for name in names))
        except OverflowError:
            return None
        return (self.ctypes.c_int64 * len(flat)).from_buffer_copy(flat)


_KERNEL_LOCK = _thread.allocate_lock()  # threading's Lock, without importing threading
_KERNEL: list[_Kernel | None] = []  # [the kernel, or None without one], once looked for


def kernel() -> _Kernel | None:
    """The compiled kernel when it is built from the outcomes.c beside this file, else None."""
    if not _KERNEL:
        with _KERNEL_LOCK:  # one load and one init, whichever thread asks first
            if not _KERNEL:
                _KERNEL.append(_load_kernel())
    return _KERNEL[0]


def _load_kernel(here: str | None = None) -> _Kernel | None:
    """The kernel from the directory `here` (default: this module's), if it was built from the
    outcomes.c there: _outcomes.so as the Makefile builds it, or as an installed package's build
    names it (_outcomes.cpython-311-x86_64-linux-gnu.so)."""
    import ctypes
    import zlib
    from importlib.machinery import EXTENSION_SUFFIXES

    here = here or os.path.dirname(os.path.abspath(__file__))
    try:
        with open(os.path.join(here, "outcomes.c"), "rb") as f:
            crc = zlib.crc32(f.read())
        built = [os.path.join(here, "_outcomes" + suffix) for suffix in [".so",
                                                                         *EXTENSION_SUFFIXES]]
        lib = ctypes.CDLL(next((p for p in built if os.path.exists(p)), built[0]))
        lib.sabot_outcomes_source_crc.restype = ctypes.c_uint32
        if lib.sabot_outcomes_source_crc() != crc:
            return None  # built from another outcomes.c: `make` builds it again
        return _Kernel(lib, ctypes)
    except (OSError, AttributeError):  # not built (or not for this machine): Python counts
        return None


@lru_cache(maxsize=64)
def _split(names: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Wagers -> (those the outcome counts settle, the pair wagers); KeyError for others."""
    for name in names:
        if name not in _MAIN_INDEX and name not in _PAIR_INDEX:
            raise KeyError(name)
    return (tuple(n for n in names if n in _MAIN_INDEX),
            tuple(n for n in names if n in _PAIR_INDEX))


_RANK_OF = {r + s: i for i, r in enumerate(RANKS) for s in SUITS}  # canonical code -> rank


class RemainingShoe:
    """A shoe's remaining cards by rank, updated as cards leave (cards out stay out), with the
    exact house edge of every analyzed wager (CONTRACTS `sabot analyze`) on demand.
    `compiled=False` counts in Python even where the kernel is built."""

    def __init__(self, decks: int = 8, seen: Sequence[str] = (), tie_odds: int = 8,
                 compiled: bool = True, rank_counts: Sequence[int] | None = None) -> None:
        """decks and the cards seen (out of the shoe), or rank_counts: the cards left by rank
        A..K, whatever shoe they come from (at most MAX_CARDS)."""
        self.decks = decks
        if rank_counts is None:
            self.rank_counts = shoe_counts(decks, seen)
        elif (len(rank_counts) != 13 or any(not isinstance(c, int) or c < 0 for c in rank_counts)
              or not MIN_CARDS <= sum(rank_counts) <= MAX_CARDS):
            raise SabotError(f"rank counts must be 13 whole numbers adding up to {MIN_CARDS} to "
                             f"{MAX_CARDS} (got {list(rank_counts)})")
        else:
            self.rank_counts = list(rank_counts)
        if not isinstance(tie_odds, int) or tie_odds < 8:
            raise SabotError("--tie-odds must be a whole number of at least 8 (627a.12(b))")
        self.tie_odds = tie_odds
        self.value_counts = [0] * 10
        for r, cnt in enumerate(self.rank_counts):
            self.value_counts[RANK_VALUE[r]] += cnt
        self._kernel = kernel() if compiled else None
        self._buffers: Any = None  # the kernel's arrays (values, outcome counts), made at need
        self._dots: dict[tuple[str, ...], Any] = {}  # wagers -> the kernel's rows and sums
        self._weights: list[int] = []  # the Python counting's, made at its first count
        self._weighted: list[int] = []
        self._dirty = set(range(10))
        self._counted = False  # the kernel's buffer holds this shoe's outcome counts
        self._counts: list[int] | None = None  # ... as a list
        self._expected: dict[str, int] = {}  # expected returns worked out for this shoe

    @property
    def cards(self) -> int:
        return sum(self.value_counts)

    @property
    def sequences(self) -> int:
        return falling(self.cards, 6)

    def remove(self, card: str, copies: int = 1) -> None:
        """Copies of a card have left the shoe (dealt, burned or otherwise out for good)."""
        r = _RANK_OF.get(card)
        if r is None:
            code = parse_card(card)
            r = RANKS.index(code[0])
        else:
            code = card
        if self.rank_counts[r] < copies:
            raise SabotError(f"no {code[0]} is left in the shoe to remove ({code})")
        self.rank_counts[r] -= copies
        self.value_counts[RANK_VALUE[r]] -= copies
        self._dirty.add(RANK_VALUE[r])
        self._counted, self._counts, self._expected = False, None, {}

    def remove_all(self, cards: Iterable[str]) -> None:
        for card in cards:
            self.remove(card)

    def _check_cards(self) -> int:
        n = self.cards
        if n < MIN_CARDS:
            raise SabotError(
                f"only {n} cards left: a round needs 6 in this counting convention")
        return n

    # ---- the counting --------------------------------------------------------------------------
    def outcome_counts(self) -> list[int]:
        """Sequences for each outcome index kind * 100 + player_total * 10 + banker_total,
        kind 0..3 for (player cards, banker cards) = (2,2), (2,3), (3,2), (3,3)."""
        if self._counts is None:
            if self._kernel is not None:
                self._count_compiled()
                self._counts = list(self._buffers[1])
            else:
                self._counts = self._count_python()
        return list(self._counts)

    def _count_compiled(self, names: tuple[str, ...] = (), dot: Any = None) -> None:
        """The kernel's outcome counts into its buffer, and the expected returns of the main
        wagers `names` (dot: their rows and sums' arrays) when it counts."""
        if self._counted:
            if dot is not None:
                self._kernel_dot(names, dot)
            return
        k = self._kernel
        assert k is not None
        n = self._check_cards()
        if n > MAX_CARDS:
            raise SabotError(f"{n} cards: the counting holds at most {MAX_CARDS}")
        if self._buffers is None:
            self._buffers = ((k.ctypes.c_int64 * 10)(), (k.ctypes.c_int64 * 400)())
        values, out = self._buffers
        values[:] = self.value_counts
        rows, hi, lo = dot if dot is not None else (None, None, None)
        sequences = n * (n - 1) * (n - 2) * (n - 3) * (n - 4) * (n - 5)  # falling(n, 6)
        if k.count(values, out, len(names) if dot is not None else 0, rows, hi, lo) != sequences:
            raise AssertionError("outcome counts do not add up to the number of sequences")
        self._counted = True
        if dot is not None:
            self._store_dot(names, dot)

    def _kernel_dot(self, names: tuple[str, ...], dot: Any) -> None:
        assert self._kernel is not None
        rows, hi, lo = dot
        self._kernel.dot(self._buffers[1], len(names), rows, hi, lo)
        self._store_dot(names, dot)

    def _store_dot(self, names: tuple[str, ...], dot: Any) -> None:
        _, hi, lo = dot
        for name, h, low in zip(names, hi, lo):
            self._expected[name] = (h << 64) | low

    def _refresh_weights(self) -> None:
        t = _tables()
        if not self._weights:
            self._weights = [0] * len(t.parts)
            self._weighted = [0] * len(t.parts)
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

    def _count_python(self) -> list[int]:
        n = self._check_cards()
        self._refresh_weights()
        t = _tables()
        c = self.value_counts
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

    # ---- expected returns and edges ------------------------------------------------------------
    def _main_expected(self, names: tuple[str, ...]) -> None:
        k = self._kernel
        dot = self._dots.get(names) if k is not None else None
        if dot is None and k is not None:
            rows = k.returns(self.tie_odds, names)
            c = k.ctypes
            if rows is not None:
                dot = self._dots[names] = (rows, (c.c_int64 * len(names))(),
                                           (c.c_uint64 * len(names))())
        if dot is not None:
            self._count_compiled(names, dot)
            return
        counts = self.outcome_counts()
        _, main, _ = return_tables(self.tie_odds)
        for name in names:
            self._expected[name] = sum(map(mul, counts, main[_MAIN_INDEX[name]]))

    def _pair_expected(self) -> None:
        self._check_cards()
        pc = pair_counts(self.rank_counts)
        counts = [pc[k] for k in PAIR_OUTCOMES]
        _, _, pairs = return_tables(self.tie_odds)
        for name, row in zip(PAIR_WAGERS, pairs):
            self._expected[name] = sum(map(mul, counts, row))

    def expected(self, names: tuple[str, ...] = ANALYZED_WAGERS) -> dict[str, int]:
        """Each wager's expected net return, times denominator(): positive where the player has
        the edge. Only the counting a name needs is done (pair wagers need no outcome counts),
        once for this shoe."""
        known = self._expected
        main, pairs = _split(names)
        for name in main:
            if name not in known:
                self._main_expected(main)
                break
        if pairs and pairs[0] not in known:  # all three are worked out at once
            self._pair_expected()
        return {name: known[name] for name in names}

    def denominator(self) -> int:
        """house edge = -expected / denominator(), exactly."""
        return return_tables(self.tie_odds)[0] * self.sequences

    def exact_edges(self) -> dict[str, Fraction]:
        """House edge of every wager in ANALYZED_WAGERS, as an exact fraction."""
        from fractions import Fraction

        d = self.denominator()
        return {name: Fraction(-e, d) for name, e in self.expected().items()}

    def house_edges(self) -> dict[str, float]:
        """House edge of every analyzed wager, as `analyze` prints it: the exact fraction's
        nearest float (Python's int division rounds correctly, as float(Fraction) does)."""
        d = self.denominator()
        return {name: -e / d for name, e in self.expected().items()}

    def outcomes(self) -> dict[str, int]:
        """Sequences won by the Banker, the Player and tied (analyze's "outcomes")."""
        tally = {"banker": 0, "player": 0, "tie": 0}
        for i, cnt in enumerate(self.outcome_counts()):
            p, b = divmod(i % 100, 10)
            tally["player" if p > b else "banker" if b > p else "tie"] += cnt
        return tally

    def player_favorable(self) -> list[str]:
        """The wagers whose house edge is below 0, in ANALYZED_WAGERS order."""
        return [name for name, e in self.expected().items() if e > 0]

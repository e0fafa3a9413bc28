"""The exact edges' fixed tables: the classes of first four cards (their values' multisets and
two-card totals) and each wager's net return per outcome, derived from the rules here and read,
at run time, from their generated form (outcome_tables.py; edges.tables_source writes it)."""

from __future__ import annotations

from functools import lru_cache

from sabot.game import outcome_tables

# The wagers, in the order of wagers.ANALYZED_WAGERS (outcome_tables is checked against it).
ANALYZED_WAGERS: tuple[str, ...] = outcome_tables.ANALYZED_WAGERS
PAIR_WAGERS: tuple[str, ...] = outcome_tables.PAIR_WAGERS
MAIN_WAGERS: tuple[str, ...] = tuple(w for w in ANALYZED_WAGERS if w not in PAIR_WAGERS)
MAIN_INDEX = {w: i for i, w in enumerate(MAIN_WAGERS)}

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

        main[MAIN_INDEX["tie"]] = [
            int(wagers.net_return("tie", wagers.Summary(p, b, pc, bc, False, False), tie_odds)
                * den) for pc, bc in KINDS for p in range(10) for b in range(10)]
    return den, main, pairs


"""Exact combinatorial analysis of a baccarat shoe (CONTRACTS.md `sabot analyze`).

Counting convention: a round is an ordered sequence of six cards P1 B1 P2 B2 P3 B3 (undealt ones
too). Only point values 0-9 matter for the main outcome, so the first four cards are grouped by
their multiset of values (715 of them); the depletion of the third cards by the first four is
carried in closed form by the sums S0 = sum W, S1[v] = sum W*k_v, S2[v][w] = sum W*k_v*k_w over the
classes with the same two-card totals. Pair wagers depend on ranks and are counted directly."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from itertools import combinations_with_replacement, permutations
from typing import Any, TypeAlias

from sabot.errors import SabotError
from sabot.game import rules, wagers
from sabot.game.cards import RANKS

RANK_VALUE = [1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 0, 0, 0]

# One class of first four cards: ([(value, multiplicity)], [(p2, b2, orderings)]).
ValueClass: TypeAlias = tuple[list[tuple[int, int]], list[tuple[int, int, int]]]
# (player_total, banker_total, player_cards, banker_cards)
OutcomeKey: TypeAlias = tuple[int, int, int, int]


def falling(n: int, k: int) -> int:
    r = 1
    for i in range(k):
        r *= n - i
    return r


@lru_cache(maxsize=1)
def first_four_classes() -> list[ValueClass]:
    """For every multiset of four values: (multiplicities, [(p2, b2, orderings)]), orderings
    counting the distinct (P1, B1, P2, B2) value tuples with those two-card totals."""
    classes = []
    for combo in combinations_with_replacement(range(10), 4):
        mult = [0] * 10
        for v in combo:
            mult[v] += 1
        dup = 1
        for m in mult:
            for i in range(2, m + 1):
                dup *= i
        tally: dict[tuple[int, int], int] = {}
        for p1, b1, p2, b2 in permutations(combo):
            key = ((p1 + p2) % 10, (b1 + b2) % 10)
            tally[key] = tally.get(key, 0) + 1
        nonzero = [(v, m) for v, m in enumerate(mult) if m]
        classes.append((nonzero, [(p, b, c // dup) for (p, b), c in tally.items()]))
    return classes


def outcome_counts(value_counts: Sequence[int]) -> dict[OutcomeKey, int]:
    """{(player_total, banker_total, player_cards, banker_cards): sequences} for a shoe's value
    counts."""
    c = value_counts
    n = sum(c)
    out: dict[OutcomeKey, int] = {}

    def add(key: OutcomeKey, count: int) -> None:
        if count:
            out[key] = out.get(key, 0) + count

    ff2, ff1 = falling(n - 4, 2), n - 5
    s0 = [[0] * 10 for _ in range(10)]
    s1 = [[[0] * 10 for _ in range(10)] for _ in range(10)]
    s2: list[list[list[list[int]] | None]] = [[None] * 10 for _ in range(10)]
    for nonzero, splits in first_four_classes():
        weight = 1
        for v, m in nonzero:
            weight *= falling(c[v], m)
        if not weight:
            continue
        for p2, b2, orderings in splits:
            t = weight * orderings
            if p2 >= 8 or b2 >= 8:
                add((p2, b2, 2, 2), t * ff2)
                continue
            s0[p2][b2] += t
            row1 = s1[p2][b2]
            row2 = s2[p2][b2]
            if row2 is None:
                row2 = s2[p2][b2] = [[0] * 10 for _ in range(10)]
            for v, m in nonzero:
                row1[v] += t * m
                r2v = row2[v]
                for w, mw in nonzero:
                    r2v[w] += t * m * mw
    for p2 in range(8):
        for b2 in range(8):
            S0, S1, S2 = s0[p2][b2], s1[p2][b2], s2[p2][b2]
            if not S0:
                continue
            assert S2 is not None  # filled wherever S0 is
            if not rules.player_draws(p2):
                if rules.banker_draws(b2, None):
                    for w in range(10):
                        add((p2, (b2 + w) % 10, 2, 3), (c[w] * S0 - S1[w]) * ff1)
                else:
                    add((p2, b2, 2, 2), S0 * ff2)
                continue
            for v in range(10):
                pt = (p2 + v) % 10
                if rules.banker_draws(b2, v):
                    cv, s1v, s2v = c[v], S1[v], S2[v]
                    for w in range(10):
                        cw = c[w] - (v == w)
                        add(
                            (pt, (b2 + w) % 10, 3, 3),
                            cv * cw * S0 - cv * S1[w] - cw * s1v + s2v[w],
                        )
                else:
                    add((pt, b2, 3, 2), (c[v] * S0 - S1[v]) * ff1)
    return out


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
    if sum(counts) < 6:
        raise SabotError(
            f"only {sum(counts)} cards left: a round needs 6 in this counting convention"
        )
    return counts


def analyze(decks: int = 8, seen: Sequence[str] = (), tie_odds: int = 8) -> dict[str, Any]:
    rank_counts = shoe_counts(decks, seen)
    value_counts = [0] * 10
    for r, cnt in enumerate(rank_counts):
        value_counts[RANK_VALUE[r]] += cnt
    n = sum(rank_counts)
    sequences = falling(n, 6)
    main = outcome_counts(value_counts)
    if sum(main.values()) != sequences:
        raise AssertionError("outcome counts do not add up to the number of sequences")
    tally = {"banker": 0, "player": 0, "tie": 0}
    for (p, b, _, _), cnt in main.items():
        tally["player" if p > b else "banker" if b > p else "tie"] += cnt
    pairs = pair_counts(rank_counts)
    if not isinstance(tie_odds, int) or tie_odds < 8:
        raise SabotError("--tie-odds must be a whole number of at least 8 (627a.12(b))")
    edges: dict[str, dict[str, float]] = {}
    result = {
        "decks": decks,
        "cards": n,
        "sequences": sequences,
        "outcomes": tally,
        "tie_odds": tie_odds,
        "wagers": edges,
    }
    for name in wagers.ANALYZED_WAGERS:
        if name in wagers.PAIR_WAGERS:
            dist = ((wagers.Summary(0, 0, 2, 2, pp, bp), cnt) for (pp, bp), cnt in pairs.items())
        else:
            dist = (
                (wagers.Summary(p, b, pc, bc, False, False), cnt)
                for (p, b, pc, bc), cnt in main.items()
            )
        expected = sum(wagers.net_return(name, s, tie_odds) * cnt for s, cnt in dist)
        edges[name] = {"house_edge": float(-expected / sequences)}
    # CONTRACTS: the wagers whose house edge is below 0 (the float keeps the exact sign)
    result["player_favorable"] = [name for name, e in edges.items() if e["house_edge"] < 0]
    return result

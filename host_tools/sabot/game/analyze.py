"""Exact combinatorial analysis of a baccarat shoe (CONTRACTS.md `sabot analyze`): the report of
edges.RemainingShoe, the one counting the watch and the pages use too.

Counting convention: a round is an ordered sequence of six cards P1 B1 P2 B2 P3 B3 (undealt ones
too); every count is an exact integer, every edge an exact fraction printed as its nearest float
(edges.py says how it is counted)."""

from __future__ import annotations

from collections.abc import Sequence

from sabot.game.edge_tables import KINDS
from sabot.game.edges import RANK_VALUE, RemainingShoe, pair_counts

TYPE_CHECKING = False  # typing's, without importing typing for `sabot analyze` (mypy: True)
if TYPE_CHECKING:
    from typing import Any, TypeAlias

__all__ = ["analyze", "outcome_counts", "pair_counts"]

# (player_total, banker_total, player_cards, banker_cards)
OutcomeKey: TypeAlias = tuple[int, int, int, int]


def outcome_counts(value_counts: Sequence[int]) -> dict[OutcomeKey, int]:
    """{(player_total, banker_total, player_cards, banker_cards): sequences} for a shoe's value
    counts (0-9), the outcomes that occur."""
    ranks = [0] * 13  # any ranks with these values: the outcomes count values only
    for r, v in enumerate(RANK_VALUE[:10]):
        ranks[r] = value_counts[v]
    counts = RemainingShoe(rank_counts=ranks).outcome_counts()
    return {(i % 100 // 10, i % 10, *KINDS[i // 100]): n for i, n in enumerate(counts) if n}


def report_text(result: dict[str, Any]) -> str:
    """`sabot analyze`'s report for people (without --json)."""
    lines = [f"{result['decks']} decks, {result['cards']} cards left, "
             f"{result['sequences']:,} sequences"]
    for name, count in result["outcomes"].items():
        lines.append(f"  {name:<7} {count:>26,}  {count / result['sequences']:.6%}")
    lines.append("house edge by wager:")
    for name, w in result["wagers"].items():
        lines.append(f"  {name:<22} {w['house_edge']:>10.4%}")
    return "\n".join(lines)


def analyze(decks: int = 8, seen: Sequence[str] = (), tie_odds: int = 8) -> dict[str, Any]:
    shoe = RemainingShoe(decks, seen, tie_odds)
    edges = shoe.house_edges()
    return {
        "decks": decks,
        "cards": shoe.cards,
        "sequences": shoe.sequences,
        "outcomes": shoe.outcomes(),
        "tie_odds": tie_odds,
        "wagers": {name: {"house_edge": e} for name, e in edges.items()},
        # CONTRACTS: the wagers whose house edge is below 0 (the float keeps the exact sign)
        "player_favorable": [name for name, e in edges.items() if e < 0],
    }

"""A simulated blackjack table for the virtual shoe (issue 24): players who follow a basic
strategy, and a dealer who deals the cards in the order the dealing procedure makes them and
presses NEXT, DOUBLE or SPLIT as the players decide. What it produces is the round's events, as
the shoe's round follower (firmware/shoe/blackjack.py) takes them: every card as it leaves the
shoe and every press.

The strategy is the common multi-deck basic strategy (doubling on any two cards, doubling after a
split; the dealer standing on all 17s, or drawing to a soft 17 where it moves a few doubles); it is
the players' part, not a rule of the game, and any sequence of presses is the dealer's to make."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from sabot.game.blackjack import card_value, follow_round, hand_total

# the dealer's up card as 2..11 (an ace 11)
_UP = range(2, 12)


def decide(cards: Sequence[str], up: str, rule: str, may_split: bool) -> str:
    """"hit", "stand", "double" or "split" for a hand of two or more cards against the dealer's
    up card."""
    u = 11 if up[0] == "A" else card_value(up)
    two = len(cards) == 2
    if two and may_split and card_value(cards[0]) == card_value(cards[1]):
        v = 11 if cards[0][0] == "A" else card_value(cards[0])
        splits = {11: _UP, 8: _UP, 9: (2, 3, 4, 5, 6, 8, 9), 7: range(2, 8), 6: range(2, 7),
                  4: (5, 6), 3: range(2, 8), 2: range(2, 8)}.get(v, ())
        if u in splits:
            return "split"
    total, soft = hand_total(cards)
    if soft:
        doubles = {13: (5, 6), 14: (5, 6), 15: (4, 5, 6), 16: (4, 5, 6), 17: range(3, 7),
                   18: range(2, 7) if rule == "h17" else range(3, 7)}.get(total, ())
        if two and u in doubles:
            return "double"
        if total == 18:
            return "stand" if u in (2, 3, 4, 5, 6, 7, 8) else "hit"
        return "stand" if total >= 19 else "hit"
    doubles = {9: range(3, 7), 10: range(2, 10),
               11: range(2, 12) if rule == "h17" else range(2, 11)}.get(total, ())
    if two and u in doubles:
        return "double"
    if total >= 17 or (13 <= total <= 16 and u <= 6) or (total == 12 and 4 <= u <= 6):
        return "stand"
    return "hit"


def deal_round(shoe: Iterator[str], seats: Sequence[int], rule: str,
               hole_card: bool = True) -> list[tuple[str, str]]:
    """One round's events, the cards drawn from `shoe` as each is due; the players' decisions
    made by basic strategy and pressed by the dealer. StopIteration when the shoe runs out."""
    events: list[tuple[str, str]] = []
    initial = 2 * len(set(seats)) + (2 if hole_card else 1)
    dealt = 0
    while True:
        state = follow_round(seats, events, rule, hole_card)
        if state["complete"]:
            return events
        hand = _playing(state) if dealt >= initial else None
        if hand is not None:
            cards = state["hands"][hand]["cards"]
            choice = decide(cards, state["dealer"][0], rule,
                            may_split=len(state["hands"]) < 15)
            if choice != "hit":
                events.append(("press", {"stand": "next"}.get(choice, choice)))
                if choice != "double":
                    continue
        events.append(("card", next(shoe)))
        dealt += 1


def _playing(state: dict[str, Any]) -> int | None:
    """The hand a player decides for now (the initial deal done): the first not finished, when
    it has its two cards and is not waiting for a double's card; None when a card is due."""
    for i, h in enumerate(state["hands"]):
        cards = h["cards"]
        if h["stood"] or (h["doubled"] and len(cards) >= 3) or hand_total(cards)[0] >= 21:
            continue
        return i if len(cards) >= 2 and not h["doubled"] else None
    return None

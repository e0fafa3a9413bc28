"""The host's own implementation of the Blackjack hand rules (58 Pa. Code Chapter 633a), written
from the regulation text: the value of the cards (§ 633a.3(e)), Blackjack (§ 633a.1: an ace and
any card having a value of 10 dealt as the initial two cards), hard and soft totals (§ 633a.1),
and the dealer's drawing rule, which the certificate holder's Rules Submission fixes: the dealer
stands on all 17s (`s17`) or draws to a soft 17 (`h17`, § 633a.12).

This is the validator's second opinion on every blackjack round, and what the side wagers'
settlement and the exact analysis count the dealer's cards with."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sabot.errors import SabotError

DEALER_RULES = ("s17", "h17")
BUST = 22  # any total over 21: the hand is bust


def card_value(card: str) -> int:
    """§ 633a.3(e): 2 to 10 their face value, a jack, queen or king 10, an ace 1 here (counted as
    11 by hand_total when that does not take the hand over 21)."""
    rank = card[0]
    if rank == "A":
        return 1
    if rank in "TJQK":
        return 10
    return int(rank)


def hand_total(cards: Iterable[str]) -> tuple[int, bool]:
    """(total, soft): every ace counts 1, and one of them 11 when that keeps the total at 21 or
    under — the hand is then soft (§ 633a.1 "Soft total"); otherwise its total is hard."""
    return total_of_values(card_value(c) for c in cards)


def total_of_values(values: Iterable[int]) -> tuple[int, bool]:
    """hand_total of card values (an ace 1)."""
    hard, ace = 0, False
    for v in values:
        hard += v
        ace = ace or v == 1
    if ace and hard + 10 <= 21:
        return hard + 10, True
    return hard, False


def is_blackjack(initial: Sequence[str]) -> bool:
    """An ace and a card of value 10 as the initial two cards of a hand (§ 633a.1). (A split
    hand's first two cards are not its initial two: the caller says which hand it holds.)"""
    return len(initial) == 2 and sorted(card_value(c) for c in initial) == [1, 10]


def dealer_draws(total: int, soft: bool, rule: str) -> bool:
    """Whether the dealer draws another card to a hand of this total: under 17 always; on 17
    only a soft 17 under `h17`; never over 17."""
    if rule not in DEALER_RULES:
        raise SabotError(f"a dealer's rule is one of {', '.join(DEALER_RULES)}, not {rule!r}")
    return total < 17 or (total == 17 and soft and rule == "h17")


def dealer_hand(cards: Sequence[str], rule: str) -> int:
    """How many of `cards` (the dealer's, in the order dealt: up card, hole card, then each
    drawn) make the dealer's completed hand: 2 for a Blackjack, else up to the card on which
    the dealer stands or goes bust. SabotError when the cards run out before the hand is done."""
    if is_blackjack(cards[:2]):
        return 2
    for n in range(2, len(cards) + 1):
        total, soft = hand_total(cards[:n])
        if total > 21 or not dealer_draws(total, soft, rule):
            return n
    raise SabotError(f"the dealer's {len(cards)} cards do not complete the hand")

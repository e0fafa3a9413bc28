"""Exact analysis of a blackjack shoe (`sabot analyze --game blackjack`): the dealer's final number
of cards and Blackjack, for a composition (a full shoe of N decks, less the cards seen), under
either dealer's rule; and the house edges of the side wagers that depend on them.

Counting convention: the players' cards are not seen, so the dealer's cards are, by symmetry, the
first cards of a random ordering of the composition. Every ordered sequence of the dealer's cards
until the hand is complete (a Blackjack at two; otherwise standing or busting, the busting card
counted, § 633a.7(o)(2)(i)) is weighted by its number of orderings, exactly: the sequence of k
cards from n remaining stands for falling(n - k, LONGEST - k) orderings of LONGEST cards, so every
weight is an integer over falling(n, LONGEST), and each probability is an exact fraction printed
as its nearest float."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from functools import cache

from sabot.errors import SabotError
from sabot.game import blackjack
from sabot.game.cards import left_in_shoe

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

RANKS = "A23456789TJQK"
SUITS = "SHDC"
LONGEST = 18  # no dealer's hand is longer: 17 cards of value 1 at most before it stands
COUNT_BUCKETS = ("2", "3", "4", "5", "6", "7", "8+")
TOTAL_BUCKETS = ("17", "18", "19", "20", "21", "bust")
# outcome slots of a weight vector: Blackjack, then a slot per (cards bucket, total bucket)
_SLOTS = 1 + len(COUNT_BUCKETS) * len(TOTAL_BUCKETS)


def falling(n: int, k: int) -> int:
    out = 1
    for i in range(k):
        out *= n - i
    return out


class Composition:
    """The cards left in a shoe, by card (rank and suit)."""

    def __init__(self, decks: int, seen: Sequence[str] = ()) -> None:
        if not 1 <= decks <= 8:
            raise SabotError("a blackjack shoe here holds 1 to 8 decks")
        self.decks = decks
        self.count = left_in_shoe(decks, seen)
        self.cards = sum(self.count.values())
        if self.cards < LONGEST:
            raise SabotError(f"{self.cards} cards left: fewer than a dealer's hand may need "
                             f"({LONGEST})")

    def by_value(self) -> tuple[int, ...]:
        """Cards left of each value 1 (ace) to 10 (ten, jack, queen, king)."""
        values = [0] * 10
        for card, n in self.count.items():
            values[blackjack.card_value(card) - 1] += n
        return tuple(values)


def dealer_outcomes(values: tuple[int, ...], rule: str) -> list[Fraction]:
    """The dealer's completed hand, exactly: [P(Blackjack)] then P(cards bucket, total bucket)
    in COUNT_BUCKETS x TOTAL_BUCKETS order, for the cards left by value (1-10)."""
    blackjack.dealer_draws(0, False, rule)  # the rule checked once
    n = sum(values)

    @cache
    def weights(left: tuple[int, ...], hard: int, ace: bool, k: int) -> tuple[int, ...]:
        total = hard + 10 if ace and hard + 10 <= 21 else hard
        soft = total != hard
        if k == 2 and ace and hard == 11:  # an ace and a ten-value card: Blackjack
            out = [0] * _SLOTS
            out[0] = falling(n - 2, LONGEST - 2)
            return tuple(out)
        if k >= 2 and (total > 21 or not blackjack.dealer_draws(total, soft, rule)):
            out = [0] * _SLOTS
            at = min(k, 8) - 2
            slot = 5 if total > 21 else total - 17
            out[1 + at * len(TOTAL_BUCKETS) + slot] = falling(n - k, LONGEST - k)
            return tuple(out)
        acc = [0] * _SLOTS
        for v in range(10):
            c = left[v]
            if c:
                nxt = list(left)
                nxt[v] -= 1
                sub = weights(tuple(nxt), hard + v + 1, ace or v == 0, k + 1)
                for i, w in enumerate(sub):
                    if w:
                        acc[i] += c * w
        return tuple(acc)

    total = falling(n, LONGEST)
    return [Fraction(w, total) for w in weights(values, 0, False, 0)]


def analyze(decks: int = 8, seen: Sequence[str] = (), rule: str = "s17",
            hit_and_run_meter_cents: int = 100_000, hit_and_run_wager_cents: int = 100
            ) -> dict[str, Any]:
    """The report `sabot analyze --game blackjack --json` prints."""
    shoe = Composition(decks, seen)
    p = dealer_outcomes(shoe.by_value(), rule)
    cards = {b: sum((p[1 + i * len(TOTAL_BUCKETS) + j] for j in range(len(TOTAL_BUCKETS))),
                    Fraction(0)) for i, b in enumerate(COUNT_BUCKETS)}
    cards["2"] += p[0]
    totals = {t: sum((p[1 + i * len(TOTAL_BUCKETS) + j] for i in range(len(COUNT_BUCKETS))),
                     Fraction(0)) for j, t in enumerate(TOTAL_BUCKETS)}
    edge = hit_and_run_edge(p[0], cards, hit_and_run_meter_cents, hit_and_run_wager_cents)
    house_money = house_money_odds(shoe)
    return {
        "game": "blackjack", "decks": decks, "cards": shoe.cards, "dealer": rule,
        "blackjack": float(p[0]),
        "dealer_cards": {b: float(v) for b, v in cards.items()},
        "dealer_totals": {t: float(v) for t, v in totals.items()},
        "wagers": {"hit_and_run": {"house_edge": float(edge),
                                   "meter_cents": hit_and_run_meter_cents,
                                   "wager_cents": hit_and_run_wager_cents},
                   "house_money": {"house_edge": float(house_money_edge(house_money)),
                                   "hands": {h: float(q) for h, (q, _) in house_money.items()}}},
    }


def house_money_odds(shoe: Composition) -> dict[str, tuple[Fraction, int]]:
    """{hand: (its probability, odds to 1)} of House Money's hands (§ 633a.13(n)) over the
    player's first two cards, every ordered pair of the composition's cards counted once."""
    from sabot.game.blackjack_settle import house_money_hand

    n = shoe.cards
    ways: dict[str, list[int]] = {}
    for a, ca in shoe.count.items():
        for b, cb in shoe.count.items():
            pairs = ca * (cb - (a == b))
            if pairs:
                best = house_money_hand([a, b], shoe.decks)
                if best is not None:
                    ways.setdefault(best[0], [0, best[1]])[0] += pairs
    return {h: (Fraction(w, n * (n - 1)), odds) for h, (w, odds) in ways.items()}


def house_money_edge(hands: Mapping[str, tuple[Fraction, int]]) -> Fraction:
    """The player's expected loss per unit on House Money: each hand paid its odds to 1, the
    wager lost otherwise."""
    win = sum((q * odds for q, odds in hands.values()), Fraction(0))
    lose = 1 - sum((q for q, _ in hands.values()), Fraction(0))
    return lose - win


# § 633a.13(l)(1): what a winning Hit and Run Progressive Wager returns per unit wagered, "for
# 1" (the wager included); eight or more cards: 100% of the meter
HIT_AND_RUN_FOR_ONE = {"blackjack": 4, "5": 8, "6": 25, "7": 200}


def hit_and_run_edge(p_blackjack: Fraction, cards: Mapping[str, Fraction], meter_cents: int,
                     wager_cents: int) -> Fraction:
    """The player's expected loss per unit wagered on Hit and Run: the wager lost unless the
    dealer has Blackjack or five or more cards; paid "for 1" (the wager taken, the payout
    returned), and with eight or more cards the meter's amount (at its reset amount: at least
    $1,000, § 633a.13(l)(2)) for the wager."""
    if meter_cents < 100_000:
        raise SabotError("the Hit and Run meter resets to at least $1,000 (633a.13(l)(2))")
    if wager_cents <= 0:
        raise SabotError("a Hit and Run wager is at least 1 cent")
    returned = (p_blackjack * HIT_AND_RUN_FOR_ONE["blackjack"]
                + sum(cards[k] * HIT_AND_RUN_FOR_ONE[k] for k in ("5", "6", "7"))
                + cards["8+"] * Fraction(meter_cents, wager_cents))
    return 1 - returned

"""The host's own implementation of the Blackjack hand rules (58 Pa. Code Chapter 633a), written
from the regulation text: the value of the cards (§ 633a.3(e)), Blackjack (§ 633a.1: an ace and
any card having a value of 10 dealt as the initial two cards), hard and soft totals (§ 633a.1),
and the dealer's drawing rule, which the certificate holder's Rules Submission fixes: the dealer
stands on all 17s (`s17`) or draws to a soft 17 (`h17`; § 633a.12, which was not found, is
where the chapter would say so).

This is the validator's second opinion on every blackjack round, and what the side wagers'
settlement and the exact analysis count the dealer's cards with."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

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


# ---- following a round: whose card is whose (the validator's second opinion on the shoe's
# attribution, firmware/shoe/blackjack.py) ------------------------------------------------------
PRESSES = ("next", "double", "split")
MAX_HANDS = 15  # the hands of a round, splits included (the result frame names one in a nibble)
MAX_EVENTS = 54  # a round's cards and presses taken (its result frame holds them all)


def follow_round(seats: Sequence[int], events: Sequence[tuple[str, str]], rule: str,
                 hole_card: bool = True) -> dict[str, Any]:
    """The round as the dealing procedure makes it, from its events in order: ("card", "AS")
    as the shoe read each card, ("press", "next" | "double" | "split") for the dealer's presses.
    {"hands": [{"seat", "cards", "split", "doubled", "stood"}] in the order played, "dealer":
    its cards, "owner": per event, the hand index a card went to then ("dealer"; None for a card
    not due) or whether a press was taken (True/False), "placed": per event, the hand a card is
    in at the end (a split puts the hands after it one place on; None for a press), "complete":
    the dealer's hand done}.

    The order: a card to each seat from the dealer's left, the dealer's up card, a second to
    each seat, the hole card (with one); a dealer's Blackjack then ends the round; each hand
    until it stands (a press), reaches 21, busts, or takes the one card of a double; a pair's
    split makes two hands of its cards, which take their second cards in turn; then the dealer
    until the rule stands (or busts), the dealer's second card first without a hole card."""
    hands: list[dict[str, Any]] = [{"seat": s, "cards": [], "split": False, "doubled": False,
                                    "stood": False} for s in sorted(set(seats))]
    dealer: list[str] = []
    initial: list[Any] = [*range(len(hands)), "dealer", *range(len(hands))]
    if hole_card:
        initial.append("dealer")
    owner: list[Any] = []  # per event, as answered then
    placed: list[Any] = []  # per event, the hand a card is in at the end (None: not a card's)
    turn = 0  # the hand being played, once the initial deal is out

    def done(hand: dict[str, Any]) -> bool:
        cards = hand["cards"]
        if len(cards) < 2:
            return False
        if hand["stood"] or (hand["doubled"] and len(cards) == 3):
            return True
        return hand_total(cards)[0] >= 21

    def dealer_done() -> bool:
        if len(dealer) < 2:
            return False
        if is_blackjack(dealer):
            return True
        total, soft = hand_total(dealer)
        return not dealer_draws(total, soft, rule)

    def due() -> Any:
        nonlocal turn
        if initial:
            return initial[0]
        if hole_card and is_blackjack(dealer):
            return None  # the dealer's Blackjack ends the round
        while turn < len(hands) and done(hands[turn]):
            turn += 1
        if turn < len(hands):
            return turn
        return None if dealer_done() else "dealer"

    taken = 0  # cards attributed and presses taken: at most MAX_EVENTS a round
    for kind, what in events:
        if taken >= MAX_EVENTS:
            owner.append(None if kind == "card" else False)
            placed.append(None)
            continue
        if kind == "card":
            who = due()
            owner.append(who)
            placed.append(who)
            if who is None:
                continue
            taken += 1
            if initial:
                initial.pop(0)
            (dealer if who == "dealer" else hands[who]["cards"]).append(what)
            continue
        who = due()
        took = isinstance(who, int) and not initial and _pressed(hands, who, what)
        taken += took
        if took and what == "split":
            _place_split(placed, events, who, hands[who + 1]["cards"][0])
        owner.append(took)
        placed.append(None)
    return {"hands": hands, "dealer": dealer, "owner": owner, "placed": placed,
            "complete": not initial and due() is None}


def _place_split(placed: list[Any], events: Sequence[tuple[str, str]], who: int,
                 second: str) -> None:
    """Hand `who` split: the cards placed in later hands are in them one place on, the pair's
    second card (`second`) in the new hand."""
    placed[:] = [o + 1 if type(o) is int and o > who else o for o in placed]
    for i in range(len(placed) - 1, -1, -1):
        if tuple(events[i]) == ("card", second) and placed[i] == who:
            placed[i] = who + 1
            return


def _pressed(hands: list[dict[str, Any]], who: int, what: str) -> bool:
    """The dealer's press for hand `who`, taken (True) or refused: a stand once it has two
    cards (not a doubled hand's: its one card is due); a double or a split of its first two (a
    split: two cards of one value, § 633a.11, and fewer than MAX_HANDS hands), which then
    become two hands."""
    hand = hands[who]
    cards = hand["cards"]
    if len(cards) < 2:
        return False
    if what == "next" and not hand["doubled"]:
        hand["stood"] = True
        return True
    if len(cards) != 2 or hand["doubled"]:
        return False
    if what == "double":
        hand["doubled"] = True
        return True
    if what == "split" and len(hands) < MAX_HANDS and card_value(cards[0]) == card_value(
            cards[1]):
        hand["split"] = True
        hands.insert(who + 1, {"seat": hand["seat"], "cards": [cards.pop()], "split": True,
                               "doubled": False, "stood": False})
        return True
    return False


def check_result(rec: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """The validator's second opinion on a blackjack result (protocol.decode_blackjack_result):
    the round followed again from its seats and events, independently of the shoe: (the round,
    None) when every card is in the hand the shoe says and the round is complete, every event
    the shoe signed one it could take; else (None, what differs)."""
    got = follow_round(rec["seats"], rec["events"], rec["dealer_rule"], rec["hole_card"])
    if any(o is None or o is False for o in got["owner"]):  # (0 == False: by identity)
        return None, "an event the round could not take (a card not due, a press refused)"
    placed = [p for (kind, _), p in zip(rec["events"], got["placed"], strict=True)
              if kind == "card"]
    if placed != rec["placed"]:
        at = next(i for i, (a, b) in enumerate(zip(placed, rec["placed"], strict=True)) if a != b)
        def hand(h: Any) -> str:  # hands counted from 1, as status and the lines count them
            return f"hand {h + 1}" if type(h) is int else f"the {h}'s"

        return None, (f"card {at + 1}: the shoe put it in {hand(rec['placed'][at])}, the rules "
                      f"in {hand(placed[at])}")
    if not got["complete"]:
        return None, "the round is not complete"
    return got, None


def total_text(cards: Sequence[str], initial: bool) -> str:
    """A hand's total as the table says it: "Blackjack" (its `initial` two cards), "bust",
    "soft 18", "17"."""
    if initial and is_blackjack(cards):
        return "Blackjack"
    total, soft = hand_total(cards)
    return "bust" if total > 21 else f"soft {total}" if soft else str(total)


def round_of(rec: dict[str, Any]) -> dict[str, Any]:
    """A blackjack result record (protocol.decode_blackjack_result) as `sabot settle` takes its
    round: the dealer's cards and each hand's seat, cards, split and doubled, followed from the
    record's seats and events by the host's own rules."""
    got = follow_round(rec["seats"], rec["events"], rec["dealer_rule"], rec["hole_card"])
    return {"dealer": got["dealer"],
            "hands": [{"seat": h["seat"], "cards": h["cards"], "split": h["split"],
                       "doubled": h["doubled"]} for h in got["hands"]]}

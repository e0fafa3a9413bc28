"""A simulated blackjack table for the virtual shoe: players who follow a basic
strategy, and a dealer who deals the cards in the order the dealing procedure makes them and
presses NEXT, DOUBLE or SPLIT as the players decide. What it produces is the round's events, as
the shoe's round follower (firmware/shoe/blackjack.py) takes them: every card as it leaves the
shoe and every press.

The strategy is the common multi-deck basic strategy (doubling on any two cards, doubling after a
split; the dealer standing on all 17s, or drawing to a soft 17 where it moves a few doubles); it is
the players' part, not a rule of the game, and any sequence of presses is the dealer's to make."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from sabot.game.blackjack import card_value, follow_round, hand_total
from sabot.protocol import END_SHOE, PH_ENDED, PH_HELD, VOID_ROUND
from sabot.virtual.dealer_channel import BETS, BUTTONS, CONFIRM, EMPTY, SUPERVISOR, card_bytes

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
               hole_card: bool = True,
               on_event: Callable[[str, str], None] | None = None) -> list[tuple[str, str]]:
    """One round's events, the cards drawn from `shoe` as each is due; the players' decisions
    made by basic strategy and pressed by the dealer; `on_event(kind, what)` as each is made (a
    dealer dealing it then). StopIteration when the shoe runs out."""
    events: list[tuple[str, str]] = _Events(on_event)
    initial = 2 * len(set(seats)) + (2 if hole_card else 1)
    dealt = 0
    while True:
        state = follow_round(seats, events, rule, hole_card)
        if state["complete"]:
            return list(events)
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


class _Events(list[tuple[str, str]]):
    """A round's events, each handed on as it is appended."""

    def __init__(self, on_event: Callable[[str, str], None] | None) -> None:
        super().__init__()
        self.on_event = on_event

    def append(self, event: tuple[str, str]) -> None:
        super().append(event)
        if self.on_event is not None:
            self.on_event(*event)


def _playing(state: dict[str, Any]) -> int | None:
    """The hand a player decides for now (the initial deal done): the first not finished, when
    it has its two cards and is not waiting for a double's card; None when a card is due."""
    for i, h in enumerate(state["hands"]):
        cards = h["cards"]
        if h["stood"] or (h["doubled"] and len(cards) >= 3) or hand_total(cards)[0] >= 21:
            continue
        return i if len(cards) >= 2 and not h["doubled"] else None
    return None


# ---- the dealer at the virtual board -----------------------------------------------------------
CONFIRM_DUE = 0xFD  # the shoe's `due` once a round's cards are out: the dealer's confirm
NONE_DUE = 0xFF  # between rounds


class Held(Exception):
    """The shoe holds an irregularity: the round stops here (the supervisor voids it)."""


class Ended(Exception):
    """The cut card came out between rounds: the shoe has ended, no round is dealt."""


class TableDealer:
    """Deals a blackjack shoe file into the virtual shoe (sabot/virtual/board.py VirtualBoard) as
    a careful dealer does: each round's bets on their spots (the bet-spot sensors' byte), the
    cards as the players' basic strategy calls for them, the presses, then the shoe's hands
    (its `H` display line) checked against the table: confirmed when they are the table's,
    disputed when not (the supervisor voids the round). Any hold is voided by the supervisor.
    `mistakes`: the share of rounds in which one press is missed or made twice, as a tired
    dealer does; `truth` keeps what the table really dealt, by round number, to hold the
    verified rounds to."""

    def __init__(self, board: Any, tokens: list[str], rule: str = "s17", hole_card: bool = True,
                 seed: int | None = None, mistakes: float = 0.0) -> None:
        import random

        self.board = board
        self.tokens = tokens
        self.rule, self.hole_card = rule, hole_card
        self.rng = random.Random(seed)
        self.mistakes = mistakes
        self.truth: dict[int, dict[str, Any]] = {}  # round -> seats, events, "confirmed"/"voided"
        self.at = 0  # the next token: every token sent moves the shoe's position by one

    def deal(self, progress: Callable[[], None] | None = None) -> None:
        b = self.board
        b.wait(lambda s: True, 10)
        self.at = b.indicator[2] if b.indicator else 0  # a shoe dealt before a power cut: on
        if b.indicator and (b.indicator[0] == PH_HELD or b.indicator[1] != NONE_DUE):
            b.send(bytes([SUPERVISOR + VOID_ROUND]))  # a round under way when it went off: void
            b.wait(lambda s: s[0] != PH_HELD and s[1] == NONE_DUE, 10)
        if self.at == 0:
            self._card(self.tokens[0])  # the burn card
        while b.indicator and b.indicator[0] != PH_ENDED and self.at < len(self.tokens):
            rnd = b.indicator[4] + 1  # the shoe's number for the round it begins
            self._round(rnd)
            if b.indicator and b.indicator[4] < rnd:
                self.truth.pop(rnd, None)  # its first card held the shoe: no round began
            if progress:
                progress()

    def _round(self, rnd: int) -> None:
        b = self.board
        seats = sorted(self.rng.sample(range(1, 8), self.rng.randint(1, 7)))
        slip = self.rng.random() < self.mistakes
        b.send(bytes([BETS, sum(1 << (s - 1) for s in seats)]))
        truth: dict[str, Any] = {"seats": seats, "events": [], "status": "voided"}
        self.truth[rnd] = truth
        shown = b.placed_count  # the shoe's hands shown so far: this round's come after

        def deal(kind: str, what: str) -> None:
            nonlocal slip
            truth["events"].append((kind, what))
            if kind == "card":
                self._card(what)
                return
            times = 1
            if slip:
                slip, times = False, self.rng.choice((0, 2))  # missed, or pressed twice
            for _ in range(times):
                taken = b.taken
                b.send(bytes([BUTTONS[what]]))
                b.wait(lambda s: b.taken > taken, 10)  # the shoe took it (and shows a hold)
                self._check()

        try:
            deal_round(self._cards(), seats, self.rule, self.hole_card, on_event=deal)
            # as a dealer waits for the shoe, however slow its host: the round's last card
            # shown and the confirm due (2 s had a loaded host's Pico voiding a dealt round)
            b.wait(lambda s: s[0] == PH_HELD or s[1] == CONFIRM_DUE, 10)
            self._check()
            want = [p for (k, _), p in zip(truth["events"], follow_round(
                seats, truth["events"], self.rule, self.hole_card)["placed"], strict=True)
                    if k == "card"]
            if b.indicator[1] == CONFIRM_DUE and b.placed_count > shown and b.placed == want:
                b.send(bytes([CONFIRM]))
                b.wait(lambda s: s[1] != CONFIRM_DUE, 10)
                self._check()
                truth["status"] = "confirmed"
                return
            # the shoe's hands are not the table's, or its round is not over: void
            truth["why"] = ("hands differ" if b.indicator[1] == CONFIRM_DUE else "not over",
                            b.indicator, b.placed, want)
            b.send(bytes([CONFIRM if b.indicator[1] != CONFIRM_DUE else SUPERVISOR + VOID_ROUND]))
            b.wait(lambda s: s[0] == PH_HELD or s[1] == NONE_DUE, 10)
            self._check()
        except Held:
            truth["why"] = ("held", b.indicator)
        except Ended:
            return
        except StopIteration:
            self._empty()
            return
        self._void()

    def _cards(self) -> Iterator[str]:
        """The shoe's cards in order, the cut card's exit given to the shoe where it lies (out
        between rounds, it ends the shoe: no round is dealt)."""
        while self.at < len(self.tokens):
            token = self.tokens[self.at]
            if token == "CUT":
                self._card(token)
                if self.board.indicator and self.board.indicator[0] == PH_ENDED:
                    raise Ended
                continue
            yield token

    def _card(self, token: str) -> None:
        b = self.board
        before = b.indicator[2] if b.indicator else 0
        self.at += 1
        b.send(card_bytes(token))
        b.wait(lambda s: s[2] > before or s[0] == PH_HELD, 10)
        self._check()

    def _check(self) -> None:
        if self.board.indicator and self.board.indicator[0] == PH_HELD:
            raise Held

    def _void(self) -> None:
        b = self.board
        if b.indicator and b.indicator[0] == PH_HELD:
            b.send(bytes([SUPERVISOR + VOID_ROUND]))
            b.wait(lambda s: s[0] != PH_HELD, 10)

    def _empty(self) -> None:
        """The shoe ran out mid-round: the empty sensor, then the supervisor ends the shoe."""
        b = self.board
        b.send(bytes([EMPTY]))
        if b.wait(lambda s: s[0] == PH_HELD, 5):
            b.send(bytes([SUPERVISOR + END_SHOE]))
            b.wait(lambda s: s[0] != PH_HELD, 10)

"""The simulated dealer at the virtual board: it reads the shoe's lamps and display, draws a shoe
file's cards into it as they allow, and makes the supervisor's usual call on a held round."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sabot.protocol import (
    ANNOUNCEMENTS,
    CARD_MISSING,
    CARDS_EXHAUSTED,
    DUE,
    END_SHOE,
    IRREGULARITIES,
    PH_ENDED,
    PH_HELD,
    PHASES,
    VOID_CARD,
    VOID_ROUND,
    WINNERS,
    blackjack_due,
)
from sabot.virtual.board import VirtualBoard
from sabot.virtual.dealer_channel import EMPTY, REVEAL, SUPERVISOR, card_bytes


def describe_show(what: str, values: tuple[Any, ...], blackjack: bool = False) -> str:
    """The shoe's lamps and display as a technician reads them, one line (`blackjack`: a
    blackjack shoe's, whose lamps say whose hand draws)."""
    if what == "H":
        hands = " ".join("D" if h == "dealer" else str(h + 1) for h in values)
        return f"display: each card's hand, for the dealer's confirm: {hands}"

    if what == "A":
        pt, bt, winner, ann = values
        said = "".join(f'  "{name}"' for bit, name in ANNOUNCEMENTS if ann & bit)
        return (f"display: player {pt}  banker {bt}  -> {WINNERS.get(winner, winner)}{said}")
    phase, due, position, shoe, rnd, alarm, reveal = values
    name = (PHASES + ("tilt",))[phase] if phase <= len(PHASES) else str(phase)
    lamps = f"draw for {DUE[due]}" if 0 < due < len(DUE) else "no hand lamp"
    if blackjack:
        said = blackjack_due(due)
        lamps = ("confirm lamp: check the shown hands" if said == "confirm" else
                 "no hand lamp" if said == "none" else f"draw for {said}")
    if alarm:
        kind = IRREGULARITIES[alarm] if alarm < len(IRREGULARITIES) else alarm
        lamps += f", ALARM {kind} (supervisor or sabot resolve)"
    if reveal:
        lamps += ", reveal lamp"
    return f"lamps: {lamps} | display: shoe {shoe} round {rnd} card {position} ({name})"


def supervisor_default(board: VirtualBoard, state: tuple[int, ...]) -> None:
    """The supervisor's usual call: discard the offending card (in the burn: go on); void the
    round when a card is missing; end the shoe when it has run out of cards."""
    code = {CARD_MISSING: VOID_ROUND, CARDS_EXHAUSTED: END_SHOE}.get(state[5], VOID_CARD)
    board.send(bytes([SUPERVISOR + code]))


class Dealer:
    """Draws the cards of a shoe file into the virtual shoe, one at a time, as the indicators
    allow.

    After a power cut it resumes at the shoe's own position: no card is dealt twice or skipped."""

    def __init__(self, board: VirtualBoard, tokens: list[str],
                 on_held: Callable[[VirtualBoard, tuple[int, ...]], None] | None = None) -> None:
        self.board = board
        self.tokens = tokens
        self.on_held = on_held or supervisor_default
        self.held_seen = 0

    def indicator(self, timeout: float) -> tuple[int, ...] | None:
        """The board's indicator once it shows one; None while the board is off."""
        b = self.board
        return b.indicator if b.wait(lambda s: True, timeout) else None

    def step(self, timeout: float = 10) -> bool:
        """Deal the next card; returns False when the shoe has ended."""
        b = self.board
        ind = self.indicator(timeout)
        if ind is None:
            return True  # board off: nothing to do now
        phase, _, position, _, _, _, reveal = ind
        if phase == PH_ENDED:
            return False
        if reveal:
            # Squeeze: the players have looked at their cards; the dealer releases them.
            b.send(bytes([REVEAL]))
            b.wait(lambda s: not s[6], timeout)
            return True
        if phase == PH_HELD:
            self.held_seen += 1
            self.on_held(b, ind)
            b.wait(lambda s: s[0] != PH_HELD, timeout)
            return True
        if position >= len(self.tokens):
            b.send(bytes([EMPTY]))
            b.wait(lambda s: s[0] in (PH_ENDED, PH_HELD), timeout)
            return True
        b.send(card_bytes(self.tokens[position]))
        b.wait(lambda s: s[2] > position or s[0] in (PH_HELD, PH_ENDED), timeout)
        return True

    def deal(self, progress: Callable[[tuple[int, ...] | None], None] | None = None) -> None:
        while self.step():
            if progress:
                progress(self.board.indicator)

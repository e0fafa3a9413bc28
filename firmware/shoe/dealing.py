"""The shoe's dealing state machine: new shoe -> burn -> rounds -> cut card -> last round -> end.
Baccarat's rounds follow the tableau (shoe/decision.py), 21 Baccarat's its table and the table's
rules (`self.b21`, a shoe/b21.py Rules21, set by the app for that variant); a blackjack shoe's
(`self.bj`, a shoe/blackjack.py Round, set by the app for a blackjack variant) follow the
players' hands, the dealer's presses and the dealer's rule: one burned card, a round per the bet
spots' seats, the result made when the dealer confirms the shoe's hands, and the shoe ended after
the round the cut card came out in.

Inputs are what the hardware reports (a card out of the shoe, the cut card, an unreadable card, the
dealer's confirm and shoe-empty signals) and supervisor resolutions. Outputs are event bits in
`self.events`, drained by the app after each input so that frames are built outside the card path.
`card_out` and the decision it makes allocate nothing."""

try:
    from micropython import const
except ImportError:  # CPython (tests): const is only a compiler hint
    def const(x):  # type: ignore[misc]
        return x

from shoe.cards import CUT, NO_CARD, burn_value
from shoe.decision import DUE_NONE, DUE_PLAYER, due

PH_BURN_FIRST = const(0)  # waiting for the exposed first card
PH_BURN = const(1)
PH_ROUND = const(2)
PH_HELD = const(3)  # an irregularity waits for a supervisor's resolution
PH_ENDED = const(4)

EV_SHOE_START = const(1)
EV_BURN = const(2)
EV_INITIAL = const(4)  # the first four cards are out: pair / House Money wagers settle now
EV_RESULT = const(8)
EV_IRREGULARITY = const(16)
EV_RESOLUTION = const(32)
EV_SHOE_END = const(64)
EV_PLACED = const(128)  # blackjack: the dealer's hand is complete; the display shows the hands

# Irregularity kinds and resolutions: their names are in docs/PROTOCOL.md (the host decodes them)
IR_CARD_NOT_DUE = const(1)
IR_UNREADABLE = const(2)
IR_TWO_CARDS = const(3)
IR_INVENTORY = const(4)
IR_FOREIGN = const(5)
IR_CARD_MISSING = const(6)
IR_EXHAUSTED = const(7)
IR_BURN_UNREADABLE = const(8)  # a burned card not read: it still counts as burned; no hold
IR_CUT_IN_BURN = const(9)  # the cut card as the first card or during the burn
IR_SECOND_CUT = const(10)
IR_PRESS_REFUSED = const(11)  # blackjack: a press the hand being played cannot take
IR_DISPUTED = const(12)  # blackjack: the dealer found the shoe's hands other than the table's

RES_VOID_CARD = const(1)  # in the burn: continue
RES_KEEP_DUMMY = const(2)
RES_VOID_ROUND = const(3)
RES_END_SHOE = const(4)  # the shoe ends here and is reshuffled

CUT_NONE = const(0)
CUT_FINISH_THEN_ONE = const(1)  # out during a round: finish it, then one more
CUT_NEXT_IS_LAST = const(2)


class DealingState:
    """Where the shoe is in its dealing: phase, round, cards out and what they were."""

    def __init__(self, decks=8):
        self.decks = decks
        self.inventory = bytearray(52)  # each readable card that left the shoe, whatever it became
        self.player = bytearray(11)  # 21 Baccarat's hands hold up to 11 cards, baccarat's 3
        self.banker = bytearray(11)
        self.burned = bytearray(11)
        self.shoe_no = 0
        self.events = 0
        self.ir_kind = 0
        self.ir_card = NO_CARD
        self.ir_position = 0
        self.resolution = 0
        self.voided = 0
        self.bj = None  # blackjack: the round follower (shoe/blackjack.py Round); None: baccarat
        self.b21 = None  # 21 Baccarat: its rules (shoe/b21.py Rules21)
        self.h17 = 0  # blackjack: the dealer draws to a soft 17
        self.hole = 1  # blackjack: the dealer takes a hole card
        self._reset(0)

    def _reset(self, shoe_no):
        self.shoe_no = shoe_no
        self.round_no = 0
        self.phase = PH_BURN_FIRST
        self.position = 0  # cards out of the shoe, cut card included
        self.unknown = 0  # cards out that were not read (unreadable, foreign)
        self.cut = CUT_NONE
        self.cut_seen = False
        self.last_round = False
        self.dummy = False
        self.dummy_done = 0
        self.np = 0
        self.nb = 0
        self.complete = True  # no round in progress
        self.n_burned = 0
        self.burn_left = 0
        self.held_phase = PH_ROUND
        for i in range(52):
            self.inventory[i] = 0

    def new_shoe(self):
        self._reset(self.shoe_no + 1)
        self.events |= EV_SHOE_START

    def in_round(self):
        return self.phase == PH_ROUND and not self.complete

    def in_burn(self):
        return self.phase == PH_BURN_FIRST or self.phase == PH_BURN

    def due(self):
        """DUE_PLAYER / DUE_BANKER / DUE_NONE, what the indicators show; blackjack: the seat (1-7)
        whose hand is due, DEALER_HAND, 0xFD the round's cards are out and the dealer's confirm
        is due, or NOT_DUE."""
        bj = self.bj
        if bj is not None:
            if self.phase != PH_ROUND or self.complete:
                return 0xFF
            if bj.done():
                return 0xFD  # the dealer's confirm
            h = bj.due()
            return bj.seat_of[h] if h < 0xFD else h
        if self.phase != PH_ROUND:
            return DUE_NONE
        if self.complete:
            return DUE_PLAYER
        return self._due()

    def _due(self):
        b21 = self.b21
        if b21 is not None:
            return b21.due(self.player, self.np, self.banker, self.nb)
        return due(self.player, self.np, self.banker, self.nb)

    def _note(self, kind, card):
        """An irregularity reported with its card and position."""
        self.ir_kind = kind
        self.ir_card = card
        self.ir_position = self.position
        self.events |= EV_IRREGULARITY

    def _irregular(self, kind, card):
        """An irregularity that holds the shoe until a supervisor's resolution."""
        self._note(kind, card)
        if self.phase != PH_HELD:
            self.held_phase = self.phase
        self.phase = PH_HELD

    def _count(self, card):
        if card < 52:
            if self.inventory[card] < 255:
                self.inventory[card] += 1
        elif self.unknown < 0xFFFF:
            self.unknown += 1

    def card_out(self, card, bets=0):
        """A card (0..51), CUT or NO_CARD (unreadable) has left the shoe; `bets`, blackjack's bet
        spots as it left (bit s-1: a wager at seat s), the seats of a round it opens."""
        self.position += 1
        if card == CUT:
            self._cut_card()
            return
        self._count(card)  # counted whatever becomes of it: voided cards left the shoe too
        if card == NO_CARD:
            if self.phase == PH_BURN:
                # Burn cards are discarded unseen: it counts as burned, the inventory keeps one
                # unknown card, and the shoe goes on.
                self._note(IR_BURN_UNREADABLE, card)
                self._burn(card)
            else:
                self._irregular(IR_UNREADABLE, card)
            return
        if self.phase == PH_HELD or self.phase == PH_ENDED:
            self._irregular(IR_CARD_NOT_DUE, card)
            return
        if self.inventory[card] > self.decks:
            self._irregular(IR_INVENTORY, card)
            return
        if self.phase == PH_BURN_FIRST:
            self.burned[0] = card
            self.n_burned = 1
            if self.bj is not None:  # blackjack burns the one card
                self.phase = PH_ROUND
                self.events |= EV_BURN
                return
            self.burn_left = burn_value(card)
            self.phase = PH_BURN
            return
        if self.phase == PH_BURN:
            self._burn(card)
            return
        bj = self.bj
        if bj is not None:
            self._deal_blackjack(bj, card, bets)
            return
        self._deal(card)

    def _cut_card(self):
        if self.phase == PH_ENDED:
            return
        if self.cut_seen:
            self._irregular(IR_SECOND_CUT, CUT)
            return
        self.cut_seen = True
        if self.bj is not None:
            self._cut_blackjack()
            return
        # 21 Baccarat's table may make the round the cut card comes out in the last
        last = self.b21 is not None and self.b21.cut_last()
        if self.in_burn():
            self.cut = CUT_NEXT_IS_LAST  # continuing makes the first round the last
            self._irregular(IR_CUT_IN_BURN, CUT)
        elif not self.complete:
            self.cut = CUT_NEXT_IS_LAST if last else CUT_FINISH_THEN_ONE
            if last:
                self.last_round = True  # (voided, the shoe ends: resolve)
        elif last and self.phase != PH_HELD:
            self._end()
        else:
            self.cut = CUT_NEXT_IS_LAST
            if last:  # held between rounds: the shoe ends once the hold is resolved
                self.last_round = True

    def _burn(self, card):
        self.burned[self.n_burned] = card
        self.n_burned += 1
        self.burn_left -= 1
        if self.burn_left == 0:
            self.phase = PH_ROUND
            self.events |= EV_BURN

    def _deal(self, card):
        if self.complete:
            self.complete = False
            self.np = 0
            self.nb = 0
            self.round_no += 1
            self.last_round = self.cut == CUT_NEXT_IS_LAST
        d = self._due()
        if d == DUE_PLAYER:
            self.player[self.np] = card
            self.np += 1
        else:
            self.banker[self.nb] = card
            self.nb += 1
        if self.np + self.nb == 4:
            self.events |= EV_INITIAL
        if self._due() == DUE_NONE:
            self._round_complete()

    def _cut_blackjack(self):
        """Blackjack: the round the cut card came out in is the shoe's last; between rounds none
        is (the shoe ends, once a hold there is resolved); in the burn, the first round is."""
        held = self.phase == PH_HELD
        phase = self.held_phase if held else self.phase
        if phase == PH_BURN_FIRST or phase == PH_BURN:
            self.cut = CUT_NEXT_IS_LAST
            if not held:
                self._irregular(IR_CUT_IN_BURN, CUT)
        elif self.complete and not held:
            self._end()
        else:
            self.last_round = True  # ends at the round's result, or at the hold's resolution

    def _deal_blackjack(self, bj, card, bets):
        if self.complete:
            if not bj.begin(bets, self.h17, self.hole):
                self._irregular(IR_CARD_NOT_DUE, card)  # no wager on any spot: no round
                return
            self.complete = False
            self.round_no += 1
            if self.cut == CUT_NEXT_IS_LAST:  # the cut card came out in the burn
                self.last_round = True
        if bj.card(card) == 0xFF:  # NOT_DUE: the card stays out of every hand
            self._irregular(IR_CARD_NOT_DUE, card)
        elif bj.done():
            self.events |= EV_PLACED

    def press(self, kind):
        """Blackjack: the dealer's NEXT, DOUBLE or SPLIT (shoe/blackjack.py PRESS_*); one the
        hand being played cannot take holds the shoe. False when not taken."""
        if self.bj is None or self.phase == PH_HELD or self.phase == PH_ENDED:
            return False
        if self.phase == PH_ROUND and not self.complete and self.bj.press(kind):
            if self.bj.done():  # the last hand stood, and the dealer's two cards stand
                self.events |= EV_PLACED
            return True
        self._irregular(IR_PRESS_REFUSED, NO_CARD)
        return False

    def disputable(self):
        """Blackjack: a round the dealer has not confirmed (the supervisor's void-round key
        disputes it: shoe/app.py supervisor)."""
        return self.bj is not None and self.phase == PH_ROUND and not self.complete

    def dispute(self):
        self._irregular(IR_DISPUTED, NO_CARD)

    def _round_complete(self):
        self.complete = True
        self.events |= EV_RESULT
        if self.last_round:
            self._end()
        elif self.cut == CUT_FINISH_THEN_ONE:
            self.cut = CUT_NEXT_IS_LAST
        self.dummy_done = 1 if self.dummy else 0
        self.dummy = False

    def _end(self):
        self.phase = PH_ENDED
        self.events |= EV_SHOE_END

    # Sensor-level irregularities reported by the app
    def two_cards(self, card):
        self.position += 1
        self._count(card)
        self._irregular(IR_TWO_CARDS, card)

    def foreign(self):
        self.position += 1
        self._count(NO_CARD)
        self._irregular(IR_FOREIGN, NO_CARD)

    def confirm(self):
        """The dealer confirms the round; an irregularity if a card is still due. Blackjack: the
        dealer has checked the shoe's hands against the table; the result is made now."""
        if self.bj is not None and self.in_round() and self.bj.done():
            self._round_complete()
            return
        if self.in_round():
            self._irregular(IR_CARD_MISSING, NO_CARD)

    def empty(self):
        """The shoe-empty sensor: the shoe has no cards left."""
        if self.phase == PH_ENDED or self.phase == PH_HELD:
            return
        if self.in_round() or self.in_burn():
            self._irregular(IR_EXHAUSTED, NO_CARD)  # a round, or the burn, cannot be finished
        else:
            self._end()

    def resolve(self, code):
        """A supervisor's resolution of the held irregularity; False when none is held or it does
        not fit."""
        if self.phase != PH_HELD or code < RES_VOID_CARD or code > RES_END_SHOE:
            return False
        card = self.ir_card
        kind = self.ir_kind
        in_burn = self.held_phase == PH_BURN_FIRST or self.held_phase == PH_BURN
        self.voided = 0
        if code == RES_KEEP_DUMMY:
            # The card opens the next round, a no-bet dummy hand; only for a readable, countable
            # card drawn between rounds.
            if (self.bj is not None or card >= 52
                    or (kind != IR_CARD_NOT_DUE and kind != IR_TWO_CARDS)
                    or self.held_phase != PH_ROUND or not self.complete
                    or self.inventory[card] > self.decks):
                return False
            self.phase = PH_ROUND
            self.dummy = True
            self._deal(card)
        elif code == RES_VOID_ROUND or code == RES_END_SHOE:
            if code == RES_VOID_ROUND and in_burn:
                return False  # no round to void: continue (void card) or end the shoe
            self.phase = PH_ROUND if self.held_phase != PH_ENDED else PH_ENDED
            if not self.complete and self.bj is not None:
                # its cards go in a voided result (the app), and the round keeps its number
                self.voided = 1
                self.complete = True
            elif not self.complete:
                self.voided = self.np << 4 | self.nb  # its cards stay counted out of the shoe
                self.complete = True
                self.round_no -= 1
                self.dummy = False
            if code == RES_END_SHOE and self.phase != PH_ENDED:
                if in_burn and self.n_burned:
                    self.events |= EV_BURN  # the cards burned so far are in the accounting too
                self._end()
        else:
            if not in_burn and (kind == IR_CARD_MISSING or kind == IR_EXHAUSTED):
                return False  # nothing to void: the round itself must be voided
            if kind == IR_DISPUTED:
                return False  # a round the dealer found other than the table is void
            self.phase = self.held_phase
        if ((self.bj is not None or (self.b21 is not None and self.b21.cut_last()))
                and self.last_round and self.complete and self.phase == PH_ROUND):
            self._end()  # the cut card's round is over (void, or held between rounds)
        self.resolution = code
        self.events |= EV_RESOLUTION
        return True

"""Following a blackjack round (58 Pa. Code Chapter 633a): which hand each card the shoe
reads belongs to, and whether the dealer must draw — from the generated table (shoe/bjtable.py),
as the baccarat tableau is decided from shoe/table.py. Allocation-free on the card path: every
buffer is made once, in __init__.

The least the dealer does:
- The round's active seats (a bit per seat, seat 1 the dealer's leftmost, first base) come with
  `begin`: the table's bet-spot sensors, read as the round's first card leaves the shoe
  (shoe/dealing.py). No press, and no host in the loop: a shoe whose host link is down deals on
  and keeps its frames (a seats command from the host would stop the game with the link).
- The initial deal is the common order (§ 633a.7's own text was not found; § 685a.7(e) words
  it so): a card to each active seat from the dealer's left, the dealer's up card, a second card
  to each seat, then the dealer's hole card (§ 633a.1: the second card dealt face down to the
  dealer), or, at a table without a hole card, the dealer's second card at the dealer's turn.
- With a hole card the shoe reads it, so a dealer's Blackjack ends the round at once: no card is
  due to anyone.
- Each hand then in turn, seat by seat from the dealer's left, its split hands in order. The
  shoe moves on by itself where it can tell: a hand of 21 (a Blackjack included), a bust, a
  doubled hand once its one card is dealt. The dealer presses NEXT only for a stand, DOUBLE
  before a double's card, SPLIT for a pair (two cards of one value, § 633a.11), whose hands then
  take their second cards in turn.
- Then the dealer's hand, which the shoe completes by the table: it says when the dealer must
  draw (the lamp) and when the hand is done. The dealer always completes the hand (Hit and Run
  counts the dealer's cards even when every player has busted).
- A card when none is due is not attributed (card() answers NOT_DUE: the caller raises the
  irregularity); a press the hand cannot take is refused (press() answers False).
- When the dealer's hand is complete the shoe shows every hand as it attributed the cards, and
  the dealer confirms it against the table (CONFIRM) before the result is made: a press the
  dealer missed or made twice moves cards between hands in a way no rule can see (a stand is
  legal on any total), and only the table can. A shoe other than the table is disputed (the
  supervisor's void-round key): the round is void, its cards only accounted."""

from shoe.bjtable import DEALER, VALUE

try:
    from micropython import const
except ImportError:  # CPython (tests): const is only a compiler hint
    def const(x):  # type: ignore[misc]
        return x

SEATS = const(7)
MAX_HANDS = const(15)  # a split past this many is refused (a hand is a nibble: 15 the dealer)
# a round's cards and presses: its result frame holds them all, within a frame's 200 bytes
# (header 46, signature 64: 7 + 54 events + 27 bytes of nibbles)
MAX_CARDS = const(54)
DEALER_HAND = const(0xFE)
NOT_DUE = const(0xFF)
PRESS_EVENT = const(0xF0)  # a press taken, in the round's events: 0xF0 | its kind
RESULT_HEADER = const(7)  # shoe(2) round(2) seats(1) rule(1) events(1)

PRESS_NEXT = const(1)  # the hand stands
PRESS_DOUBLE = const(2)  # the next card is the hand's last
PRESS_SPLIT = const(3)  # the pair becomes two hands

# phases
IDLE = const(0)
INITIAL = const(1)
PLAYERS = const(2)
DEALER_TURN = const(3)
DONE = const(4)

# hand flags
STOOD = const(1)
DOUBLED = const(2)
SPLIT = const(4)


class Round:
    def __init__(self):
        self.seat_of = bytearray(MAX_HANDS)  # each hand's seat, in the order hands are played
        self.hard = bytearray(MAX_HANDS)  # its total, every ace 1
        self.aces = bytearray(MAX_HANDS)
        self.count = bytearray(MAX_HANDS)
        self.flags = bytearray(MAX_HANDS)
        self.codes = bytearray(MAX_CARDS)  # the round's cards as read (rank * 4 + suit)
        self.hand_of = bytearray(MAX_CARDS)  # the hand each belongs to, or DEALER_HAND
        # the round's events as they came: each card attributed, and 0xF0 | kind for each press
        # taken (what the result frame signs, for the host to follow the round again)
        self.events = bytearray(MAX_CARDS)
        self.n_events = 0
        self.mask = 0
        self.phase = IDLE
        self.hands = 0
        self.seats = 0
        self.cards = 0
        self.cur = 0
        self.step = 0  # the initial deal's next position
        self.h17 = 0
        self.hole = 1
        self.d_hard = 0
        self.d_aces = 0
        self.d_count = 0

    def begin(self, mask, h17, hole):
        """A new round for the seats in `mask` (bit 0: seat 1), the dealer's rule (`h17` true:
        the dealer draws to a soft 17) and the hole card. False for a round of no seat."""
        mask &= (1 << SEATS) - 1
        if not mask:
            return False
        n = 0
        for s in range(SEATS):
            if mask >> s & 1:
                self.seat_of[n] = s + 1
                self.hard[n] = 0
                self.aces[n] = 0
                self.count[n] = 0
                self.flags[n] = 0
                n += 1
        self.hands = self.seats = n
        self.mask = mask
        self.n_events = 0
        self.h17 = 1 if h17 else 0
        self.hole = 1 if hole else 0
        self.cards = self.cur = self.step = 0
        self.d_hard = self.d_aces = self.d_count = 0
        self.phase = INITIAL
        return True

    # ---- the card path ----------------------------------------------------------------------
    def due(self):
        """The hand the next card belongs to: a hand's index, DEALER_HAND, or NOT_DUE."""
        ph = self.phase
        if ph == INITIAL:
            s = self.step
            n = self.seats
            if s < n:
                return s
            if s == n:
                return DEALER_HAND
            if s <= 2 * n:
                return s - n - 1
            return DEALER_HAND  # the hole card
        if ph == PLAYERS:
            return self.cur
        if ph == DEALER_TURN:
            return DEALER_HAND
        return NOT_DUE

    def dealer_draws(self):
        """The lamp: the dealer's hand takes the next card."""
        return self.phase == DEALER_TURN

    def card(self, code):
        """Attribute the card the shoe read (rank * 4 + suit): the hand it went to, or NOT_DUE
        (not attributed)."""
        h = self.due()
        if h == NOT_DUE or self.n_events >= MAX_CARDS:
            return NOT_DUE
        self.events[self.n_events] = code
        self.n_events += 1
        i = self.cards
        self.codes[i] = code
        self.hand_of[i] = h
        self.cards = i + 1
        v = VALUE[code >> 2]
        if h == DEALER_HAND:
            self.d_hard += v
            if v == 1:
                self.d_aces += 1
            self.d_count += 1
        else:
            self.hard[h] += v
            if v == 1:
                self.aces[h] += 1
            self.count[h] += 1
        if self.phase == INITIAL:
            self.step += 1
            if self.step == 2 * self.seats + 1 + self.hole:
                if self.hole and self._dealer_blackjack():
                    self.phase = DONE
                else:
                    self.phase = PLAYERS
                    self.cur = 0
                    self._next_hand()
        elif self.phase == PLAYERS:
            if self._finished(h):
                self.cur += 1
                self._next_hand()
        else:
            self._dealer_next()
        return h

    def press(self, kind):
        """The dealer's press for the hand being played: True if it takes it."""
        if self.phase != PLAYERS or self.n_events >= MAX_CARDS:
            return False
        if self._take(kind):
            self.events[self.n_events] = PRESS_EVENT | kind
            self.n_events += 1
            return True
        return False

    def done(self):
        """The round is complete: its result frame may be made."""
        return self.phase == DONE

    def result_into(self, buf, at, shoe_no, round_no, voided=0):
        """The round's result frame body at buf[at:]: shoe(2) round(2) seats(1) rule(1: 1 h17,
        2 hole card, 4 voided: a supervisor voided the round, its cards only accounted) n(1),
        its n events (a card as read, 0xF0 | a press taken), then the hand each card is in at
        the end, a nibble each (high first; 15 the dealer's). Its length; allocation-free."""
        buf[at] = shoe_no >> 8
        buf[at + 1] = shoe_no & 255
        buf[at + 2] = round_no >> 8
        buf[at + 3] = round_no & 255
        buf[at + 4] = self.mask
        buf[at + 5] = self.h17 | self.hole << 1 | (4 if voided else 0)
        n = self.n_events
        buf[at + 6] = n
        i = at + RESULT_HEADER
        for k in range(n):
            buf[i + k] = self.events[k]
        i += n
        c = self.cards
        for k in range((c + 1) >> 1):
            hi = self.hand_of[2 * k]
            lo = self.hand_of[2 * k + 1] if 2 * k + 1 < c else 0
            buf[i + k] = (15 if hi == DEALER_HAND else hi) << 4 | (
                15 if lo == DEALER_HAND else lo)
        return i + ((c + 1) >> 1) - at

    def _take(self, kind):
        h = self.cur
        if self.count[h] < 2:
            return False
        if kind == PRESS_NEXT:
            if self.flags[h] & DOUBLED:
                return False  # the double's one card is due: no stand before it
            self.flags[h] |= STOOD
            self.cur += 1
            self._next_hand()
            return True
        if self.count[h] != 2 or self.flags[h] & DOUBLED:
            return False
        if kind == PRESS_DOUBLE:
            self.flags[h] |= DOUBLED
            return True
        if kind == PRESS_SPLIT:
            return self._split(h)
        return False

    # ---- inside ------------------------------------------------------------------------------
    def _best(self, hard, aces):
        if aces and hard + 10 <= 21:
            return hard + 10
        return hard

    def _finished(self, h):
        c = self.count[h]
        if c < 2:
            return False
        f = self.flags[h]
        if f & STOOD or (f & DOUBLED and c >= 3):
            return True
        return self._best(self.hard[h], self.aces[h]) >= 21

    def _next_hand(self):
        while self.cur < self.hands and self._finished(self.cur):
            self.cur += 1
        if self.cur >= self.hands:
            self.phase = DEALER_TURN
            self._dealer_next()

    def _dealer_blackjack(self):
        return self.d_count == 2 and self.d_aces == 1 and self.d_hard == 11

    def _dealer_next(self):
        """Whether the dealer's hand takes another card; DONE when it is complete."""
        if self.d_count < 2:
            return  # its second card (no hole card) comes first
        if self._dealer_blackjack():
            self.phase = DONE
            return
        best = self._best(self.d_hard, self.d_aces)
        soft = 1 if best != self.d_hard else 0
        if best >= 32 or not DEALER[best * 2 + soft] >> self.h17 & 1:
            self.phase = DONE

    def _split(self, h):
        """Hand h's pair becomes hands h and h + 1, each of one card (its second card, which
        moves, keeps its place in the round's cards)."""
        if self.hands >= MAX_HANDS:
            return False
        # the hand's two cards: the last two attributed to it
        second = self.cards - 1
        while self.hand_of[second] != h:
            second -= 1
        first = second - 1
        while self.hand_of[first] != h:
            first -= 1
        v1 = VALUE[self.codes[first] >> 2]
        v2 = VALUE[self.codes[second] >> 2]
        if v1 != v2:
            return False
        # make room: hands after h move one place on, and so do the cards that name them
        for k in range(self.hands, h + 1, -1):
            self.seat_of[k] = self.seat_of[k - 1]
            self.hard[k] = self.hard[k - 1]
            self.aces[k] = self.aces[k - 1]
            self.count[k] = self.count[k - 1]
            self.flags[k] = self.flags[k - 1]
        for i in range(self.cards):
            o = self.hand_of[i]
            if o != DEALER_HAND and o > h:
                self.hand_of[i] = o + 1
        self.hands += 1
        self.hand_of[second] = h + 1
        n = h + 1
        self.seat_of[n] = self.seat_of[h]
        self.hard[h] = v1
        self.hard[n] = v2
        self.aces[h] = self.aces[n] = 1 if v1 == 1 else 0
        self.count[h] = self.count[n] = 1
        self.flags[h] = self.flags[n] = SPLIT
        return True

"""21 Baccarat (58 Pa. Code § 681a): where each card goes and who wins, from the generated table
(shoe/b21table.py) and the table's configuration: two rule bytes of flash `variant`, written at
provisioning and signed in every shoe_start and result frame. Allocation-free (the card path).

The round (docs/RULES.md "21 Baccarat"): the Player's Hand and the Banker's Hand two cards each,
alternately, the Player's first (as baccarat deals); then the Player's Hand draws by its rule,
then the Banker's Hand by its own, or, under beat_player, while it is under a Player's Hand of 21
or less. A hand holds at most MOST_CARDS cards (one that draws while under 21 never needs more
with four aces a deck; with eight decks a hand that would is complete at 11)."""

from shoe import frames
from shoe.b21table import DRAW, VALUE, WINNER
from shoe.decision import DUE_BANKER, DUE_NONE, DUE_PLAYER

try:
    from micropython import const
except ImportError:  # CPython (tests): const is only a compiler hint
    def const(x):  # type: ignore[misc]
        return x

MOST_CARDS = const(11)
# a rule byte: bits 0-4 the hand's draw total (the Banker's 0: beat_player), bit 5 a soft total
# equal to it draws; the Player's byte also carries bit 6, aces count 1 only, and bit 7, the
# round the cut card comes out in is the shoe's last (else: that round, then one more)
RULE_BELOW = const(31)
RULE_SOFT = const(32)
RULE_ACE_ONE = const(64)
RULE_CUT_LAST = const(128)
# outcome bits beside the winner (1 Player, 2 Banker, 3 Tie): each hand's first two cards
PLAYER_PAIR = const(4)
PLAYER_SUITED = const(8)
BANKER_PAIR = const(16)
BANKER_SUITED = const(32)


class Rules21:
    def __init__(self, player_rule, banker_rule):
        self.p = player_rule
        self.b = banker_rule

    def score(self, cards, n):
        """The hand's best total << 1 | 1 when it is soft (an ace counted 11)."""
        hard = 0
        ace = 0
        for i in range(n):
            v = VALUE[cards[i] >> 2]
            hard += v
            if v == 1:
                ace = 1
        if ace and not self.p & RULE_ACE_ONE and hard + 10 <= 21:
            return (hard + 10) << 1 | 1
        return hard << 1

    def total(self, cards, n):
        return self.score(cards, n) >> 1

    def _draws(self, cards, n, below, soft):
        """`soft`: 1 where a soft total equal to `below` draws."""
        if n >= MOST_CARDS:
            return False
        s = self.score(cards, n)
        t = s >> 1
        if t > 21:
            return False
        if below > 21:  # no table's (provisioning refuses it): never an index beyond the table
            below = 21
        return DRAW[below * 22 + t] >> (1 + soft if s & 1 else 0) & 1

    def due(self, player, np, banker, nb):
        """DUE_PLAYER / DUE_BANKER: the hand the next card goes to; DUE_NONE: complete."""
        if np < 2 or nb < 2:
            return DUE_PLAYER if np <= nb else DUE_BANKER
        p = self.p
        if self._draws(player, np, p & RULE_BELOW, 1 if p & RULE_SOFT else 0):
            return DUE_PLAYER
        b = self.b
        below = b & RULE_BELOW
        soft = 1 if b & RULE_SOFT else 0
        if not below:  # beat_player: the Player's total, if 21 or less, is the Banker's
            below = self.total(player, np)
            if below > 21:
                below = 0
            soft = 0
        if self._draws(banker, nb, below, soft):
            return DUE_BANKER
        return DUE_NONE

    def outcome(self, player, np, banker, nb):
        """The winner (1 Player, 2 Banker, 3 Tie) | each hand's pair bits."""
        pt = self.total(player, np)
        bt = self.total(banker, nb)
        i = (pt if pt < 32 else 31) * 32 + (bt if bt < 32 else 31)
        o = WINNER[i >> 2] >> (i & 3) * 2 & 3
        if player[0] >> 2 == player[1] >> 2:
            o |= PLAYER_SUITED | PLAYER_PAIR if player[0] == player[1] else PLAYER_PAIR
        if banker[0] >> 2 == banker[1] >> 2:
            o |= BANKER_SUITED | BANKER_PAIR if banker[0] == banker[1] else BANKER_PAIR
        return o

    def cut_last(self):
        return self.p & RULE_CUT_LAST

    def result(self, app, s):
        """The round's result frame, made by the app (`s`: its DealingState) as the round ends,
        and the announcement the dealer makes."""
        o = self.outcome(s.player, s.np, s.banker, s.nb)
        at = app.outbox.begin(frames.T_RESULT21)
        n = frames.result21_into(app.outbox.building, at, s.shoe_no, s.round_no, s.player,
                                 s.np, s.banker, s.nb, s.dummy_done, self, o)
        app._made(frames.T_RESULT21, n)
        app.indicators.announce(self.total(s.player, s.np), self.total(s.banker, s.nb), o & 3,
                                frames.A_TIE_HAND if o & 3 == 3 else 0)

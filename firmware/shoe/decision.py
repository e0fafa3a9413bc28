"""Table decision: which hand is due next and the round's outcome, read from the generated table.

A round is held as two 3-byte hands of card numbers plus their lengths; nothing here allocates, so
the card path can run with the heap locked."""

try:
    from micropython import const
except ImportError:  # CPython (tests): const is only a compiler hint
    def const(x):  # type: ignore[misc]
        return x

from shoe.table import DRAW, OUTCOME, POINT

DUE_NONE = const(0)
DUE_PLAYER = const(1)
DUE_BANKER = const(2)

WINNER_MASK = const(3)
WINNER_PLAYER = const(1)
WINNER_BANKER = const(2)
WINNER_TIE = const(3)
PLAYER_NATURAL = const(4)
BANKER_NATURAL = const(8)
DRAGON7 = const(16)
PANDA8 = const(32)
LUCKY_SIX = const(64)
PLAYER_PAIR = const(128)
BANKER_PAIR = const(256)


def total(hand, n):
    """Point Count of the first n cards of a hand."""
    t = 0
    for i in range(n):
        t += POINT[hand[i] >> 2]
    return t % 10


def due(player, np, banker, nb):
    """DUE_PLAYER / DUE_BANKER: the hand that must receive the next card; DUE_NONE: complete."""
    n = np + nb
    if n < 4:
        return DUE_PLAYER if n & 1 == 0 else DUE_BANKER
    row = (total(player, 2) * 10 + total(banker, 2)) * 11
    if np == 2:
        bits = DRAW[row + 10]
        if bits & 1:
            return DUE_PLAYER
        if nb == 2 and bits & 2:
            return DUE_BANKER
        return DUE_NONE
    if nb == 2 and DRAW[row + POINT[player[2] >> 2]] & 2:
        return DUE_BANKER
    return DUE_NONE


def outcome(player, np, banker, nb):
    """Winner and flag bits of a complete round (see the constants above)."""
    p = total(player, np)
    b = total(banker, nb)
    v = OUTCOME[((p * 10 + b) * 2 + (np == 3)) * 2 + (nb == 3)]
    if player[0] >> 2 == player[1] >> 2:
        v |= PLAYER_PAIR
    if banker[0] >> 2 == banker[1] >> 2:
        v |= BANKER_PAIR
    return v

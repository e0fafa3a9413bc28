"""Card decode: card number = rank * 4 + suit (rank A..K = 0..12, suit S H D C = 0..3).

CUT and NO_CARD are numbers outside 0..51 so a card always fits one byte."""

try:
    from micropython import const
except ImportError:  # CPython (tests): const is only a compiler hint
    def const(x):  # type: ignore[misc]
        return x

CUT = const(52)
NO_CARD = const(255)
RANKS = b"A23456789TJQK"
SUITS = b"SHDC"

# ASCII -> rank + 1 / suit + 1 (0 = not a rank/suit): indexing a bytes object allocates nothing.
_RANK_OF = bytearray(128)
_SUIT_OF = bytearray(128)
for _i in range(13):
    _RANK_OF[RANKS[_i]] = _i + 1
    _RANK_OF[RANKS[_i] + 32 if RANKS[_i] > 64 else RANKS[_i]] = _i + 1  # lower case
for _i in range(4):
    _SUIT_OF[SUITS[_i]] = _i + 1
    _SUIT_OF[SUITS[_i] + 32] = _i + 1


def decode(rank_ch, suit_ch):
    """Card number from a rank and a suit character code (ints); NO_CARD if either is unknown."""
    if rank_ch > 127 or suit_ch > 127:
        return NO_CARD
    r = _RANK_OF[rank_ch]
    s = _SUIT_OF[suit_ch]
    if r == 0 or s == 0:
        return NO_CARD
    return (r - 1) * 4 + s - 1


def burn_value(card):
    """Burn procedure count for the exposed first card: A = 1, 2-9 face value, T/J/Q/K = 10."""
    r = card >> 2
    return r + 1 if r < 9 else 10

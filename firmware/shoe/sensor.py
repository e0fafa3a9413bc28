"""Recognition-module frame decoder (the reference module's UART protocol, README "Reference
hardware").

A frame is 10 ASCII bytes: `$` TYPE RANK SUIT CONF(2 hex) `*` XOR(2 hex) `\\n`, XOR over
TYPE..CONF. TYPE `R` a card read, `C` the cut card, `U` a card seen but not read. Bytes go in one
at a time; a bad frame is counted and the decoder resynchronises at the next `$`. No allocation per
byte."""

try:
    from micropython import const
except ImportError:  # CPython (tests): const is only a compiler hint
    def const(x):  # type: ignore[misc]
        return x

from shoe.cards import CUT, NO_CARD, decode

READ_NONE = const(0)
READ_CARD = const(1)  # self.card, self.confidence hold the read
READ_CUT = const(2)
READ_UNREADABLE = const(3)
READ_FOREIGN = const(4)  # a well-formed frame naming no card of the deck

_HEX = b"0123456789ABCDEF"


def _hexval(c):
    """Upper-case hex only, as the module sends it: no single flipped bit passes as the same
    digit."""
    if 48 <= c <= 57:
        return c - 48
    if 65 <= c <= 70:
        return c - 55
    return -1


class SensorDecoder:
    def __init__(self):
        self.buf = bytearray(9)
        self.n = -1  # -1: hunting for '$'
        self.card = NO_CARD
        self.confidence = 0
        self.errors = 0

    def feed(self, b):
        """One byte in; READ_* when a frame completes, else READ_NONE."""
        if b == 36:  # '$' always starts a frame, even mid-frame (resync)
            if self.n > 0:
                self.errors += 1
            self.n = 0
            return READ_NONE
        if self.n < 0:
            return READ_NONE
        buf = self.buf
        buf[self.n] = b
        self.n += 1
        if self.n < 9:
            return READ_NONE
        self.n = -1
        # buf: TYPE RANK SUIT C1 C2 '*' X1 X2 '\n'
        x = buf[0] ^ buf[1] ^ buf[2] ^ buf[3] ^ buf[4]
        c1 = _hexval(buf[3])  # one name at a time: a 4-tuple unpack would allocate
        c2 = _hexval(buf[4])
        x1 = _hexval(buf[6])
        x2 = _hexval(buf[7])
        bad_hex = c1 < 0 or c2 < 0 or x1 < 0 or x2 < 0
        if buf[5] != 42 or buf[8] != 10 or bad_hex or x1 * 16 + x2 != x:
            self.errors += 1
            return READ_NONE
        self.confidence = c1 * 16 + c2
        t = buf[0]
        if t == 82:  # 'R'
            self.card = decode(buf[1], buf[2])
            return READ_CARD if self.card != NO_CARD else READ_FOREIGN
        if t == 67:  # 'C'
            self.card = CUT
            return READ_CUT
        if t == 85:  # 'U'
            self.card = NO_CARD
            return READ_UNREADABLE
        self.errors += 1
        return READ_NONE


def encode(kind, rank_suit=b"--", confidence=0xF0):
    """The frame a recognition module sends (used by the simulated dealer and tests)."""
    body = bytearray(5)
    body[0] = kind
    body[1] = rank_suit[0]
    body[2] = rank_suit[1]
    body[3] = _HEX[confidence >> 4]
    body[4] = _HEX[confidence & 15]
    x = body[0] ^ body[1] ^ body[2] ^ body[3] ^ body[4]
    return b"$" + bytes(body) + b"*" + bytes((_HEX[x >> 4], _HEX[x & 15])) + b"\n"

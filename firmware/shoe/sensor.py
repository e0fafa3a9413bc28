"""Recognition-module frame decoder (the reference module's UART protocol, docs/HARDWARE.md
"The recognition module's frames").

A frame is 10 ASCII bytes: `$` TYPE RANK SUIT CONF(2 hex) `*` CRC(2 hex) `\\n`, the CRC a CRC-8
over TYPE..CONF (the five ASCII bytes as sent): CRC-8/DVB-S2, poly 0xD5, init 0x00, not
reflected, xorout 0x00 (check value 0xBC over b"123456789"). TYPE `R` a card read, `C` the cut
card, `U` a card seen but not read. Hex digits are upper case only. Bytes go in one at a time; a
bad frame is counted and the decoder resynchronises at the next `$`. No allocation per byte.

Why 0xD5: every 1- and 2-bit error anywhere in the 10 bytes must be refused. Over the bits as
sent, the CRC's digits are ASCII, and one flipped bit can turn one valid digit into another whose
value differs in up to three bits (`B` 0x42 <-> `C` 0x43 is 11 <-> 12, 0b0111). CRC-8/SMBUS (0x07)
and CRC-8/AUTOSAR (0x2F) each have a single body bit whose syndrome is 0x07 or 0x70, so that bit
plus a `B`/`C` flip in the CRC passes; 0xD5 has none (tests/test_sensor_crc.py proves it for every
frame and runs every 1- and 2-bit error of every card's frame through this decoder)."""

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

CRC_POLY = const(0xD5)
_HEX = b"0123456789ABCDEF"


def _crc_table():
    t = bytearray(256)
    for i in range(256):
        c = i
        for _ in range(8):
            c = ((c << 1) ^ CRC_POLY) & 0xFF if c & 0x80 else (c << 1) & 0xFF
        t[i] = c
    return bytes(t)


_CRC = _crc_table()  # built once at import: the card path only indexes it


def crc8(buf, n):
    """CRC-8/DVB-S2 of buf's first n bytes. Allocates nothing (a range loop and small ints)."""
    c = 0
    t = _CRC
    for i in range(n):
        c = t[c ^ buf[i]]
    return c


def _hexval(c):
    """Upper-case hex only, as the module sends it."""
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
        # buf: TYPE RANK SUIT C1 C2 '*' K1 K2 '\n'
        c1 = _hexval(buf[3])  # one name at a time: a 4-tuple unpack would allocate
        c2 = _hexval(buf[4])
        k1 = _hexval(buf[6])
        k2 = _hexval(buf[7])
        bad_hex = c1 < 0 or c2 < 0 or k1 < 0 or k2 < 0
        if buf[5] != 42 or buf[8] != 10 or bad_hex or k1 * 16 + k2 != crc8(buf, 5):
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
    c = crc8(body, 5)
    return b"$" + bytes(body) + b"*" + bytes((_HEX[c >> 4], _HEX[c & 15])) + b"\n"

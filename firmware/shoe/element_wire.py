"""The ATECC608's bytes on the wire, beside its driver (shoe/element.py): the packets' CRC, and a
signature put in its one low-S form.

The CRC is CryptoAuthLib's atCRC: polynomial 0x8005, init 0, each byte fed LSB first into an
MSB-first register. That is the bit-reversal of CRC-16/ARC, so a reflected 256-entry table (built
once at import) does a byte per lookup; the register is reversed once at the end."""

from array import array


def _reverse8(b):
    r = 0
    for _ in range(8):
        r = (r << 1) | (b & 1)
        b >>= 1
    return r


def _reflected_table():
    t = array("H")  # 512 bytes; a list of 256 ints is four times that on a 64-bit port
    for i in range(256):
        r = i
        for _ in range(8):
            r = (r >> 1) ^ 0xA001 if r & 1 else r >> 1  # 0xA001: 0x8005 bit-reversed
        t.append(r)
    return t


_CRC_TABLE = _reflected_table()
_REV8 = bytes(_reverse8(i) for i in range(256))


# P-256's group order n, and (n - 1) / 2: a signature's s above it is made n - s (low-S, as
# the host requires). Both (r, s) and (r, n - s) verify; a frame's exact bytes are a leaf of the
# shoe's log (shoe/tree.py), so a second form anyone on the cable could make from the first
# would put a different leaf in the host's store than in the shoe's tree.
_ORDER = bytes.fromhex("ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551")
_HALF = bytes.fromhex("7fffffff800000007fffffffffffffffde737d56d38bcf4279dce5617e3192a8")


def low_s(buf, at):
    """The signature r||s at buf[at:at + 64] with s made n - s when above (n - 1) / 2, in place.
    Allocation-free (a byte at a time: no int of 256 bits)."""
    s = at + 32
    for i in range(32):  # s > half?
        d = buf[s + i] - _HALF[i]
        if d:
            break
    if d <= 0:
        return
    borrow = 0
    for i in range(31, -1, -1):
        v = _ORDER[i] - buf[s + i] - borrow
        borrow = 1 if v < 0 else 0
        buf[s + i] = v + 256 if v < 0 else v


def crc16(buf, start, end):
    """atCRC over buf[start:end], as an int whose low byte goes first on the wire."""
    r = 0
    t = _CRC_TABLE
    for i in range(start, end):
        r = (r >> 8) ^ t[(r ^ buf[i]) & 0xFF]
    return (_REV8[r & 0xFF] << 8) | _REV8[r >> 8]

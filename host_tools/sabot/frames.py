"""Link frames, host side (docs/PROTOCOL.md). Parsed with struct and verified with Python's own hmac,
independently of the firmware's codec. COBS framing, 0x00 delimiter."""

import hmac
import struct
from collections import namedtuple
from hashlib import sha256

VERSION = 1
HEADER = struct.Struct(">BBHIHI8s")
MAC_LEN = 32
MAX_FRAME = 200
MAX_ENCODED = MAX_FRAME + 3

TYPES = {0x01: "shoe_start", 0x02: "burn", 0x03: "initial_cards", 0x04: "result", 0x05: "irregularity",
         0x06: "resolution", 0x07: "shoe_end", 0x08: "command_rejected", 0x40: "status", 0x41: "integrity"}
CHAINED = {t for t in TYPES if t < 0x40}
T_STATUS = 0x40
T_INTEGRITY = 0x41
C_INTEGRITY = 0x85
C_HELLO, C_ACK, C_RESOLVE, C_NEW_SHOE, C_MAINTENANCE = 0x80, 0x81, 0x82, 0x83, 0x86

Frame = namedtuple("Frame", "raw type key_id shoe_id boot seq chain payload mac")


def cobs_encode(data):
    out = bytearray([0])
    code_at, code = 0, 1
    for b in data:
        if b == 0:
            out[code_at] = code
            code_at, code = len(out), 1
            out.append(0)
        else:
            out.append(b)
            code += 1
            if code == 255:
                out[code_at] = code
                code_at, code = len(out), 1
                out.append(0)
    out[code_at] = code
    return bytes(out) + b"\x00"


def cobs_decode(data):
    """One frame's bytes (without its trailing zero), or None if malformed. Works block by block."""
    parts = []
    i, n = 0, len(data)
    while i < n:
        code = data[i]
        end = i + code
        if code == 0 or end > n:
            return None
        parts.append(data[i + 1 : end])
        i = end
        if code < 255 and i < n:
            parts.append(b"\x00")
    return b"".join(parts)


class Deframer:
    """Splits a byte stream into frames at zero bytes; bounded, resynchronises after noise."""

    def __init__(self):
        self.buf = bytearray()

    def feed(self, data):
        out = []
        data = bytes(data)
        start = 0
        while True:
            z = data.find(b"\x00", start)
            if z < 0:
                self.buf += data[start:]
                if len(self.buf) > MAX_ENCODED:
                    self.buf.clear()  # longer than any frame: noise
                return out
            self.buf += data[start:z]
            if self.buf:
                if len(self.buf) <= MAX_ENCODED:
                    out.append(bytes(self.buf))
                self.buf.clear()
            start = z + 1


def parse(raw):
    """A Frame, or a reason string when the bytes are not a well-formed frame."""
    if len(raw) < HEADER.size + MAC_LEN:
        return "too_short"
    if len(raw) > MAX_FRAME:
        return "too_long"
    if raw[0] != VERSION:
        return "bad_version"
    _, ftype, key_id, shoe_id, boot, seq, chain = HEADER.unpack_from(raw)
    return Frame(raw, ftype, key_id, shoe_id, boot, seq, chain, raw[HEADER.size : -MAC_LEN], raw[-MAC_LEN:])


def mac(key, body):
    return hmac.digest(key, body, sha256)


def verify(key, frame):
    return hmac.compare_digest(mac(key, frame.raw[:-MAC_LEN]), frame.mac)


def build(key, key_id, shoe_id, boot, seq, chain, ftype, payload):
    body = HEADER.pack(VERSION, ftype, key_id, shoe_id, boot, seq, chain) + payload
    return body + mac(key, body)


def command(key, key_id, shoe_id, counter, ftype, payload=b""):
    """An encoded host -> shoe command, ready to write to the port."""
    return cobs_encode(build(key, key_id, shoe_id, 0, counter, bytes(8), ftype, payload))

"""Link frames, shoe side. Layout (big-endian), before COBS:

  version(1) type(1) key_id(2) shoe_id(4) boot(2) seq(4) chain(8) payload(...) mac(32)

mac = HMAC-SHA256(key, everything before it). For the shoe's chained frames `seq` counts up by one and
`chain` is the first 8 bytes of the previous chained frame's MAC, so each MAC covers its predecessor's.
Host commands carry the host's command counter in `seq` and zero `chain`. See docs/PROTOCOL.md."""

import struct

VERSION = 1
HEADER = ">BBHIHI8s"
HEADER_LEN = 22
MAC_LEN = 32
MAX_FRAME = 200

# shoe -> host, chained
T_SHOE_START = 0x01
T_BURN = 0x02
T_INITIAL = 0x03
T_RESULT = 0x04
T_IRREGULARITY = 0x05
T_RESOLUTION = 0x06
T_SHOE_END = 0x07
T_COMMAND_REJECTED = 0x08
# shoe -> host, not chained
T_STATUS = 0x40
T_INTEGRITY = 0x41
# host -> shoe
C_HELLO = 0x80
C_ACK = 0x81
C_RESOLVE = 0x82
C_NEW_SHOE = 0x83
C_INTEGRITY = 0x85
C_MAINTENANCE = 0x86


def build(key, key_id, shoe_id, boot, seq, chain, ftype, payload):
    head = struct.pack(HEADER, VERSION, ftype, key_id, shoe_id, boot, seq, chain)
    body = head + payload
    return body + key.mac(body)


def parse(frame):
    """(type, key_id, shoe_id, boot, seq, chain, payload, mac) or None when malformed."""
    if len(frame) < HEADER_LEN + MAC_LEN or len(frame) > MAX_FRAME or frame[0] != VERSION:
        return None
    _, ftype, key_id, shoe_id, boot, seq, chain = struct.unpack(HEADER, frame[:HEADER_LEN])
    return ftype, key_id, shoe_id, boot, seq, chain, frame[HEADER_LEN:-MAC_LEN], frame[-MAC_LEN:]

"""Link frames, shoe side: the layout, the payload of every frame type, and the field accessors.
Layout (big-endian), before COBS:

  version(1) type(1) key_id(2) shoe_id(4) boot(2) seq(4) chain(8) payload(...) mac(32)

mac = HMAC-SHA256(key, everything before it). For the shoe's chained frames `seq` counts up by one
and `chain` is the first 8 bytes of the previous chained frame's MAC, so each MAC covers its
predecessor's.
Host commands carry the host's command counter in `seq` and zero `chain`. See docs/PROTOCOL.md.
Nothing outside this module reads a frame's bytes by offset."""

import struct

try:
    from micropython import const
except ImportError:  # CPython (tests): const is only a compiler hint
    def const(x):  # type: ignore[misc]
        return x

VERSION = const(1)
_HEADER = ">BBHIHI8s"
HEADER_LEN = const(22)
MAC_LEN = const(32)
CHAIN_LEN = const(8)
MAX_FRAME = const(200)
MAX_ENCODED = const(203)  # COBS adds one byte per 254 and the 0x00 delimiter
MAX_CHAINED = const(114)  # the longest frame the shoe makes: shoe_end, with its 52-byte inventory
_SEQ_AT = const(10)

# shoe -> host, chained
T_SHOE_START = const(0x01)
T_BURN = const(0x02)
T_INITIAL = const(0x03)
T_RESULT = const(0x04)
T_IRREGULARITY = const(0x05)
T_RESOLUTION = const(0x06)
T_SHOE_END = const(0x07)
T_COMMAND_REJECTED = const(0x08)
# shoe -> host, not chained
T_STATUS = const(0x40)
T_INTEGRITY = const(0x41)
# host -> shoe
C_HELLO = const(0x80)
C_ACK = const(0x81)
C_RESOLVE = const(0x82)
C_NEW_SHOE = const(0x83)
C_INTEGRITY = const(0x85)
C_MAINTENANCE = const(0x86)

# Variant id (flash file "variant", one byte, signed in every shoe_start frame)
# bits 0-1: game, 0 minibaccarat, 1 midibaccarat, 2 baccarat
V_EZ = const(4)
V_COMMISSION_FREE = const(8)
V_SQUEEZE = const(16)
V_DEFAULT = const(2)

# Announcement bits in a result frame (627a.11(a), 631a.12(a), 631c.5(e))
A_TIE_HAND = const(1)
A_DRAGON7 = const(2)
A_PANDA8 = const(4)
A_LUCKY_SIX = const(8)

# Integrity state in status and integrity answers
INTEGRITY_UNCHECKED = const(0)  # a development run from source: no MANIFEST to check against
INTEGRITY_OK = const(1)
INTEGRITY_TILT = const(2)


def build(key, key_id, shoe_id, boot, seq, chain, ftype, payload):
    head = struct.pack(_HEADER, VERSION, ftype, key_id, shoe_id, boot, seq, chain)
    body = head + payload
    return body + key.mac(body)


def parse(frame):
    """(type, key_id, shoe_id, boot, seq, chain, payload, mac) or None when malformed."""
    if len(frame) < HEADER_LEN + MAC_LEN or len(frame) > MAX_FRAME or frame[0] != VERSION:
        return None
    _, ftype, key_id, shoe_id, boot, seq, chain = struct.unpack(_HEADER, frame[:HEADER_LEN])
    return ftype, key_id, shoe_id, boot, seq, chain, frame[HEADER_LEN:-MAC_LEN], frame[-MAC_LEN:]


def signed_part(frame):
    """The bytes the MAC covers."""
    return frame[:-MAC_LEN]


# ---- field accessors ------------------------------------------------------------------------
def type_of(frame):
    return frame[1]


def seq_of(frame):
    return struct.unpack_from(">I", frame, _SEQ_AT)[0]


def is_chained(frame):
    return frame[1] < T_STATUS


def is_command(frame):
    """Host -> shoe: the type's top bit is the frame's direction."""
    return frame[1] >= C_HELLO


def names_cards(frame):
    """Frames that name a hand's cards (withheld under the squeeze procedure until the reveal)."""
    return frame[1] == T_INITIAL or frame[1] == T_RESULT


def link_of(frame):
    """What the next chained frame carries in its chain field: the first 8 bytes of this MAC."""
    return frame[-MAC_LEN : -MAC_LEN + CHAIN_LEN]


# ---- payloads, by type (docs/PROTOCOL.md) -----------------------------------------------------
def shoe_start(shoe_no, decks, variant):
    return struct.pack(">HBB", shoe_no, decks, variant)


def _shoe_round(shoe_no, round_no):
    return struct.pack(">HH", shoe_no, round_no)


def burn(shoe_no, round_no, cards, n):
    return _shoe_round(shoe_no, round_no) + bytes(cards[:n])


def initial(shoe_no, round_no, player, banker):
    return _shoe_round(shoe_no, round_no) + bytes((player[0], banker[0], player[1], banker[1]))


def result(shoe_no, round_no, player, np, banker, nb, dummy, outcome, announcements):
    return (_shoe_round(shoe_no, round_no) + bytes((np << 4 | nb, dummy)) + bytes(player[:np])
            + bytes(banker[:nb]) + struct.pack(">HB", outcome, announcements))


def irregularity(shoe_no, round_no, kind, card, position):
    return _shoe_round(shoe_no, round_no) + struct.pack(">BBH", kind, card, position)


def resolution(shoe_no, round_no, code, kind, card, source, voided, player, banker):
    """voided: the counts of a voided round's cards, player << 4 | banker; the cards follow."""
    return (_shoe_round(shoe_no, round_no) + bytes((code, kind, card, source, voided))
            + bytes(player[: voided >> 4]) + bytes(banker[: voided & 15]))


def shoe_end(shoe_no, round_no, position, inventory, unknown):
    """inventory: the count of each card that left the shoe; unknown: cards out not read."""
    return (_shoe_round(shoe_no, round_no) + struct.pack(">H", position) + inventory
            + struct.pack(">H", unknown))


def command_rejected(reason, ftype, counter):
    return struct.pack(">BBI", reason, ftype, counter)


def status(phase, shoe_no, round_no, position, due, host_counter, acked, unacked_from,
           unacked_to, integrity, refused):
    return struct.pack(">BHHHBIIIIBI", phase, shoe_no, round_no, position, due, host_counter,
                       acked, unacked_from, unacked_to, integrity, refused)


def integrity_answer(state, digest):
    return bytes((state,)) + digest


class Signer:
    """The shoe's identity on the link: it builds and signs every frame the shoe sends."""

    def __init__(self, key, key_id, shoe_id, boot):
        self.key = key
        self.key_id = key_id
        self.shoe_id = shoe_id
        self.boot = boot

    def frame(self, seq, chain, ftype, payload):
        return build(self.key, self.key_id, self.shoe_id, self.boot, seq, chain, ftype, payload)

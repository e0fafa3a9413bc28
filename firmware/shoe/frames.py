"""Link frames, shoe side: the layout, the payload of every frame type, and the field accessors.
Layout (big-endian), before COBS (docs/PROTOCOL.md, version 2):

  version(1) type(1) key_id(2) shoe_id(4) boot(2) seq(4) chain(32) payload(...) signature(64)

The body is every byte before the signature; its digest is SHA-256(body), and the signature (ECDSA
P-256, raw r||s, made by the secure element) signs that digest (a checkpoint's signs its note
instead: shoe/tree.py). `initial_cards` and the commands hello, verify and checkpoint carry no
signature. For the shoe's chained frames `seq` counts up by one and `chain` is the digest of the
previous chained frame's body. Host commands carry the command counter in `seq` and zero
`chain`.

Frames are built in place, in caller-owned buffers (`head_into` and the `*_into` payloads, which
return the payload's length), so the card path allocates nothing. Nothing outside this module
reads a frame's bytes by offset."""

import struct

try:
    from micropython import const
except ImportError:  # CPython (tests): const is only a compiler hint
    def const(x):  # type: ignore[misc]
        return x

VERSION = const(2)
# The shoe id is carried as its 4 bytes and seq is read by byte (seq_of): on a 32-bit port an int
# of 2**30 or more is a long int on the heap, and a shoe id may be that large.
_HEADER = ">BBH4sHI32s"
_PARSED = ">BBH4sH4s32s"  # the same, seq left as bytes
HEADER_LEN = const(46)
SIG_LEN = const(64)
DIGEST_LEN = const(32)
CHAIN_LEN = const(32)
MAX_FRAME = const(200)
MAX_ENCODED = const(203)  # COBS adds one byte per 254 and the 0x00 delimiter
# a status's payload: 39 bytes, then zeros up to MAX_BODY's length (room for later fields, and a
# length whose SHA end the element driver has prepared already: a hello's pass allocates nothing)
STATUS_LEN = const(60)
MAX_BODY = const(106)  # the longest body the shoe makes: shoe_end, with its 52-byte inventory
MAX_CHAINED = const(200)  # the longest chained frame: a maintenance frame (rekey), signed
_SHOE_AT = const(4)
_SEQ_AT = const(10)
ZERO_CHAIN = bytes(CHAIN_LEN)

# shoe -> host, chained
T_SHOE_START = const(0x01)
T_BURN = const(0x02)
T_INITIAL = const(0x03)
T_RESULT = const(0x04)
T_IRREGULARITY = const(0x05)
T_RESOLUTION = const(0x06)
T_SHOE_END = const(0x07)
T_COMMAND_REJECTED = const(0x08)
T_MAINTENANCE = const(0x09)  # an update or rekey: who asked (command counter, name) and what
T_BLACKJACK_RESULT = const(0x0A)  # a blackjack round (shoe/blackjack.py result_into)
T_RESULT21 = const(0x0B)  # a 21 Baccarat round (result21_into)
# shoe -> host, not chained
T_STATUS = const(0x40)
T_INTEGRITY = const(0x41)
T_UPDATE_PROGRESS = const(0x42)  # unsigned: the update chunk the shoe took (pacing only)
T_CHECKPOINT = const(0x43)  # the shoe's log head, its note signed (shoe/tree.py)
# host -> shoe
C_HELLO = const(0x80)
C_ACK = const(0x81)
C_RESOLVE = const(0x82)
C_NEW_SHOE = const(0x83)
C_INTEGRITY = const(0x85)
C_UPDATE = const(0x87)  # signed, counted: an update of length L whose chunk chain starts at H
C_UPDATE_DATA = const(0x88)  # unsigned: one chunk, authenticated by the chain C_UPDATE anchors
C_REKEY = const(0x89)  # signed, counted: the element makes the next result key version
C_CHECKPOINT = const(0x8A)  # unsigned: sign (or send again) a checkpoint of the shoe's log


# Variant id (flash file "variant": this byte, then the deck count; both signed in every
# shoe_start frame; 21 Baccarat's two rule bytes follow: shoe/b21.py)
# bits 0-1: game, 0 minibaccarat, 1 midibaccarat, 2 baccarat, 3 blackjack; bit 7 with game 2:
# 21 Baccarat
V_EZ = const(4)
V_COMMISSION_FREE = const(8)
V_SQUEEZE = const(16)
V_BLACKJACK = const(3)
V_H17 = const(32)  # blackjack: the dealer draws to a soft 17
V_NO_HOLE = const(64)  # blackjack: no hole card (the dealer's second card at the dealer's turn)
V_DEFAULT = const(2)
V_B21 = const(128)

# Announcement bits in a result frame (627a.11(a), 631a.12(a), 631c.5(e))
A_TIE_HAND = const(1)
A_DRAGON7 = const(2)
A_PANDA8 = const(4)
A_LUCKY_SIX = const(8)

# Integrity state in status and integrity answers
INTEGRITY_UNCHECKED = const(0)  # a development run from source: no MANIFEST to check against
INTEGRITY_OK = const(1)
INTEGRITY_TILT = const(2)
# why a shoe is tilted (status): its code is not the signed build, its log could not be read, no
# secure element answers (or not sabot's), its boot counter is at its end
TILT_CODE = const(1)
TILT_LOG = const(2)
TILT_ELEMENT = const(3)
TILT_BOOTS = const(4)

# Status flags (the status payload's last byte)
S_FLASH_LOW = const(1)  # the flash cannot take another whole shoe: a new shoe is refused
S_WITHHELD = const(2)  # squeeze: due and position are sent as 0 until the reveal


def signed(ftype):
    """Every frame is signed but initial_cards (sealed by the next signed frame), the update
    progress answer (it only paces the host), the commands hello, verify and checkpoint (each
    only asks for a signed answer), and update chunks
    (each authenticated by the hash chain its signed C_UPDATE anchors: shoe/update.py)."""
    return not (ftype == T_INITIAL or ftype == C_HELLO or ftype == C_INTEGRITY
                or ftype == C_UPDATE_DATA or ftype == T_UPDATE_PROGRESS
                or ftype == C_CHECKPOINT)


def shoe_bytes(shoe_id):
    """A shoe id as the 4 bytes frames carry, which is how the firmware holds it (made once, at
    boot: the id may be too large for a small int)."""
    return struct.pack(">I", shoe_id)


def head_into(buf, at, ftype, key_id, shoe, boot, seq, chain=ZERO_CHAIN):
    """The header at buf[at:] (`shoe`: the shoe id's 4 bytes; seq < 2**30, see seq_of); the
    payload goes at at + HEADER_LEN."""
    struct.pack_into(_HEADER, buf, at, VERSION, ftype, key_id, shoe, boot, seq, chain)


def build(key_id, shoe_id, boot, seq, chain, ftype, payload):
    """A frame's body as bytes (tests and the rare paths that may allocate)."""
    buf = bytearray(HEADER_LEN + len(payload))
    head_into(buf, 0, ftype, key_id, shoe_bytes(shoe_id), boot, seq, bytes(chain))
    buf[HEADER_LEN:] = payload
    return bytes(buf)


def parse(frame):
    """(type, key_id, shoe (the id's 4 bytes), boot, seq (seq_of), chain, payload, signature) or
    None when malformed; signature is b"" for the unsigned types."""
    if len(frame) < HEADER_LEN or len(frame) > MAX_FRAME or frame[0] != VERSION:
        return None
    _, ftype, key_id, shoe_id, boot, _, chain = struct.unpack(_PARSED, frame[:HEADER_LEN])
    seq = seq_of(frame)
    if not signed(ftype):
        return ftype, key_id, shoe_id, boot, seq, chain, frame[HEADER_LEN:], b""
    if len(frame) < HEADER_LEN + SIG_LEN:
        return None
    return (ftype, key_id, shoe_id, boot, seq, chain, frame[HEADER_LEN:-SIG_LEN],
            frame[-SIG_LEN:])


def body_len(frame):
    """The length of the part the digest covers: all but a signature."""
    return len(frame) - SIG_LEN if signed(frame[1]) else len(frame)


# ---- field accessors (by byte, so reading one allocates nothing) ----------------------------
def type_of(frame, at=0):
    return frame[at + 1]


def seq_at(buf, i):
    """The big-endian 4-byte number at buf[i:]; -1 when it is 2**30 or more (see seq_of)."""
    if buf[i] & 0xC0:
        return -1
    return buf[i] << 24 | buf[i + 1] << 16 | buf[i + 2] << 8 | buf[i + 3]


def seq_of(frame, at=0):
    """The seq field; -1 when it is 2**30 or more. The shoe numbers fewer frames than that in its
    life (about 200 a shoe: five million shoes), so such a frame is none of its own, and a host
    command's counter that large is never the element's next (its counters stop at 2**21)."""
    return seq_at(frame, at + _SEQ_AT)


def same_shoe(frame, shoe):
    """The frame names this shoe (`shoe`: its id's 4 bytes); b"\0\0\0\0" names any shoe."""
    for i in range(4):  # noqa: SIM110  (a loop, not all(): no generator on the heap)
        if frame[_SHOE_AT + i] != shoe[i]:
            return False
    return True


def is_chained(frame, at=0):
    return frame[at + 1] < T_STATUS


def is_command(frame, at=0):
    """Host -> shoe: the type's top bit is the frame's direction."""
    return frame[at + 1] >= C_HELLO


def names_cards(ftype):
    """Frames that name a hand's cards (withheld under the squeeze procedure until the reveal)."""
    return ftype == T_INITIAL or ftype == T_RESULT or ftype == T_RESULT21


# ---- payloads, by type (docs/PROTOCOL.md): written at buf[at:], their length returned --------
def _cards_into(buf, at, cards, n):
    for i in range(n):
        buf[at + i] = cards[i]
    return n


def shoe_start_into(buf, at, shoe_no, decks, variant, rules=None):
    """`rules`: 21 Baccarat's two rule bytes (shoe/b21.py), announced after the variant."""
    struct.pack_into(">HBB", buf, at, shoe_no, decks, variant)
    if rules is None:
        return 4
    buf[at + 4] = rules.p
    buf[at + 5] = rules.b
    return 6


def burn_into(buf, at, shoe_no, round_no, cards, n):
    struct.pack_into(">HH", buf, at, shoe_no, round_no)
    return 4 + _cards_into(buf, at + 4, cards, n)


def initial_into(buf, at, shoe_no, round_no, player, banker):
    struct.pack_into(">HHBBBB", buf, at, shoe_no, round_no, player[0], banker[0], player[1],
                     banker[1])
    return 8


def result_into(buf, at, shoe_no, round_no, player, np, banker, nb, dummy, outcome,
                announcements):
    struct.pack_into(">HHBB", buf, at, shoe_no, round_no, np << 4 | nb, dummy)
    i = at + 6
    i += _cards_into(buf, i, player, np)
    i += _cards_into(buf, i, banker, nb)
    struct.pack_into(">HB", buf, i, outcome, announcements)
    return i + 3 - at


def result21_into(buf, at, shoe_no, round_no, player, np, banker, nb, dummy, rules, outcome):
    """A 21 Baccarat round: shoe(2) round(2) counts(1: np << 4 | nb) dummy(1) the two rule
    bytes, the Player's cards, the Banker's, then the outcome (shoe/b21.py Rules21.outcome)."""
    struct.pack_into(">HHBBBB", buf, at, shoe_no, round_no, np << 4 | nb, dummy, rules.p, rules.b)
    i = at + 8
    i += _cards_into(buf, i, player, np)
    i += _cards_into(buf, i, banker, nb)
    buf[i] = outcome
    return i + 1 - at


def irregularity_into(buf, at, shoe_no, round_no, kind, card, position):
    struct.pack_into(">HHBBH", buf, at, shoe_no, round_no, kind, card, position)
    return 8


def resolution_into(buf, at, shoe_no, round_no, code, kind, card, source, voided, player,
                    banker):
    """voided: the counts of a voided round's cards, player << 4 | banker; the cards follow."""
    struct.pack_into(">HHBBBBB", buf, at, shoe_no, round_no, code, kind, card, source, voided)
    i = at + 9
    i += _cards_into(buf, i, player, voided >> 4)
    i += _cards_into(buf, i, banker, voided & 15)
    return i - at


def shoe_end_into(buf, at, shoe_no, round_no, position, inventory, unknown):
    """inventory: the count of each card that left the shoe; unknown: cards out not read."""
    struct.pack_into(">HHH", buf, at, shoe_no, round_no, position)
    _cards_into(buf, at + 6, inventory, 52)
    struct.pack_into(">H", buf, at + 58, unknown)
    return 60


def command_rejected_into(buf, at, reason, ftype, counter):
    struct.pack_into(">BBI", buf, at, reason, ftype, counter)
    return 6


def status_into(buf, at, phase, shoe_no, round_no, position, due, host_counter, acked,
                unacked_from, unacked_to, integrity, refused, flags=0, bad_key=0, unlogged=0,
                tilt=0):
    """bad_key: refused commands signed by another key; unlogged: refused commands counted, not
    kept as frames (the flash's reserve); tilt: why a tilted shoe tilted (TILT_*)."""
    struct.pack_into(">BHHHBIIIIBIBIIB", buf, at, phase, shoe_no, round_no, position, due,
                     host_counter, acked, unacked_from, unacked_to, integrity, refused, flags,
                     bad_key, unlogged, tilt)
    for i in range(at + 39, at + STATUS_LEN):
        buf[i] = 0
    return STATUS_LEN


def integrity_into(buf, at, state, digest):
    buf[at] = state
    buf[at + 1 : at + 33] = digest
    return 33

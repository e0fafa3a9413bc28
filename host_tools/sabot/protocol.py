"""The link's wire vocabulary, host side (docs/PROTOCOL.md, version 2): frame layout, type numbers,
the names of every coded field, parsing, signatures and payload decoding. Parsed with struct and
verified with `cryptography` (ECDSA P-256), independently of the firmware's codec. COBS framing
(the `cobs` package), 0x00 delimiter."""

from __future__ import annotations

import struct
from hashlib import sha256
from typing import Any, NamedTuple

from cobs import cobs
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, utils

from sabot import frames21, note, tlog
from sabot.errors import SabotError
from sabot.game import baccarat21 as b21
from sabot.game import rules
from sabot.game.blackjack import PRESSES as PRESS_NAMES
from sabot.game.cards import card_code

# ---- frame layout ----------------------------------------------------------------------------
VERSION = 2
HEADER = struct.Struct(">BBHIHI32s")  # version type key_id shoe_id boot seq chain
SIG_LEN = 64  # ECDSA P-256, raw r||s
DIGEST_LEN = 32
ZERO_CHAIN = bytes(DIGEST_LEN)
MAX_FRAME = 200
MAX_ENCODED = MAX_FRAME + 3


def shoe_id_text(shoe_id: int | None) -> str:
    """A shoe id (the header's 32-bit field) as every line a person reads names it: 0x and 8 hex
    digits, e.g. 0xdeadbeef. JSON keeps the integer; an input takes decimal or 0x hex."""
    return f"{shoe_id:#010x}" if isinstance(shoe_id, int) else "unknown"


# ---- frame types: shoe -> host, chained ------------------------------------------------------
T_SHOE_START, T_BURN, T_INITIAL_CARDS, T_RESULT = 0x01, 0x02, 0x03, 0x04
T_IRREGULARITY, T_RESOLUTION, T_SHOE_END, T_COMMAND_REJECTED = 0x05, 0x06, 0x07, 0x08
T_MAINTENANCE = 0x09  # an update or a rekey: who asked, what, the MANIFEST digest or the new key
# a blackjack round's result (firmware/shoe/blackjack.py result_into), or a voided round's cards
T_BLACKJACK_RESULT = 0x0A
T_RESULT21 = 0x0B
# shoe -> host, not chained
T_STATUS, T_INTEGRITY = 0x40, 0x41
T_UPDATE_PROGRESS = 0x42  # unsigned, never stored: the update chunk the shoe took (pacing)
# the shoe's log head: seq its size, chain the digest of frame `size`, payload the root; its
# signature signs the C2SP checkpoint note (checkpoint_text), not the body
T_CHECKPOINT = 0x43
TYPES = {T_SHOE_START: "shoe_start", T_BURN: "burn", T_INITIAL_CARDS: "initial_cards",
         T_RESULT: "result", T_IRREGULARITY: "irregularity", T_RESOLUTION: "resolution",
         T_SHOE_END: "shoe_end", T_COMMAND_REJECTED: "command_rejected",
         T_MAINTENANCE: "maintenance", T_BLACKJACK_RESULT: "blackjack_result",
         T_RESULT21: "result",  # a 21 Baccarat round: its record says "game": "21-baccarat"
         T_STATUS: "status", T_INTEGRITY: "integrity",
         T_UPDATE_PROGRESS: "update_progress", T_CHECKPOINT: "checkpoint"}
CHAINED = frozenset(t for t in TYPES if t < T_STATUS)

# ---- host -> shoe commands -------------------------------------------------------------------
C_HELLO, C_ACK, C_RESOLVE, C_NEW_SHOE = 0x80, 0x81, 0x82, 0x83
C_VERIFY = 0x85
C_UPDATE, C_UPDATE_DATA, C_REKEY = 0x87, 0x88, 0x89
C_CHECKPOINT = 0x8A  # unsigned: the shoe signs a checkpoint of its log (or sends its last again)
# frames that carry no signature: initial_cards is sealed by the next signed frame of the shoe;
# an update chunk is authenticated by the hash chain its signed C_UPDATE anchors; the update
# progress answer only paces the sender
UNSIGNED = frozenset((T_INITIAL_CARDS, C_HELLO, C_VERIFY, C_UPDATE_DATA, T_UPDATE_PROGRESS,
                      C_CHECKPOINT))

# ---- coded fields, by their wire number --------------------------------------------------------
PHASES = ("burn_first", "burn", "dealing", "held", "ended")
PH_HELD, PH_ENDED = PHASES.index("held"), PHASES.index("ended")
INTEGRITY = ("unchecked", "ok", "tilt")
DUE = ("none", "player", "banker")
IRREGULARITIES = ("", "card_not_due", "unreadable_card", "two_cards", "inventory_exceeded",
                  "foreign_card", "card_missing", "cards_exhausted", "unreadable_burn_card",
                  "cut_card_in_burn", "second_cut_card", "press_refused", "disputed")
# what each irregularity adds to the shoe's accounting of cards out: the card it names, one
# unknown card, or nothing (a burned card not read is in the burn frame; the cut card is no card)
COUNTS_ITS_CARD = frozenset(("card_not_due", "two_cards", "inventory_exceeded"))
COUNTS_UNKNOWN = frozenset(("unreadable_card", "foreign_card"))
HOLDS = frozenset(IRREGULARITIES[1:]) - {"unreadable_burn_card"}
BLACKJACK_HOLDS = frozenset(("press_refused", "disputed"))  # a blackjack shoe's only
CARD_MISSING = IRREGULARITIES.index("card_missing")
CARDS_EXHAUSTED = IRREGULARITIES.index("cards_exhausted")
RESOLUTIONS = ("", "void_card", "keep_dummy", "void_round", "end_shoe")
VOID_CARD, KEEP_DUMMY, VOID_ROUND, END_SHOE = 1, 2, 3, 4
SOURCES = ("supervisor", "host")
# why the shoe refused an authentic command (frames failing authentication are only counted)
COMMAND_REJECTIONS = ("", "bad_signature", "replayed", "not_for_this_shoe", "not_now",
                      "unknown_command", "flash_low", "keys_exhausted", "no_round_since_rekey")
S_FLASH_LOW, S_WITHHELD = 1, 2  # status flags
TILTS = ("", "code_not_the_signed_build", "log_unreadable", "no_secure_element", "boots_spent")
# what a maintenance frame records, and why an update was refused (shoe/update.py)
MAINTENANCE = ("", "update_begun", "update_applied", "update_refused", "rekey",
               "rekey_certificate")
UPDATE_REFUSALS = ("", "interrupted", "not_a_code_tree", "code_differs_from_manifest",
                   "not_signed_by_the_release_key", "flash_write_failed", "manifest_malformed",
                   "element_error", "no_code_tree", "older_than_running",
                   "built_for_another_board", "no_room_beside_the_log", "abandoned")
BY_LEN = 16
WINNERS = {1: "player", 2: "banker", 3: "tie"}
FLAG_BITS = (("banker_natural", 8), ("banker_pair", 256), ("dragon7", 16), ("lucky_six", 64),
             ("panda8", 32), ("player_natural", 4), ("player_pair", 128))
ANNOUNCEMENTS = ((1, "tie hand"), (2, "Dragon 7"), (4, "Panda 8"), (8, "Lucky Six"))
GAMES = ("minibaccarat", "midibaccarat", "baccarat")
CARD_NAMES: list[str | None] = [card_code(b) for b in range(52)] + ["CUT"] + [None] * 203


class FrameError(Exception):
    """A frame refused; `reason` is the validator's rejection reason (docs/PROTOCOL.md)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Frame(NamedTuple):
    raw: bytes
    type: int
    key_id: int
    shoe_id: int
    boot: int
    seq: int
    chain: bytes
    payload: bytes
    signature: bytes  # raw r||s; b"" for a frame that carries none
    body: bytes  # every byte before the signature
    digest: bytes  # SHA-256(body): what the signature signs, what the next frame's chain holds

    @property
    def signed(self) -> bool:
        return bool(self.signature)


# ---- variant byte: game 0-2, +4 EZ, +8 commission-free, +16 squeeze; 3 blackjack, +32 the dealer
# draws to a soft 17, +64 no hole card ------------------------------------------------------------
BLACKJACK = 3


def decode_variant(v: int, rules: bytes = b"") -> dict[str, Any]:
    """The game a variant byte names; 21 Baccarat's with the settings its rule bytes give."""
    if v == frames21.VARIANT:
        return {"game": b21.GAME, **frames21.decode_rules(rules)}
    if v & 3 == BLACKJACK:
        return {"game": "blackjack", "dealer": "h17" if v & 32 else "s17",
                "hole_card": not v & 64}
    return {"game": GAMES[v & 3], "ez": bool(v & 4), "commission_free": bool(v & 8),
            "squeeze": bool(v & 16)}


def blackjack_variant_byte(dealer: str = "s17", hole_card: bool = True) -> int:
    return BLACKJACK | (32 if dealer == "h17" else 0) | (0 if hole_card else 64)


def variant_byte(game: str = "baccarat", ez: bool = False, commission_free: bool = False,
                 squeeze: bool = False) -> int:
    """The shoe's variant id (firmware/shoe/app.py V_*), signed in every shoe_start frame."""
    if game not in GAMES:
        raise SabotError(f"unknown game {game!r}: one of {', '.join(GAMES)}")
    if ez and commission_free:
        raise SabotError("EZ and commission-free are different games; pick one")
    return GAMES.index(game) | ez << 2 | commission_free << 3 | squeeze << 4


# ---- framing -----------------------------------------------------------------------------------
def encode_frame(raw: bytes) -> bytes:
    """A raw frame as it goes on the line: COBS, then the 0x00 delimiter."""
    return cobs.encode(raw) + b"\x00"


def decode_frame(encoded: bytes) -> bytes:
    """The raw frame inside one encoded frame (its delimiter already taken off by the Deframer)."""
    try:
        return cobs.decode(encoded)
    except cobs.DecodeError:
        raise FrameError("bad_framing") from None


class Deframer:
    """Splits a byte stream into encoded frames at zero bytes; bounded, resyncs after noise."""

    def __init__(self) -> None:
        self.buf = bytearray()
        # inside a run longer than any frame: noise up to its 0x00, however the reads cut it
        # (so a capture's replay, read in other pieces, deframes the same frames)
        self.noise = False

    def feed(self, data: bytes) -> list[bytes]:
        out: list[bytes] = []
        start = 0
        while True:
            z = data.find(b"\x00", start)
            if z < 0:
                if not self.noise:
                    self.buf += data[start:]
                    if len(self.buf) > MAX_ENCODED:
                        self.buf.clear()  # longer than any frame: noise
                        self.noise = True
                return out
            if not self.noise:
                self.buf += data[start:z]
                if self.buf and len(self.buf) <= MAX_ENCODED:
                    out.append(bytes(self.buf))
            self.buf.clear()
            self.noise = False
            start = z + 1


def parse(raw: bytes) -> Frame:
    """The frame's fields; FrameError when the bytes are not a well-formed frame."""
    if len(raw) > MAX_FRAME:
        raise FrameError("too_long")
    if len(raw) < HEADER.size:
        raise FrameError("too_short")
    if raw[0] != VERSION:
        raise FrameError("bad_version")
    _, ftype, key_id, shoe_id, boot, seq, chain = HEADER.unpack_from(raw)
    if ftype in UNSIGNED:
        body, sig = raw, b""
    else:
        if len(raw) < HEADER.size + SIG_LEN:
            raise FrameError("too_short")
        body, sig = raw[:-SIG_LEN], raw[-SIG_LEN:]
    payload = body[HEADER.size :]
    if ftype == T_CHECKPOINT:
        # its signature covers the note, not the header: a chain other than the zero the shoe
        # sends would be an unsigned field someone put there
        if len(payload) != DIGEST_LEN or chain != ZERO_CHAIN:
            raise FrameError("malformed_payload")
        # what the element signed: the note's text, whose first byte ('s') no body has (0x02)
        signed = checkpoint_text(shoe_id, seq, payload).encode()
    else:
        signed = body
    return Frame(raw, ftype, key_id, shoe_id, boot, seq, chain, payload, sig, body,
                 sha256(signed).digest())


def checkpoint_text(shoe_id: int, size: int, root: bytes) -> str:
    """The C2SP checkpoint a shoe's T_CHECKPOINT frame signs (firmware/shoe/tree.py)."""
    return tlog.Checkpoint(tlog.origin(shoe_id), size, root).text()


def checkpoint_note(f: Frame, public_key: ec.EllipticCurvePublicKey) -> str:
    """A checkpoint frame as the C2SP signed note it is (`public_key`: the registry's key of the
    frame's key_id)."""
    return signed_checkpoint(f.shoe_id, f.seq, f.payload, f.signature, public_key)


def signed_checkpoint(shoe_id: int, size: int, root: bytes, signature: bytes,
                      public_key: ec.EllipticCurvePublicKey) -> str:
    """A checkpoint the shoe signed (`signature`: the element's r||s over its text) as a C2SP
    signed note: the text, then the signature line (type 0x02, DER), named by the log's origin
    and keyed by `public_key`."""
    origin = tlog.origin(shoe_id)
    der = utils.encode_dss_signature(int.from_bytes(signature[:32], "big"),
                                     int.from_bytes(signature[32:], "big"))
    return (checkpoint_text(shoe_id, size, root) + "\n"
            + note.signature_line(origin, note.ecdsa_verifier(origin, public_key).id, der))


# ---- signatures and building -------------------------------------------------------------------
_PREHASHED = ec.ECDSA(utils.Prehashed(hashes.SHA256()))


# P-256's group order: a frame's s is at most (n - 1) / 2 (low-S). Both (r, s) and (r, n - s)
# verify, and a frame's exact bytes are a leaf of the shoe's log, so only one form is taken:
# the one the shoe sends (firmware/shoe/element_wire.py low_s)
P256_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551


def sign_digest(private_key: ec.EllipticCurvePrivateKey, digest: bytes) -> bytes:
    """Raw r||s (32 + 32 bytes, big-endian, low-S) over a SHA-256 digest, as the element signs."""
    r, s = utils.decode_dss_signature(private_key.sign(digest, _PREHASHED))
    s = min(s, P256_ORDER - s)
    return r.to_bytes(32, "big") + s.to_bytes(32, "big")


def verify_digest(public_key: ec.EllipticCurvePublicKey, digest: bytes, signature: bytes) -> bool:
    """Whether `signature` (raw r||s, low-S) signs `digest` under `public_key`."""
    if len(signature) != SIG_LEN or int.from_bytes(signature[32:], "big") > P256_ORDER // 2:
        return False
    der = utils.encode_dss_signature(int.from_bytes(signature[:32], "big"),
                                     int.from_bytes(signature[32:], "big"))
    try:
        public_key.verify(der, digest, _PREHASHED)
    except InvalidSignature:
        return False
    return True


def verify(public_key: ec.EllipticCurvePublicKey, frame: Frame) -> bool:
    """Whether a signed frame carries a valid signature of `public_key` over its body (an
    unsigned frame verifies nothing on its own: it is sealed by the next signed frame)."""
    return frame.signed and verify_digest(public_key, frame.digest, frame.signature)


def build(private_key: ec.EllipticCurvePrivateKey | None, key_id: int, shoe_id: int, boot: int,
          seq: int, chain: bytes, ftype: int, payload: bytes) -> bytes:
    """A raw frame; signed unless its type carries none (then `private_key` may be None)."""
    body = HEADER.pack(VERSION, ftype, key_id, shoe_id, boot, seq, chain) + payload
    if ftype in UNSIGNED:
        return body
    if private_key is None:
        raise ValueError(f"frame type 0x{ftype:02x} must be signed")
    return body + sign_digest(private_key, sha256(body).digest())


def digest(raw_body: bytes) -> bytes:
    return sha256(raw_body).digest()


def command(command_key: ec.EllipticCurvePrivateKey | None, shoe_id: int, counter: int,
            ftype: int, payload: bytes = b"") -> bytes:
    """An encoded host -> shoe command, ready to write to the port: key_id 0, boot 0, chain zero,
    signed with the host command key (hello and verify go unsigned)."""
    return encode_frame(build(command_key, 0, shoe_id, 0, counter, ZERO_CHAIN, ftype, payload))


# ---- payloads ----------------------------------------------------------------------------------
def _name(names: tuple[str, ...], code: int) -> str | int:
    return names[code] if code < len(names) else code  # a newer firmware's code stays visible


def refused_for_key(status: dict[str, Any]) -> int:
    """The refusals in a status that say a command was signed by another key: `refused_bad_key`,
    or, from a firmware that does not tell its refusals apart, every one refused."""
    bad = status.get("refused_bad_key")
    return int(status["refused"] if bad is None else bad)


def blackjack_due(due: int) -> str:
    """A blackjack shoe's `due`: "seat N" (its hand takes the next card), "dealer", "confirm"
    (the round's cards are out: the dealer's confirm of its hands), or "none"."""
    return {0xFF: "none", 0xFE: "dealer", 0xFD: "confirm"}.get(due, f"seat {due}")


def decode_status(payload: bytes, blackjack: bool = False) -> dict[str, Any]:
    """A status frame's payload: where the shoe stands and what it holds unacknowledged
    (`blackjack`: a blackjack shoe's, whose `due` names a hand)."""
    if len(payload) == 29:
        payload += b"\x00"  # a firmware before the flags byte
    causes = len(payload) != 30  # a firmware before the refusals' causes and the tilt's: None
    if not causes:
        payload += bytes(9)
    elif len(payload) == 60:
        payload = payload[:39]  # then zeros, room for later fields
    try:
        (phase, shoe, rnd, position, due, host_counter, acked, first, last, integ,
         refused, flags, bad_key, unlogged, tilt) = struct.unpack(">BHHHBIIIIBIBIIB", payload)
    except struct.error:
        raise FrameError("malformed_payload") from None
    return {"phase": _name(PHASES + ("tilt",), phase), "shoe": shoe, "round": rnd,
            "integrity": _name(INTEGRITY, integ), "position": position,
            "due": blackjack_due(due) if blackjack else _name(DUE, due),
            "host_counter": host_counter, "acked": acked, "unacked_from": first,
            "unacked_to": last, "refused": refused,
            # of the refused frames, commands signed by another key than the command key
            "refused_bad_key": bad_key if causes else None,
            # refused commands counted, not kept as frames (the flash's reserve holds 16)
            "refusals_unlogged": unlogged if causes else None,
            "tilt": _name(TILTS, tilt) if tilt else None,  # why a tilted shoe tilted
            "flash_low": bool(flags & S_FLASH_LOW),  # a new shoe is refused until acks free it
            "withheld": bool(flags & S_WITHHELD)}  # squeeze: due and position are not sent


def decode_payload(f: Frame) -> tuple[str, dict[str, Any]]:
    """(kind, record) for a chained frame's payload; FrameError when it does not fit its type."""
    try:
        return _decode_payload(f.type, f.payload)
    except (struct.error, IndexError, ValueError, KeyError, TypeError):
        raise FrameError("malformed_payload") from None


def _decode_payload(ftype: int, p: bytes) -> tuple[str, dict[str, Any]]:
    kind = TYPES[ftype]
    if kind == "shoe_start":
        shoe, decks, variant = struct.unpack(">HBB", p[:4])
        if len(p) != (6 if variant == frames21.VARIANT else 4):
            raise ValueError(kind)
        return kind, {"event": kind, "shoe": shoe, "decks": decks,
                      "variant": decode_variant(variant, p[4:])}
    if kind == "command_rejected":
        reason, refused, counter = struct.unpack(">BBI", p)
        return kind, {"event": kind, "reason": COMMAND_REJECTIONS[reason], "command": refused,
                      "counter": counter}
    if kind == "maintenance":
        return kind, decode_maintenance(p)
    if kind == "blackjack_result":
        return kind, decode_blackjack_result(p)
    shoe, rnd = struct.unpack(">HH", p[:4])
    body = p[4:]
    if kind == "burn":
        return kind, {"event": kind, "shoe": shoe, "cards": [CARD_NAMES[b] for b in body]}
    if kind == "initial_cards":
        if len(body) != 4:
            raise ValueError(kind)
        c = [CARD_NAMES[b] for b in body]
        return kind, {"event": kind, "shoe": shoe, "round": rnd, "player": [c[0], c[2]],
                      "banker": [c[1], c[3]]}
    if ftype == T_RESULT21:
        return kind, {"event": kind, **frames21.decode_result(shoe, rnd, body)}
    if kind == "result":
        return kind, _decode_result(shoe, rnd, body)
    if kind == "irregularity":
        k, card, position = struct.unpack(">BBH", body)
        return kind, {"event": kind, "shoe": shoe, "round": rnd, "kind": IRREGULARITIES[k],
                      "card": CARD_NAMES[card], "position": position}
    if kind == "resolution":
        code, k, card, source, counts = body[:5]
        voided = [CARD_NAMES[b] for b in body[5 : 5 + (counts >> 4) + (counts & 15)]]
        return kind, {"event": kind, "shoe": shoe, "round": rnd, "resolution": RESOLUTIONS[code],
                      "kind": IRREGULARITIES[k], "card": CARD_NAMES[card],
                      "source": SOURCES[source], "voided_cards": voided}
    if kind == "shoe_end":
        position, inv, unknown = struct.unpack(">H52sH", body)
        return kind, {"event": kind, "shoe": shoe, "rounds": rnd, "position": position,
                      "inventory": {card_code(i): n for i, n in enumerate(inv) if n},
                      "unknown": unknown}
    raise KeyError(kind)  # status and integrity carry no record


# blackjack: the dealer's presses by kind, 1..3 (firmware/shoe/blackjack.py PRESS_*); among a
# round's events, a press taken is PRESS_EVENT | its kind
PRESSES = dict(enumerate(PRESS_NAMES, 1))
PRESS_EVENT = 0xF0
BLACKJACK_PRESSES = {PRESS_EVENT | kind: name for kind, name in PRESSES.items()}
BLACKJACK_DEALER = 15  # the dealer's hand, in a result's nibbles


def decode_blackjack_result(p: bytes) -> dict[str, Any]:
    """A blackjack result's payload: shoe(2) round(2) seats(1: bit s-1 seat s) rule(1: 1 the
    dealer draws to a soft 17, 2 a hole card, 4 voided: a supervisor voided the round, its cards
    are only accounted) n(1), n events (a card as read, 0xF1 next, 0xF2
    double, 0xF3 split: the presses taken), then the hand each card is in, a nibble each (high
    first; 15 the dealer's). ValueError when it does not fit."""
    if len(p) < 7:
        raise ValueError("blackjack_result")
    shoe, rnd, seats, rule, n = struct.unpack(">HHBBB", p[:7])
    raw = p[7 : 7 + n]
    if len(raw) != n or seats == 0 or seats >> 7 or rule >> 3:
        raise ValueError("blackjack_result")
    events: list[tuple[str, str]] = []
    for b in raw:
        if b in BLACKJACK_PRESSES:
            events.append(("press", BLACKJACK_PRESSES[b]))
        elif b < 52:
            events.append(("card", card_code(b)))
        else:
            raise ValueError("blackjack_result")
    cards = sum(1 for kind, _ in events if kind == "card")
    nibbles = p[7 + n :]
    if len(nibbles) != (cards + 1) // 2:
        raise ValueError("blackjack_result")
    hands = [(nibbles[k // 2] >> (0 if k % 2 else 4)) & 15 for k in range(cards)]
    if cards % 2 and nibbles[-1] & 15:
        raise ValueError("blackjack_result")  # the last byte's spare nibble is 0
    return {"event": "blackjack_result", "shoe": shoe, "round": rnd,
            "seats": [s + 1 for s in range(7) if seats >> s & 1],
            "dealer_rule": "h17" if rule & 1 else "s17", "hole_card": bool(rule & 2),
            "voided": bool(rule & 4), "events": events,
            "placed": ["dealer" if h == BLACKJACK_DEALER else h for h in hands]}


def decode_maintenance(p: bytes) -> dict[str, Any]:
    """what(1) counter(4) by(16) detail: who asked (the command counter and the name the host
    signed into the command) and what was done."""
    what, counter = p[0], struct.unpack(">I", p[1:5])[0]
    # the name is the host's, signed as it sent it: anything but printable ASCII is shown as
    # U+FFFD (a NUL inside it is no text a database keeps)
    by = "".join(chr(b) if 0x20 <= b < 0x7F else "\ufffd" for b in p[5 : 5 + BY_LEN].rstrip(b"\0"))
    detail = p[5 + BY_LEN :]
    rec: dict[str, Any] = {"event": "maintenance", "what": MAINTENANCE[what],
                           "counter": counter, "by": by}
    if what == 1:
        length, head = struct.unpack(">I32s", detail)
        rec.update(length=length, chain_head=head.hex())
    elif what == 2:
        digest, version = struct.unpack(">32sI", detail)
        rec.update(manifest=digest.hex(), version=version)
    elif what == 3:
        reason, digest, version = struct.unpack(">B32sI", detail)
        rec.update(reason=_name(UPDATE_REFUSALS, reason), manifest=digest.hex(), version=version)
    elif what in (4, 5):
        version, material = struct.unpack(">H64s", detail)
        rec.update(version=version)
        rec["public_key" if what == 4 else "certificate"] = material.hex()
    return rec


def maintenance_by(name: str) -> bytes:
    """The `by` field of an update or rekey command: who asks, ASCII, at most 16 bytes."""
    return name.encode("ascii", "replace")[:BY_LEN]


def _decode_result(shoe: int, rnd: int, body: bytes) -> dict[str, Any]:
    np, nb, dummy = body[0] >> 4, body[0] & 15, body[1]
    if not (2 <= np <= 3 and 2 <= nb <= 3) or len(body) != 5 + np + nb:
        raise ValueError("result")
    cards = [CARD_NAMES[b] for b in body[2 : 2 + np + nb]]
    o, ann = struct.unpack(">HB", body[2 + np + nb :])
    known = [c for c in cards if c is not None]
    complete = len(known) == len(cards)
    rec: dict[str, Any] = {
        "shoe": shoe, "round": rnd, "player": cards[:np], "banker": cards[np:],
        "player_total": rules.point_count(known[:np]) if complete else None,
        "banker_total": rules.point_count(known[np:]) if complete else None,
        "winner": WINNERS.get(o & 3), "flags": [n for n, bit in FLAG_BITS if o & bit]}
    if dummy:
        rec["dummy"] = True
    rec["announcements"] = [name for bit, name in ANNOUNCEMENTS if ann & bit]
    return rec

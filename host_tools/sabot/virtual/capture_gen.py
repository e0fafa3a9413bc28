"""Shoe traffic at host speed, without a board: shuffled shoes dealt by the host's rules
(rules.deal_shoe) and framed as a version-2 shoe sends them (docs/PROTOCOL.md) — chained by
digest, signed with a result key, `initial_cards` unsigned and sealed by the result after it.
For benchmarks of the validator and host-only tests; tests of the firmware itself use the real
MicroPython on the virtual board.

The signing key stands in for a shoe's secure element: a generated P-256 key (written beside the
capture as `result.pem`, mode 0600), or one given (e.g. an emulator store's `slot0.pem`). Its
public half is registered in the returned registry entry as key version 1."""

from __future__ import annotations

import hashlib
import os
import struct
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ec

from sabot import keys, tlog
from sabot import protocol as pr
from sabot.game.cards import BURN_VALUES, CUT, card_index, shuffled_shoe
from sabot.game.rules import deal_shoe
from sabot.registry import ShoeEntry

_FLAG_BITS = dict(pr.FLAG_BITS)
_WINNER_BITS = {name: bit for bit, name in pr.WINNERS.items()}


class ShoeSigner:
    """Builds a shoe's frames in order: seq, digest chain and signature, as the shoe does."""

    def __init__(self, private_key: ec.EllipticCurvePrivateKey, shoe_id: int, key_id: int = 1,
                 boot: int = 1, seq: int = 0, last_digest: bytes = pr.ZERO_CHAIN) -> None:
        self.private_key = private_key
        self.shoe_id = shoe_id
        self.key_id = key_id
        self.boot = boot
        self.seq = seq
        self.last_digest = last_digest
        self.log = tlog.Prefix()  # its chained frames from seq 1 (a signer starting later: none)

    def chained(self, ftype: int, payload: bytes) -> bytes:
        """The next chained frame (raw, not COBS-encoded)."""
        self.seq += 1
        raw = pr.build(self.private_key, self.key_id, self.shoe_id, self.boot, self.seq,
                       self.last_digest, ftype, payload)
        self.last_digest = pr.parse(raw).digest
        self.log.add(self.seq - 1, raw)
        return raw

    def checkpoint(self, size: int | None = None) -> bytes:
        """A checkpoint of the log of its first `size` chained frames (default: all built so
        far), as the shoe's element signs it: over the C2SP note text, not the frame's body
        (firmware/shoe/tree.py)."""
        size = self.seq if size is None else size
        root = self.log.root_at(size) or tlog.EMPTY_ROOT
        text = pr.checkpoint_text(self.shoe_id, size, root).encode()
        body = pr.HEADER.pack(pr.VERSION, pr.T_CHECKPOINT, self.key_id, self.shoe_id, self.boot,
                              size, pr.ZERO_CHAIN) + root
        return body + pr.sign_digest(self.private_key, hashlib.sha256(text).digest())

    def status(self, payload: bytes) -> bytes:
        """A status: seq and chain of the newest chained frame."""
        return pr.build(self.private_key, self.key_id, self.shoe_id, self.boot, self.seq,
                        self.last_digest, pr.T_STATUS, payload)


def status_payload(phase: int = 2, shoe: int = 1, rnd: int = 0, position: int = 0, due: int = 0,
                   host_counter: int = 0, acked: int = 0, unacked_from: int = 0,
                   unacked_to: int = 0, integrity: int = 1, refused: int = 0) -> bytes:
    return struct.pack(">BHHHBIIIIBI", phase, shoe, rnd, position, due, host_counter, acked,
                       unacked_from, unacked_to, integrity, refused)


def announcements(rec: dict[str, Any], variant: int = 2) -> int:
    """The announcement bits a shoe of `variant` signs for a round (firmware/shoe/app.py): tie
    hand at every table, Dragon 7 and Panda 8 at EZ ones, Lucky Six at commission-free ones."""
    table = pr.decode_variant(variant)
    flags = set(rec["flags"])
    calls = {"tie hand"} if rec["winner"] == "tie" else set()
    if table["ez"]:
        calls |= {name for flag, name in (("dragon7", "Dragon 7"), ("panda8", "Panda 8"))
                  if flag in flags}
    if table["commission_free"] and "lucky_six" in flags:
        calls.add("Lucky Six")
    return sum(bit for bit, name in pr.ANNOUNCEMENTS if name in calls)


def result_payload(rec: dict[str, Any], variant: int = 2) -> bytes:
    player, banker = rec["player"], rec["banker"]
    outcome = _WINNER_BITS[rec["winner"]] | sum(_FLAG_BITS[f] for f in rec["flags"])
    return (struct.pack(">HHBB", rec["shoe"], rec["round"], len(player) << 4 | len(banker), 0)
            + bytes(card_index(c) for c in player + banker)
            + struct.pack(">HB", outcome, announcements(rec, variant)))


def shoe_frames(signer: ShoeSigner, tokens: list[str], shoe: int, decks: int = 8,
                variant: int = 2) -> tuple[list[bytes], int]:
    """(raw frames, rounds) of one whole shoe dealt by the default shoe procedure, as a shoe
    provisioned for `decks` decks of the game `variant` names announces them."""
    out = [signer.chained(pr.T_SHOE_START, struct.pack(">HBB", shoe, decks, variant))]
    cards = [t for t in tokens if t != CUT]
    burn = cards[: 1 + BURN_VALUES[cards[0][0]]]
    out.append(signer.chained(pr.T_BURN, struct.pack(">HH", shoe, 0)
                              + bytes(card_index(c) for c in burn)))
    inventory = [0] * 52
    for c in burn:
        inventory[card_index(c)] += 1
    rounds = deal_shoe(tokens, shoe)
    for rec in rounds:
        p, b = rec["player"], rec["banker"]
        out.append(signer.chained(pr.T_INITIAL_CARDS, struct.pack(">HH", shoe, rec["round"])
                                  + bytes(card_index(c) for c in (p[0], b[0], p[1], b[1]))))
        out.append(signer.chained(pr.T_RESULT, result_payload(rec, variant)))
        for c in p + b:
            inventory[card_index(c)] += 1
    position = sum(inventory) + 1  # the cut card came out too
    out.append(signer.chained(pr.T_SHOE_END, struct.pack(">HHH", shoe, len(rounds), position)
                              + bytes(inventory) + struct.pack(">H", 0)))
    return out, len(rounds)


def generate(workdir: str, shoes: int, seed: int = 0,
             signing_key: ec.EllipticCurvePrivateKey | None = None,
             shoe_id: int = 0x5AB0_7E57) -> tuple[ShoeEntry, bytes, int]:
    """(registry entry, capture bytes, rounds): `shoes` shuffled 8-deck shoes of one shoe."""
    if signing_key is None:
        signing_key = ec.generate_private_key(ec.SECP256R1())
        keys.write_private(os.path.join(workdir, "result.pem"), signing_key)
    entry = ShoeEntry(shoe_id)
    entry.add_public_key(1, keys.public_pem(signing_key.public_key()))
    signer = ShoeSigner(signing_key, shoe_id)
    data = bytearray()
    total = 0
    for n in range(shoes):
        frames, rounds = shoe_frames(signer, shuffled_shoe(8, seed + n), n + 1)
        total += rounds
        for raw in frames:
            data += pr.encode_frame(raw)
    return entry, bytes(data), total

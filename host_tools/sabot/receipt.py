"""A round's receipt: what a player checks offline, with no server's word.

A receipt is a C2SP tlog-proof (`c2sp.org/tlog-proof@v1`) whose entry is the round's result
frame in its shoe's transparency log:
- `extra` holds the round's two frames as the shoe sent them: its initial cards (unsigned, sealed
  by the result: the result's chain field is their digest) and its signed result, as
  base64(u16 length of the first || first || second); a blackjack round has no initial cards
  (length 0): its signed blackjack_result alone;
- `index` and the proof lines prove the result frame is that entry of the tree the checkpoint
  heads;
- the checkpoint is signed by the shoe's own result key (its element; signature type 0x02) and
  cosigned by witnesses.

`verify` checks all of it against the shoe registry's keys and the witnesses the player trusts,
and says in plain words what that proves and what it does not."""

from __future__ import annotations

import base64
import struct
import time
from collections.abc import Mapping, Sequence
from typing import Any

from sabot import note, tlog
from sabot import protocol as pr
from sabot.errors import NotVerified, SabotError
from sabot.game import rules
from sabot.registry import ShoeEntry

HEADER = "c2sp.org/tlog-proof@v1"
MAX_BYTES = 64 * 1024  # a receipt is a few hundred bytes and 16 cosignatures at most


class ReceiptInvalid(NotVerified):
    """The receipt does not hold; its words say which part."""


def make(initial_cards: bytes, result: bytes, index: int, proof: Sequence[bytes],
         checkpoint: str) -> str:
    """A receipt: the round's two frames, the result's entry index and inclusion proof in the
    tree the (signed, cosigned) checkpoint heads."""
    extra = base64.b64encode(struct.pack(">H", len(initial_cards)) + initial_cards + result)
    lines = [HEADER, f"extra {extra.decode()}", f"index {index}",
             *(base64.b64encode(h).decode() for h in proof)]
    return "\n".join(lines) + "\n\n" + checkpoint


def _parse(text: str) -> tuple[bytes, bytes, int, list[bytes], str]:
    head, sep, signed = text.partition("\n\n")
    lines = head.split("\n")
    if not sep or lines[0] != HEADER:
        raise ReceiptInvalid(f"not a receipt: a receipt begins with {HEADER} and has a blank "
                             "line before its checkpoint")
    if len(lines) < 3 or not lines[1].startswith("extra ") or not lines[2].startswith("index "):
        raise ReceiptInvalid("not a receipt: it holds the round's frames (extra) and the "
                             "entry's index")
    try:
        extra = base64.b64decode(lines[1][6:], validate=True)
        (n,) = struct.unpack(">H", extra[:2])
        initial, result = extra[2:2 + n], extra[2 + n:]
        index = lines[2][6:]
        if not index.isascii() or not index.isdigit() or (index != "0"
                                                          and index.startswith("0")):
            raise ValueError(index)
        proof = [base64.b64decode(line, validate=True) for line in lines[3:]]
    except (ValueError, struct.error):
        raise ReceiptInvalid("not a receipt: its frames, index or proof lines do not "
                             "decode") from None
    if len(proof) > tlog.MAX_PROOF or any(len(h) != tlog.HASH_SIZE for h in proof) or len(
            index) > 20:
        raise ReceiptInvalid("not a receipt: its proof is not SHA-256 hashes")
    return initial, result, int(index), proof, signed


def verify(text: str, shoes: Mapping[int, ShoeEntry], witnesses: Sequence[note.Verifier],
           quorum: int | None = None, policy: Policy | None = None) -> dict[str, Any]:
    """The receipt checked whole: {"round": the result record, "shoe_id", "index", "size",
    "witnesses": names that cosigned, "explanation": plain words}; ReceiptInvalid saying
    which part does not hold."""
    if policy is not None:
        witnesses = list(policy.witnesses.values())
    witnesses = list({v.vkey(): v for v in witnesses}.values())  # one given twice counts once
    quorum = len(witnesses) if quorum is None else quorum
    if policy is None and not 1 <= quorum <= len(witnesses):
        raise SabotError(f"a quorum of {quorum} of {len(witnesses)} witnesses: give 1 to "
                         f"{len(witnesses)}")
    # as pasted, mailed or read off a QR code: line ends and blank lines around it are not its
    text = text.replace("\r\n", "\n").strip() + "\n"
    initial_raw, result_raw, index, proof, signed = _parse(text)
    try:
        result = pr.parse(result_raw)
        _, rec = pr.decode_payload(result)
        blackjack = result.type == pr.T_BLACKJACK_RESULT and not initial_raw
        if not blackjack:
            initial = pr.parse(initial_raw)
            _, first = pr.decode_payload(initial)
    except pr.FrameError as e:
        raise ReceiptInvalid(f"the receipt's frames are not a shoe's ({e.reason})") from None
    if not blackjack and (result.type not in (pr.T_RESULT, pr.T_RESULT21)
                          or initial.type != pr.T_INITIAL_CARDS):
        raise ReceiptInvalid("the receipt's frames are not a round's initial cards and result")
    entry = shoes.get(result.shoe_id)
    if entry is None:
        raise ReceiptInvalid(f"shoe {pr.shoe_id_text(result.shoe_id)} is not in the registry "
                             "given")
    key = entry.public_key(result.key_id)
    if key is None or not pr.verify(key, result):
        raise ReceiptInvalid(f"the result is not signed by shoe "
                             f"{pr.shoe_id_text(result.shoe_id)}'s key: it was altered or made "
                             "by someone else")
    if blackjack:
        _check_blackjack(rec)
    else:
        _check_initial(initial, first, result, rec)
    if "21-baccarat" in (rec.get("game"), entry.game):
        _check_21(rec, entry)
    try:
        cp_text, _ = note.split(signed)
        cp = tlog.Checkpoint.parse(cp_text)
    except SabotError as e:
        raise ReceiptInvalid(f"the receipt's checkpoint is not one: {e}") from None
    origin = tlog.origin(result.shoe_id)
    if cp.origin != origin:
        raise ReceiptInvalid(f"the checkpoint is of another log ({cp.origin}), not shoe "
                             f"{pr.shoe_id_text(result.shoe_id)}'s")
    shoe_keys = [note.ecdsa_verifier(origin, k) for k in
                 (entry.public_key(v["version"]) for v in entry.public_keys) if k is not None]
    try:
        _, good = note.verified(signed, [*shoe_keys, *witnesses])
    except SabotError as e:
        raise ReceiptInvalid(f"the checkpoint's signatures do not hold: {e}") from None
    if not any(v in shoe_keys for v, _ in good):
        raise ReceiptInvalid("the checkpoint is not signed by the shoe: only its own element "
                             "heads its log")
    cosigned = {v.name: t for v, t in good if v in witnesses}
    if policy is not None:
        if not policy.holds(set(cosigned)):
            raise ReceiptInvalid(f"the witnesses that cosigned the checkpoint "
                                 f"({', '.join(sorted(cosigned)) or 'none'}) do not meet the "
                                 "policy's quorum")
    elif len(cosigned) < quorum:
        raise ReceiptInvalid(f"{len(cosigned)} of the witnesses trusted here cosigned the "
                             f"checkpoint; {quorum} must")
    if not tlog.verify_inclusion(tlog.leaf_hash(result_raw), index, cp.size, proof, cp.root):
        raise ReceiptInvalid("the result is not in the log the checkpoint heads (its inclusion "
                             "proof does not hold)")
    return {"shoe_id": result.shoe_id, "round": rec, "index": index, "size": cp.size,
            "witnesses": sorted(cosigned), "explanation": explain(rec, result.shoe_id, index,
                                                                 cp.size, cosigned, entry.table)}


def _check_initial(initial: pr.Frame, first: dict[str, Any], result: pr.Frame,
                   rec: dict[str, Any]) -> None:
    """A baccarat round's initial cards: the frame the signed result seals, beginning its
    hands."""
    if (initial.shoe_id, initial.boot, initial.seq + 1) != (result.shoe_id, result.boot,
                                                            result.seq) \
            or result.chain != initial.digest:
        raise ReceiptInvalid("the initial cards are not the ones the signed result seals: they "
                             "were altered")
    dealt = [first.get("player", [None] * 2), first.get("banker", [None] * 2)]
    if (first.get("shoe"), first.get("round")) != (rec["shoe"], rec["round"]) or \
            dealt != [rec["player"][:2], rec["banker"][:2]]:
        raise ReceiptInvalid("the initial cards do not begin the result's hands")


def _check_blackjack(rec: dict[str, Any]) -> None:
    """A blackjack round: played, and every card in the hand the rules put it in."""
    from sabot.game.blackjack import check_result

    if rec["voided"]:  # its cards only accounted for: no hands to hold to the rules
        return
    _, why = check_result(rec)
    if why:
        raise ReceiptInvalid(f"the shoe's round is not one the rules deal ({why})")


def _check_21(rec: dict[str, Any], entry: Any) -> None:
    """A 21 Baccarat round: of its table's game and settings, and dealt and won as they say."""
    from sabot.frames21 import dealing, rules_of
    from sabot.game import baccarat21 as b21

    if rec.get("game") != entry.game:
        raise ReceiptInvalid(f"the round is not of table {entry.table}'s game ({entry.game}): "
                             "the shoe dealt another than the registry's")
    if rec["rules"] != dealing(entry.rules21_rules):
        raise ReceiptInvalid(f"the round was dealt under other settings than table "
                             f"{entry.table}'s in the registry")
    table = rules_of(rec["rules"], 8)
    want = b21.round_record(rec["shoe"], rec["round"], rec["player"], rec["banker"], table)
    if b21.redeal(rec["player"], rec["banker"], table) != (rec["player"], rec["banker"]) or \
            (rec["winner"], rec["flags"]) != (want["winner"], want["flags"]):
        raise ReceiptInvalid("the shoe's round is not one the rules deal (its table's settings "
                             "draw or score these cards otherwise)")


def blackjack_words(rec: dict[str, Any]) -> str:
    """A blackjack round's hands in words: each seat's from the dealer's left, then the
    dealer's (as the browser's checker says them, pit/static/verify.js)."""
    from sabot.game.blackjack import round_of, total_text

    if rec["voided"]:
        cards = [c for kind, c in rec["events"] if kind == "card"]
        return ("voided by a supervisor: no wager on it settles, and its cards ("
                + (" ".join(cards) or "none") + ") were set aside")
    r = round_of(rec)
    seats = [f"seat {h['seat']} {' '.join(h['cards'])} ({total_text(h['cards'], not h['split'])}"
             + (", split" if h["split"] else "") + ")" for h in r["hands"]]
    return (", ".join(seats) + f"; dealer {' '.join(r['dealer'])} "
            f"({total_text(r['dealer'], True)}, {len(r['dealer'])} cards)")


def explain(rec: dict[str, Any], shoe_id: int, index: int, size: int,
            cosigned: Mapping[str, int], table: str = "") -> str:
    """What a verified receipt proves, and what it does not, in plain words."""
    def hand(name: str) -> str:  # a card the shoe could not read: "?", and so its hand's total
        cards = " ".join(c or "?" for c in rec[name])
        total = rec[f"{name}_total"]
        if total is None and None not in rec[name]:  # (the record has none once any is unread)
            total = rules.point_count(rec[name])
        return f"{name.capitalize()} {cards} ({'?' if total is None else total})"
    winner = {"banker": "Banker wins", "player": "Player wins", "tie": "a Tie"}.get(
        rec.get("winner") or "", "no winner")
    dummy = (", a dummy hand (a supervisor kept it with no wagers on it: it settles no bet)"
             if rec.get("dummy") else "")
    said = (blackjack_words(rec) if rec.get("event") == "blackjack_result"
            else f"{hand('player')}, {hand('banker')}: {winner}")
    at = f" (table {table})" if table else ""
    head = (f"This is the result shoe {pr.shoe_id_text(shoe_id)}{at} signed for round "
            f"{rec['round']} of its shoe {rec['shoe']}{dummy}: {said}. It is entry {index} of "
            f"the shoe's log of {size} entries, whose head the shoe signed")
    tail = " It does not show that the shuffle was fair, nor which cards were in the shoe."
    if not cosigned:  # a policy whose quorum is none: no witness vouches for the log
        return (head + ". No witness was asked for: nothing here shows the casino's log could "
                "not drop or change it." + tail)
    when = max(cosigned.values())
    seen = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(when)) if when else "?"
    return (head + f" and {', '.join(sorted(cosigned))} cosigned (by {seen}). The casino's "
            "log cannot drop or change this result without those witnesses noticing." + tail)


# ---- a witness policy (C2SP tlog-policy, as Sigsum's policy files write it) -----------------
class Policy:
    """Which witnesses a player trusts and which of them must have cosigned: `witness NAME VKEY
    [URL]`, `group NAME K|all|any MEMBER...` and `quorum NAME` (or `none`) lines; `log` lines
    are taken and ignored (the shoe's keys are the registry's); # starts a comment."""

    def __init__(self, witnesses: dict[str, note.Verifier], groups: dict[str, tuple[int,
                 list[str]]], quorum: str) -> None:
        self.witnesses, self.groups, self.quorum = witnesses, groups, quorum

    def holds(self, cosigned: set[str]) -> bool:
        """Whether the witnesses of these verifier names meet the quorum."""
        def met(name: str) -> bool:
            if name == "none":
                return True
            if name in self.witnesses:
                return self.witnesses[name].name in cosigned
            k, members = self.groups[name]
            return sum(met(m) for m in members) >= k
        return met(self.quorum)

    @classmethod
    def parse(cls, text: str) -> Policy:
        witnesses: dict[str, note.Verifier] = {}
        groups: dict[str, tuple[int, list[str]]] = {}
        quorum = None
        for no, line in enumerate(text.splitlines(), 1):
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            kind, args = words[0], words[1:]
            where = f"policy line {no}"
            if kind == "log":
                continue
            if kind == "witness" and len(args) in (2, 3):
                if args[0] in witnesses or args[0] in groups or args[0] == "none":
                    raise SabotError(f"{where}: {args[0]} is named twice")
                witnesses[args[0]] = note.Verifier.parse(args[1])
            elif kind == "group" and len(args) >= 3:
                name, k, members = args[0], args[1], args[2:]
                if name in witnesses or name in groups or name == "none":
                    raise SabotError(f"{where}: {name} is named twice")
                unknown = [m for m in members if m not in witnesses and m not in groups]
                if unknown:
                    raise SabotError(f"{where}: group {name} names {unknown[0]}, defined "
                                     "nowhere before it")
                n = {"all": len(members), "any": 1}.get(k)
                if n is None and not (k.isdigit() and 1 <= int(k) <= len(members)):
                    raise SabotError(f"{where}: a group's threshold is all, any or 1 to "
                                     f"{len(members)}, not {k!r}")
                groups[name] = (n if n is not None else int(k), members)
            elif kind == "quorum" and len(args) == 1:
                if quorum is not None:
                    raise SabotError(f"{where}: a second quorum")
                if args[0] != "none" and args[0] not in witnesses and args[0] not in groups:
                    raise SabotError(f"{where}: the quorum {args[0]} is defined nowhere")
                quorum = args[0]
            else:
                raise SabotError(f"{where}: not a policy line (log, witness NAME VKEY, group "
                                 f"NAME K|all|any MEMBER..., quorum NAME): {line.strip()!r}")
        if quorum is None:
            raise SabotError("the policy has no quorum line")
        return cls(witnesses, groups, quorum)

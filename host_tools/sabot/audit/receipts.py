"""Receipts made from the audit store (`sabot receipt --db`): a round's two frames, its entry's
inclusion proof in the shoe's log, and the smallest checkpoint covering it that the shoe signed
and witnesses cosigned (sabot/receipt.py has the format and the player's check)."""

from __future__ import annotations

from typing import Any

from sabot import protocol as pr
from sabot import receipt, tlog
from sabot.audit.records import stored_log
from sabot.audit.store import AuditStore
from sabot.errors import SabotError
from sabot.registry import ShoeEntry


def published_note(entry: ShoeEntry, cp: dict[str, Any]) -> str:
    """A stored checkpoint (AuditStore.checkpoints) as the signed note it is published as: its
    text, the shoe's signature line and every cosignature stored for it."""
    f = pr.parse(cp["raw"])
    key = entry.public_key(f.key_id)
    if key is None:
        raise SabotError(f"the registry holds no public key version {f.key_id} for shoe "
                         f"{pr.shoe_id_text(entry.shoe_id)}: its checkpoint cannot be named")
    return pr.checkpoint_note(f, key) + "".join(cp["cosignatures"][w]
                                                for w in sorted(cp["cosignatures"]))


def make_receipt(store: AuditStore, entry: ShoeEntry, shoe: int, round_no: int,
                 quorum: int = 1) -> str:
    """Round `round_no` of shoe `shoe` of the registered shoe `entry`: its receipt, or a
    SabotError in one line saying what is missing."""
    sid = entry.shoe_id
    who = f"round {round_no} of shoe {shoe} dealt by shoe {pr.shoe_id_text(sid)}"
    got = store.round_frames(sid, shoe, round_no)
    if "blackjack_result" in got:  # a blackjack round: its one signed frame
        seq, result = got["blackjack_result"]
        initial = b""  # (a voided round's too: its receipt says it was voided)
    elif "result" not in got or "initial_cards" not in got:
        raise SabotError(f"{who} is not in {store.path} (no result stored)" if "result" not in got
                         else f"{who} has no initial cards stored (a store that met the shoe "
                         "mid-round)")
    else:
        seq, result = got["result"]
        first_seq, initial = got["initial_cards"]
        if first_seq != seq - 1:
            raise SabotError(f"{who}: its initial cards are not the frame before its result")
    cps = store.checkpoints(sid)
    covering = [c for c in cps if c["size"] >= seq]
    witnessed = [c for c in covering if len(c["cosignatures"]) >= quorum]
    if not witnessed:
        if not cps:
            raise SabotError(f"{who}: the store holds no checkpoint of the shoe's log (a pit "
                             "validating with --witness stores them)")
        newest = max((c["size"] for c in cps if len(c["cosignatures"]) >= quorum), default=0)
        many = f"{quorum} cosignature{'s' if quorum > 1 else ''}"
        if not newest:
            raise SabotError(f"{who}: no checkpoint of the shoe's log in {store.path} has {many}"
                             " (a pit validating with --witness stores them once a witness "
                             "answers: its lines say why one did not)")
        raise SabotError(f"{who} (entry {seq - 1} of the shoe's log) is in no checkpoint with "
                         f"{many} yet (the newest covers {newest} frames): the next one the "
                         "witnesses cosign will cover it")
    cp = witnessed[0]
    signed = published_note(entry, cp)
    log, _ = stored_log(store, sid)
    if log.root_at(cp["size"]) != pr.parse(cp["raw"]).payload:
        raise SabotError(f"the store does not hold the shoe's log up to {cp['size']} frames as "
                         "its checkpoint names it (run sabot audit verify)")
    return receipt.make(initial, result, seq - 1,
                        tlog.inclusion_proof(log.hashes, seq - 1, cp["size"]), signed)

"""`sabot audit verify`'s checks against the witnesses of the shoes' logs (audit/cosign.py): each
cosignature the store holds names a checkpoint stored before it and is its witness's signature of
it; each log a witness's state says it cosigned is held by the store frame for frame, under a key
the registry holds."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sabot import note
from sabot import protocol as pr
from sabot.audit.cosign import Witnessed
from sabot.audit.derived import Broken, DerivedShoe, sid
from sabot.audit.store_checks import key_infos
from sabot.errors import SabotError
from sabot.registry import WITNESS_BOUND, ShoeEntry


class Cosignatures:
    """The checkpoints stored so far, and the cosignatures stored for them; `counts`: the walk's
    "cosignatures" {"checked", "unchecked", "by_witness"}."""

    def __init__(self, witnesses: Sequence[note.Verifier], counts: dict[str, Any]) -> None:
        self.keys = {v.name: v for v in witnesses}
        self.counts = counts
        # frame id -> (shoe id, size, note text) of each stored checkpoint; the cosignatures
        # stored for them, (frame id, witness)
        self.checkpoints: dict[int, tuple[int, int, str]] = {}
        self.cosigned: set[tuple[int, str]] = set()

    def checkpoint(self, rid: int, f: pr.Frame) -> None:
        """A checkpoint the shoe signed, stored as frame id `rid`."""
        self.checkpoints[rid] = (f.shoe_id, f.seq, pr.checkpoint_text(f.shoe_id, f.seq,
                                                                      f.payload))

    def row(self, rid: int, values: tuple[Any, ...]) -> None:
        """A witness's cosignature names the stored checkpoint it cosigned (stored before the
        frames of its batch: audit/cosign.py)."""
        _, shoe_id, size, frame_id, witness, line = values
        where = f"cosignature id {rid} (by {witness})"
        cp = self.checkpoints.get(frame_id)
        if cp is None or cp[:2] != (shoe_id, size):
            raise Broken(f"{where} names frame id {frame_id}, which is no stored checkpoint of "
                         f"shoe {sid(shoe_id)} at {size} frames (inserted or moved?)")
        try:
            _, sigs = note.split(cp[2] + "\n" + line)
        except SabotError:
            sigs = []
        if len(sigs) != 1 or sigs[0].name != witness:
            raise Broken(f"{where} is not one signature line of that witness (altered?)")
        key = self.keys.get(witness)
        by = self.counts["by_witness"]
        by[witness] = by.get(witness, 0) + 1
        if key is None:
            self.counts["unchecked"] += 1
        elif sigs[0].id != key.id or key.verify(cp[2], sigs[0].sig) is None:
            raise Broken(f"{where} is not that witness's signature of the checkpoint (made up "
                         "or altered: its key does not verify it)")
        else:
            self.counts["checked"] += 1
        if (frame_id, witness) in self.cosigned:
            raise Broken(f"{where} is a second cosignature of that witness for frame id "
                         f"{frame_id} (inserted?)")
        self.cosigned.add((frame_id, witness))


def check_witnessed(w: Witnessed, shoes: Mapping[int, DerivedShoe],
                    configs: Mapping[int, ShoeEntry]) -> dict[str, Any] | None:
    """The store holds the log the witness cosigned, frame for frame, and the registry the key
    that signed its first checkpoint there: the log found ({shoe_id, witness, size, state_at};
    None for one bound with nothing cosigned yet), or Broken."""
    by = f"witness {w.witness} cosigned shoe {sid(w.shoe_id)}'s log at {w.size} frames"
    entry = configs.get(w.shoe_id)
    if entry is not None and w.key is not None and w.key not in key_infos(entry):
        raise Broken(f"{by}, its first checkpoint signed by a key the registry does not hold for "
                     "that shoe: the registry's key was replaced")
    if w.size == 0:  # bound (sabot bind), nothing cosigned yet: nothing it could lack
        return None
    shoe = shoes.get(w.shoe_id)
    held = len(shoe.log.hashes) if shoe is not None else 0
    root = shoe.log.root_at(w.size) if shoe is not None else None
    if root is None:
        raise Broken(f"{by}; this store holds its log only up to {held} frames: the rest was "
                     "deleted (or never stored here)")
    if root != w.root:
        raise Broken(f"{by}; the log this store holds at {w.size} frames is another one: its "
                     "frames were changed, replaced or signed again")
    return {"shoe_id": w.shoe_id, "witness": w.witness, "size": w.size, "state_at": w.at}


def beyond_cosigned(shoes: Mapping[int, DerivedShoe], cosignatures: Cosignatures,
                    witnessed: Sequence[Witnessed], configs: Mapping[int, ShoeEntry]
                    ) -> list[dict[str, Any]]:
    """Each stored shoe's frames and rounds past the last checkpoint a witness given cosigned (a
    stored cosignature its key verified, or the witness's own state): what no witness has seen,
    and so what could be deleted with no witness noticing. `overdue_rounds`: those a witness
    should have cosigned by now — in shoes that ended, or before the shoe's newest checkpoint but
    one (the newest may still be on its way; a shoe signs one every 10 rounds, so a shoe whose
    end was deleted is judged all the same). `bound`: its table's — the registry's
    witness_bound, and for a shoe a witness's state holds bound to it, never more than
    WITNESS_BOUND (None: not a witnessed table)."""
    cosigned: dict[int, int] = {}
    for frame_id, witness in cosignatures.cosigned:
        if witness in cosignatures.keys:
            shoe_id, size, _ = cosignatures.checkpoints[frame_id]
            cosigned[shoe_id] = max(cosigned.get(shoe_id, 0), size)
    for w in witnessed:
        cosigned[w.shoe_id] = max(cosigned.get(w.shoe_id, 0), w.size)
    signed: dict[int, list[int]] = {}  # each shoe's stored checkpoints' sizes
    for shoe_id, size, _ in cosignatures.checkpoints.values():
        signed.setdefault(shoe_id, []).append(size)
    held = {w.shoe_id for w in witnessed}  # bound to a witness, whatever the registry says
    out = []
    for shoe_id, shoe in sorted(shoes.items()):
        if not shoe.anchored:
            continue
        size = cosigned.get(shoe_id, 0)
        sizes = sorted(signed.get(shoe_id, []))
        due = sizes[-2] if len(sizes) > 1 else 0
        entry = configs.get(shoe_id)
        bound = entry.witness_bound if entry is not None else None
        if shoe_id in held:
            bound = WITNESS_BOUND if bound is None else min(bound, WITNESS_BOUND)
        out.append({"shoe_id": shoe_id, "cosigned_size": size,
                    "frames": max(0, shoe.st["last_seq"] - size),
                    "rounds": sum(1 for seq, _ in shoe.round_seqs if seq > size),
                    "overdue_rounds": sum(1 for seq, n in shoe.round_seqs
                                          if seq > size and (n in shoe.ended or seq <= due)),
                    "bound": bound})
    return out


def over_bound(beyond: Sequence[Mapping[str, Any]]) -> None:
    """Broken for a witnessed table's shoe with more overdue rounds beyond its witnesses than its
    bound: its pit did not have its checkpoints cosigned (no --witness, or the witness
    unreachable)."""
    for b in beyond:
        if b["bound"] is not None and b["overdue_rounds"] > b["bound"]:
            raise Broken(f"shoe {sid(b['shoe_id'])}, a witnessed table: {b['overdue_rounds']} "
                         f"rounds a witness should have cosigned by now ({b['frames']} frames "
                         "in all) lie beyond the last checkpoint a witness "
                         f"cosigned (at {b['cosigned_size']} frames), more than the "
                         f"{b['bound']} its registration allows: its checkpoints were not "
                         "cosigned as they came, so no witness would notice them deleted")

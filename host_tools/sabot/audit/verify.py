"""`sabot audit verify`: re-verify an audit store from its raw frames and check its own row chain.

The row chain has no secret: an insider who can write the database can recompute it after any
edit. So everything a store says is derived again from what no insider can make — the frames the
shoe signed and the statuses it signed — walking the store once in chain order, as its validators
wrote it, and compared row by row, column by column:
- every trigger that makes the store append-only is still there, word for word, and every row
  still chains to the one before;
- every frame row's columns are its raw frame's header; every accepted frame carries a valid
  signature of the shoe's result key (public keys from the registry) or, unsigned (initial_cards),
  is sealed by the frame stored right after it; it follows its predecessor in seq and digest chain,
  or the shoe's own status said the frames between were acknowledged elsewhere;
- each rejected frame's stored reason holds for its bytes (a bad signature really fails, a
  replayed frame really is authentic and old, ...);
- each accepted chained frame has exactly one record, stored right after it, every column what
  the frame says;
- the alarms on each frame are exactly those its validator raised: the content alarms (the
  shoe's accounting run again), `sequence_gap` (derived from the frames' seqs and the authentic
  statuses, never read from the alarms table), `tilt` and `counter_low` (from the statuses),
  every column;
- every link_state row is the validator's state at that point, and every read that changed it
  stored it;
- every authentic status's newest frame is stored or the store names it as missing; the operator
  log stands where the frames and alarms say (audit/operator_log.py).
The checks of the store as a whole, a registry that is not the store's among them, are
audit/store_checks.py's; those against the witnesses, audit/witness_check.py's. What it cannot
prove — rows no shoe signed and nothing later signed refers to — is listed in docs/SECURITY.md
("Rewriting the audit store")."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sabot import note
from sabot import protocol as pr
from sabot.audit.cosign import Witnessed
from sabot.audit.derived import Broken, DerivedShoe, differ, sid, status_of, type_name
from sabot.audit.operator_log import OperatorLog
from sabot.audit.records import COUNTER_LOW, TILT_DETAIL, checkpoint_mismatch, counter_low
from sabot.audit.rejections import check_rejected, check_unparsed
from sabot.audit.signatures_ahead import SignaturesAhead
from sabot.audit.store import (
    GENESIS,
    AuditStore,
    StoreUnreadable,
    open_store,
    row_hash,
)
from sabot.audit.store_checks import (
    check_chain_places,
    check_triggers,
    misfit_text,
    registry_misfit,
)
from sabot.audit.verify_rows import FrameRows, OpenFrame, alarm_key
from sabot.audit.witness_check import (
    Cosignatures,
    beyond_cosigned,
    check_witnessed,
    over_bound,
)
from sabot.errors import SabotError
from sabot.registry import ShoeEntry

VERDICTS = frozenset(("accepted", "rejected", "deferred", "resent"))
SEQUENCE = frozenset(("replayed", "boot_backwards", "sequence_gap", "chain_broken"))


class Unchained(Broken):
    """A row out of the chain: the store was edited, whatever registry checks it."""


class WrongRegistry(Exception):
    """The registry given is not this store's (store_checks.registry_misfit)."""

    def __init__(self, misfit: dict[str, Any], text: str) -> None:
        super().__init__(text)
        self.misfit = misfit


def verify(path: str, configs: Mapping[int, ShoeEntry],
           witnessed: Sequence[Witnessed] = (),
           witnesses: Sequence[note.Verifier] = (), only_stored: bool = False,
           registry: str = "given", jobs: int = 1) -> dict[str, Any]:
    """{"ok", "frames", "rounds", "rows", "holes", "unstored", "starts", "absent", "witnessed",
    "cosignatures", the other frame counts ("shoes", "statuses", "checkpoints",
    "integrity_answers", "resent", "deferred", "rejected"), "wrong_registry", "problem"} for
    the store at `path`; `configs` maps shoe ids to their registry entries: their public keys
    verify every signature, their configuration derives the alarms again; `witnessed`: the logs
    witnesses cosigned (audit/cosign.py), each of which the store must hold, frame for frame;
    `witnesses`: the witnesses' keys, which every stored cosignature of theirs must verify with
    ("cosignatures": {"checked", "unchecked"}: those of a witness not given are only matched to
    their checkpoint). `only_stored`: a witnessed log of a shoe this store holds no frame of is
    named ("elsewhere"), not required (a casino whose shoes write to several stores checks each
    shoe in its own). "wrong_registry" (None, or what registry_misfit found): the registry, named
    `registry` in the problem, is not this store's — bad input, not a store that does not hold.
    `jobs`: processes that check the frames' signatures ahead of the walk (1: the walk checks
    each itself; audit/signatures_ahead.py); the verdict is the same."""
    store = open_store(path, writer=False)
    walk = _Walk(configs, witnesses, jobs)
    walk.counts["witnessed"], walk.counts["unwitnessed"], walk.counts["elsewhere"] = [], [], []
    walk.counts["wrong_registry"], walk.counts["beyond"] = None, []
    try:
        with store.snapshot():  # a live store: its writers' newest batches whole or not at all
            check_triggers(store)
            check_chain_places(store)
            try:
                walk.run(store)
            except Unchained:
                raise
            except Broken:  # frames that do not verify: is the registry this store's at all?
                misfit = registry_misfit(store, configs, witnessed)
                if misfit is not None:
                    raise WrongRegistry(misfit, misfit_text(misfit, registry)) from None
                raise
            for w in witnessed:
                if only_stored and w.shoe_id not in walk.shoes:
                    walk.counts["elsewhere"].append(w.shoe_id)
                    continue
                found = check_witnessed(w, walk.shoes, configs)
                if found is not None:
                    walk.counts["witnessed"].append(found)
            if witnessed:  # a shoe of this store no witness given holds: said, not proven
                seen = {w.shoe_id for w in witnessed if w.size > 0}
                walk.counts["unwitnessed"] = sorted(
                    s for s, shoe in walk.shoes.items() if shoe.anchored and s not in seen)
            if witnesses:  # what lies beyond every cosignature, and a witnessed table's bound
                walk.counts["beyond"] = beyond_cosigned(walk.shoes, walk.cosignatures,
                                                        witnessed, configs)
                over_bound(walk.counts["beyond"])
    except StoreUnreadable as e:
        return {"ok": False, **walk.counts, "problem": f"the store cannot be read ({e.reason})"}
    except WrongRegistry as e:
        return {"ok": False, **walk.counts, "wrong_registry": e.misfit, "problem": str(e)}
    except Broken as e:
        return {"ok": False, **walk.counts, "problem": str(e)}
    finally:
        walk.close()
        store.close()
    return {"ok": True, **walk.counts, "problem": None}


class _Walk(FrameRows):
    """One pass over every row of the store in chain order."""

    def __init__(self, configs: Mapping[int, ShoeEntry],
                 witnesses: Sequence[note.Verifier] = (), jobs: int = 1) -> None:
        self.configs = configs
        self.ahead = SignaturesAhead(jobs, configs) if jobs > 1 else None
        # frames: the shoe frames (chained) stored once each; the other frames stored are
        # counted apart, by what they are
        self.counts: dict[str, Any] = {"frames": 0, "rounds": 0, "rows": 0, "shoes": 0,
                                       "statuses": 0, "checkpoints": 0, "integrity_answers": 0,
                                       "resent": 0, "deferred": 0, "rejected": 0, "holes": [],
                                       "unstored": [], "starts": [], "absent": [],
                                       "cosignatures": {"checked": 0, "unchecked": 0,
                                                        "by_witness": {}}}
        self.shoes: dict[int, DerivedShoe] = {}
        self.keys: dict[tuple[int, int], Any] = {}
        self.frame: OpenFrame | None = None  # the accepted frame whose rows follow
        self.stored_alarms: list[tuple[int, tuple[Any, ...]]] = []  # (alarm id, key) on it
        self.record_seen = False
        self.optional: tuple[Any, ...] | None = None  # an alarm the frame may carry or not
        self.unsealed: tuple[int, pr.Frame] | None = None  # an unsigned frame: sealed by the next
        self.batch: Any = object()  # the receive time of the read being walked (one per read)
        self.touched: set[int] = set()  # shoes whose state a frame of this read changed
        self.last_frame_id = 0
        self.operator_log = OperatorLog()
        self.meta: list[tuple[Any, ...]] = []
        self.cosignatures = Cosignatures(witnesses, self.counts["cosignatures"])

    def close(self) -> None:
        if self.ahead is not None:
            self.ahead.close()

    def run(self, store: AuditStore) -> None:
        prev, expect = GENESIS, 1
        last_ids: dict[str, int] = {}
        rows = store.rows() if self.ahead is None else self.ahead.rows(store.rows())
        for table, rid, no, values, h in rows:
            if no != expect:
                raise Unchained(f"row {expect} of the chain is missing (deleted); the next is "
                                f"{table} id {rid}")
            if row_hash(prev, table, no, rid, values) != h:
                raise Unchained(f"{table} id {rid} (row {no} of the chain) was altered or "
                                "inserted")
            # a table's ids are handed out one by one in the order its rows are stored (not
            # proof against an insider who renumbers, only against one who does not)
            if rid != last_ids.get(table, 0) + 1:
                raise Unchained(f"{table} id {rid} (row {no} of the chain) follows id "
                                f"{last_ids.get(table, 0)}: a row was deleted, or moved")
            last_ids[table] = rid
            prev, expect = h, expect + 1
            self.counts["rows"] = no
            getattr(self, f"_{table}")(rid, values)
        self._close_frame()
        self._end_of_read(None)
        self._finish()

    def _shoe(self, shoe_id: int) -> DerivedShoe:
        shoe = self.shoes.get(shoe_id)
        if shoe is None:
            shoe = self.shoes[shoe_id] = DerivedShoe(shoe_id, self.configs.get(shoe_id)
                                               or ShoeEntry(shoe_id))
        return shoe

    def _key(self, f: pr.Frame) -> Any:
        """The registry's public key for the frame's shoe and key version, or None."""
        k = (f.shoe_id, f.key_id)
        if k not in self.keys:
            entry = self.configs.get(f.shoe_id)
            try:
                self.keys[k] = entry.public_key(f.key_id) if entry else None
            except SabotError as e:
                raise Broken(str(e)) from None
        return self.keys[k]

    def _authentic(self, f: pr.Frame, rid: int | None = None) -> bool:
        """Whether the frame carries a valid signature of its shoe's key version (frame row
        `rid`'s check made ahead, when it was)."""
        if not f.signed:
            return False
        if self.ahead is not None and rid is not None:
            got = self.ahead.authentic(rid, f)
            if got is not None:
                return got
        key = self._key(f)
        return key is not None and pr.verify(key, f)

    def _signed_by_shoe(self, f: pr.Frame, fid: int, authentic: bool) -> None:
        """Broken unless the frame carries a valid signature of its shoe's result key version."""
        if f.shoe_id not in self.configs:
            raise Broken(f"shoe {sid(f.shoe_id)} is not in the shoe registry, which verifies "
                         "other shoes of this store: its frames (put in?) cannot be verified; a "
                         "registry that holds its public keys may (--registry FILE)")
        if self._key(f) is None:
            raise Broken(f"the registry holds no public key version {f.key_id} for shoe "
                         f"{sid(f.shoe_id)}: frame id {fid} cannot be verified")
        if not authentic:
            raise Broken(f"frame id {fid} (shoe {sid(f.shoe_id)} seq {f.seq}) does not carry a "
                         f"valid signature of the shoe's key version {f.key_id}")

    # ---- reads: one batch of frames, stored with its records, alarms and link state ---------
    def _end_of_read(self, at: Any) -> None:
        """A row of another read begins (or the store ends): the read before stored the state it
        left its shoe in."""
        if at == self.batch:
            return
        for shoe_id in sorted(self.touched):
            shoe = self.shoes[shoe_id]
            if shoe.row != shoe.link_values():
                raise Broken(f"the link state of shoe {sid(shoe_id)} after the read ending with "
                             f"frame id {self.last_frame_id} is not stored (its link_state row "
                             "was deleted or altered)")
        self.touched = set()
        self.batch = at

    # ---- frames --------------------------------------------------------------------------
    def _frames(self, rid: int, values: tuple[Any, ...]) -> None:
        received_at, raw, key_id, shoe_id, boot, seq, stored_type, verdict, reason = values
        self._close_frame()
        self._end_of_read(received_at)
        self.last_frame_id = rid
        columns = (key_id, shoe_id, boot, seq, stored_type)
        if columns == (None,) * 5 and verdict == "rejected":  # the validator could not parse it
            self.counts["rejected"] += 1
            self._seal(None, False)
            check_unparsed(rid, raw, reason)
            return
        try:
            f = pr.parse(raw)
        except pr.FrameError as e:
            raise Broken(f"frame id {rid} is stored as a shoe's frame, but its bytes are none "
                         f"({e.reason})") from None
        header = (f.key_id, f.shoe_id, f.boot, f.seq, pr.TYPES.get(f.type) or type_name(f))
        if columns != header:
            differs = differ(("key_id", "shoe_id", "boot", "seq", "type"), columns, header)
            raise Broken(f"frame id {rid}: its columns (key_id, shoe_id, boot, seq, type) are not "
                         f"its frame's header (shoe {sid(f.shoe_id)} seq {f.seq} {header[4]}): "
                         f"they differ in {differs}")
        if verdict not in VERDICTS or (reason is not None) != (verdict == "rejected"):
            raise Broken(f"frame id {rid}: verdict {verdict!r} with reason {reason!r} is none a "
                         "validator gives")
        authentic = self._authentic(f, rid)
        if verdict != "rejected" and f.signed:
            self._signed_by_shoe(f, rid, authentic)  # (before the frame it may seal: named first)
        self._seal(f, authentic)
        shoe = self._shoe(f.shoe_id)
        if verdict == "rejected":
            if not f.signed and reason in SEQUENCE:
                # decided once the next frame sealed it: that frame is stored right after it
                self.unsealed, authentic = (rid, f), True
            check_rejected(rid, f, reason, shoe, authentic, self._key(f) is not None)
            self.counts["rejected"] += 1
            return
        if not f.signed and f.type != pr.T_INITIAL_CARDS:
            raise Broken(f"frame id {rid} is an unsigned {type_name(f)}: no shoe frame")
        if not f.signed and verdict != "deferred":
            self.unsealed = (rid, f)
        if verdict == "resent":
            # a copy of a stored frame, or (a replay anchored past them) of one never seen here
            unseen = f.seq not in shoe.stored and f.seq <= shoe.unseen
            if f.type not in pr.CHAINED or f.seq > shoe.st["last_seq"] or not (
                    shoe.stored.get(f.seq) == f.digest or unseen):
                raise Broken(f"frame id {rid} is stored as resent, but it is no copy of a frame "
                             f"of shoe {sid(f.shoe_id)} stored before it")
            self.counts["resent"] += 1
            return
        if verdict == "deferred":
            # not taken (it comes again): only an unsigned one met again before its seal, or a
            # frame met live before the status, or past a gap, answering the link's hello
            if f.type not in pr.CHAINED or (f.signed and shoe.anchored
                                            and f.seq <= shoe.st["last_seq"] + 1):
                raise Broken(f"frame id {rid} (shoe {sid(f.shoe_id)} seq {f.seq}) is stored as "
                             "deferred, but a validator would have decided it")
            self.counts["deferred"] += 1
            return
        if f.type == pr.T_STATUS:
            self._status(rid, f, shoe, received_at)
            self.counts["statuses"] += 1
        elif f.type == pr.T_INTEGRITY:
            # answers a verify-firmware challenge: its signature is all a store can check
            self.counts["integrity_answers"] += 1
        elif f.type == pr.T_CHECKPOINT:
            self._checkpoint(rid, f, shoe, received_at)
            self.counts["checkpoints"] += 1
        elif f.type in pr.CHAINED:
            self._chained(rid, f, shoe, received_at)
        else:
            raise Broken(f"frame id {rid} is an accepted {type_name(f)}: no shoe frame")

    def _seal(self, f: pr.Frame | None, authentic: bool) -> None:
        """An unsigned frame is stored when the next frame of its shoe seals it, right after it."""
        if self.unsealed is None:
            return
        pid, p = self.unsealed
        self.unsealed = None
        if f is None or f.shoe_id != p.shoe_id or not authentic \
                or f.chain != p.digest or f.seq != p.seq + (f.type in pr.CHAINED):
            raise Broken(f"frame id {pid} (shoe {sid(p.shoe_id)} seq {p.seq}, unsigned) is not "
                         "sealed by the frame stored after it: its content is not the shoe's")

    def _status(self, rid: int, f: pr.Frame, shoe: DerivedShoe, at: float) -> None:
        """The validator's reading of an authentic status: the host counter, a tilt, frames the
        shoe no longer holds (acknowledged elsewhere: a gap, derived here, never read)."""
        st = shoe.st
        s = status_of(f)
        where = f"frame id {rid} (a status of shoe {sid(f.shoe_id)})"
        if s is None:
            raise Broken(f"{where} is accepted, but its payload is no status")
        if f.boot < st["last_boot"] or ((shoe.anchored or shoe.linked)
                                        and f.seq < st["last_seq"]):
            raise Broken(f"{where} names seq {f.seq} boot {f.boot}, older than the frames stored "
                         "before it: a validator would have rejected it")
        if f.seq == st["last_seq"] and st["last_digest"] and f.chain != st["last_digest"]:
            raise Broken(f"{where} names seq {f.seq} with another digest than the stored frame's")
        held: list[tuple[str, Any]] = []
        tilt = s["integrity"] == "tilt"
        if tilt and not shoe.tilted:
            held.append(("tilt", TILT_DETAIL))
        # a tilt going on: the first status a later validator session gets raises it again,
        # and a store does not say where its sessions began
        again = tilt and shoe.tilted
        shoe.tilted = tilt
        if st["host_counter"] < COUNTER_LOW <= s["host_counter"]:
            held.append(("counter_low", counter_low(s["host_counter"])))
        st["host_counter"] = s["host_counter"]
        if not shoe.anchored:
            first = s["unacked_from"] or s["acked"] + 1
            if first > 1:
                held.append(self._gap(shoe, 1, first - 1))
            st["last_seq"], st["last_digest"] = first - 1, b""
            shoe.anchored = True
        elif s["acked"] > st["last_seq"]:
            held.append(self._gap(shoe, st["last_seq"] + 1, s["acked"]))
            st["last_seq"], st["last_digest"] = s["acked"], b""
        if not s["withheld"]:  # (a squeeze withholds the hand's finished frames until shown)
            shoe.said = max(shoe.said, f.seq)
        shoe.raised = []
        for kind, detail in held:
            shoe.emit(kind, detail)
        self._opened(rid, f, shoe, at, None)
        if again:
            self.optional = alarm_key("tilt", (st["inventory"] or {}).get("shoe"), None,
                                       TILT_DETAIL)

    def _checkpoint(self, rid: int, f: pr.Frame, shoe: DerivedShoe, at: float) -> None:
        """A checkpoint the shoe signed: where the stored frames hold its whole log, its root
        is theirs, or the validator raised checkpoint_mismatch (its frame's alarms)."""
        shoe.raised = []
        root = shoe.log.root_at(f.seq)
        if root is not None and root != f.payload:
            shoe.emit("checkpoint_mismatch", checkpoint_mismatch(f.seq))
        self.cosignatures.checkpoint(rid, f)
        self._opened(rid, f, shoe, at, None)

    def _gap(self, shoe: DerivedShoe, first: int, last: int) -> tuple[str, Any]:
        """Frames that can never be seen here: the accounts are partial, as the validator's."""
        shoe.accounts.mark_partial()
        hole = {"shoe_id": shoe.shoe_id, "first": first, "last": last}
        if first == 1:  # the store met the shoe later: its head, not a hole in it
            self.counts["starts"].append({"shoe_id": shoe.shoe_id, "seq": last + 1})
        else:
            self.counts["holes"].append(hole)
        return "sequence_gap", (first, last)

    def _chained(self, rid: int, f: pr.Frame, shoe: DerivedShoe, at: float) -> None:
        st = shoe.st
        where = f"frame id {rid} (shoe {sid(f.shoe_id)} seq {f.seq})"
        held: list[tuple[str, Any]] = []
        if f.boot < st["last_boot"]:
            raise Broken(f"{where}: boot {f.boot} after boot {st['last_boot']}")
        if not shoe.anchored:
            if f.seq != 1:
                held.append(self._gap(shoe, 1, f.seq - 1))
                shoe.unseen = f.seq - 1
        elif f.seq <= st["last_seq"]:
            raise Broken(f"{where}: seq {f.seq} is stored again after seq {st['last_seq']}")
        elif f.seq != st["last_seq"] + 1:
            raise Broken(f"{where}: seq {f.seq} follows {st['last_seq']} and no status of the "
                         "shoe says the frames between were acknowledged elsewhere (deleted?)")
        elif st["last_digest"] and f.chain != st["last_digest"]:
            raise Broken(f"{where}: its chain is not the digest of frame seq {st['last_seq']}")
        shoe.anchored = True
        st["last_seq"], st["last_digest"], st["last_boot"] = f.seq, f.digest, f.boot
        shoe.stored[f.seq] = f.digest
        shoe.log.add(f.seq - 1, f.raw)
        self.counts["frames"] += 1
        shoe.raised = []
        for kind, detail in held:
            shoe.emit(kind, detail)
        try:
            kind, rec = pr.decode_payload(f)
        except pr.FrameError:
            shoe.emit("malformed_payload", "an authentic frame whose payload does not fit its "
                      f"type {type_name(f)}")
            self._opened(rid, f, shoe, at, None)
            return
        record = (rid, f.key_id, f.shoe_id, f.seq, kind, rec.get("shoe"), rec.get("round"),
                  json.dumps(rec, sort_keys=True))
        if kind == "resolution" and rec["source"] == "host":
            shoe.effects[f.seq] = ("resolve", rec)
        elif kind == "shoe_start":
            shoe.effects[f.seq] = ("new_shoe", rec, (st["inventory"] or {}).get("shoe"))
        elif kind == "result" or (kind == "blackjack_result" and not rec["voided"]):
            self.counts["rounds"] += 1
            shoe.round_seqs.append((f.seq, rec.get("shoe")))
        elif kind == "shoe_end":
            shoe.ended.add(rec.get("shoe"))
        shoe.accounts.account(kind, rec)
        self._opened(rid, f, shoe, at, record)

    def _opened(self, rid: int, f: pr.Frame, shoe: DerivedShoe, at: float,
                record: tuple[Any, ...] | None) -> None:
        self.touched.add(shoe.shoe_id)
        self.frame = OpenFrame(rid, f, shoe, at, record, shoe.raised)
        self.stored_alarms = []
        self.record_seen = False
        self.optional = None

    def _finish(self) -> None:
        if self.unsealed is not None:
            pid, p = self.unsealed
            raise Broken(f"frame id {pid} (shoe {sid(p.shoe_id)} seq {p.seq}, unsigned) is "
                         "sealed by no later frame of its shoe")
        self.operator_log.finish(self.shoes)
        for shoe_id, shoe in sorted(self.shoes.items()):
            if shoe.said > shoe.st["last_seq"]:
                self.counts["unstored"].append({"shoe_id": shoe_id,
                                                "first": shoe.st["last_seq"] + 1,
                                                "last": shoe.said})
        self.counts["absent"] = sorted(s for s in self.configs
                                       if s not in self.shoes or not self.shoes[s].anchored)
        self.counts["shoes"] = sum(shoe.anchored for shoe in self.shoes.values())


"""`sabot audit verify`: re-verify an audit store from its raw frames and check its own row chain.

What it proves, and what it cannot (docs/SECURITY.md): every stored row still has the hash that
chains it to the row before (an inserted, altered or deleted row breaks the chain where it
happened); every trigger that makes the store append-only is still there, word for word; every
accepted frame still carries a valid signature of the shoe's result key (from the shoe registry:
public keys only) or, unsigned (initial_cards), is sealed by the next accepted frame of its shoe,
follows its predecessor in seq and digest chain (or a stored sequence_gap alarm says why not),
and decodes to exactly the record stored for it; every stored
round is the one the host's rules deal, or a stored alarm says it is not. Someone who rewrites
the whole tail of every table and recomputes the chain is caught only by the shoe itself: the shoe
holds its frames until they are acknowledged, and its status reports the seq it was acknowledged
to."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

from sabot import protocol as pr
from sabot.audit.accounts import ShoeAccounts
from sabot.audit.store import COLUMNS, GENESIS, TRIGGERS, AuditStore, StoreUnreadable, row_hash
from sabot.errors import SabotError
from sabot.game import rules
from sabot.registry import ShoeEntry


class Broken(Exception):
    """The first thing found wrong with the store."""


def _norm(sql: str) -> str:
    return re.sub(r"\s+", " ", sql.replace("IF NOT EXISTS ", "")).strip().rstrip(";")


def verify(path: str, configs: Mapping[int, ShoeEntry]) -> dict[str, Any]:
    """{"ok", "frames", "rounds", "rows", "problem"} for the store at `path`; `configs` maps shoe
    ids to their registry entries: their public keys verify every signature, their configuration
    derives the alarms again."""
    store = AuditStore(path, writer=False)
    counts: dict[str, Any] = {"frames": 0, "rounds": 0, "rows": 0, "holes": []}
    try:
        _check_triggers(store)
        counts["rows"] = _check_chain(store)
        _check_frames(store, configs, counts)
        _check_alarms(store, configs)
    except StoreUnreadable as e:
        return {"ok": False, **counts, "problem": f"the store cannot be read ({e.reason})"}
    except Broken as e:
        return {"ok": False, **counts, "problem": str(e)}
    finally:
        store.close()
    return {"ok": True, **counts, "problem": None}


def _check_triggers(store: AuditStore) -> None:
    have = {name: _norm(sql) for name, sql in store.triggers().items()}
    for name, sql in TRIGGERS.items():
        if name not in have:
            raise Broken(f"trigger {name} is missing: the store was opened to edits")
        if have[name] != _norm(sql):
            raise Broken(f"trigger {name} was altered: {have[name]}")
    for name in sorted(set(have) - set(TRIGGERS)):  # e.g. one that silently drops new alarms
        raise Broken(f"trigger {name} is not the store's: {have[name]}")
    tables = store.tables()
    for table in COLUMNS:
        if table not in tables:
            raise Broken(f"table {table} is missing")


def _check_chain(store: AuditStore) -> int:
    prev, expect = GENESIS, 1
    for table, rid, no, values, h in store.rows():
        if no != expect:
            raise Broken(f"row {expect} of the chain is missing (deleted); the next is {table} "
                         f"id {rid}")
        if row_hash(prev, table, no, rid, values) != h:
            raise Broken(f"{table} id {rid} (row {no} of the chain) was altered or inserted")
        prev, expect = h, expect + 1
    for table, (n, seen) in store.chain_counts().items():  # a row outside the chain (chain_no
        if n != seen:  # reused) cannot hide either
            raise Broken(f"{table} holds rows outside the chain")
    return expect - 1


def _signed_by_shoe(configs: Mapping[int, ShoeEntry], f: pr.Frame, fid: int) -> None:
    """Broken unless the frame carries a valid signature of its shoe's result key version."""
    entry = configs.get(f.shoe_id)
    if entry is None:
        raise Broken(f"shoe {f.shoe_id} is not in the shoe registry: its frames cannot be "
                     "verified (pass the registry that holds its public keys: --registry FILE)")
    try:
        key = entry.public_key(f.key_id)
    except SabotError as e:
        raise Broken(str(e)) from None
    if key is None:
        raise Broken(f"the registry holds no public key version {f.key_id} for shoe "
                     f"{f.shoe_id}: frame id {fid} cannot be verified")
    if not pr.verify(key, f):
        raise Broken(f"frame id {fid} (shoe {f.shoe_id} seq {f.seq}) does not carry a valid "
                     f"signature of the shoe's key version {f.key_id}")


def _check_frames(store: AuditStore, configs: Mapping[int, ShoeEntry],
                  counts: dict[str, Any]) -> None:
    alarms = {fid: set(kinds) for fid, kinds in store.alarm_kinds_by_frame().items()}
    records = store.records_by_frame()
    last: dict[int, pr.Frame] = {}
    unsealed: dict[int, tuple[int, pr.Frame]] = {}  # shoe id -> an accepted unsigned frame
    seen: set[int] = set()
    for fid, raw, type_name in store.accepted_frames():
        if type_name is None:
            continue
        try:
            f = pr.parse(raw)
        except pr.FrameError as e:
            raise Broken(f"frame id {fid} is not a frame ({e.reason})") from None
        shoe = f.shoe_id
        waiting = unsealed.pop(shoe, None)
        if f.signed:
            _signed_by_shoe(configs, f, fid)
        if waiting is not None and not (f.signed and f.chain == waiting[1].digest):
            raise Broken(f"frame id {waiting[0]} (shoe {shoe} seq {waiting[1].seq}, unsigned) is "
                         "not sealed by the next frame of its shoe: its content is not the "
                         "shoe's")
        if not f.signed:
            if f.type != pr.T_INITIAL_CARDS:
                raise Broken(f"frame id {fid} is an unsigned {type_name}: no shoe frame")
            unsealed[shoe] = (fid, f)
        if type_name in ("status", "integrity"):
            continue
        seen.add(fid)
        counts["frames"] += 1
        prev = last.get(shoe)
        if prev is not None:
            # A hole is genuine only where the shoe itself said so: an authentic status, stored
            # between the two, acknowledging past the hole (frames acknowledged elsewhere).
            if f.seq != prev.seq + 1:
                if not _shoe_said_acknowledged(store, configs, prev, f):
                    raise Broken(f"frame id {fid}: seq {f.seq} follows {prev.seq} and no status "
                                 "of the shoe says the frames between were acknowledged "
                                 "(deleted?)")
                # Explained, but a store cannot tell frames acknowledged to another host from
                # frames deleted here with a later genuine status moved in: named, never silent.
                counts["holes"].append({"shoe_id": shoe, "first": prev.seq + 1,
                                        "last": f.seq - 1})
            if f.seq == prev.seq + 1 and f.chain != prev.digest:
                raise Broken(f"frame id {fid}: its chain is not the digest of frame seq "
                             f"{prev.seq}")
        last[shoe] = f
        try:
            kind, rec = pr.decode_payload(f)
        except pr.FrameError:
            if "malformed_payload" not in alarms.get(fid, set()):
                raise Broken(f"frame id {fid} is unreadable and no alarm says so") from None
            continue
        stored = records.get(fid)
        if stored is None or stored[0] != kind or stored[1] != rec:
            raise Broken(f"the record of frame id {fid} (shoe {f.shoe_id} seq {f.seq}) is not "
                         "what the frame says")
        if kind == "result":
            counts["rounds"] += 1
            if not _legal(rec) and "rules_mismatch" not in alarms.get(fid, set()):
                raise Broken(f"frame id {fid}: round {rec['round']} is not what the rules deal "
                             "and no alarm says so")
    for fid, f in sorted(unsealed.values()):
        raise Broken(f"frame id {fid} (shoe {f.shoe_id} seq {f.seq}, unsigned) is sealed by no "
                     "later frame of its shoe")
    for fid in sorted(set(records) - seen):
        raise Broken(f"a record points at frame id {fid}, which is no accepted frame")


# the alarms a frame's content raises: derived again from the frames, they must be those stored
CONTENT_ALARMS = frozenset((
    "rules_mismatch", "announcement_mismatch", "burn_mismatch", "missing_burn",
    "round_out_of_order", "initial_cards_mismatch", "dummy_mismatch", "resolution_mismatch",
    "inventory_exceeded", "inventory_mismatch", "config_mismatch", "malformed_payload",
    "missing_shoe_end", "missing_initial_cards", "round_after_shoe_end", "firmware_update",
    "update_refused", "rekey"))


def _check_alarms(store: AuditStore, configs: Mapping[int, ShoeEntry]) -> None:
    """Run every accepted frame's content through a fresh accounting per shoe device, in the order
    the frames were stored, and compare the alarms it raises with the stored ones, frame by frame
    (player_advantage / repeated_sequence are not derived here)."""
    stored: Counter[tuple[int | None, str]] = Counter()
    gaps: set[int] = set()
    for fid, kinds in store.alarm_kinds_by_frame().items():
        if fid is None:
            continue
        stored.update((fid, kind) for kind in kinds if kind in CONTENT_ALARMS)
        if "sequence_gap" in kinds:
            gaps.add(fid)
    derived: Counter[tuple[int | None, str]] = Counter()
    raised: list[str] = []  # the kinds the frame being accounted raises

    def alarm(kind: str, detail: str, **where: Any) -> None:
        raised.append(kind)

    accounts: dict[int, ShoeAccounts] = {}
    for fid, raw, type_name in store.accepted_frames():
        f = pr.parse(raw)
        shoe = accounts.get(f.shoe_id)
        if shoe is None:
            shoe = accounts[f.shoe_id] = ShoeAccounts(
                configs.get(f.shoe_id) or ShoeEntry(f.shoe_id), {"inventory": {}}, alarm)
        if fid in gaps:  # where the live validator could not see all: partial, as it was
            shoe.mark_partial()
        if type_name in ("status", "integrity"):
            continue
        raised.clear()
        try:
            kind, rec = pr.decode_payload(f)
        except pr.FrameError:
            raised.append("malformed_payload")
        else:
            shoe.account(kind, rec)
        derived.update((fid, k) for k in raised)
    for key in sorted(set(stored) | set(derived), key=lambda k: (k[0] or 0, k[1])):
        if stored.get(key, 0) < derived.get(key, 0):
            raise Broken(f"frame id {key[0]} raises a {key[1]} alarm the store does not hold "
                         "(deleted?)")
        if stored.get(key, 0) > derived.get(key, 0):
            raise Broken(f"the store holds a {key[1]} alarm on frame id {key[0]} that its frames "
                         "do not raise (inserted?)")


def _shoe_said_acknowledged(store: AuditStore, configs: Mapping[int, ShoeEntry], prev: pr.Frame,
                            f: pr.Frame) -> bool:
    """An authentic status of the same shoe, stored between the two frames, with a
    sequence_gap alarm on it, whose `acked` covers every frame between them."""
    for raw in store.gap_statuses(f.shoe_id, prev.raw, f.raw):
        s = pr.parse(raw)
        entry = configs.get(s.shoe_id)
        key = entry.public_key(s.key_id) if entry else None
        if s.shoe_id == f.shoe_id and key is not None and pr.verify(key, s) and \
                pr.decode_status(s.payload)["acked"] >= f.seq - 1:
            return True
    return False


def _legal(rec: dict[str, Any]) -> bool:
    player, banker = rec["player"], rec["banker"]
    if None in player or None in banker or "CUT" in player + banker:
        return False
    if rules.redeal(player, banker) != (player, banker):
        return False
    want = rules.round_outcome(player, banker)
    return all(rec[k] == want[k] for k in ("player_total", "banker_total", "winner", "flags"))

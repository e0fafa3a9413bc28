"""`sabot audit verify`: re-verify an audit store from its raw frames and check its own row chain.

What it proves, and what it cannot (docs/SECURITY.md): every stored row still has the hash that
chains it to the row before (an inserted, altered or deleted row breaks the chain where it
happened); every trigger that makes the store append-only is still there, word for word; every
accepted frame still carries the shoe's MAC, follows its predecessor in seq and chain (or a stored
sequence_gap alarm says why not), and decodes to exactly the record stored for it; every stored
round is the one the host's rules deal, or a stored alarm says it is not. Someone who rewrites
the whole tail of every table and recomputes the chain is caught only by the shoe itself: the shoe
holds its frames until they are acknowledged, and its status reports the seq it was acknowledged
to."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from . import protocol as pr
from . import rules
from .audit import COLUMNS, GENESIS, TRIGGERS, AuditStore, row_hash
from .errors import SabotError


class Broken(Exception):
    """The first thing found wrong with the store."""


def _norm(sql: str) -> str:
    return re.sub(r"\s+", " ", sql.replace("IF NOT EXISTS ", "")).strip().rstrip(";")


def verify(path: str, keys: Mapping[tuple[int, int], bytes]) -> dict[str, Any]:
    """{"ok", "frames", "rounds", "rows", "problem"} for the store at `path`; `keys` maps
    (key_id, shoe_id) to the key its frames are verified with."""
    store = AuditStore(path, writer=False)
    counts = {"frames": 0, "rounds": 0, "rows": 0}
    try:
        _check_triggers(store)
        counts["rows"] = _check_chain(store)
        _check_frames(store, keys, counts)
    except Broken as e:
        return {"ok": False, **counts, "problem": str(e)}
    finally:
        store.close()
    return {"ok": True, **counts, "problem": None}


def _check_triggers(store: AuditStore) -> None:
    have = {name: _norm(sql) for name, sql in store.db.execute(
        "SELECT name, sql FROM sqlite_master WHERE type='trigger'")}
    for name, sql in TRIGGERS.items():
        if name not in have:
            raise Broken(f"trigger {name} is missing: the store was opened to edits")
        if have[name] != _norm(sql):
            raise Broken(f"trigger {name} was altered: {have[name]}")


def _check_chain(store: AuditStore) -> int:
    prev, expect = GENESIS, 1
    for table, rid, no, values, h in store.rows():
        if no != expect:
            raise Broken(f"row {expect} of the chain is missing (deleted); the next is {table} "
                         f"id {rid}")
        if row_hash(prev, table, no, values) != h:
            raise Broken(f"{table} id {rid} (row {no} of the chain) was altered or inserted")
        prev, expect = h, expect + 1
    for table in COLUMNS:  # a row outside the chain (chain_no reused) cannot hide either
        n = store.db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
        seen = store.db.execute(f"SELECT COUNT(DISTINCT chain_no) FROM {table}").fetchone()[0]
        if n != seen:
            raise Broken(f"{table} holds rows outside the chain")
    return expect - 1


def _check_frames(store: AuditStore, keys: Mapping[tuple[int, int], bytes],
                  counts: dict[str, int]) -> None:
    alarms: dict[int, set[str]] = {}
    for fid, kind in store.db.execute("SELECT frame_id, kind FROM alarms"):
        alarms.setdefault(fid, set()).add(kind)
    records = {fid: (kind, json.loads(rec)) for fid, kind, rec in store.db.execute(
        "SELECT frame_id, kind, record FROM records")}
    last: dict[tuple[int, int], pr.Frame] = {}
    rows = store.db.execute("SELECT id, raw, type, verdict FROM frames ORDER BY id")
    for fid, raw, type_name, verdict in rows:
        if verdict != "accepted" or type_name in ("status", "integrity", None):
            continue
        counts["frames"] += 1
        try:
            f = pr.parse(raw)
        except pr.FrameError as e:
            raise Broken(f"frame id {fid} is not a frame ({e.reason})") from None
        shoe = (f.key_id, f.shoe_id)
        if shoe not in keys:
            raise Broken(f"no key for shoe {f.shoe_id} key {f.key_id}: its frames cannot be "
                         "verified (pass its key)")
        if not pr.verify(keys[shoe], f):
            raise Broken(f"frame id {fid} (shoe {f.shoe_id} seq {f.seq}) does not carry the "
                         "shoe's MAC")
        prev = last.get(shoe)
        gap = "sequence_gap" in alarms.get(fid, set())
        if prev is not None and not gap:
            if f.seq != prev.seq + 1 and not _gap_between(store, prev, f):
                raise Broken(f"frame id {fid}: seq {f.seq} follows {prev.seq} with no "
                             "sequence_gap alarm")
            if f.seq == prev.seq + 1 and f.chain != prev.mac[:8]:
                raise Broken(f"frame id {fid}: its chain does not follow frame seq {prev.seq}")
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


def _gap_between(store: AuditStore, prev: pr.Frame, f: pr.Frame) -> bool:
    """A sequence_gap alarm stored between two frames of the same shoe (at a status)."""
    row = store.db.execute(
        "SELECT 1 FROM alarms a JOIN frames s ON s.id = a.frame_id WHERE a.kind='sequence_gap'"
        " AND a.shoe_id=? AND s.id > (SELECT id FROM frames WHERE raw=? LIMIT 1)"
        " AND s.id <= (SELECT id FROM frames WHERE raw=? LIMIT 1)",
        (f.shoe_id, prev.raw, f.raw)).fetchone()
    return row is not None


def _legal(rec: dict[str, Any]) -> bool:
    player, banker = rec["player"], rec["banker"]
    if None in player or None in banker or "CUT" in player + banker:
        return False
    if rules.redeal(player, banker) != (player, banker):
        return False
    want = rules.round_outcome(player, banker)
    return all(rec[k] == want[k] for k in ("player_total", "banker_total", "winner", "flags"))


def keys_for(key_files: list[str]) -> dict[tuple[int, int], bytes]:
    from . import keys as keyfiles

    if not key_files:
        raise SabotError("audit verify needs the shoes' keys (--key FILE, once per shoe)")
    out = {}
    for path in key_files:
        k = keyfiles.load(path)
        out[(k.key_id, k.shoe_id)] = k.key
    return out

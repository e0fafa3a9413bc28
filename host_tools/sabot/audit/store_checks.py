"""`sabot audit verify`'s checks of a store as a whole, apart from its walk row by row
(audit/verify.py): the triggers that keep it append-only, every row in the chain, and whether the
registry given is this store's at all.

A wrong registry and an edited store can look alike: frames that do not verify. It is called a
wrong registry (bad input) only where the evidence says so: the registry verifies a frame of
none of the store's shoes — it holds none of them, or for each one it holds, another key than the
one that signed every stored frame of it — and no witness's state given says the registry's key
is that shoe's. Where the registry verifies even one shoe's frames it is this store's, and a shoe
that does not verify is a store that does not hold (a frame changed, or a shoe's frames put in)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from sabot import note
from sabot import protocol as pr
from sabot.audit.cosign import Witnessed
from sabot.audit.derived import Broken, sid
from sabot.audit.store import COLUMNS, AuditStore
from sabot.errors import SabotError
from sabot.registry import ShoeEntry


def _norm(sql: str) -> str:
    return re.sub(r"\s+", " ", sql.replace("IF NOT EXISTS ", "")).strip().rstrip(";")


def check_triggers(store: AuditStore) -> None:
    have = {name: _norm(sql) for name, sql in store.triggers().items()}
    expected = store.expected_triggers()
    for name, sql in expected.items():
        what = name if name.startswith(("function ", "table ", "policy ")) else f"trigger {name}"
        if name not in have:
            raise Broken(f"{what} is missing: the store was opened to edits")
        if have[name] != _norm(sql):
            raise Broken(f"{what} was altered: {have[name]}")
    for name in sorted(set(have) - set(expected)):  # e.g. one that silently drops new alarms
        what = name if name.startswith("policy ") else f"trigger {name}"
        raise Broken(f"{what} is not the store's: {have[name]}")
    tables = store.tables()
    for table in COLUMNS:
        if table not in tables:
            raise Broken(f"table {table} is missing")


def check_chain_places(store: AuditStore) -> None:
    for table, (n, seen) in store.chain_counts().items():  # a row outside the chain (chain_no
        if n != seen:  # reused) cannot hide either
            raise Broken(f"{table} holds rows outside the chain")


def key_infos(entry: ShoeEntry) -> list[bytes]:
    """The registry entry's result keys as DER SubjectPublicKeyInfo (what a witness keeps)."""
    keys = (entry.public_key(v["version"]) for v in entry.public_keys)
    return [note.ecdsa_verifier("k", k).public for k in keys if k is not None]


def registry_misfit(store: AuditStore, configs: Mapping[int, ShoeEntry],
                    witnessed: Sequence[Witnessed] = ()) -> dict[str, Any] | None:
    """None when the registry is this store's: it verifies a stored frame of one of the store's
    shoes (stored as anything but rejected), or a witness's state vouches for its key of one, or
    the store holds no shoe's frame at all. Otherwise {"unregistered": [shoe ids], "other_key":
    [{"shoe_id", "frames": its signed frames stored, "key_ids": the key versions they name,
    "registered": the versions the registry holds}]}."""
    vouched = set()
    for w in witnessed:
        entry = configs.get(w.shoe_id)
        if entry is not None and w.key is not None:
            try:
                if w.key in key_infos(entry):
                    vouched.add(w.shoe_id)
            except SabotError:
                pass
    seen: dict[int, tuple[int, set[int]]] = {}  # shoe id -> (signed frames, key versions)
    keys: dict[tuple[int, int], Any] = {}
    for table, _, _, values, _ in store.rows():
        if table != "frames" or values[7] == "rejected":
            continue
        try:
            f = pr.parse(values[1])
        except pr.FrameError:
            continue
        n, versions = seen.get(f.shoe_id, (0, set()))
        seen[f.shoe_id] = (n + f.signed, versions | ({f.key_id} if f.signed else set()))
        if f.shoe_id in vouched:
            return None
        entry = configs.get(f.shoe_id)
        if entry is None or not f.signed:
            continue
        if (f.shoe_id, f.key_id) not in keys:
            try:
                keys[f.shoe_id, f.key_id] = entry.public_key(f.key_id)
            except SabotError:
                keys[f.shoe_id, f.key_id] = None
        key = keys[f.shoe_id, f.key_id]
        if key is not None and pr.verify(key, f):
            return None
    if not seen:
        return None
    return {"unregistered": sorted(s for s in seen if s not in configs),
            "other_key": [{"shoe_id": s, "frames": n, "key_ids": sorted(versions),
                           "registered": configs[s].key_versions}
                          for s, (n, versions) in sorted(seen.items()) if s in configs]}


def misfit_text(misfit: Mapping[str, Any], registry: str) -> str:
    """The one line that says the registry is not this store's, and what shows it."""
    said, resigned = [], False
    unregistered = misfit["unregistered"]
    if unregistered:
        said.append(f"shoe {', '.join(sid(s) for s in unregistered)} "
                    f"{'is' if len(unregistered) == 1 else 'are'} not in the shoe registry")
    for o in misfit["other_key"]:
        if set(o["key_ids"]) & set(o["registered"]):
            resigned = True
            said.append(f"it holds another key for shoe {sid(o['shoe_id'])} than the one that "
                        f"signed its {o['frames']} frames here")
        else:
            said.append(f"it holds no key version {', '.join(map(str, o['key_ids']))} for shoe "
                        f"{sid(o['shoe_id'])}, which its {o['frames']} frames here name")
    head = (f"the registry {registry} holds none of this store's shoes ({said[0]})"
            if not misfit["other_key"] else
            f"the registry {registry} verifies no frame of this store: " + "; ".join(said))
    return (head + ": is it this floor's registry?"
            + (" If it is, those frames were all signed again under another key (check the "
               "store against a witness's state: --witness-state)" if resigned else ""))

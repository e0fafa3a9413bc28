"""`sabot audit verify` given a registry that is not the store's: bad input (exit 2, one line that
says so), not a store that does not hold (exit 1). Frames that do not verify are called a wrong
registry only where the evidence says so — the registry verifies a frame of none of the store's
shoes, and no witness's state says its key is the shoe's; every case that can be an edit stays
exit 1 (audit/store_checks.py)."""

import json
import shutil

import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from test_audit_verify import A, B, framed, rechain
from test_witness_state import (
    SHOE,
    dealt,
    entry_of,
    witnessed,  # noqa: F401 (the fixture, for this module too)
)

from sabot import keys
from sabot.audit.store_checks import misfit_text
from sabot.audit.validator import Validator
from sabot.audit.verify import verify
from sabot.game.cards import shuffled_shoe
from sabot.registry import Registry, ShoeEntry
from sabot.virtual.capture_gen import shoe_frames

from kit import flip_a_stored_result, signing_shoe


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """Shoe A's whole shoe validated into a.db, its registry; and two.db: A's and B's."""
    d = tmp_path_factory.mktemp("registry")
    sa, ea = signing_shoe(A)
    sb, eb = signing_shoe(B)
    Registry(str(d / "shoes.json")).put(ea)
    fa, _ = shoe_frames(sa, shuffled_shoe(2, seed=3), 1)
    fb, _ = shoe_frames(sb, shuffled_shoe(2, seed=4), 1)
    for name, pairs in (("a.db", [(ea, fa)]), ("two.db", [(ea, fa), (eb, fb)])):
        for entry, frames in pairs:
            v = Validator(entry, str(d / name), watch=False)
            v.receive(framed(*frames))
            v.store.close()
    return d


def registry(path, *entries):
    reg = Registry(str(path))
    for e in entries:
        reg.put(e)
    return path


def other_key(shoe_id):
    e = ShoeEntry(shoe_id)
    e.add_public_key(1, keys.public_pem(ec.generate_private_key(ec.SECP256R1())
                                              .public_key()))
    return e


def one_line(r, status):
    assert r.returncode == status, (r.returncode, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    return r.stderr


def test_a_registry_holding_none_of_the_stores_shoes_is_bad_input(cli, stored, tmp_path):
    reg = registry(tmp_path / "other.json", other_key(B))
    said = one_line(cli("audit", "verify", "--db", stored / "a.db", "--registry", reg), 2)
    assert f"the registry {reg} holds none of this store's shoes" in said
    assert f"shoe {A:#010x} is not in the shoe registry" in said
    assert "is it this floor's registry?" in said


def test_a_registry_holding_another_key_for_the_shoe_is_bad_input(cli, stored, tmp_path):
    reg = registry(tmp_path / "other.json", other_key(A))
    r = cli("audit", "verify", "--db", stored / "a.db", "--registry", reg, "--json")
    said = one_line(r, 2)
    assert f"holds another key for shoe {A:#010x}" in said and "this floor's registry" in said
    assert "signed again" in said  # what it means if the registry is the floor's
    out = json.loads(r.stdout)
    assert not out["ok"] and [o["shoe_id"] for o in out["wrong_registry"]["other_key"]] == [A]


def test_a_registry_without_the_key_version_the_frames_name_is_said_so():
    """(A registry from before a rekey: its version 2 cannot be registered here without the
    attestation chain, so the line is built from what registry_misfit finds.)"""
    misfit = {"unregistered": [B], "other_key": [
        {"shoe_id": A, "frames": 70, "key_ids": [2], "registered": [1]}]}
    assert misfit_text(misfit, "old.json") == (
        f"the registry old.json verifies no frame of this store: shoe {B:#010x} is not in the "
        f"shoe registry; it holds no key version 2 for shoe {A:#010x}, which its 70 frames here "
        "name: is it this floor's registry?")


def test_the_stores_own_registry_passes_and_says_nothing_of_one(cli, stored):
    r = cli("audit", "verify", "--db", stored / "a.db", "--registry", stored / "shoes.json",
            "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["wrong_registry"] is None


def test_a_changed_signature_stays_an_edit(cli, stored, tmp_path):
    """The registry verifies the shoe's other frames: it is the store's, and a frame that does
    not verify is the store's fault."""
    db = tmp_path / "t.db"
    shutil.copy(stored / "a.db", db)
    fid = flip_a_stored_result(db)
    rechain(db)
    said = one_line(cli("audit", "verify", "--db", db, "--registry", stored / "shoes.json"), 1)
    assert f"frame id {fid}" in said and "signature" in said


def test_a_shoe_the_registry_lacks_beside_one_it_verifies_stays_an_edit(cli, stored, tmp_path):
    """A store holding a shoe the registry does not: its frames put in by an insider, or the
    registry of one pit given for a floor's store. The registry verifies A, so it is not called
    a wrong one: exit 1, and the line names the shoe."""
    said = one_line(cli("audit", "verify", "--db", stored / "two.db", "--registry",
                        stored / "shoes.json"), 1)
    assert f"shoe {B:#010x} is not in the shoe registry" in said


def test_a_store_signed_again_is_an_edit_where_a_witness_vouches_for_the_key(witnessed,  # noqa: F811
                                                                             tmp_path):
    """The insider's store of test_witness_state.py, every frame signed again under a key of
    their own, checked with the genuine registry: alone, the evidence cannot tell it from a
    registry holding another key (and the line says both); with the witness's state, whose log
    was signed by the registry's key, it is a store that does not hold."""
    forged = tmp_path / "forged.db"
    dealt(forged, ec.generate_private_key(ec.SECP256R1()), 7)
    genuine = {SHOE: entry_of(witnessed["key"])}
    alone = verify(str(forged), genuine)
    assert alone["wrong_registry"] and "signed again" in alone["problem"]
    out = verify(str(forged), genuine, witnessed["logs"])
    assert not out["ok"] and out["wrong_registry"] is None
    assert "valid signature" in out["problem"], out["problem"]

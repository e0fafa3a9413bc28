"""Registry.register, the one way provision, deploy, demo and board --key register a shoe's
result key: it adds key versions and keeps the old ones, refuses a version that names another
key, writes the file only when something changed and says so."""

import json

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from sabot import keys
from sabot.errors import SabotError
from sabot.registry import Registry


def pem():
    return keys.public_pem(ec.generate_private_key(ec.SECP256R1()).public_key())


def test_a_new_shoe_is_registered_and_the_same_key_again_changes_nothing(tmp_path):
    path = tmp_path / "shoes.json"
    key = pem()
    entry, changed = Registry.load(str(path)).register(7, 1, key, table="BAC-07")
    assert changed and entry.table == "BAC-07" and entry.key_versions == [1]
    written = path.read_text()
    assert json.loads(written)["shoes"][0]["table"] == "BAC-07"
    entry, changed = Registry.load(str(path)).register(7, 1, key)
    assert not changed and entry.table == "BAC-07" and path.read_text() == written


def test_another_key_for_a_registered_version_is_refused_unless_the_element_is_fresh(tmp_path):
    reg = Registry.load(str(tmp_path / "shoes.json"))
    reg.register(7, 1, pem(), game="midibaccarat", side_wagers=["dragon7"])
    with pytest.raises(SabotError, match="already has a different public key"):
        reg.register(7, 1, pem())
    new = pem()
    entry, changed = reg.register(7, 1, new, fresh_element=True, ez=True)
    assert changed and entry.public_keys[0]["key"] == new and entry.ez
    # what the call does not name is kept
    assert entry.game == "midibaccarat" and entry.side_wagers == ["dragon7"]
    assert Registry.load(reg.path).shoes[7] == entry


def test_a_rename_alone_is_a_change(tmp_path):
    reg = Registry.load(str(tmp_path / "shoes.json"))
    key = pem()
    entry, _ = reg.register(9, 1, key)
    assert entry.table == "shoe-9"
    entry, changed = reg.register(9, 1, key, table="BAC-09")
    assert changed and Registry.load(reg.path).shoes[9].table == "BAC-09"

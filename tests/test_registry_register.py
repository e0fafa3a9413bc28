"""Registry.register, the one way provision, deploy, demo and board --key register a shoe's
result key: it adds key versions and keeps the old ones, refuses a version that names another
key, writes the file only when something changed and says so."""

import json
import re

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
    reg.register(7, 1, pem(), game="midibaccarat", side_wagers=["player_pair"])
    with pytest.raises(SabotError, match="already has a different public key"):
        reg.register(7, 1, pem())
    new = pem()
    entry, changed = reg.register(7, 1, new, fresh_element=True, ez=True)
    assert changed and entry.public_keys[0]["key"] == new and entry.ez
    # what the call does not name is kept
    assert entry.game == "midibaccarat" and entry.side_wagers == ["player_pair"]
    assert Registry.load(reg.path).shoes[7] == entry


def test_a_rename_alone_is_a_change(tmp_path):
    reg = Registry.load(str(tmp_path / "shoes.json"))
    key = pem()
    entry, _ = reg.register(9, 1, key)
    assert entry.table == "shoe-9"
    entry, changed = reg.register(9, 1, key, table="BAC-09")
    assert changed and Registry.load(reg.path).shoes[9].table == "BAC-09"


def test_the_tables_wagers_are_kept_and_checked_as_settlement_takes_them(tmp_path):
    reg = Registry.load(str(tmp_path / "shoes.json"))
    entry, _ = reg.register(3, 1, pem(), decks=6, tie_odds=9, dragon_bonus_paytable="C",
                            side_wagers=["dragon_bonus_banker", "house_money"])
    again = Registry.load(reg.path).shoes[3]
    assert again == entry and (again.decks, again.tie_odds, again.dragon_bonus_paytable) == (
        6, 9, "C")
    for config, said in [
        ({"side_wagers": ["dragon_bonus_player"]}, "dragon_bonus_paytable must be A, B or C"),
        ({"dragon_bonus_paytable": "A"}, "offers no Dragon Bonus wager"),
        ({"side_wagers": ["dragon7"]}, "only on EZ Baccarat tables"),
        ({"side_wagers": ["lucky_six"], "ez": True}, "only on commission-free tables"),
        ({"commission_free": True, "tie_odds": 9}, "8 to 1 (631c.5(j))"),
        ({"tie_odds": 7}, "at least 8"), ({"tie_odds": 101}, "8 to 100"),
        ({"side_wagers": ["house_money", "house_money"]}, "listed twice"),
    ]:
        with pytest.raises(SabotError, match=re.escape(said)):
            reg.register(4, 1, pem(), **config)
    assert 4 not in Registry.load(reg.path).shoes  # nothing written


BAD_NAMES = [("BAC\n07", "unprintable"), ("BAC\x1b[31m07", "unprintable"),
             ("\u202eBAC", "unprintable"), (" BAC-07", "begin or end"),
             ("T" * 65, "1 to 64 characters")]


@pytest.mark.parametrize("name,said", BAD_NAMES)
def test_a_table_name_is_short_and_printable_at_register_and_at_load(tmp_path, name, said):
    reg = Registry.load(str(tmp_path / "shoes.json"))
    with pytest.raises(SabotError, match=re.escape(said)) as e:
        reg.register(5, 1, pem(), table=name)
    assert "\n" not in str(e.value) and "\x1b" not in str(e.value) and len(str(e.value)) < 200
    assert not (tmp_path / "shoes.json").exists()
    reg.register(5, 1, pem(), table="BAC-<b>07</b> ü")  # markup is the pages' to escape
    doc = json.loads((tmp_path / "shoes.json").read_text())
    doc["shoes"][0]["table"] = name  # an edited file
    (tmp_path / "shoes.json").write_text(json.dumps(doc))
    with pytest.raises(SabotError, match=re.escape(said)) as e:
        Registry.load(str(tmp_path / "shoes.json"))
    assert "\n" not in str(e.value) and len(str(e.value)) < 200


def test_a_huge_or_odd_registry_file_is_refused_in_one_line(tmp_path):
    from sabot.registry import MAX_BYTES

    path = tmp_path / "shoes.json"
    shoe = {"shoe_id": 1, "public_keys": []}
    path.write_text(json.dumps({"shoes": [shoe], "pad": " " * MAX_BYTES}))
    with pytest.raises(SabotError, match="over 4 MB"):
        Registry.load(str(path))
    path.write_text('{"shoes": [{"shoe_id": ' + "9" * 5000 + "}]}")  # past int()'s digit limit
    with pytest.raises(SabotError, match="a number too long"):
        Registry.load(str(path))
    path.write_text(json.dumps({"shoes": [dict(shoe, table=["x"])]}))
    with pytest.raises(SabotError, match="table must be a name"):
        Registry.load(str(path))
    path.write_text(json.dumps({"shoes": [dict(shoe, side_wagers=[["x"]])]}))
    with pytest.raises(SabotError, match="unknown side wager"):
        Registry.load(str(path))
    # a registry that would grow past the limit is not written (it could not be read again)
    reg = Registry.load(str(tmp_path / "small.json"))
    reg.register(1, 1, pem())
    written = (tmp_path / "small.json").read_text()
    reg.max_bytes = len(written) + 100  # this registry's bound: room for no second shoe
    with pytest.raises(SabotError, match=f"it would be over {len(written) + 100:,} bytes"):
        reg.register(2, 1, pem())
    assert (tmp_path / "small.json").read_text() == written and 2 not in reg.shoes

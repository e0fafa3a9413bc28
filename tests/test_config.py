"""Configuration honoured: the deck count and the table's wagers are provisioned,
the shoe deals and announces the deck count it was provisioned with (not its board's DECKS), the
registry keeps them, and the host checks the shoe against them (config_mismatch, the inventory),
takes the edges' wagers and `sabot settle --table` from them.

In-process: every variant x deck count 1-8 through the validator (frames as a shoe of that
configuration signs them), and the firmware's own ShoeApp on its provisioned flash for each deck
count; on real MicroPython one 6-deck shoe end to end (`tests/test_deploy.py` provisions one over
a blank shoe's REPL with --decks too)."""

import json
from itertools import product

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from sabot import keys
from sabot import protocol as pr
from sabot.audit.store import open_store
from sabot.audit.validator import Validator
from sabot.errors import BAD_INPUT, SabotError
from sabot.protocol import decode_variant, variant_byte
from sabot.registry import Registry, ShoeEntry
from sabot.virtual.capture_gen import ShoeSigner, shoe_frames
from shoe.app import ShoeApp
from shoe.sensor import encode
from shoe.store import Flash

from kit import fw

# every variant byte a shoe can be provisioned with: game x (plain, EZ, commission-free) x squeeze
VARIANTS = [variant_byte(game, ez, free, squeeze) for game in pr.GAMES
            for ez, free in ((False, False), (True, False), (False, True))
            for squeeze in (False, True)]
BURN = ("AD", "5H")  # the exposed ace: one more card burned
DRAGON_7 = ("AS", "2D", "3H", "2C", "2H", "3S")  # P 6 (three cards), B 7 (three cards)
LUCKY_SIX = ("KS", "AH", "QS", "2S", "4D", "3C")  # P 4, B 6 with three cards
# two rounds, no card twice (a one-deck shoe): the cut card in the first, then one more round
SHORT_SHOE = [*BURN, *DRAGON_7[:3], "CUT", *DRAGON_7[3:], *LUCKY_SIX]
NATURAL = ("AS", "KH", "8D", "QC")  # P 9 (a natural) v B 0: four cards, no third card
CALLS = {"ez": ["Dragon 7"], "commission_free": ["Lucky Six"]}


def entry_for(shoe_id, public, variant, decks):
    """The registry's word on a shoe provisioned with `variant` and `decks`."""
    entry = ShoeEntry(shoe_id, decks=decks, **decode_variant(variant))
    entry.add_public_key(1, keys.public_pem(public))
    return entry


def test_every_variant_and_deck_count_validates_without_config_mismatch(tmp_path):
    """18 variants x 8 deck counts, each its own shoe in one store: the shoe_start announcing
    the registered configuration, the rounds' announcements the variant's, no alarm."""
    key = ec.generate_private_key(ec.SECP256R1())
    store = open_store(str(tmp_path / "a.db"), durable=False)
    for n, (variant, decks) in enumerate(product(VARIANTS, range(1, 9))):
        entry = entry_for(0x100 + n, key.public_key(), variant, decks)
        raw, rounds = shoe_frames(ShoeSigner(key, entry.shoe_id), SHORT_SHOE, 1, decks, variant)
        records = []
        v = Validator(entry, store, watch=False, on_record=lambda k, r: records.append((k, r)))
        verdicts = v.receive(b"".join(pr.encode_frame(f) for f in raw))
        v.finish()
        assert [x[1] for x in verdicts] == ["accepted"] * len(raw), (variant, decks)
        assert v.alarms == [] and rounds == 2, (variant, decks, v.alarms)
        start = next(r for k, r in records if k == "shoe_start")
        assert (start["decks"], start["variant"]) == (decks, entry.variant)
        said = [r["announcements"] for k, r in records if k == "result"]
        want = [CALLS["ez"] if entry.ez else [], CALLS["commission_free"]
                if entry.commission_free else []]
        assert said == want, (variant, decks)
    # the check can fail: the same frames against a registry holding another deck count
    entry = entry_for(0x200, key.public_key(), 2, 6)
    raw, _ = shoe_frames(ShoeSigner(key, 0x200), SHORT_SHOE, 1, 8, 2)
    v = Validator(entry, store, watch=False)
    v.receive(b"".join(pr.encode_frame(f) for f in raw))
    assert [(a["kind"], a["detail"]) for a in v.alarms] == [
        ("config_mismatch", "the shoe announces decks 8 (registry: 6)")]


class InProcess:
    """The firmware's ShoeApp on a provisioned flash (its element in this process), its frames
    verified and stored by the host's validator with the registry's entry for the shoe."""

    def __init__(self, tmp, shoe, entry, board_decks=8):
        self.link = fw.Link()
        self.app = ShoeApp(Flash(str(shoe.flash)), self.link, self.link, shoe.element(),
                           board_decks)
        self.records = []
        self.validator = Validator(entry, open_store(str(tmp / "a.db"), durable=False),
                                   watch=False, on_record=lambda k, r: self.records.append((k, r)))
        self.app.start()
        self.pump()

    def pump(self):
        while self.app.busy():
            self.app.service()
        if self.app.hold_from:  # squeeze: the dealer reveals the hands
            self.app.reveal_button()
            self.pump()
        if self.link.data:
            self.validator.receive(bytes(self.link.data))
            self.link.data = bytearray()

    def deal(self, *tokens):
        for t in tokens:
            for b in encode(ord("R"), t.encode()):
                self.app.sensor_byte(b)
            self.app.exit_edge()
            self.pump()

    def of(self, kind):
        return [r for k, r in self.records if k == kind]


@pytest.mark.parametrize("decks", range(1, 9))
def test_the_shoe_deals_the_deck_count_it_was_provisioned_with(tmp_path, decks):
    """The shoe's own provisioning writes the deck count; the shoe (its board holding 8) deals
    and announces that count; `decks` copies of a card are fine on shoe and host, one more is
    the shoe's inventory irregularity and the host's inventory_exceeded."""
    variant = VARIANTS[decks * 5 % len(VARIANTS)]  # the deck counts spread over the variants
    shoe = fw.ProvisionedShoe(tmp_path, variant=variant, decks=decks)
    assert (shoe.flash / "variant").read_bytes() == bytes((variant, decks))
    rig = InProcess(tmp_path, shoe, entry_for(shoe.shoe_id, shoe.public_key(), variant, decks))
    assert rig.app.shoe.decks == decks
    assert [(r["decks"], r["variant"]) for r in rig.of("shoe_start")] == [
        (decks, decode_variant(variant))]
    rig.deal(*BURN)
    for _ in range(decks):  # every card of NATURAL out `decks` times
        rig.deal(*NATURAL)
    assert len(rig.of("result")) == decks
    assert rig.of("irregularity") == [] and rig.validator.alarms == []
    rig.deal(NATURAL[0])  # one copy more than the decks hold
    assert [(r["kind"], r["card"]) for r in rig.of("irregularity")] == [
        ("inventory_exceeded", "AS")]
    assert [(a["kind"], a["detail"]) for a in rig.validator.alarms] == [
        ("inventory_exceeded", f"copy {decks + 1} of AS in a {decks}-deck shoe")]
    assert rig.validator.counts["rejected"] == 0


def test_a_shoe_without_a_deck_count_deals_its_boards_and_never_more(tmp_path):
    """A shoe provisioned before the deck count was written (a one-byte `variant`) deals its
    board's DECKS, as it did; a count beyond what the board holds is not taken, and the
    shoe_start says so to the host (config_mismatch against the registry)."""
    shoe = fw.ProvisionedShoe(tmp_path, decks=6)
    flash = shoe.flash
    for n, (written, board_decks, announced) in enumerate(
            [(b"\x02", 8, 8), (b"\x02\x06", 4, 4), (b"\x02\x00", 8, 8), (b"\x02\x06", 8, 6)]):
        (flash / "variant").write_bytes(written)
        (flash / "log").unlink(missing_ok=True)  # a fresh log: the shoe starts shoe 1 again
        d = tmp_path / f"run{n}"
        d.mkdir()
        rig = InProcess(d, shoe, entry_for(shoe.shoe_id, shoe.public_key(), 2, 6), board_decks)
        assert [r["decks"] for r in rig.of("shoe_start")] == [announced], written
        mismatch = [a["detail"] for a in rig.validator.alarms if a["kind"] == "config_mismatch"]
        assert mismatch == ([] if announced == 6 else
                            [f"the shoe announces decks {announced} (registry: 6)"]), written


def test_provision_registers_the_tables_configuration_and_writes_the_shoes(tmp_path, cli):
    reg = tmp_path / "shoes.json"
    flash = tmp_path / "flash"
    r = cli("provision", "--key", tmp_path / "host.pem", "--flash", flash, "--registry", reg,
            "--table", "BAC-07", "--decks", "6", "--side-wagers",
            "dragon_bonus_player,dragon_bonus_banker,house_money", "--dragon-bonus-paytable", "b",
            "--tie-odds", "9", "--limits", "2.50-500")
    assert r.returncode == 0, r.stderr
    assert "6 decks, tie 9 to 1" in r.stdout and "Dragon Bonus paytable B" in r.stdout
    entry = Registry.load(str(reg)).pick(None)
    assert (entry.table, entry.decks, entry.tie_odds, entry.dragon_bonus_paytable) == (
        "BAC-07", 6, 9, "B")
    assert entry.side_wagers == ["dragon_bonus_player", "dragon_bonus_banker", "house_money"]
    assert (flash / "variant").read_bytes() == bytes((variant_byte(), 6))
    raw = json.loads(reg.read_text())["shoes"][0]
    assert raw["tie_odds"] == 9 and raw["dragon_bonus_paytable"] == "B"
    assert (raw["min_bet_cents"], raw["max_bet_cents"]) == (250, 50000)  # whole cents
    # the edges' and settlement's table: what the registry holds
    assert entry.table_config() == {
        "game": "baccarat", "ez": False, "commission_free": False, "tie_odds": 9,
        "side_wagers": ["dragon_bonus_player", "dragon_bonus_banker", "house_money"],
        "dragon_bonus_paytable": "B"}
    # a kept virtual shoe provisioned again takes the new configuration, on flash and registry
    r = cli("provision", "--key", tmp_path / "host.pem", "--flash", flash, "--registry", reg,
            "--decks", "2", "--ez", "--side-wagers", "dragon7")
    assert r.returncode == 0, r.stderr
    entry = Registry.load(str(reg)).pick(None)
    assert (entry.decks, entry.ez, entry.side_wagers, entry.tie_odds) == (2, True, ["dragon7"], 8)
    assert entry.dragon_bonus_paytable is None
    assert (flash / "variant").read_bytes() == bytes((variant_byte(ez=True), 2))


@pytest.mark.parametrize("args,said", [
    (["--side-wagers", "dragon_bonus_player"], "--dragon-bonus-paytable A, B or C"),
    (["--dragon-bonus-paytable", "A"], "for a table offering Dragon Bonus"),
    (["--commission-free", "--tie-odds", "9"], "8 to 1 (631c.5(j))"),
    (["--side-wagers", "lucky_six"], "Lucky Six is offered only on commission-free tables"),
    (["--side-wagers", "panda8"], "Panda 8 are offered only on EZ Baccarat tables"),
    (["--table", "BAC\x1b[2J07"], "unprintable character"),
    (["--table", "BAC-07 "], "must not begin or end with a space"),
    (["--table", "T" * 65], "1 to 64 characters"),
    (["--limits", "500-25"], "no more than the maximum"),
    (["--limits", "25"], "want MIN-MAX in dollars"),
    (["--limits", "2.505-5"], "not an amount in dollars"),
    (["--limits", "0-5"], "at least 1 cent"),
])
def test_provision_refuses_a_configuration_before_touching_the_shoe(tmp_path, cli, args, said):
    key, flash, reg = tmp_path / "host.pem", tmp_path / "flash", tmp_path / "shoes.json"
    r = cli("provision", "--key", key, "--flash", flash, "--registry", reg, *args)
    assert r.returncode == BAD_INPUT and said in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "\x1b" not in r.stderr
    assert not key.exists() and not flash.exists() and not reg.exists()  # nothing touched


def registered_table(tmp_path, **config):
    reg = Registry(str(tmp_path / "shoes.json"))
    key = ec.generate_private_key(ec.SECP256R1()).public_key()
    reg.put(entry_for(7, key, 2, 8))
    entry = reg.shoes[7]
    for k, v in config.items():
        setattr(entry, k, v)
    entry.check()
    reg.put(entry)
    return reg.path


BY_SEVEN = {"player": ["4S", "3D"], "banker": ["KC", "QH", "TC"]}  # P 7 v B 0: not a natural


def test_settle_takes_the_table_from_the_registry(tmp_path, cli):
    path = registered_table(tmp_path, table="BAC-07", tie_odds=9, dragon_bonus_paytable="C",
                            side_wagers=["dragon_bonus_player"])
    tie = {"player": ["7S", "KH"], "banker": ["7D", "QC"]}
    request = {"round": tie, "wagers": [{"seat": 1, "wager": "tie", "amount_cents": 100},
                                        {"seat": 2, "wager": "dragon_bonus_player",
                                         "amount_cents": 100}]}
    r = cli("settle", "--table", "BAC-07", "--registry", path, stdin=json.dumps(request))
    assert r.returncode == 0, r.stderr
    won = {e["wager"]: e for e in json.loads(r.stdout)["settlements"]}
    assert won["tie"]["win_cents"] == 900  # the registered 9 to 1, not the default 8
    assert won["dragon_bonus_player"]["result"] == "lose"
    # paytable C: a win by 7 points pays 4 to 1 (A 6, B 7); the same table by --shoe-id
    request = {"round": BY_SEVEN, "wagers": [{"seat": 2, "wager": "dragon_bonus_player",
                                                "amount_cents": 100}]}
    r = cli("settle", "--shoe-id", "7", "--registry", path, stdin=json.dumps(request))
    assert r.returncode == 0 and json.loads(r.stdout)["settlements"][0]["win_cents"] == 400
    # without the registry the request's own table is all there is: no Dragon Bonus offered
    r = cli("settle", stdin=json.dumps(request))
    assert r.returncode == BAD_INPUT and "does not offer dragon_bonus_player" in r.stderr


def test_settle_refuses_a_request_whose_table_disagrees_with_the_registry(tmp_path, cli):
    path = registered_table(tmp_path, table="BAC-07", tie_odds=9)
    base = {"round": BY_SEVEN, "wagers": [{"seat": 1, "wager": "player", "amount_cents": 100}]}
    for table, said in [({"tie_odds": 8}, "table.tie_odds 8 disagrees with table BAC-07"),
                        ({"ez": True}, "table.ez true disagrees"),
                        ({"side_wagers": ["house_money"]}, "table.side_wagers")]:
        r = cli("settle", "--table", "BAC-07", "--registry", path,
                stdin=json.dumps(dict(base, table=table)))
        assert r.returncode == BAD_INPUT and said in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
    # agreeing fields and those the registry does not hold (vigorish) are the request's
    r = cli("settle", "--table", "BAC-07", "--registry", path,
            stdin=json.dumps(dict(base, table={"tie_odds": 9, "vigorish": "deferred"})))
    assert r.returncode == 0 and "markers" in json.loads(r.stdout), r.stderr
    r = cli("settle", "--table", "BAC-99", "--registry", path, stdin=json.dumps(base))
    assert r.returncode == BAD_INPUT and "is at table 'BAC-99' (its tables: BAC-07)" in r.stderr


@pytest.mark.board
def test_a_six_deck_shoe_on_micropython_from_provision_to_the_validator(tmp_path, cli):
    """`sabot provision --flash --decks 6` and the virtual board (the firmware on MicroPython):
    the shoe announces 6 decks, the validator with the registry's entry raises nothing, and the
    seventh ace of spades is the shoe's irregularity and the host's inventory_exceeded."""
    from sabot.audit.validator import Validator
    from sabot.link.host import HostLink
    from sabot.virtual.board import VirtualBoard
    from sabot.virtual.dealer_channel import card_bytes

    from kit import SIGN_MS, free_port_for_tests

    key, flash, reg = tmp_path / "host.pem", tmp_path / "flash", tmp_path / "shoes.json"
    r = cli("provision", "--key", key, "--flash", flash, "--registry", reg, "--decks", "6",
            "--ez", "--side-wagers", "dragon7,panda8", "--table", "EZ-06")
    assert r.returncode == 0, r.stderr
    entry = Registry.load(str(reg)).pick(None)
    board = VirtualBoard(str(flash), port=free_port_for_tests(), sign_ms=SIGN_MS).start()
    records = []
    validator = Validator(entry, str(tmp_path / "audit.db"),
                          on_record=lambda k, r: records.append((k, r)))
    link = HostLink(board.url, validator, keys.load_or_create(str(key)))
    try:
        def settle():  # as kit.Rig: every input read, every frame it made stored
            assert board.wait_read(10) and link.ask(10) is not None

        def deal(*tokens):
            for t in tokens:
                board.send(card_bytes(t))
            settle()

        settle()  # the link's first exchange (the shoe_start the shoe made at its first boot)
        deal("AD", "5H", *(NATURAL * 6))
        starts = [r for k, r in records if k == "shoe_start"]
        assert [(r["decks"], r["variant"]["ez"]) for r in starts] == [(6, True)]
        assert len([r for k, r in records if k == "result"]) == 6 and validator.alarms == []
        deal("AS")
        assert [(r["kind"], r["card"]) for k, r in records if k == "irregularity"] == [
            ("inventory_exceeded", "AS")]
        assert [a["detail"] for a in validator.alarms] == ["copy 7 of AS in a 6-deck shoe"]
        assert validator.counts["rejected"] == 0
    finally:
        link.close()
        board.stop()
        validator.store.close()


@pytest.mark.parametrize("low,high,said", [
    (2500, None, "both limits, or neither"), (0, 100, "from 1"), (True, 100, "whole number"),
    (500, 25, "above the maximum"),
])
def test_a_registry_with_limits_that_are_no_limits_is_refused(tmp_path, low, high, said):
    key = ec.generate_private_key(ec.SECP256R1()).public_key()
    entry = entry_for(7, key, 2, 8)
    entry.min_bet_cents, entry.max_bet_cents = low, high
    with pytest.raises(SabotError, match=said):
        entry.check()

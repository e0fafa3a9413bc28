"""21 Baccarat dealt by the shoe: its decision table generated from § 681a.6's words and the
drawing rule (release/table21_gen.py), the firmware's rules (shoe/b21.py) and the host's
independent ones (game/baccarat21.py) dealing thousands of random rounds alike on real
MicroPython with the heap locked, a hidden shoe of every winning rule dealt through the whole
shoe app on the virtual board and verified, a table of other settings provisioned from the CLI
and dealt by them, the whole card path allocating nothing, and the validator's second opinion
finding a round its rules deal otherwise or a table other than the registry's."""

import json
import random
import re
import struct

import pytest

from sabot import frames21, keys
from sabot.audit.accounts import ShoeAccounts, new_shoe_accounts
from sabot.errors import SabotError
from sabot.game import baccarat21 as b21
from sabot.game.cards import format_shoe, shuffled_shoe
from sabot.registry import Registry, ShoeEntry
from sabot.release import table21_gen, table_gen

from kit import ROOT

RANKS, SUITS = "A23456789TJQK", "SHDC"
WINNERS = {1: "player", 2: "banker", 3: "tie"}


def code(card):
    return RANKS.index(card[0]) * 4 + SUITS.index(card[1])


def test_the_winner_table_is_section_681a6_read_the_ordinary_way():
    table = table21_gen.build_winner_table()
    said = {(p, b): WINNERS[table21_gen.winner_of(table, p, b)] for p in range(32)
            for b in range(32)}
    assert said == {(p, b): b21.winner(p, b) for p in range(32) for b in range(32)}
    assert said[(20, 19)] == "player" and said[(19, 20)] == "banker"  # (c)(1)(i), (2)(i)
    assert said[(22, 24)] == "player" and said[(25, 23)] == "banker"  # (c)(1)(ii), (2)(ii)
    assert said[(18, 23)] == "player" and said[(26, 21)] == "banker"  # the reading
    assert said[(19, 19)] == said[(22, 22)] == "tie"  # (d)(1)
    assert table_gen.check() is None  # the committed firmware/shoe/b21table.py is that
    with pytest.raises(SabotError, match="cannot read the winning rule"):
        table21_gen.parse_winning_rule(table21_gen.WINNING_RULE.replace("lower", "higher", 1))
    with pytest.raises(SabotError, match="cannot read the drawing rule"):
        table21_gen.parse_drawing_rule(table21_gen.DRAWING_RULE.replace("under", "at most", 1))


def random_rules(rng):
    return b21.Rules(ace=rng.choice(b21.ACES),
                     player_draws_below=rng.randint(12, 21),
                     player_draws_soft=rng.random() < 0.5,
                     banker_draws_below=rng.randint(12, 21),
                     banker_draws_soft=rng.random() < 0.5,
                     banker_rule=rng.choice(b21.BANKER_RULES),
                     cut_card=rng.choice(b21.CUT_CARDS))


def random_cards(rng):
    """24 cards of an 8-deck shoe, now and then rich in aces and twos: hands of many cards."""
    low = rng.random() < 0.2
    return [RANKS[rng.choice((0, 1, 2)) if low and rng.random() < 0.8 else rng.randrange(13)]
            + rng.choice(SUITS) for _ in range(24)]


@pytest.mark.board
def test_the_shoe_and_the_host_deal_every_random_round_alike(mpy, tmp_path):
    """Random settings and cards: the firmware's rules (heap locked) and the host's take the
    same cards into each hand and name the same totals, winner and pairs."""
    rng = random.Random(21)
    cases = [(random_rules(rng), random_cards(rng)) for _ in range(4000)]
    (tmp_path / "rounds").write_bytes(b"".join(
        frames21.rule_bytes(r) + bytes(code(c) for c in cards) for r, cards in cases))
    r = mpy(ROOT / "tests" / "mp" / "rounds21.py", tmp_path / "rounds", tmp_path / "out")
    assert r.returncode == 0, r.stderr.decode()
    assert b"rounds 4000 alloc_failures 0" in r.stdout, r.stdout
    out = (tmp_path / "out").read_bytes()
    lengths = []
    for i, (rules, cards) in enumerate(cases):
        announced = frames21.rules_of(frames21.dealing(rules), 8)  # as the validator reads it
        assert frames21.rule_bytes(announced) == frames21.rule_bytes(rules)
        player, banker = b21.deal(iter(cards), rules)
        o = b21.outcome(player, banker, rules)
        np, nb, outcome, pt, bt = out[5 * i : 5 * i + 5]
        assert (np, nb, pt, bt) == (len(player), len(banker), o["player_total"],
                                    o["banker_total"]), (i, rules, cards)
        flags = [n for n, bit in frames21.FLAG_BITS if outcome & bit]
        assert (WINNERS[outcome & 3], flags) == (o["winner"], b21.round_flags(o)), (i, cards)
        lengths.append(np + nb)
    assert max(lengths) >= 12 and min(lengths) == 4  # long rounds, and naturals' short ones


# A hidden shoe: the burn (an ace: one more card), then a round of each winning rule at a table
# of the default settings (the Player's Hand draws under 16, the Banker's under 17), then too few
# cards for another round.
HIDDEN = [
    (["TS", "9S"], ["TH", "8H"], "player"),  # both 21 or less, the greater: (c)(1)(i)
    (["TC", "7D"], ["9C", "KD"], "banker"),  # (c)(2)(i)
    (["TD", "5S", "7H"], ["TS", "6C", "8D"], "player"),  # both over 21, the lower: (c)(1)(ii)
    (["TH", "5C", "9D"], ["KS", "6D", "6C"], "banker"),  # (c)(2)(ii)
    (["TC", "5H", "KD"], ["9H", "TD"], "banker"),  # one of each: the reading
    (["JS", "8C"], ["QD", "6S", "9S"], "player"),  # the reading, the Banker over
    (["TS", "8S"], ["9D", "9C"], "tie"),  # equal, 21 or less: (d)(1)
    (["KH", "5D", "7S"], ["JD", "5H", "7H"], "tie"),  # equal, over 21
    # 16 each after two cards: the Player's Hand stands, the Banker's draws
    (["TH", "6H"], ["9S", "7C", "AD"], "banker"),
]


def hidden_shoe():
    tokens = ["AD", "4C"]
    for player, banker, _ in HIDDEN:
        tokens += [player[0], banker[0], player[1], banker[1], *player[2:], *banker[2:]]
    return tokens + ["2D", "3D"]


def deal_through_the_shoe(tmp_path, tokens, entry):
    """The shoe file dealt by the firmware on the virtual board (real MicroPython) to a
    validator (the shoe in tmp_path/flash, provisioned for tmp_path/k.pem unless it is): (its
    round records, its alarms, frames rejected)."""
    from sabot.virtual.demo import Session

    session = Session(tokens, keys.load_or_create(str(tmp_path / "k.pem")),
                      str(tmp_path / "a.db"), str(tmp_path / "flash"), config=entry)
    try:
        session.run()
    finally:
        session.close()
    v = session.validator.summary()
    return [r for k, r in session.records if k == "result"], v["alarms"], v["rejected"]


@pytest.mark.board
def test_each_winning_rule_is_dealt_by_the_shoe_and_verified(tmp_path):
    rounds, alarms, rejected = deal_through_the_shoe(
        tmp_path, hidden_shoe(), ShoeEntry(0x2100_0001, game="21-baccarat"))
    assert (alarms, rejected) == ([], 0)
    assert [(r["player"], r["banker"], r["winner"]) for r in rounds] == HIDDEN
    assert [r["announcements"] for r in rounds] == [["tie hand"] if w == "tie" else []
                                                    for _, _, w in HIDDEN]
    assert all(r["game"] == "21-baccarat" and r["rules"] == frames21.dealing(b21.Rules())
               for r in rounds)


@pytest.mark.board
def test_a_table_of_other_settings_is_provisioned_and_dealt_by_them(cli, tmp_path):
    """`sabot provision --game 21-baccarat --rules`: the registry holds the settings, the shoe's
    flash their rule bytes; dealt (one deck, a cut card), every round is the host's own deal of
    that shoe under those settings, and none a default table's."""
    settings = {"banker_rule": "beat_player", "player_draws_below": 15,
                "player_draws_soft": True, "ace": "1", "cut_card": "last_round", "tie_odds": 8}
    reg, flash = tmp_path / "shoes.json", tmp_path / "flash"
    r = cli("provision", "--flash", flash, "--key", tmp_path / "k.pem", "--registry", reg,
            "--game", "21-baccarat", "--decks", "1", "--rules", json.dumps(settings),
            "--side-wagers", "tie,banker_bonus", "--table", "T21")
    assert r.returncode == 0, r.stderr
    assert "21-baccarat, 1 decks, banker_rule beat_player" in r.stdout
    entry = Registry.load(str(reg)).at_table("T21")
    assert (entry.game, entry.decks, entry.rules21) == ("21-baccarat", 1, settings)
    rules = entry.rules21_rules
    assert (flash / "variant").read_bytes() == bytes((frames21.VARIANT, 1)) + \
        frames21.rule_bytes(rules)
    # what `sabot board` reads of it at start (a board started on this flash)
    from sabot.virtual.demo import flash_table

    assert flash_table(str(flash)) == {"game": "21-baccarat", **frames21.dealing(rules)}
    tokens = shuffled_shoe(1, seed=5)
    tokens.insert(40, "CUT")
    rounds, alarms, rejected = deal_through_the_shoe(tmp_path, tokens, entry)
    # settings that favour the Banker's Hand more than its commission takes: the live edges
    # find the players' edge on the Banker wager from the first round on, raised once a shoe
    assert rejected == 0 and {a["kind"] for a in alarms} == {"player_advantage"}
    assert [a["round"] for a in alarms if a["detail"].startswith("banker ")] == [1]
    want = b21.deal_shoe(tokens, rules)
    assert [{k: r[k] for k in want[0]} for r in rounds] == want
    assert want != b21.deal_shoe(tokens, b21.Rules(decks=1))
    for args, said in ((["--ez"], "--ez: not a 21 Baccarat table's"),
                       (["--rules", '{"banker_rule": "chase"}'],
                        "banker_rule is one of fixed, beat_player"),
                       (["--side-wagers", "dragon7"], "side_wagers of a 21 Baccarat table")):
        r = cli("provision", "--flash", tmp_path / "f2", "--key", tmp_path / "k.pem",
                "--registry", reg, "--game", "21-baccarat", *args)
        assert r.returncode == 2 and said in r.stderr and not (tmp_path / "f2").exists(), \
            r.stderr
    r = cli("provision", "--flash", tmp_path / "f2", "--key", tmp_path / "k.pem", "--registry",
            reg, "--rules", "{}")
    assert r.returncode == 2 and "--rules is 21 Baccarat's" in r.stderr


@pytest.mark.board
def test_the_whole_card_path_of_a_21_baccarat_shoe_allocates_nothing(mpy, mpy_build, tmp_path):
    """Heap locked over each card's whole path, in the heap every build says a shoe needs (the
    firmware compiled to .mpy, as it ships)."""
    from sabot.release.build import HEAP_NEEDED
    from sabot.virtual.provisioning import set_variant

    from kit.fw import EmulatorProcess, ProvisionedShoe, write_acks

    shoe = ProvisionedShoe(tmp_path)
    rules = b21.Rules(banker_rule="beat_player", player_draws_soft=True)
    set_variant(str(shoe.flash), frames21.VARIANT, 8, frames21.rule_bytes(rules))
    tokens = shuffled_shoe(8, seed=3)[:160]
    (tmp_path / "shoe.txt").write_text(format_shoe(tokens))
    write_acks(shoe, tmp_path / "acks.bin")
    em = EmulatorProcess(shoe.store, tmp_path / "el.sock", "--sign-ms", 0, "--ecc-ms", 0,
                         "--cmd-ms", 0)
    try:
        r = mpy(ROOT / "tests" / "mp" / "card_path.py", tmp_path / "shoe.txt", shoe.flash,
                em.spec, "lock", tmp_path / "acks.bin", heapsize=f"{HEAP_NEEDED >> 10}K",
                path=[mpy_build], cwd=tmp_path)
    finally:
        em.stop()
    assert r.returncode == 0, r.stderr.decode()
    got = {k.decode(): int(v) for k, v in re.findall(rb"(\w+) (\d+)", r.stdout)}
    assert got["alloc_failures"] == 0 and got["element_errors"] == 0
    assert got["results"] == len(b21.deal_shoe(tokens, rules)) > 10


def accounts(entry):
    alarms = []
    state = {"inventory": new_shoe_accounts(1)}
    state["inventory"]["burned"] = True
    acc = ShoeAccounts(entry, state, lambda kind, detail, **where: alarms.append(kind))
    return acc, alarms


def result21(player, banker, winner, rules=None):
    body = struct.pack(">BB", len(player) << 4 | len(banker), 0) + frames21.rule_bytes(
        rules or b21.Rules()) + bytes(code(c) for c in player + banker) + bytes((winner,))
    return {"event": "result", **frames21.decode_result(1, 1, body)}


def test_the_validator_holds_each_round_to_its_own_rules_and_the_registrys_table():
    entry = ShoeEntry(0x2100_0002, game="21-baccarat")
    for rec, want in (
            (result21(["TS", "9S"], ["TH", "8H"], 1), []),
            # the Banker stood on 16: its rule draws under 17
            (result21(["TS", "9S"], ["TH", "6H"], 1), ["rules_mismatch"]),
            # the Player's 18 against 23: the shoe signed the Banker's win
            (result21(["TS", "8S"], ["TH", "6H", "7C"], 2), ["rules_mismatch"]),
            # dealt under beat_player: another table than the registry's
            (result21(["TS", "9S"], ["TH", "8H", "2C"], 2, b21.Rules(banker_rule="beat_player")),
             ["config_mismatch"])):
        acc, alarms = accounts(entry)
        acc.account("initial_cards", {"shoe": 1, "round": 1, "player": rec["player"][:2],
                                      "banker": rec["banker"][:2]})
        acc.account("result", rec)
        assert alarms == want, (rec, alarms)
    acc, alarms = accounts(entry)
    start = {"event": "shoe_start", "shoe": 2, "decks": 8,
             "variant": {"game": "21-baccarat", **frames21.dealing(b21.Rules(ace="1"))}}
    acc.account("shoe_start", start)
    assert alarms == ["missing_shoe_end", "config_mismatch"]  # (shoe 1 never ended here)
    for announced in ({"game": "21-baccarat", **frames21.dealing(b21.Rules(
            banker_rule="beat_player"))}, {"game": "baccarat", "ez": False}):
        acc, alarms = accounts(entry)  # settings of other keys: an alarm, never a KeyError
        acc.account("shoe_start", dict(start, variant=announced))
        assert alarms[-1] == "config_mismatch"
    acc, alarms = accounts(entry)  # a baccarat round from a 21 Baccarat table's shoe
    acc.account("result", {"event": "result", "shoe": 1, "round": 1, "player": ["5S", "4S"],
                           "banker": ["TH", "8H"], "player_total": 9, "banker_total": 8,
                           "winner": "player", "flags": ["player_natural", "banker_natural"],
                           "announcements": []})
    assert alarms[0] == "config_mismatch"
    acc, alarms = accounts(ShoeEntry(0x2100_0003))  # a baccarat table's registry entry
    acc.account("result", result21(["TS", "9S"], ["TH", "8H"], 1))
    assert alarms[0] == "config_mismatch"


def test_the_shoe_refuses_rule_bytes_that_name_no_tables_settings(tmp_path):
    """Provisioning is the only time a shoe takes its rules: bytes no table's settings make (a
    draw total past 21, a Banker's byte with bits no setting has) are refused before anything is
    written, never dealt by."""
    from cryptography.hazmat.primitives.asymmetric import ec

    from sabot.virtual import factory

    xy = keys.xy(ec.generate_private_key(ec.SECP256R1()).public_key())
    for variant, rules in ((130, b"\x1f\x11"), (130, b"\x0b\x11"), (130, b"\x11\x80"),
                           (130, b"\x11\x05"), (130, b"\x11"), (130, b""), (131, b"\x11\x11"),
                           (128, b"\x11\x11"), (2, b"\x11\x11")):
        with pytest.raises(SabotError, match=r"rule bytes|variant byte is 130"):
            factory.provision(tmp_path / "el", tmp_path / "flash", 5, variant, xy, 8, rules)
        assert not (tmp_path / "flash" / "variant").exists()


def test_a_registered_table_settles_by_its_own_settings_not_the_requests(cli, tmp_path):
    """`settle --table` at a 21 Baccarat table: a setting the request names otherwise than the
    table — a default one included — is refused, the same one is taken, and nothing the
    registry does not name can change what the table pays."""
    reg = tmp_path / "shoes.json"
    Registry.load(str(reg)).put(ShoeEntry(0x2100_0004, table="T21", game="21-baccarat",
                                          side_wagers=["tie", "banker_bonus"]))
    request = {"round": {"player": ["TC", "6H"], "banker": ["KH", "7D"]},
               "wagers": [{"seat": 1, "wager": "banker", "amount_cents": 1000}]}
    for table, said in (({"banker_commission": "none"}, "table.banker_commission \"none\""),
                        ({"bonus_paytable": {"pair": 50}}, "table.bonus_paytable"),
                        ({"tie_main": "lose"}, "table.tie_main"), ({"decks": 6}, "table.decks"),
                        ({"cut_card": "last_round"}, "table.cut_card")):
        r = cli("settle", "--table", "T21", "--registry", reg,
                stdin=json.dumps(dict(request, table=table)))
        assert r.returncode == 2 and said in r.stderr and "disagrees with table T21" in \
            r.stderr, r.stderr
    r = cli("settle", "--table", "T21", "--registry", reg,
            stdin=json.dumps(dict(request, table={"tie_odds": 7, "game": "21-baccarat"})))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["settlements"] == [
        {"seat": 1, "wager": "banker", "result": "win", "win_cents": 1000, "vigorish_cents": 50}]
    with pytest.raises(SabotError, match="the fixed Banker's rule's"):
        b21.Rules.from_config({"banker_rule": "beat_player", "banker_draws_below": 18})


@pytest.mark.board
def test_a_cut_card_out_while_the_shoe_is_held_between_rounds_ends_it_at_the_resolution(mpy):
    """`cut_card` last_round, on real MicroPython: the cut card between rounds ends the shoe;
    held there (an unreadable card), it ends once the hold is resolved, never after one more
    round (tests/mp/cut21.py)."""
    from sabot.protocol import PH_ENDED

    r = mpy(ROOT / "tests" / "mp" / "cut21.py")
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.decode().split("\n")[:2] == [f"held {h} phase {PH_ENDED} round 1"
                                                for h in (0, 1)], r.stdout


def test_a_table_whose_hands_draw_alike_raises_no_alarm_at_a_full_shoe():
    """An edge of exactly 0 (the two hands drawing alike, no commission) is no player's edge,
    however the doubles round it."""
    from sabot.audit.watch import LiveEdges21

    for below in (12, 16, 21):
        for ace in b21.ACES:
            rules = b21.Rules(player_draws_below=below, banker_draws_below=below, ace=ace,
                              banker_commission="none")
            live = LiveEdges21(8, rules)
            live.update(1, {})
            assert live.favourable(("player", "banker")) == {}, (below, ace)

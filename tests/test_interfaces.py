"""The interfaces users rely on are the repository's own (docs/INTERFACES.md): every command,
option and exit status named there, no text sending a user outside the clone; every line names a
shoe id one way and prints no Python value; round lines show what the table's variant has; a
refused resolution names the ones that fit the hold, by the shoe's own rule."""

import argparse
import copy
import json
import random
import re

import pytest

from sabot import errors
from sabot import protocol as pr
from sabot.cli import build_parser
from sabot.cli.output import format_event, format_round, print_records
from sabot.link.operate import applicable_resolutions

from kit import ROOT
from kit.cli import plain_line_problems

DOC = ROOT / "docs" / "INTERFACES.md"


def subcommands():
    """(name, parser) of every `sabot` subcommand."""
    top = build_parser()
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    return top, list(sub.choices.items())


def section(text, heading):
    """The text from the heading line starting with `heading` to the next heading of its level or
    above; None when there is no such heading."""
    level = heading.split(" ", 1)[0]
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(heading):
            end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("#")
                        and len(lines[j].split(" ", 1)[0]) <= len(level)), len(lines))
            return "\n".join(lines[i:end])
    return None


def named(word, text):
    return re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text) is not None


# ---- the project's own docs ------------------------------------------------------------------
def test_every_command_and_option_is_in_interfaces_md():
    doc = DOC.read_text(encoding="utf-8")
    top, commands = subcommands()
    missing = [opt for a in top._actions for opt in a.option_strings if not named(opt, doc)]
    for name, parser in commands:
        text = section(doc, f"### `sabot {name}")
        if text is None:
            missing.append(f"sabot {name} (no section)")
            continue
        for action in parser._actions:
            for opt in action.option_strings:
                if opt not in ("-h", "--help") and not named(opt, text):
                    missing.append(f"sabot {name} {opt}")
            for choice in action.choices or ():
                if not named(str(choice), text):
                    missing.append(f"sabot {name}: {choice}")
    assert not missing, "not in its section of docs/INTERFACES.md: " + ", ".join(missing)


def test_every_exit_status_is_in_interfaces_md():
    statuses = {v for k, v in vars(errors).items() if k.isupper() and isinstance(v, int)}
    # every error class's status is one of those
    classes = [errors.SabotError, *errors.SabotError.__subclasses__()]
    assert {c.exit_status for c in classes} <= statuses
    text = section(DOC.read_text(encoding="utf-8"), "## Exit status")
    assert text is not None
    assert statuses == {0, 1, 2, 130}
    for status in statuses:
        assert f"| `{status}` |" in text, f"exit status {status} is not in docs/INTERFACES.md"


def help_texts():
    top, commands = subcommands()
    yield "sabot --help", top.format_help()
    for name, parser in commands:
        yield f"sabot {name} --help", parser.format_help()


def test_readme_docs_and_every_help_stay_inside_the_repository():
    texts = [(p.relative_to(ROOT), p.read_text(encoding="utf-8"))
             for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]]
    outside = [where for where, text in [*texts, *help_texts()]
               if any(s in text for s in ("../shared", "shared/", "CONTRACTS"))]
    assert not outside, f"these send a user outside the repository: {outside}"
    broken = []  # and every relative link they make leads to a file of the clone
    for where, text in texts:
        for target in re.findall(r"\]\(([^)#\s]+)", text):
            if "://" not in target and not (ROOT / where).parent.joinpath(target).exists():
                broken.append(f"{where}: {target}")
    assert not broken, broken
    assert "(docs/INTERFACES.md)" in texts[0][1]


# ---- every line: shoe ids in hex, no Python value ---------------------------------------------
SHOE_ID = 0x5AB0_7E57  # 1521516119: ten digits in decimal, unmistakable in a line


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Two whole shoes of a plain Baccarat table, validated from a capture into an audit store,
    with the registry holding the shoe's public key."""
    from kit import validated_capture

    d = tmp_path_factory.mktemp("interfaces")
    validated_capture(d, 2, seed=3, shoe_id=SHOE_ID)
    return d


def test_the_line_check_finds_python_values_and_decimal_shoe_ids():
    """The check every in-process command's output goes through (kit.cli.run_cli) finds what the
    commands printed before."""
    old = ["shoe_start: decks=8 shoe=1 variant={'game': 'baccarat', 'ez': False}",
           "burn: cards=['5C', 'TH'] shoe=1 shoe_id=1521516119",
           "  alarm firmware_update (shoe None): version 20",
           "sabot audit: shoe 1521516119 is not in the shoe registry",
           "registered shoe 0x5ab07e57 (table BAC-07, result key versions [1, 2])",
           "the shoe answered for shoe 3735928559, not 0xdeadbeef"]
    assert plain_line_problems("\n".join(old)) == old
    good = ['{"shoe": 1, "cards": ["5C", "TH"], "variant": {"ez": false}}',
            "[shoe id 0x5ab07e57] burn: shoe=1 cards=5C,TH",
            'sabot settle: markers must be an object of seat: cents owed, e.g. {"3": 25}',
            "shoe 2 round  71: player 3S 6C     9  banker 8S JH     8  -> player"]
    assert plain_line_problems("\n".join(good)) == []


def test_every_line_names_the_shoe_id_in_hex_and_prints_no_python_value(cli, store):
    db, reg, cap = store / "audit.db", store / "shoes.json", store / "cap.bin"
    runs = [cli("replay", cap, "--registry", reg), cli("history", "--db", db),
            cli("history", "--db", db, "--shoe", 2, "--round", 5),
            cli("audit", "verify", "--db", db, "--registry", reg),
            cli("replay", cap, "--registry", reg, "--shoe-id", 7)]  # a shoe it does not hold
    for r in runs:
        assert plain_line_problems(r.stdout + r.stderr) == [], r.args
    assert [r.returncode for r in runs] == [0, 0, 0, 0, 2]
    history = runs[1].stdout.splitlines()
    assert history[0] == "[shoe id 0x5ab07e57] shoe_start: shoe=1 decks=8 variant=baccarat"
    assert history[1].startswith("[shoe id 0x5ab07e57] burn: shoe=1 cards=")
    assert all(line.startswith("[shoe id 0x5ab07e57] ") for line in history)
    assert "shoe 0x00000007 is not in the shoe registry" in runs[4].stderr


def test_an_event_line_shows_lists_and_the_variant_in_words():
    rec = {"event": "resolution", "shoe": 2, "round": 7, "resolution": "void_round",
           "kind": "card_missing", "card": None, "source": "host",
           "voided_cards": ["2C", "4C", None], "shoe_id": 7}
    assert format_event(rec) == ("[shoe id 0x00000007] resolution: shoe=2 round=7 "
                                 "resolution=void_round kind=card_missing source=host "
                                 "voided_cards=2C,4C,--")
    start = {"event": "shoe_start", "shoe": 1, "decks": 6, "variant": {
        "game": "minibaccarat", "ez": True, "commission_free": False, "squeeze": True}}
    assert format_event(start) == "shoe_start: shoe=1 decks=6 variant=minibaccarat, EZ, squeeze"
    assert format_event({"event": "burn", "shoe": 1, "cards": []}) == "burn: shoe=1 cards=none"


# ---- round lines: what the table's variant has -------------------------------------------------
ROUND = {"shoe": 1, "round": 9, "player": ["4S", "3H", "KD"], "banker": ["6C", "KS", "AH"],
         "player_total": 7, "banker_total": 7, "winner": "tie", "flags": [],
         "announcements": ["tie hand"]}
DRAGON = dict(ROUND, player=["4S", "2H", "KD"], player_total=6, winner="banker",
              flags=["dragon7"], announcements=["Dragon 7"])
LUCKY = dict(ROUND, player=["4S", "KH"], player_total=4, banker=["6C", "KS"], banker_total=6,
             winner="banker", flags=["lucky_six"], announcements=[])


def variant(**kw):
    return dict({"game": "baccarat", "ez": False, "commission_free": False, "squeeze": False},
                **kw)


def test_round_lines_show_the_flags_only_where_the_tables_variant_has_them():
    plain, ez, free = variant(), variant(ez=True), variant(commission_free=True)
    assert "dragon7" not in format_round(DRAGON, plain)
    assert format_round(DRAGON, ez).endswith('-> banker  (dragon7)  "Dragon 7"')
    assert "dragon7" not in format_round(DRAGON, free)
    assert "lucky_six" not in format_round(LUCKY, plain) + format_round(LUCKY, ez)
    assert format_round(LUCKY, free).endswith("-> banker  (lucky_six)")
    assert format_round(ROUND, plain).endswith('-> tie  "tie hand"')


def test_printed_rounds_follow_their_shoes_start_or_the_registrys_variant(capsys):
    start = {"event": "shoe_start", "shoe": 1, "decks": 8, "variant": variant(ez=True)}
    print_records([("shoe_start", start), ("result", DRAGON), ("result", LUCKY)], False,
                  shown=("result",))
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and "(dragon7)" in lines[0] and "lucky_six" not in lines[1]
    print_records([("result", LUCKY)], False, variant=variant(commission_free=True))
    assert "(lucky_six)" in capsys.readouterr().out
    print_records([("shoe_start", start), ("result", DRAGON)], True)  # JSON: every flag, always
    assert json.loads(capsys.readouterr().out.splitlines()[1])["flags"] == ["dragon7"]


def test_history_of_a_plain_table_names_no_ez_or_commission_free_flag(cli, store):
    db = store / "audit.db"
    records = [json.loads(x) for x in cli("history", "--db", db, "--json").stdout.splitlines()]
    dealt = {f for r in records for f in r.get("flags", ())}
    assert {"dragon7", "panda8", "lucky_six"} <= dealt  # the JSON records keep every flag
    text = cli("history", "--db", db).stdout + cli("history", "--db", db, "--shoe", 1,
                                                   "--round", 3).stdout
    assert " round " in text and not any(f in text for f in ("dragon7", "panda8", "lucky_six"))


# ---- a refused resolution names the ones that fit ----------------------------------------------
RESOLUTION_NAMES = {1: "void-card", 2: "keep-dummy", 3: "void-round", 4: "end-shoe"}


def firmware_holds(seed, steps=400, decks=1, blackjack=False):
    """Drive the firmware's own dealing state machine (shoe/dealing.py, under CPython) with random
    dealer, sensor and supervisor inputs; at every hold, yield (the shoe, what its frames and
    status tell the host). A one-deck shoe reaches copies beyond its decks too. `blackjack`: a
    blackjack shoe's, with bet spots, presses and disputes among the inputs."""
    from shoe import dealing as fw
    from shoe.blackjack import Round
    from shoe.cards import CUT, NO_CARD

    rng = random.Random(seed)
    shoe = fw.DealingState(decks)
    if blackjack:
        shoe.bj = Round()
    shoe.new_shoe()
    seen = {"burned": False, "ended": False, "round": 0}
    for _ in range(steps):
        shoe.events = 0
        roll = rng.random()
        if shoe.phase == fw.PH_HELD and roll < 0.3:
            shoe.resolve(rng.randint(1, 4))
        elif blackjack and roll < 0.4:
            if rng.random() < 0.1 and shoe.disputable():
                shoe.dispute()
            else:
                shoe.press(rng.randint(1, 3))
        elif roll < 0.75:
            shoe.card_out(rng.randrange(52), rng.choice((0, 1, 5, 127)))
        elif roll < 0.8:
            shoe.card_out(CUT)
        elif roll < 0.85:
            shoe.card_out(NO_CARD)
        elif roll < 0.9:
            shoe.two_cards(rng.randrange(52))
        elif roll < 0.92:
            shoe.foreign()
        elif roll < 0.96:
            shoe.confirm()
        else:
            shoe.empty()
        ev = shoe.events
        if ev & fw.EV_BURN:
            seen["burned"] = True
        if ev & fw.EV_RESULT or (blackjack and ev & fw.EV_RESOLUTION and shoe.voided):
            seen["round"] = shoe.round_no  # (a voided blackjack round: its voided result)
        if ev & fw.EV_SHOE_END:
            seen["ended"] = True
        if shoe.phase == fw.PH_HELD and ev & fw.EV_IRREGULARITY:  # each new hold once
            held = {"kind": pr.IRREGULARITIES[shoe.ir_kind], "card": pr.CARD_NAMES[shoe.ir_card]}
            # the host's count of each card out equals the shoe's (the shoe_end inventory check)
            counts = {pr.CARD_NAMES[c]: n for c, n in enumerate(shoe.inventory) if n}
            yield shoe, held, dict(seen, counts=counts, partial=False)
        if shoe.phase == fw.PH_ENDED and rng.random() < 0.2:
            shoe.new_shoe()
            seen = {"burned": False, "ended": False, "round": 0}


def clone(shoe):
    """A copy of the firmware's DealingState to try a resolution on (its state: numbers and
    bytearrays)."""
    twin = copy.copy(shoe)
    for name, value in vars(shoe).items():
        if isinstance(value, bytearray):
            setattr(twin, name, bytearray(value))
    return twin


def test_the_hosts_rule_names_exactly_the_resolutions_the_shoe_takes():
    kinds, checked = set(), 0
    for seed in range(12):
        for shoe, held, inv in firmware_holds(seed):
            takes = [name for code, name in RESOLUTION_NAMES.items() if clone(shoe).resolve(code)]
            assert applicable_resolutions(held, shoe.round_no, inv, shoe.decks) == takes, (
                seed, held, inv, shoe.held_phase, shoe.complete)
            kinds.add((held["kind"], tuple(takes)))
            checked += 1
    fits = {takes for _, takes in kinds}
    # every kind of hold a baccarat shoe makes
    assert checked > 1000 and {k for k, _ in kinds} == pr.HOLDS - pr.BLACKJACK_HOLDS
    blackjack = set()
    for seed in range(12):
        for shoe, held, inv in firmware_holds(seed, decks=2, blackjack=True):
            takes = [name for code, name in RESOLUTION_NAMES.items() if clone(shoe).resolve(code)]
            assert applicable_resolutions(held, shoe.round_no, inv, shoe.decks, True) == takes, (
                seed, held, inv, shoe.held_phase, shoe.complete)
            blackjack.add((held["kind"], tuple(takes)))
    assert {k for k, _ in blackjack} >= pr.BLACKJACK_HOLDS | {"card_not_due", "card_missing"}
    assert ("void-round", "end-shoe") in {t for k, t in blackjack if k == "disputed"}
    assert ("void-card", "keep-dummy", "void-round", "end-shoe") in fits  # a dummy hand possible
    assert ("void-card", "end-shoe") in fits  # in the burn
    assert ("void-round", "end-shoe") in fits  # a round that cannot be finished
    # met mid-shoe, or with nothing held, the host does not guess
    assert applicable_resolutions(None, 3, {"burned": True, "round": 3}, 8) is None
    assert applicable_resolutions({"kind": "card_not_due", "card": "AS"}, 3, {"partial": True},
                                  8) is None


@pytest.mark.board
def test_a_refused_resolution_names_the_ones_that_fit_the_hold(rig, cli):
    """On the firmware: the shoe runs out mid-round (cards_exhausted). void-card does not fit; the
    refusal names void-round and end-shoe, and void-round then resolves it."""
    from sabot.virtual.dealer_channel import EMPTY

    rig.deal("2C", "3C")
    rig.send(bytes([EMPTY]))
    assert rig.phase == "held" and rig.of("irregularity")[-1]["kind"] == "cards_exhausted"
    rig.link.close()  # the port and the store to `sabot resolve`, as a technician hands them on
    rig.validator.store.close()
    rig.closed = True
    try:
        args = ("--port", rig.board.url, "--key", rig.tmp / "command.pem", "--db",
                rig.tmp / "audit.db", "--registry", rig.registry, "--by", "sue")
        r = cli("resolve", "void-card", *args)
        assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, r.stderr
        assert ("refused void-card (not_now): it does not apply to the held cards_exhausted; "
                "what applies: void-round, end-shoe (sabot resolve void-round --by NAME)"
                ) in r.stderr
        r = cli("resolve", "void-round", *args)
        assert r.returncode == 0, r.stderr
        assert "resolved cards_exhausted in shoe 1: void_round, voided 2C 3C" in r.stdout
    finally:
        rig.board.stop()

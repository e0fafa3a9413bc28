"""`sabot analyze`: exact counts and house edges against published figures and brute force; the
one counting (game/edges.py) in its two implementations, the compiled kernel and Python, held to
each other; its generated tables held to their derivation; the command's start kept light."""

import json
import random
import shutil
import subprocess
import sys
from fractions import Fraction
from itertools import permutations
from pathlib import Path

import pytest

from sabot.errors import SabotError
from sabot.game import edge_tables, edges, outcome_kernel, outcome_tables, rules, wagers
from sabot.game.analyze import analyze, outcome_counts, pair_counts
from sabot.game.edges import RemainingShoe

from kit import ROOT


def test_wizard_of_odds_eight_deck_counts():
    r = analyze(8)
    assert r["cards"] == 416
    assert r["sequences"] == 4998398275503360
    assert r["outcomes"] == {"banker": 2292252566437888, "player": 2230518282592256,
                             "tie": 475627426473216}


@pytest.mark.parametrize("wager,edge", [
    ("banker", 0.010579), ("player", 0.012351), ("tie", 0.143596), ("dragon7", 0.076113),
    ("panda8", 0.101876), ("nocomm_banker", 0.014581), ("player_pair", 0.103614),
    ("banker_pair", 0.103614), ("dragon_bonus_a_player", 0.026517),
    ("dragon_bonus_a_banker", 0.093731),
])
def test_wizard_of_odds_eight_deck_house_edges(wager, edge):
    assert analyze(8)["wagers"][wager]["house_edge"] == pytest.approx(edge, abs=5e-7)


def brute_force(deck):
    """Every ordered six-card sequence of a small deck, dealt by the host rules."""
    main, pairs = {}, {}
    for seq in permutations(deck, 6):
        player, banker = rules.deal_round(iter(seq).__next__)
        key = (rules.point_count(player), rules.point_count(banker), len(player), len(banker))
        main[key] = main.get(key, 0) + 1
        pk = (seq[0][0] == seq[2][0], seq[1][0] == seq[3][0])
        pairs[pk] = pairs.get(pk, 0) + 1
    return main, pairs


def test_closed_form_equals_brute_force_on_a_small_shoe():
    deck = ["AS", "AH", "2S", "3D", "5S", "6H", "7D", "8C", "9S", "KD", "KH"]
    main, pairs = brute_force(deck)
    value_counts = [0] * 10
    rank_counts = [0] * 13
    for c in deck:
        value_counts[rules.point_value(c)] += 1
        rank_counts["A23456789TJQK".index(c[0])] += 1
    assert edges.kernel() is not None, "the kernel is not built: `make` builds it"
    assert outcome_counts(value_counts) == main  # the kernel's counts
    python = RemainingShoe(rank_counts=rank_counts, compiled=False).outcome_counts()
    assert {(i % 100 // 10, i % 10, *edge_tables.KINDS[i // 100]): n
            for i, n in enumerate(python) if n} == main
    assert {k: v for k, v in pair_counts(rank_counts).items() if v} == pairs


@pytest.mark.parametrize("seed", range(6))
def test_the_kernel_and_the_python_counting_give_the_same_integers(seed):
    """Every outcome count and every wager's expected return, on partial shoes of every size
    (one card to the whole eight decks out), with the Tie at 8, 9 and odds too wide for 64 bits
    (Python sums that one)."""
    assert edges.kernel() is not None, "the kernel is not built: `make` builds it"
    rng = random.Random(seed)
    for _ in range(6):
        decks = rng.randint(1, 8)
        seen = random_partial_shoe(rng, decks)
        tie_odds = rng.choice([8, 9, 2**70])
        fast = RemainingShoe(decks, seen, tie_odds)
        slow = RemainingShoe(decks, seen, tie_odds, compiled=False)
        assert fast.expected(("tie", "banker")) == slow.expected(("tie", "banker"))
        assert fast.outcome_counts() == slow.outcome_counts()
        assert fast.expected() == slow.expected()
        assert fast.house_edges() == {w: float(e) for w, e in slow.exact_edges().items()}


def test_the_kernel_is_used_only_when_built_from_the_source_beside_it(tmp_path):
    """A stale build (outcomes.c edited since) or none at all: Python counts."""
    here = Path(outcome_kernel.__file__).parent
    for name in ("outcomes.c", "_outcomes.so"):
        shutil.copy(here / name, tmp_path / name)
    assert outcome_kernel._load_kernel(str(tmp_path)) is not None
    source = tmp_path / "outcomes.c"
    source.write_text(source.read_text() + "/* edited */\n")
    assert outcome_kernel._load_kernel(str(tmp_path)) is None
    (tmp_path / "_outcomes.so").unlink()
    assert outcome_kernel._load_kernel(str(tmp_path)) is None


def test_the_generated_tables_equal_a_fresh_derivation():
    """outcome_tables.py is what its derivations give now (the classes of first four cards,
    wagers.net_return); its docstring says how to write it again."""
    text = (Path(outcome_tables.__file__)).read_text()
    assert text == edges.tables_source()
    assert outcome_tables.ANALYZED_WAGERS == wagers.ANALYZED_WAGERS
    assert edge_tables.return_tables(9) == edge_tables.derive_return_tables(9)


@pytest.mark.board  # a fresh interpreter: what one `sabot analyze` imports
def test_sabot_analyze_starts_light():
    """The command imports the analysis and the kernel, not argparse (cli/quick.py takes its
    plainest forms) nor every command's modules (dataclasses and inspect, shutil's compression
    modules, Fraction and Decimal, the audit, link or crypto code)."""
    code = ("import sys; from sabot.cli import main; main(['analyze', '--decks', '8']); "
            "print(' '.join(sorted(sys.modules)), file=sys.stderr)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       cwd=ROOT, env={"PYTHONPATH": str(ROOT / "host_tools")})
    assert r.returncode == 0, r.stderr
    loaded = set(r.stderr.split())
    assert "sabot.game.edges" in loaded and "ctypes" in loaded
    heavy = {"dataclasses", "inspect", "shutil", "bz2", "lzma", "fractions", "decimal",
             "sabot.game.wagers", "sabot.audit", "sabot.link", "cryptography", "sqlite3",
             "argparse", "re", "sabot.cli.options"}  # its plainest form: not even a parser
    assert not loaded & heavy, loaded & heavy


def test_seen_cards_are_removed_and_edges_are_exact_fractions_of_counts():
    full, seen = analyze(1), analyze(1, ["AS", "AH", "KD"])
    assert seen["cards"] == 49 and seen["sequences"] == 49 * 48 * 47 * 46 * 45 * 44
    assert sum(seen["outcomes"].values()) == seen["sequences"]
    assert seen["outcomes"] != full["outcomes"]
    # banker edge from the counts: (player wins - 0.95 banker wins) / sequences
    o = seen["outcomes"]
    edge = Fraction(o["player"] - Fraction(95, 100) * o["banker"], seen["sequences"])
    assert seen["wagers"]["banker"]["house_edge"] == pytest.approx(float(edge), rel=1e-12)


def test_dragon_bonus_resolution_follows_627a7():
    S = wagers.Summary
    resolve = wagers.resolve
    assert resolve("dragon_bonus_a_player", S(9, 8, 2, 2, 0, 0)) == ("win", 1, 0)  # natural 9 v 8
    assert resolve("dragon_bonus_a_player", S(8, 8, 2, 2, 0, 0))[0] == "push"  # natural tie
    assert resolve("dragon_bonus_a_player", S(7, 7, 3, 3, 0, 0))[0] == "lose"  # non-natural tie
    assert resolve("dragon_bonus_a_player", S(7, 4, 3, 3, 0, 0))[0] == "lose"  # by 3
    assert resolve("dragon_bonus_c_banker", S(1, 5, 3, 3, 0, 0)) == ("win", 2, 0)  # by 4, table C
    assert resolve("dragon_bonus_a_banker", S(0, 9, 3, 3, 0, 0)) == ("win", 30, 0)


def test_cli_json_contract(cli, tmp_path):
    seen = tmp_path / "seen.txt"
    seen.write_text("# first round\nAS 9H KD 7C 2S\n")
    r = cli("analyze", "--decks", "8", "--seen", str(seen), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["cards"] == 411 and set(out["outcomes"]) == {"banker", "player", "tie"}
    assert set(out["wagers"]) == set(wagers.ANALYZED_WAGERS)


@pytest.mark.parametrize("args,needle", [
    (["--decks", "0"], "--decks must be a whole number from 1 to 8"),
    (["--decks", "1", "--seen", "SEEN:AS AS"], "more than 1 copy of AS"),
    (["--seen", "SEEN:AS ZZ"], "unknown card 'ZZ'"),
    (["--seen", "/nonexistent/seen.txt"], "cannot read shoe file"),
])
def test_cli_bad_input_is_one_line_and_nonzero(cli, tmp_path, args, needle):
    args = list(args)
    for i, a in enumerate(args):
        if a.startswith("SEEN:"):
            f = tmp_path / "seen.txt"
            f.write_text(a[5:])
            args[i] = str(f)
    r = cli("analyze", *args)
    assert r.returncode != 0
    assert needle in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_a_fresh_shoe_has_no_player_favorable_wager():
    assert analyze(8)["player_favorable"] == []


def test_cli_lists_the_player_favorable_wagers(cli, tmp_path):
    # Search, deterministically, for a seen file that turns a wager positive for the player:
    # remove whole ranks of one deck, low ranks first, until one does.
    seen = []
    for rank in "A23456789":
        seen += [rank + s for s in "SHDC"]
        if analyze(1, seen)["player_favorable"]:
            break
    f = tmp_path / "seen.txt"
    f.write_text(" ".join(seen) + "\n")
    r = cli("analyze", "--decks", "1", "--seen", str(f), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    negative = [w for w in wagers.ANALYZED_WAGERS if out["wagers"][w]["house_edge"] < 0]
    assert negative and out["player_favorable"] == negative
    assert all(out["wagers"][w]["house_edge"] >= 0 for w in wagers.ANALYZED_WAGERS
               if w not in out["player_favorable"])


def random_partial_shoe(rng, decks):
    shoe = [r + s for _ in range(decks) for r in "A23456789TJQK" for s in "SHDC"]
    rng.shuffle(shoe)
    return shoe[: rng.randint(0, len(shoe) - 6)]


@pytest.mark.parametrize("seed", range(8))
def test_remaining_shoe_edges_equal_analyze_exactly(seed):
    rng = random.Random(seed)
    decks = rng.choice([1, 2, 6, 8, 8])
    tie_odds = rng.choice([8, 8, 9])
    seen = random_partial_shoe(rng, decks)
    expected = analyze(decks, seen, tie_odds)
    shoe = RemainingShoe(decks, seen, tie_odds)
    assert shoe.cards == expected["cards"]
    assert shoe.house_edges() == {w: e["house_edge"] for w, e in expected["wagers"].items()}
    assert shoe.outcomes() == expected["outcomes"]
    assert shoe.player_favorable() == expected["player_favorable"]


def test_remaining_shoe_updates_incrementally_as_cards_leave():
    rng = random.Random(14)
    seen = random_partial_shoe(rng, 8)[:60]
    live = RemainingShoe(8)
    live.house_edges()
    for i in range(0, len(seen), 6):  # a round's cards at a time, edges read after each
        live.remove_all(seen[i : i + 6])
        assert live.exact_edges() == RemainingShoe(8, seen[: i + 6]).exact_edges()
    edges = live.exact_edges()
    assert all(isinstance(e, Fraction) for e in edges.values())
    assert float(edges["banker"]) == analyze(8, seen)["wagers"]["banker"]["house_edge"]


def test_remaining_shoe_refuses_cards_it_does_not_hold():
    shoe = RemainingShoe(1, [f"A{s}" for s in "SHD"])
    shoe.remove("ac")
    with pytest.raises(SabotError, match="no A is left"):
        shoe.remove("AC")
    with pytest.raises(SabotError, match="unknown card"):
        shoe.remove("ZZ")
    small = RemainingShoe(1, [r + s for r in "A23456789T" for s in "SHDC"] + ["JS"])
    small.remove_all(["JH", "JD", "JC", "QS", "QH"])
    assert small.cards == 6 and small.exact_edges()
    small.remove_all(["QD", "QC", "KS", "KH"])
    assert small.cards == 2
    with pytest.raises(SabotError, match="only 2 cards left"):
        small.exact_edges()


@pytest.mark.parametrize("quick,full", [
    (["--decks", "1"], ["--decks", "1", "--tie-odds", "8"]),
    (["--json", "--decks", "2"], ["--decks", "2", "--json", "--tie-odds", "8"]),
    ([], ["--tie-odds", "8"]),
])
def test_the_quick_analyze_says_exactly_what_the_full_command_line_does(cli, quick, full):
    """`sabot analyze` without argparse (cli/quick.py) and through it (an option it does not
    take, with its default): the same output; a form it does not take goes to the full parser
    and its errors."""
    a, b = cli("analyze", *quick), cli("analyze", *full)
    assert (a.returncode, a.stdout, a.stderr) == (b.returncode, b.stdout, b.stderr) == (
        0, b.stdout, "")
    for bad in (["--decks", "9"], ["--decks"], ["--decks", "x"], ["--dekcs", "8"]):
        r = cli("analyze", *bad)
        assert r.returncode == 2 and r.stderr.startswith("sabot") and r.stdout == "", bad
        assert len(r.stderr.strip().splitlines()) == 1  # the full parser's one line

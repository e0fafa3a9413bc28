"""`sabot settle`: every expected value below is read from the regulation text; each test names
its subsection. Money is integer cents."""

import json
from fractions import Fraction
from itertools import product

import pytest

from sabot.errors import SabotError
from sabot.game import rules, wagers
from sabot.game.analyze import analyze, outcome_counts, pair_counts
from sabot.game.settle import settle, vigorish

# Legal rounds (third-card rule), named by what they show.
# 3-card P5, B7
BANKER_7_OVER_5 = {"player": ["AS", "4H", "KC"], "banker": ["KD", "7C"]}
# natural 9 beats natural 8
PLAYER_NAT_9_V_8 = {"player": ["9S", "KH"], "banker": ["8D", "QC"]}
# natural 8 tie
NATURAL_TIE = {"player": ["8S", "KH"], "banker": ["8D", "QC"]}
# two-card 7 tie (stand)
TIE_7 = {"player": ["7S", "KH"], "banker": ["7D", "QC"]}
# P 6 (3 cards), B 7 (3 cards)
DRAGON_7 = {"player": ["AS", "3H", "2H"], "banker": ["2D", "2C", "3S"]}
# P 8 (3 cards) v B 5
PANDA_8 = {"player": ["2S", "3H", "3C"], "banker": ["KD", "5C"]}
# B 6 with two cards v P 5
BANKER_6_TWO = {"player": ["2S", "3H", "KC"], "banker": ["3D", "3C"]}
# B 6 with three v P 4
BANKER_6_THREE = {"player": ["2S", "KH", "2C"], "banker": ["AD", "AC", "4S"]}
# both pairs
BOTH_PAIRS = {"player": ["5S", "5H", "KC"], "banker": ["2D", "2C"]}


def rnd(r):
    player, banker = r["player"], r["banker"]
    assert rules.redeal(player, banker) == (player, banker), "test round must be legal"
    return rules.round_record(1, 1, player, banker)


def one(table, round_, wager, amount=500, **extra):
    out = settle({"table": table, "round": rnd(round_),
                  "wagers": [{"seat": 1, "wager": wager, "amount_cents": amount, **extra}]})
    return out["settlements"][0]


def test_banker_pays_1_to_1_less_5_percent_rounded_up_to_25_cents_627a12c():
    assert one({}, BANKER_7_OVER_5, "banker", 500) == {
        "seat": 1, "wager": "banker", "result": "win", "win_cents": 500, "vigorish_cents": 25}
    assert one({}, BANKER_7_OVER_5, "banker", 700)["vigorish_cents"] == 50  # 35 cents -> 50 cents
    assert [vigorish(w) for w in (100, 500, 501, 1000, 1001, 2000)] == [25, 25, 50, 50, 75, 100]


def test_player_pays_1_to_1_627a12a_and_tie_pushes_main_wagers_627a7():
    assert one({}, PLAYER_NAT_9_V_8, "player", 500)["win_cents"] == 500
    assert one({}, TIE_7, "player")["result"] == "push"
    assert one({}, TIE_7, "banker")["result"] == "push"


def test_tie_pays_the_tables_odds_of_at_least_8_to_1_627a12b():
    assert one({}, TIE_7, "tie", 500)["win_cents"] == 4000
    assert one({"tie_odds": 9}, TIE_7, "tie", 500)["win_cents"] == 4500
    with pytest.raises(SabotError, match="at least 8"):
        one({"tie_odds": 7}, TIE_7, "tie")


def test_ez_banker_pushes_on_a_dragon_7_and_collects_no_vigorish_627a7_627a12c():
    ez = {"ez": True, "side_wagers": ["dragon7", "panda8"]}
    assert one(ez, DRAGON_7, "banker")["result"] == "push"
    assert one(ez, BANKER_7_OVER_5, "banker") == {"seat": 1, "wager": "banker", "result": "win",
                                                  "win_cents": 500, "vigorish_cents": 0}


def test_dragon_7_pays_40_to_1_627a12f_and_panda_8_pays_25_to_1_627a12g():
    ez = {"ez": True, "side_wagers": ["dragon7", "panda8"]}
    assert one(ez, DRAGON_7, "dragon7", 100)["win_cents"] == 4000
    assert one(ez, PANDA_8, "panda8", 100)["win_cents"] == 2500
    # a two-card banker 7 is no Dragon 7
    assert one(ez, BANKER_7_OVER_5, "dragon7")["result"] == "lose"


def test_commission_free_banker_6_pays_1_to_2_631c5i_and_lucky_six_12_or_20_to_1_631c5k():
    cf = {"commission_free": True, "side_wagers": ["lucky_six", "player_pair", "banker_pair"]}
    assert one(cf, BANKER_6_TWO, "banker", 500) == {"seat": 1, "wager": "banker", "result": "win",
                                                    "win_cents": 250, "vigorish_cents": 0}
    assert one(cf, BANKER_7_OVER_5, "banker", 500)["win_cents"] == 500
    assert one(cf, BANKER_6_TWO, "lucky_six", 100)["win_cents"] == 1200
    assert one(cf, BANKER_6_THREE, "lucky_six", 100)["win_cents"] == 2000
    assert one(cf, BOTH_PAIRS, "player_pair", 100)["win_cents"] == 1100  # 631c.5(g)
    assert one(cf, BANKER_6_TWO, "banker_pair", 100)["win_cents"] == 1100


@pytest.mark.parametrize("paytable,margin_odds", [
    ("A", {9: 30, 8: 10, 7: 6, 6: 4, 5: 2, 4: 1}),
    ("B", {9: 20, 8: 8, 7: 7, 6: 4, 5: 3, 4: 1}),
    ("C", {9: 30, 8: 10, 7: 4, 6: 4, 5: 2, 4: 2}),
])
def test_every_dragon_bonus_paytable_line_627a12e(paytable, margin_odds):
    table = {"side_wagers": ["dragon_bonus_player", "dragon_bonus_banker"],
             "dragon_bonus_paytable": paytable}
    s = wagers.Summary
    for margin, odds in margin_odds.items():
        # banker 3-card total `margin` over player 3-card 0: a non-natural win by `margin`
        wager = f"dragon_bonus_{paytable.lower()}_banker"
        assert wagers.resolve(wager, s(0, margin, 3, 3, 0, 0)) == ("win", odds, 0)
    # natural winner 1:1
    assert one(table, PLAYER_NAT_9_V_8, "dragon_bonus_player", 100)["win_cents"] == 100
    assert one(table, NATURAL_TIE, "dragon_bonus_player")["result"] == "push"  # natural tie push
    assert one(table, BANKER_7_OVER_5, "dragon_bonus_banker")["result"] == "lose"  # by 2: loses
    assert one(table, TIE_7, "dragon_bonus_banker")["result"] == "lose"  # non-natural tie


def test_house_money_15_to_1_both_pairs_3_to_1_either_627a12h_and_let_it_ride_631a9e():
    t = {"side_wagers": ["house_money"]}
    assert one(t, BOTH_PAIRS, "house_money", 100)["win_cents"] == 1500
    assert one(t, BANKER_6_TWO, "house_money", 100)["win_cents"] == 300
    assert one(t, BANKER_7_OVER_5, "house_money", 100)["result"] == "lose"
    out = settle({"table": t, "round": rnd(BANKER_6_TWO), "wagers": [
        {"seat": 4, "wager": "banker", "amount_cents": 1000},
        {"seat": 4, "wager": "house_money", "amount_cents": 100, "let_it_ride": "banker"}]})
    by = {e["wager"]: e for e in out["settlements"]}
    assert by["house_money"]["win_cents"] == 300 and by["house_money"]["let_ride_on"] == "banker"
    assert by["banker"]["amount_cents"] == 1300 and by["banker"]["win_cents"] == 1300
    assert by["banker"]["vigorish_cents"] == 75  # 65 cents -> 75 cents


def test_pair_and_house_money_settle_at_the_initial_cards_631a9e_631c5d():
    initial = {"event": "initial_cards", "shoe": 1, "round": 1,
               "player": ["5S", "5H"], "banker": ["2D", "3C"]}
    t = {"side_wagers": ["house_money", "player_pair"]}
    out = settle({"table": t, "round": initial, "wagers": [
        {"seat": 1, "wager": "player_pair", "amount_cents": 100},
        {"seat": 2, "wager": "house_money", "amount_cents": 100}]})
    assert [(e["wager"], e["win_cents"]) for e in out["settlements"]] == [("house_money", 300),
                                                                          ("player_pair", 1100)]
    with pytest.raises(SabotError, match="when the round is complete"):
        settle({"table": t, "round": initial,
                "wagers": [{"seat": 1, "wager": "banker", "amount_cents": 100}]})


def test_losing_wagers_first_then_seats_from_the_highest_down_627a11b_631a12b():
    out = settle({"table": {}, "round": rnd(BANKER_7_OVER_5), "wagers": [
        {"seat": 2, "wager": "banker", "amount_cents": 500},
        {"seat": 9, "wager": "player", "amount_cents": 500},
        {"seat": 12, "wager": "banker", "amount_cents": 500},
        {"seat": 1, "wager": "tie", "amount_cents": 500},
        {"seat": 5, "wager": "banker", "amount_cents": 500}]})
    assert [(e["seat"], e["result"]) for e in out["settlements"]] == [
        (9, "lose"), (1, "lose"), (12, "win"), (5, "win"), (2, "win")]


def test_deferred_vigorish_markers_and_forced_collection_627a12d():
    t = {"vigorish": "deferred"}
    req = {"table": t, "round": rnd(BANKER_7_OVER_5), "markers": {"3": 50},
           "wagers": [{"seat": 3, "wager": "banker", "amount_cents": 700}]}
    out = settle(req)
    assert out["markers"] == {"3": 100} and out["markers_total_cents"] == 100
    out = settle({**req, "collect_markers": "all"})  # before a new shoe
    assert out["collected"] == {"3": 100} and out["markers"] == {}
    assert out["markers_total_cents"] == 0
    out = settle({**req, "markers": {"3": 50, "6": 25}, "collect_markers": [6]})  # seat 6 leaves
    assert out["collected"] == {"6": 25} and out["markers"] == {"3": 100}


@pytest.mark.parametrize("table,wager,needle", [
    ({}, {"seat": 1, "wager": "dragon7", "amount_cents": 100}, "does not offer dragon7"),
    ({}, {"seat": 1, "wager": "banker", "amount_cents": -500}, "positive whole number"),
    ({}, {"seat": 1, "wager": "banker", "amount_cents": 5.5}, "positive whole number"),
    ({}, {"seat": 15, "wager": "banker", "amount_cents": 500}, "seat 15 does not exist"),
    ({"game": "minibaccarat"}, {"seat": 10, "wager": "banker", "amount_cents": 500},
     "seat 10 does not exist"),
    ({}, {"seat": 1, "wager": "banker", "amount_cents": 500, "placed_after_cards": 1},
     "no more bets"),
    ({"side_wagers": ["lucky_six"]}, {"seat": 1, "wager": "banker", "amount_cents": 5},
     "commission-free"),
])
def test_refusals_settle_nothing(table, wager, needle):
    ok = {"seat": 2, "wager": "player", "amount_cents": 500}
    with pytest.raises(SabotError, match=needle):
        settle({"table": table, "round": rnd(BANKER_7_OVER_5), "wagers": [ok, wager]})


def test_a_round_missing_a_third_card_is_refused_in_one_line():
    # P 2S 3H (5) must draw; the record stops at four cards
    with pytest.raises(SabotError, match="wants a card these hands do not have"):
        settle({"table": {}, "round": {"player": ["2S", "3H"], "banker": ["KD", "7C"]},
                "wagers": []})


def test_cli_json_in_and_out_and_one_line_errors(cli, tmp_path):
    req = {"table": {}, "round": rnd(BANKER_7_OVER_5), "wagers": [{"seat": 3, "wager": "banker",
                                                                    "amount_cents": 500}]}
    r = cli("settle", stdin=json.dumps(req))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["settlements"][0]["vigorish_cents"] == 25
    bad = cli("settle", stdin="{not json")
    assert bad.returncode != 0 and "not JSON" in bad.stderr and "Traceback" not in bad.stderr


# ---- the analyzer's house edge is the average of settlement over the exact distribution -----

CONFIGS = {  # analyzer wager -> (table, settle wager)
    "banker": ({}, "banker"), "player": ({}, "player"), "tie": ({}, "tie"),
    "ez_banker": ({"ez": True}, "banker"),
    "dragon7": ({"ez": True, "side_wagers": ["dragon7"]}, "dragon7"),
    "panda8": ({"ez": True, "side_wagers": ["panda8"]}, "panda8"),
    "nocomm_banker": ({"commission_free": True}, "banker"),
    "lucky_six": ({"commission_free": True, "side_wagers": ["lucky_six"]}, "lucky_six"),
    "player_pair": ({"side_wagers": ["player_pair"]}, "player_pair"),
    "banker_pair": ({"side_wagers": ["banker_pair"]}, "banker_pair"),
    "house_money": ({"side_wagers": ["house_money"]}, "house_money"),
    **{
        f"dragon_bonus_{t}_{h}": (
            {"side_wagers": [f"dragon_bonus_{h}"], "dragon_bonus_paytable": t.upper()},
            f"dragon_bonus_{h}",
        )
        for t in "abc" for h in ("player", "banker")
    },
}


def representatives(wanted):
    """One legal round for each of the `wanted` (totals, card counts) outcomes, and for every pair
    pattern (the point-value sequences in order: all 205 outcomes come within the first 10^4)."""
    main, pairs = {}, {}
    ranks = "TA23456789"
    for seq in product(range(10), repeat=6):
        cards = [ranks[v] + "SHDCSH"[i] for i, v in enumerate(seq)]
        p, b = rules.deal_round(iter(cards).__next__)
        key = (rules.point_count(p), rules.point_count(b), len(p), len(b))
        main.setdefault(key, rules.round_record(1, 1, p, b))
        if wanted <= main.keys():
            break
    for pp, bp in product((True, False), repeat=2):
        p = ["5S", "5H" if pp else "6H"]
        b = ["2D", "2C" if bp else "3C"]
        it = iter([p[0], b[0], p[1], b[1], "KS", "KH"])
        p, b = rules.deal_round(it.__next__)
        pairs[(pp, bp)] = rules.round_record(1, 1, p, b)
    return main, pairs


def test_analyzer_house_edges_equal_the_average_of_settle_over_the_exact_distribution():
    value_counts = [128] + [32] * 9
    main = outcome_counts(value_counts)
    main_rep, pair_rep = representatives(main.keys())
    pairs = pair_counts([32] * 13)
    total = sum(main.values())
    edges = analyze(8)["wagers"]
    amount = 500  # $5: 5% vigorish is exactly 25 cents, so no rounding enters
    for name, (table, wager) in CONFIGS.items():
        dist, reps = (pairs, pair_rep) if name in wagers.PAIR_WAGERS else (main, main_rep)
        net = Fraction(0)
        for key, count in dist.items():
            rec = reps.get(key)
            # a key found in the first hits of `representatives` covers every outcome
            if rec is None:
                pytest.fail(f"no representative round for {key}")
            out = settle({"table": table, "round": rec,
                          "wagers": [{"seat": 1, "wager": wager, "amount_cents": amount}]})
            e = out["settlements"][0]
            paid = {"win": e["win_cents"] - e["vigorish_cents"], "push": 0, "lose": -amount}
            net += count * paid[e["result"]]
        edge = float(-net / (amount * total))
        assert edge == pytest.approx(edges[name]["house_edge"], rel=1e-12), name

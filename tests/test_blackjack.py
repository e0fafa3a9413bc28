"""Blackjack (58 Pa. Code Chapter 633a): the host's hand rules (sabot/game/blackjack.py),
the exact analysis of the dealer's hand (sabot/game/blackjack_analyze.py, `sabot analyze --game
blackjack`) — checked against hands counted by hand and against an independent simulation in C
(tests/simulate_dealer.c) of 10^7 hands for each case."""

import json
import math
import subprocess
from fractions import Fraction
from pathlib import Path

import pytest

from sabot.errors import SabotError
from sabot.game import blackjack
from sabot.game.blackjack_analyze import COUNT_BUCKETS, Composition, analyze, dealer_outcomes

HERE = Path(__file__).parent


@pytest.mark.parametrize("cards,total,soft", [
    (["AS", "KH"], 21, True), (["AS", "AH"], 12, True), (["AS", "AH", "9C"], 21, True),
    (["AS", "6H"], 17, True), (["AS", "6H", "TC"], 17, False), (["KS", "QH", "2C"], 22, False),
    (["5S", "6H"], 11, False), (["AS", "AH", "AC", "AD", "7S"], 21, True),
    (["TS", "JH"], 20, False), (["9S", "AH", "AC"], 21, True),
])
def test_a_hands_total_counts_an_ace_11_only_where_it_keeps_the_hand_at_21(cards, total, soft):
    assert blackjack.hand_total(cards) == (total, soft)


def test_blackjack_is_an_ace_and_a_ten_value_card_as_the_initial_two():
    assert blackjack.is_blackjack(["AS", "KH"]) and blackjack.is_blackjack(["TD", "AC"])
    assert not blackjack.is_blackjack(["AS", "9H"]) and not blackjack.is_blackjack(
        ["AS", "5H", "5C"])


@pytest.mark.parametrize("cards,s17,h17", [
    (["AS", "KH", "5C"], 2, 2),  # a Blackjack: complete at two
    (["AS", "6H", "4C"], 2, 3),  # soft 17: stands, or draws under h17
    (["TS", "7H", "4C"], 2, 2),  # hard 17 stands under both
    (["TS", "6H", "KC", "2D"], 3, 3),  # 26: bust on the third card, which counts
    (["2S", "3H", "2C", "4D", "AS", "5H"], 6, 6),  # 2 3 2 4 A = soft 22? no: hard 12, then 17
])
def test_the_dealer_completes_the_hand_as_the_rule_says(cards, s17, h17):
    assert blackjack.dealer_hand(cards, "s17") == s17
    assert blackjack.dealer_hand(cards, "h17") == h17


def test_a_dealer_hand_that_runs_out_of_cards_or_an_unknown_rule_is_one_error():
    with pytest.raises(SabotError, match="do not complete"):
        blackjack.dealer_hand(["TS", "2H"], "s17")
    with pytest.raises(SabotError, match="s17, h17"):
        blackjack.dealer_draws(16, False, "h18")


def brute_force(values, rule):
    """Every ordered sequence of dealer cards from a small composition, by hand: P(Blackjack)
    and P(cards bucket)."""
    out = {b: Fraction(0) for b in COUNT_BUCKETS}
    bj = Fraction(0)

    def walk(left, drawn, p):
        nonlocal bj
        if len(drawn) >= 2:
            if len(drawn) == 2 and sorted(drawn) == [1, 10]:
                bj += p
                out["2"] += p
                return
            total, soft = blackjack.total_of_values(drawn)
            if total > 21 or not blackjack.dealer_draws(total, soft, rule):
                out[str(len(drawn)) if len(drawn) < 8 else "8+"] += p
                return
        n = sum(left)
        for v, c in enumerate(left):
            if c:
                nxt = list(left)
                nxt[v] -= 1
                walk(nxt, [*drawn, v + 1], p * Fraction(c, n))

    walk(list(values), [], Fraction(1))
    return bj, out


@pytest.mark.parametrize("rule", ["s17", "h17"])
def test_the_exact_analysis_equals_every_sequence_counted_by_hand(rule):
    values = (4, 3, 2, 2, 2, 1, 1, 1, 1, 8)  # a small shoe: 25 cards, long hands likely
    p = dealer_outcomes(values, rule)
    bj, by_cards = brute_force(values, rule)
    assert p[0] == bj
    per = len(p[1:]) // len(COUNT_BUCKETS)
    got = {b: sum(p[1 + i * per: 1 + (i + 1) * per]) for i, b in enumerate(COUNT_BUCKETS)}
    got["2"] += p[0]
    assert got == by_cards and sum(p) == 1


@pytest.fixture(scope="module")
def simulator(tmp_path_factory):
    exe = tmp_path_factory.mktemp("sim") / "simulate_dealer"
    subprocess.run(["cc", "-O2", "-o", str(exe), str(HERE / "simulate_dealer.c")], check=True)
    return exe


@pytest.mark.board
@pytest.mark.parametrize("decks,rule,seen", [
    (8, "s17", []), (6, "h17", []), (1, "s17", []),
    (8, "h17", ["AS", "AH", "AC", "AD", "AS", "AH", "TC", "KD", "QS", "5H"] * 3),
])
def test_the_exact_analysis_agrees_with_ten_million_simulated_hands(simulator, decks, rule,
                                                                     seen):
    """Within five standard errors for every bucket (a wrong rule moves them by tens)."""
    shoe = Composition(decks, seen)
    hands = 10_000_000
    said = subprocess.run([str(simulator), rule, str(hands), "24", *map(str, shoe.by_value())],
                          capture_output=True, text=True, check=True).stdout.split()
    counts = dict(zip(["blackjack", *COUNT_BUCKETS], map(int, said), strict=True))
    exact = analyze(decks, seen, rule)
    for name in ["blackjack", *COUNT_BUCKETS]:
        p = exact["blackjack"] if name == "blackjack" else exact["dealer_cards"][name]
        sigma = math.sqrt(hands * p * (1 - p))
        assert abs(counts[name] - hands * p) <= 5 * sigma + 1, (name, counts[name], hands * p)
    assert sum(counts[b] for b in COUNT_BUCKETS) == hands


def test_sabot_analyze_blackjack_prints_the_contracts_keys_with_twelve_digits(cli, tmp_path):
    r = cli("analyze", "--game", "blackjack", "--decks", "8", "--dealer", "h17", "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert set(got["dealer_cards"]) == {"2", "3", "4", "5", "6", "7", "8+"}
    assert got["dealer"] == "h17" and got["cards"] == 416
    # 8 decks: 32 aces and 128 ten-value cards of 416, either first
    assert got["blackjack"] == float(Fraction(2 * 32 * 128, 416 * 415))
    assert abs(sum(got["dealer_cards"].values()) - 1) < 1e-12
    seen = tmp_path / "seen.txt"
    seen.write_text("AS AH AC AD\n")
    fewer = json.loads(cli("analyze", "--game", "blackjack", "--decks", "1", "--seen", str(seen),
                           "--json").stdout)
    assert fewer["blackjack"] == 0.0 and fewer["cards"] == 48
    text = cli("analyze", "--game", "blackjack").stdout
    assert "the dealer stands on all 17s" in text and "8+  cards" in text


@pytest.mark.parametrize("args,said", [
    (["--dealer", "h17"], "--dealer: blackjack's (add --game blackjack)"),
    (["--game", "blackjack", "--tie-odds", "9"], "--tie-odds is baccarat's"),
    (["--game", "blackjack", "--hit-and-run-meter", "999.99"], "at least $1,000"),
    (["--game", "blackjack", "--hit-and-run-wager", "0"], "at least 1 cent"),
    (["--game", "blackjack", "--hit-and-run-wager", "1.005"], "not an amount in dollars"),
])
def test_analyze_refuses_what_does_not_fit_the_game_in_one_line(cli, args, said):
    r = cli("analyze", *args)
    assert r.returncode == 2 and said in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_the_hit_and_run_edge_is_its_paytable_over_the_dealers_cards():
    """633a.13(l)(1), "for 1": Blackjack 4, five cards 8, six 25, seven 200, eight or more the
    meter for the wager; anything else loses it."""
    got = analyze(8, [], "s17", hit_and_run_meter_cents=250_000, hit_and_run_wager_cents=500)
    p, c = got["blackjack"], got["dealer_cards"]
    returned = 4 * p + 8 * c["5"] + 25 * c["6"] + 200 * c["7"] + c["8+"] * 2500 / 5
    assert got["wagers"]["hit_and_run"]["house_edge"] == pytest.approx(1 - returned, abs=1e-12)


# ---- settlement of the side wagers (sabot/game/blackjack_settle.py) -----------------------------
from sabot.game.blackjack_settle import house_money_hand, is_straight, settle  # noqa: E402

TABLE = {"game": "blackjack", "decks": 6, "dealer": "s17",
         "side_wagers": ["hit_and_run", "straight_jack", "house_money"],
         "hit_and_run_reset_cents": 100_000, "straight_jack_reset_cents": 500_000}
METERS = {"hit_and_run": 150_000, "straight_jack": 800_000}
DEALERS = {  # the dealer's completed hands under s17, by what Hit and Run pays
    "blackjack": ["AS", "KH"], 2: ["TS", "8H"], 3: ["TS", "2H", "5C"], 4: ["2S", "3H", "4C", "9D"],
    5: ["2S", "3H", "2C", "4D", "7S"], 6: ["2S", "3H", "2C", "4D", "AS", "5H"],
    7: ["2S", "2H", "2C", "2D", "3S", "3H", "KC"],
    8: ["2S", "2H", "2C", "2D", "3S", "3H", "AC", "8H"],
}


def settled(dealer, hands, wagers, table=None, meters=None):
    got = settle({"table": table or TABLE, "round": {"dealer": dealer, "hands": hands},
                  "meters": METERS if meters is None else meters, "wagers": wagers})
    return got["settlements"], got["meters"]


@pytest.mark.parametrize("dealer,for_one", [("blackjack", 4), (5, 8), (6, 25), (7, 200),
                                            (2, 0), (3, 0), (4, 0)])
def test_hit_and_run_pays_its_paytable_for_1_by_the_dealers_cards(dealer, for_one):
    """633a.13(l)(1): Blackjack 4 for 1, five cards 8 for 1, six 25 for 1, seven 200 for 1 (the
    busting card counted: the 7-card hand busts on its K); 2 to 4 cards lose."""
    [s], meters = settled(DEALERS[dealer], [], [{"seat": 2, "wager": "hit_and_run",
                                                 "amount_cents": 500}])
    assert s["win_cents"] == (500 * (for_one - 1) if for_one else 0)
    assert s["result"] == ("win" if for_one else "lose") and meters == {"hit_and_run": 150_000}


def test_eight_dealer_cards_share_the_whole_meter_equally_and_it_resets():
    wagers = [{"seat": s, "wager": "hit_and_run", "amount_cents": 100} for s in (1, 4, 6)]
    got, meters = settled(DEALERS[8], [], wagers, meters={"hit_and_run": 150_001})
    # seats from the dealer's right: 6, 4, 1; 150,001 cents three ways, the odd cent to seat 6
    assert [(s["seat"], s["win_cents"]) for s in got] == [(6, 50_001 - 100), (4, 50_000 - 100),
                                                          (1, 50_000 - 100)]
    assert meters == {"hit_and_run": 100_000}


@pytest.mark.parametrize("cards,hand,to_one", [
    (["9S", "TH"], "2_card_straight", 3), (["TS", "9H"], "2_card_straight", 3),
    (["AS", "2H"], "2_card_straight", 3), (["KS", "AH"], "2_card_straight", 3),
    (["2S", "3H", "4C"], "3_card_straight", 15), (["3S", "2H", "4C", "5D"], "4_card_straight", 50),
    (["3S", "2H", "5C", "4D"], "2_card_straight", 3),  # built as dealt: the 5 does not extend it
    (["AD", "2H", "3C", "4D", "5S"], "5_card_straight", 200),
    (["9S", "TH", "JC"], "2_card_straight", 3),  # the jack busts the hand: it does not count
    (["KS", "AH", "2C"], "2_card_straight", 3),  # no wrapping
    (["5S", "9H", "6C"], "no_straight", 0), (["7S", "7H"], "no_straight", 0),
])
def test_straight_jack_pays_the_straight_the_hand_makes(cards, hand, to_one):
    [s], _ = settled(DEALERS[2], [{"seat": 3, "cards": cards}],
                     [{"seat": 3, "wager": "straight_jack", "amount_cents": 500}])
    assert (s["hand"], s["win_cents"]) == (hand, 500 * to_one)


def test_a_six_card_straight_takes_the_meter_with_the_ace_of_spades_and_a_tenth_without():
    six = ["2S", "3H", "4C", "5D", "6S"]
    hands = [{"seat": 2, "cards": ["AS", *six]}, {"seat": 5, "cards": ["AD", *six]}]
    wagers = [{"seat": 2, "wager": "straight_jack", "amount_cents": 500},
              {"seat": 5, "wager": "straight_jack", "amount_cents": 500}]
    got, meters = settled(DEALERS[2], hands, wagers)
    # 633a.13(m)(1): 10% of the meter and 200 to 1 (the tenth first); the rest of the meter
    # and 200 to 1: never more than the meter in a round
    assert [(s["seat"], s["hand"], s["win_cents"]) for s in got] == [
        (5, "six_card_straight", 80_000 + 100_000),
        (2, "six_card_straight_ace_of_spades", 720_000 + 100_000)]
    assert got[1]["pay_from"] == "not_table_inventory" and "pay_from" not in got[0]
    assert meters["straight_jack"] == 500_000  # the whole meter paid: its reset amount
    [s], meters = settled(DEALERS[2], hands[1:], wagers[1:])
    assert s["win_cents"] == 180_000 and meters["straight_jack"] == 720_000
    # a tenth can take the meter below its reset amount; the next round takes it as it stands
    [s], meters = settled(DEALERS[2], hands[1:], wagers[1:],
                          meters={"straight_jack": 500_000})
    assert meters["straight_jack"] == 450_000
    [s], meters = settled(DEALERS[2], hands[1:], wagers[1:], meters=meters)
    assert s["win_cents"] == 45_000 + 100_000 and meters["straight_jack"] == 405_000


def test_a_split_seat_settles_straight_jack_and_house_money_on_its_original_two_cards():
    """A split pair's hands (8S 9H TC, 8H 7C): the wagers take the two cards dealt first, the
    pair: House Money's pair 3 to 1, and no straight (8-9-10 after the split does not count)."""
    split = [{"seat": 1, "cards": ["8S", "9H", "TC"], "split": True},
             {"seat": 1, "cards": ["8H", "7C"], "split": True}]
    got, _ = settled(DEALERS[2], split, [
        {"seat": 1, "wager": "straight_jack", "amount_cents": 100},
        {"seat": 1, "wager": "house_money", "amount_cents": 100}])
    assert [(s["hand"], s["win_cents"]) for s in got] == [("no_straight", 0), ("pair", 300)]
    kq = [{"seat": 1, "cards": ["KS", "2H"], "split": True},
          {"seat": 1, "cards": ["QH", "9C"], "split": True}]  # a pair by value: K-Q
    got, _ = settled(DEALERS[2], kq, [
        {"seat": 1, "wager": "straight_jack", "amount_cents": 100},
        {"seat": 1, "wager": "house_money", "amount_cents": 100}])
    assert [(s["hand"], s["win_cents"]) for s in got] == [("2_card_straight", 300),
                                                          ("two_card_straight", 100)]


@pytest.mark.parametrize("hands,dealer,said", [
    ([{"seat": 1, "cards": ["8S", "9H"], "split": True}], 2, "not what a split of a pair makes"),
    ([{"seat": 1, "cards": ["8S", "9H"]}, {"seat": 1, "cards": ["8H", "7C"]}], 2,
     "not what a split of a pair makes"),
    ([{"seat": 1, "cards": ["8S", "9H"], "split": True},
      {"seat": 1, "cards": ["7H", "7C"], "split": True}], 2, "not what a split of a pair makes"),
    ([{"seat": 1, "cards": ["8S", "9H", "2C"]}], "blackjack", "drew after the dealer's Blackjack"),
])
def test_rounds_the_dealing_cannot_make_are_refused(hands, dealer, said):
    with pytest.raises(SabotError, match=said):
        settled(DEALERS[dealer], hands, [{"seat": 1, "wager": "house_money",
                                          "amount_cents": 100}])


def test_one_wager_a_seat_and_the_tables_hit_and_run_wager():
    twice = [{"seat": 1, "wager": "hit_and_run", "amount_cents": 100}] * 2
    with pytest.raises(SabotError, match="two hit_and_run wagers"):
        settled(DEALERS[8], [], twice)
    with pytest.raises(SabotError, match="Hit and Run wager is 500 cents, not 100"):
        settled(DEALERS[8], [], twice[:1], table={**TABLE, "hit_and_run_wager_cents": 500})
    [s], _ = settled(DEALERS[7], [], twice[:1])  # 200 for 1: a floorperson verifies it
    assert s["verify"] == "floorperson" and "pay_from" not in s
    [s], _ = settled(DEALERS[8], [], twice[:1])
    assert s["verify"] == "floorperson" and s["pay_from"] == "not_table_inventory"


@pytest.mark.parametrize("cards,decks,hand,to_one", [
    (["AS", "KS"], 6, "ace_king_suited", 9), (["KH", "AH"], 1, "ace_king_suited", 9),
    (["9C", "TC"], 1, "two_card_straight_flush", 5),
    (["9C", "TC"], 6, "two_card_straight_flush", 4),
    (["AD", "2D"], 2, "two_card_straight_flush", 4), (["QD", "QS"], 6, "pair", 3),
    (["QD", "QD"], 6, "pair", 3), (["9C", "TD"], 6, "two_card_straight", 1),
    (["AS", "KH"], 6, "two_card_straight", 1), (["AS", "9S"], 6, "nothing", 0),
])
def test_house_money_pays_the_best_of_the_first_two_cards(cards, decks, hand, to_one):
    """633a.13(n): ace-king suited 9 to 1; two-card straight flush 5 to 1 with a single deck,
    4 to 1 with several; pair 3 to 1; two-card straight 1 to 1."""
    [s], _ = settled(DEALERS[3], [{"seat": 4, "cards": [*cards, "2C"]}],
                     [{"seat": 4, "wager": "house_money", "amount_cents": 1000}],
                     table={**TABLE, "decks": decks})
    assert (s["hand"], s["win_cents"]) == (hand, 1000 * to_one)
    assert house_money_hand(cards, decks) == ((hand, to_one) if to_one else None)


def test_a_straight_is_consecutive_ranks_once_each_ace_high_or_low():
    assert is_straight(["QS", "KH", "AC"]) and is_straight(["AS", "2H", "3C"])
    assert not is_straight(["KS", "AH", "2C"]) and not is_straight(["2S", "2H"])


@pytest.mark.parametrize("change,said", [
    ({"wagers": [{"seat": 1, "wager": "lucky_ladies", "amount_cents": 100}]},
     "does not offer 'lucky_ladies'"),
    ({"table": {**TABLE, "side_wagers": ["house_money"]}}, "does not offer 'hit_and_run'"),
    ({"table": {**TABLE, "side_wagers": ["royal_match"]}}, "no blackjack wager settled here"),
    ({"round": {"dealer": ["TS", "5H"], "hands": []}}, "not the dealer's completed hand"),
    ({"round": {"dealer": ["AS", "6H"], "hands": []}, "table": {**TABLE, "dealer": "h17"}},
     "not the dealer's completed hand under h17"),
    ({"meters": {"hit_and_run": 99_999}}, "meters.hit_and_run must be a whole number, at least"),
    ({"table": {**TABLE, "hit_and_run_reset_cents": 50_000}}, "at least 100000"),
    ({"table": {**TABLE, "dealer": "s18"}}, "table.dealer must be one of s17, h17"),
])
def test_settle_refuses_what_the_table_or_the_text_does_not_allow_in_one_line(cli, change,
                                                                             said):
    request = {"table": TABLE, "round": {"dealer": DEALERS[2], "hands": []}, "meters": METERS,
               "wagers": [{"seat": 1, "wager": "hit_and_run", "amount_cents": 100}], **change}
    r = cli("settle", stdin=json.dumps(request))
    assert r.returncode == 2 and said in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_sabot_settle_answers_a_blackjack_request_and_names_the_aggregate_limit(cli):
    request = {"table": TABLE, "round": {"dealer": DEALERS["blackjack"], "hands": [
        {"seat": 3, "cards": ["AS", "KS"]}]}, "meters": METERS, "wagers": [
        {"seat": 3, "wager": "house_money", "amount_cents": 500},
        {"seat": 3, "wager": "hit_and_run", "amount_cents": 500}]}
    r = cli("settle", stdin=json.dumps(request))
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert [(s["wager"], s["win_cents"]) for s in got["settlements"]] == [
        ("house_money", 4500), ("hit_and_run", 1500)]
    assert "Royal Match 21 and King's Bounty" in got["aggregate_limit"]


def test_house_moneys_edge_is_its_paytable_over_every_ordered_first_two_cards():
    """One deck, 52 x 51 ordered pairs: ace-king suited 8, the other two-card straight flushes
    13 x 4 x 2 - 8 = 96, pairs 52 x 3 = 156, the other two-card straights 13 x 12 x 2 = 312."""
    got = analyze(1)["wagers"]["house_money"]
    assert got["hands"] == {"ace_king_suited": 8 / 2652, "two_card_straight_flush": 96 / 2652,
                            "pair": 156 / 2652, "two_card_straight": 312 / 2652}
    lose = 2652 - 8 - 96 - 156 - 312
    assert got["house_edge"] == float(Fraction(lose - (9 * 8 + 5 * 96 + 3 * 156 + 312), 2652))
    # several decks: a straight flush pays 4 to 1
    many = analyze(6)["wagers"]["house_money"]
    n = 312
    flush = Fraction(13 * 4 * 2 * 6 * 6, n * (n - 1)) - Fraction(8 * 36, n * (n - 1))
    assert many["hands"]["two_card_straight_flush"] == float(flush)


def test_a_meter_share_below_the_wager_is_still_paid_and_said():
    """Eight dealer cards, one $1,500 wager on a $1,000 meter: the meter is its payout ("for
    1": the wager taken), so it wins and is paid 100,000 cents, though it nets nothing."""
    [s], meters = settled(DEALERS[8], [], [{"seat": 1, "wager": "hit_and_run",
                                             "amount_cents": 150_000}],
                          meters={"hit_and_run": 100_000})
    assert (s["result"], s["win_cents"], s["payout_cents"]) == ("win", 0, 100_000)
    assert meters == {"hit_and_run": 100_000}
    [s], _ = settled(DEALERS[5], [], [{"seat": 1, "wager": "hit_and_run", "amount_cents": 500}])
    assert (s["win_cents"], s["payout_cents"]) == (3500, 4000)  # 8 for 1
    [s], _ = settled(DEALERS[2], [], [{"seat": 1, "wager": "hit_and_run", "amount_cents": 500}])
    assert (s["result"], s["payout_cents"]) == ("lose", 0)


def test_a_round_with_more_copies_of_a_card_than_the_decks_hold_is_refused(cli):
    request = {"table": {**TABLE, "decks": 1}, "round": {"dealer": DEALERS[2], "hands": [
        {"seat": 1, "cards": ["KS", "KS"]}, {"seat": 2, "cards": ["KS", "2H"]}]},
        "meters": METERS, "wagers": [{"seat": 1, "wager": "house_money", "amount_cents": 100}]}
    r = cli("settle", stdin=json.dumps(request))
    assert r.returncode == 2 and "3 copies of KS, but the table's 1 deck hold only 1" in r.stderr
    request["wagers"] = [{"seat": 1, "wager": "blackjack", "amount_cents": 100}]
    request["round"]["hands"] = []
    r = cli("settle", stdin=json.dumps(request))
    assert r.returncode == 2 and "only a blackjack table's side wagers" in r.stderr

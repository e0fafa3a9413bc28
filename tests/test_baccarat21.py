"""21 Baccarat (§ 681a.6), in process: who wins by the text's words (each rule of (c) and (d)(1),
and the reading this project takes where the text leaves a hand of 21 or less against a hand over
21 to neither), each hand's drawing by the table's configured rule, the table's configuration
refused in one line, and every wager settled in integer cents through `sabot settle`."""

import json
import subprocess

import pytest

from sabot.errors import SabotError
from sabot.game import baccarat21 as b21
from sabot.game.baccarat21_settle import settle

from kit import SABOT

RULES = b21.Rules(player_draws_below=17)  # each hand draws under 17


@pytest.mark.parametrize(("player", "banker", "won", "rule"), [
    (20, 18, "player", "(c)(1)(i): 21 or less and greater"),
    (17, 21, "banker", "(c)(2)(i): 21 or less and greater"),
    (23, 25, "player", "(c)(1)(ii): over 21 but lower"),
    (26, 22, "banker", "(c)(2)(ii): over 21 but lower"),
    (19, 19, "tie", "(d)(1): equal"),
    (24, 24, "tie", "(d)(1): equal, both over 21"),
    # neither (i) nor (ii) of the text: 18 is not greater than 23, nor over 21; the reading
    # taken here, the ordinary one: the hand of 21 or less wins
    (18, 23, "player", "the reading: 21 or less beats over 21"),
    (22, 12, "banker", "the reading: 21 or less beats over 21"),
])
def test_who_wins_is_the_texts_words_and_the_reading_taken(player, banker, won, rule):
    assert b21.winner(player, banker) == won, rule


def test_totals_count_an_ace_as_the_table_says():
    assert b21.total(["AS", "6H"], RULES) == (17, True)
    assert b21.total(["AS", "6H", "KD"], RULES) == (17, False)
    assert b21.total(["AS", "AH", "9D"], RULES) == (21, True)
    assert b21.total(["AS", "6H"], b21.Rules(ace="1")) == (7, False)


def test_each_hand_draws_by_the_tables_rule():
    # Player 10 6 draws (16 < 17) a 5: 21; Banker 9 8 stands on 17 (fixed rule, the default);
    # at the default table the Player's Hand stands on 16
    assert b21.deal(iter(["TS", "9H", "6D", "8C", "5S"]), b21.Rules()) == (["TS", "6D"],
                                                                          ["9H", "8C"])
    cards = ["TS", "9H", "6D", "8C", "5S", "2H"]
    assert b21.deal(iter(cards), RULES) == (["TS", "6D", "5S"], ["9H", "8C"])
    # a soft 17 stands by default, draws where the table says so
    soft = ["AS", "KH", "6D", "7C", "3S"]
    assert b21.deal(iter(soft), RULES)[0] == ["AS", "6D"]
    assert b21.deal(iter(soft), b21.Rules(player_draws_below=17, player_draws_soft=True))[0] \
        == ["AS", "6D", "3S"]
    # the Banker chasing the Player's 20: draws on 17 and stands once it is not lower
    chase = b21.Rules(banker_rule="beat_player", player_draws_below=17)
    assert b21.deal(iter(["KS", "9H", "QD", "8C", "2S", "AH"]), chase) == (
        ["KS", "QD"], ["9H", "8C", "2S", "AH"])
    # and stands on a Player's Hand over 21
    assert b21.deal(iter(["KS", "2H", "6D", "3C", "9S", "AH"]), chase) == (
        ["KS", "6D", "9S"], ["2H", "3C"])
    # the record's hands, dealt again: equal when the shoe kept the rule, None when short
    assert b21.redeal(["TS", "6D", "5S"], ["9H", "8C"], RULES) == (["TS", "6D", "5S"],
                                                                 ["9H", "8C"])
    assert b21.redeal(["TS", "6D"], ["9H", "8C"], RULES) is None


@pytest.mark.parametrize(("cfg", "said"), [
    ({"decks": 9}, "table.decks must be a whole number from 1 to 8"),
    ({"ace": "11"}, "table.ace is one of 1_or_11, 1"),
    ({"banker_rule": "chase"}, "table.banker_rule is one of fixed, beat_player"),
    ({"bonus_paytable": {"flush": 5}}, "table.bonus_paytable maps hands"),
    ({"surrender": True}, "table.surrender is no setting of a 21 Baccarat table"),
    ({"player_draws_soft": "yes"}, "table.player_draws_soft is true or false"),
])
def test_a_configuration_the_rules_cannot_hold_is_one_line(cfg, said):
    with pytest.raises(SabotError, match=said.replace("(", r"\(")):
        b21.Rules.from_config(cfg)


def request(player, banker, wagers, **table):
    """A settle request at a table where each hand draws under 17, a Banker win pays even
    money, a Tie 6 to 1 (unless `table` says otherwise)."""
    table = {"game": "21-baccarat", "side_wagers": ["tie", "player_bonus", "banker_bonus"],
             "player_draws_below": 17, "banker_commission": "none", "tie_odds": 6, **table}
    return {"table": table, "round": {"player": player, "banker": banker},
            "wagers": [{"seat": s, "wager": w, "amount_cents": a} for s, w, a in wagers]}


def test_every_wager_is_settled_in_cents():
    # Banker 9 9 (18) v Player 8 8 then 3 (19): the Player wins; Banker pair of nines
    r = settle(request(["8S", "8H", "3D"], ["9S", "9C"], [
        (1, "player", 1000), (2, "banker", 1000), (3, "banker", 2500), (3, "banker_bonus", 500),
        (1, "player_bonus", 500), (2, "tie", 500)], banker_commission="five_percent"))
    got = {(e["seat"], e["wager"]): (e["result"], e["win_cents"], e["vigorish_cents"])
           for e in r["settlements"]}
    assert got == {(1, "player"): ("win", 1000, 0), (2, "banker"): ("lose", 0, 0),
                   (3, "banker"): ("lose", 0, 0), (3, "banker_bonus"): ("win", 4500, 0),
                   (1, "player_bonus"): ("win", 4500, 0), (2, "tie"): ("lose", 0, 0)}
    assert r["round"]["winner"] == "player" and r["round"]["player_total"] == 19
    # losing wagers are collected first, then seats paid from the highest down
    results = [e["result"] for e in r["settlements"]]
    assert results == sorted(results, key=lambda x: x != "lose")
    # a Banker win less its commission, rounded up to 25 cents: 5% of $10.10 is 50.5 cents
    r = settle(request(["TS", "7H"], ["KS", "8C"], [(4, "banker", 1010)],
                       banker_commission="five_percent"))
    assert r["settlements"] == [{"seat": 4, "wager": "banker", "result": "win",
                                 "win_cents": 1010, "vigorish_cents": 75}]
    # a tie: the Tie pays its odds, the Player and Banker wagers push (or lose, as configured)
    tie = request(["TS", "7H"], ["KS", "7C"], [(1, "player", 1000), (1, "tie", 200)])
    assert [(e["wager"], e["result"], e["win_cents"]) for e in settle(tie)["settlements"]] == [
        ("player", "push", 0), ("tie", "win", 1200)]
    tie["table"]["tie_main"] = "lose"
    assert settle(tie)["settlements"][0]["result"] == "lose"
    # a suited pair pays the suited pair's odds
    r = settle(request(["7H", "7H", "4S"], ["KS", "8C"], [(1, "player", 100),
                                                         (1, "player_bonus", 100)]))
    assert ("player_bonus", 1800) in [(e["wager"], e["win_cents"]) for e in r["settlements"]]


@pytest.mark.parametrize(("change", "said"), [
    (lambda q: q["round"].update(player=["TS", "6D"]), "want a card these hands do not have"),
    (lambda q: q["round"].update(banker=["9H", "8C", "2D"]), "not a round the table's rules deal"),
    (lambda q: q["table"].update(side_wagers=[]), "this table does not offer tie"),
    (lambda q: q["wagers"].pop(0), "seat 1 has no Player or Banker wager"),
    (lambda q: q["wagers"][0].update(amount_cents=0), "amount_cents must be a positive"),
    (lambda q: q["wagers"][0].update(wager="dragon7"), "'dragon7' is no wager of 21 Baccarat"),
])
def test_a_request_the_table_cannot_settle_is_one_line_and_settles_nothing(change, said):
    q = request(["TS", "6D", "5S"], ["9H", "8C"], [(1, "player", 100), (1, "tie", 100)])
    change(q)
    with pytest.raises(SabotError, match=said):
        settle(q)


@pytest.mark.board  # a process: the command as a user runs it
def test_sabot_settle_settles_a_21_baccarat_round_and_refuses_in_one_line():
    q = request(["TS", "6D", "5S"], ["9H", "8C"], [(1, "player", 1000), (2, "banker", 500)])
    r = subprocess.run([*SABOT, "settle"], input=json.dumps(q), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [(e["seat"], e["result"], e["win_cents"]) for e in out["settlements"]] == [
        (2, "lose", 0), (1, "win", 1000)]
    q["wagers"].append({"seat": 3, "wager": "tie", "amount_cents": 100})
    r = subprocess.run([*SABOT, "settle"], input=json.dumps(q), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "seat 3" in r.stderr, r.stderr


def brute_force(counts, rules):
    """Every deal of a small shoe walked in the order the cards come out (Player, Banker,
    Player, Banker, the Player's draws, the Banker's), each card's chance exact: who wins."""
    from fractions import Fraction

    from sabot.game.baccarat21_analyze import _CARD

    won = {"player": Fraction(0), "banker": Fraction(0), "tie": Fraction(0)}

    def walk(left, player, banker, p):
        n = sum(left)
        if len(player) + len(banker) < 4:
            nxt = "p" if len(player) == len(banker) else "b"
        elif b21.player_draws(player, rules) and banker_done_not_started(player, banker):
            nxt = "p"
        elif b21.banker_draws(banker, player, rules):
            nxt = "b"
        else:
            won[b21.winner(b21.total(player, rules)[0], b21.total(banker, rules)[0])] += p
            return
        for v, c in enumerate(left):
            if c:
                rest = left[:v] + [c - 1] + left[v + 1:]
                card = _CARD[v]
                walk(rest, player + [card] if nxt == "p" else player,
                     banker + [card] if nxt == "b" else banker, p * Fraction(c, n))

    def banker_done_not_started(player, banker):
        return len(banker) == 2  # the Player's draws come before any of the Banker's

    walk(list(counts), [], [], Fraction(1))
    return won


@pytest.mark.parametrize("rules", [b21.Rules(), b21.Rules(banker_rule="beat_player"),
                                   b21.Rules(ace="1", player_draws_below=15,
                                             banker_draws_soft=True)])
def test_the_exact_analysis_is_every_deal_of_a_small_shoe(rules):
    """A shoe of 10 cards (values 1 to 10 in uneven numbers, some none): the analysis, which
    counts each hand's sequences by multiset (summed by the compiled kernel, and in Python),
    against a walk of every deal in the order the cards come out."""
    from sabot.game.baccarat21_analyze import _outcomes_python, hands, outcomes
    from sabot.game.outcome_kernel import kernel

    counts = [2, 1, 1, 1, 0, 1, 0, 0, 1, 3]
    want = brute_force(counts, rules)
    assert kernel() is not None  # `make test` builds it: the sum below is the kernel's
    for got in (outcomes(counts, rules), _outcomes_python(counts, hands(rules))):
        for who in want:
            assert abs(got[who] - float(want[who])) < 1e-12, (who, got, want)


@pytest.mark.board  # a process: the command as a user runs it
def test_the_analysis_agrees_with_dealt_rounds_and_its_command_says_each_edge():
    """Rounds dealt from shuffled one-deck shoes by the rules (game/baccarat21.deal), against
    the analysis of a full deck: each outcome within four standard errors; then the command."""
    import random

    from sabot.game.baccarat21_analyze import analyze

    rng = random.Random(21)
    deck = [r + s for r in "A23456789TJQK" for s in "SHDC"]
    n, seen = 30000, {"player": 0, "banker": 0, "tie": 0}
    rules = b21.Rules(banker_rule="beat_player")
    for _ in range(n):
        rng.shuffle(deck)
        p, b = b21.deal(iter(deck), rules)
        seen[b21.winner(b21.total(p, rules)[0], b21.total(b, rules)[0])] += 1
    exact = analyze(1, [], rules)["outcomes"]
    for who, k in seen.items():
        sd = (exact[who] * (1 - exact[who]) / n) ** 0.5
        assert abs(k / n - exact[who]) < 4 * sd, (who, k / n, exact[who])
    r = subprocess.run([*SABOT, "analyze", "--game", "21-baccarat", "--decks", "6", "--rules",
                        '{"player_draws_below": 17, "tie_odds": 6}', "--json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    won = out["outcomes"]
    assert abs(sum(won.values()) - 1) < 1e-12 and out["cards"] == 312
    assert abs(out["house_edges"]["banker"] - 0.05 * won["banker"]) < 1e-12
    assert abs(out["house_edges"]["tie"] - (1 - 7 * won["tie"])) < 1e-12
    r = subprocess.run([*SABOT, "analyze", "--game", "21-baccarat", "--rules", '{"decks": 6}'],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--decks" in r.stderr and r.stderr.count("\n") == 1

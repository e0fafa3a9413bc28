"""Following a blackjack round: the shoe's round follower (firmware/shoe/blackjack.py,
deciding the dealer's draws from the generated shoe/bjtable.py) and the host's independent one
(sabot/game/blackjack.py follow_round, the validator's second opinion) attribute every card of
four thousand random rounds — random seats, cards and presses, valid or not, under both dealer's
rules, with and without a hole card — to the same hand, take and refuse the same presses, and the
shoe's does it on real MicroPython with the heap locked (no allocation on the card path)."""

import random

import pytest

from sabot.game.blackjack import check_result, follow_round
from sabot.protocol import PRESSES, decode_blackjack_result
from sabot.release import table_gen

from kit import ROOT

RANKS, SUITS = "A23456789TJQK", "SHDC"
PRESS = {name: kind for kind, name in PRESSES.items()}  # the shoe's press kinds


def code(card):
    return RANKS.index(card[0]) * 4 + SUITS.index(card[1])


def owners(seats, events, rule="s17", hole=True):
    return follow_round(seats, [(k, v) for k, v in events], rule, hole)


def test_the_initial_deal_goes_seat_by_seat_from_the_dealers_left_then_the_dealer():
    got = owners([5, 2], [("card", "2S"), ("card", "3S"), ("card", "TH"), ("card", "4S"),
                          ("card", "5S"), ("card", "9D")])
    assert [h["seat"] for h in got["hands"]] == [2, 5]
    assert got["owner"] == [0, 1, "dealer", 0, 1, "dealer"]
    assert got["hands"][0]["cards"] == ["2S", "4S"] and got["dealer"] == ["TH", "9D"]


def test_a_dealers_blackjack_with_a_hole_card_ends_the_round_and_the_next_card_is_not_due():
    got = owners([1], [("card", "5S"), ("card", "AH"), ("card", "6S"), ("card", "KD"),
                       ("card", "2C")])
    assert got["owner"][-1] is None and got["complete"]
    # without a hole card the dealer's second card comes after the players
    got = owners([1], [("card", "5S"), ("card", "AH"), ("card", "6S"), ("press", "next"),
                       ("card", "KD"), ("card", "2C")], hole=False)
    assert got["owner"] == [0, "dealer", 0, True, "dealer", None] and got["complete"]


def test_21_a_bust_and_a_double_move_on_by_themselves_a_stand_needs_a_press():
    events = [("card", "AS"), ("card", "9S"), ("card", "6H"),  # seat 1, seat 3, dealer up
              ("card", "KS"), ("card", "7S"), ("card", "TD"),  # seat 1 Blackjack; seat 3 16
              ("press", "double"), ("card", "5C"),  # seat 3 doubles: 21, done
              ("card", "2H")]  # the dealer's 16 draws
    got = owners([1, 3], events)
    assert got["owner"] == [0, 1, "dealer", 0, 1, "dealer", True, 1, "dealer"]
    assert got["hands"][1]["doubled"] and got["complete"]
    stand = owners([1], [("card", "TS"), ("card", "6H"), ("card", "7S"), ("card", "TD"),
                         ("card", "3C")])
    assert stand["owner"][-1] == 0  # no press: the seat's 17 draws
    assert owners([1], [("card", "TS"), ("card", "6H"), ("card", "7S"), ("card", "TD"),
                        ("press", "next"), ("card", "3C")])["owner"][-1] == "dealer"


def test_a_split_pair_becomes_two_hands_that_take_their_second_cards_in_turn():
    events = [("card", "8S"), ("card", "9C"), ("card", "8H"), ("card", "7D"),
              ("press", "split"), ("card", "3S"), ("press", "next"), ("card", "TS"),
              ("press", "next"), ("card", "2C")]
    got = owners([4], events)
    assert [h["cards"] for h in got["hands"]] == [["8S", "3S"], ["8H", "TS"]]
    assert got["owner"] == [0, "dealer", 0, "dealer", True, 0, True, 1, True, "dealer"]
    # the pair's second card is in the new hand at the end
    assert got["placed"] == [0, "dealer", 1, "dealer", None, 0, None, 1, None, "dealer"]
    # a press the hand cannot take: split of no pair, double of three cards
    no = owners([4], [("card", "8S"), ("card", "9C"), ("card", "7H"), ("card", "7D"),
                      ("press", "split"), ("card", "2S"), ("press", "double")])
    assert no["owner"][4] is False and no["owner"][6] is False


def random_rounds(rng, rule, hole, rounds):
    """Events of random rounds, with what the host's follower made of each."""
    events, expected, placed = [], [], []
    for _ in range(rounds):
        mask = rng.randrange(1, 128)
        seats = [s + 1 for s in range(7) if mask >> s & 1]
        mine = []
        while len(mine) < 60:
            done = owners(seats, mine, rule, hole)["complete"] if mine else False
            if done:
                if rng.random() < 0.5:
                    mine.append(("card", rng.choice(RANKS) + rng.choice(SUITS)))  # not due
                break
            if rng.random() < 0.3:
                mine.append(("press", rng.choice(list(PRESS))))
            else:
                mine.append(("card", rng.choice(RANKS) + rng.choice(SUITS)))
        followed = owners(seats, mine, rule, hole)
        got = followed["owner"]
        placed += [0xFE if p == "dealer" else p for p in followed["placed"]
                   if p is not None]  # the cards the round attributed, where they ended
        events.append((1, mask))
        expected.append(1)
        for (kind, v), o in zip(mine, got, strict=True):
            events.append((2, code(v)) if kind == "card" else (3, PRESS[v]))
            expected.append(1 if o is True else 0 if o is False else 0xFE if o == "dealer"
                            else 0xFF if o is None else o)
    return bytes(b for e in events for b in e), bytes(expected), bytes(placed)


@pytest.mark.board
@pytest.mark.parametrize("rule,hole", [("s17", True), ("h17", True), ("s17", False),
                                       ("h17", False)])
def test_the_shoe_and_the_host_follow_every_random_round_alike(mpy, tmp_path, rule, hole):
    rng = random.Random(f"{rule}{hole}")
    events, expected, placed = random_rounds(rng, rule, hole, 1000)
    (tmp_path / "events").write_bytes(events)
    r = mpy(ROOT / "tests" / "mp" / "blackjack_rounds.py", tmp_path / "events", tmp_path / "out",
            tmp_path / "placed", "1" if rule == "h17" else "0", "1" if hole else "0",
            tmp_path / "results")
    assert r.returncode == 0, r.stderr.decode()
    assert b"alloc_failures 0" in r.stdout, r.stdout  # the heap locked: nothing allocated
    got = (tmp_path / "out").read_bytes()
    first = next((i for i in range(len(expected)) if got[i] != expected[i]), None)
    assert first is None, (first, got[first], expected[first])
    assert expected.count(0xFE) > 2000 and expected.count(0xFF) > 200  # dealers' cards, not due
    assert (tmp_path / "placed").read_bytes() == placed  # each card's hand as the round ended
    splits = sum(1 for i in range(0, len(events), 2) if events[i:i + 2] == b"\x03\x03"
                 and expected[i // 2] == 1)
    assert splits > 30  # pairs split, hands moved on
    results_hold_and_are_followed_again(tmp_path / "results", rule, hole)


def results_hold_and_are_followed_again(path, rule, hole):
    """Each completed round's result frame body, made by the shoe under the heap lock, decodes
    (protocol.decode_blackjack_result) and the host's second opinion (check_result) follows it
    again to the same hands; one card moved to another hand, or a press taken out, is found."""
    data = path.read_bytes()
    bodies, at = [], 0
    while at < len(data):
        bodies.append(data[at + 1 : at + 1 + data[at]])
        at += 1 + data[at]
    assert len(bodies) > 500
    for n, body in enumerate(bodies):
        rec = decode_blackjack_result(body)
        assert (rec["round"], rec["dealer_rule"], rec["hole_card"]) == (n + 1, rule, hole)
        got, problem = check_result(rec)
        assert problem is None, (n, problem, rec)
        assert got["dealer"] == [c for (k, c), p in zip(
            [e for e in rec["events"] if e[0] == "card"], rec["placed"], strict=True)
            if p == "dealer"]
    rec = decode_blackjack_result(bodies[0])
    moved = dict(rec, placed=[*rec["placed"][:1], 1 if rec["placed"][1] != 1 else 0,
                              *rec["placed"][2:]])
    assert "the shoe put it in hand" in check_result(moved)[1]
    press = next(b for b in bodies if any(k == "press" for k, _ in decode_blackjack_result(b)[
        "events"]))
    rec = decode_blackjack_result(press)
    at = next(i for i, (k, _) in enumerate(rec["events"]) if k == "press")
    cut = dict(rec, events=rec["events"][:at] + rec["events"][at + 1:])
    assert check_result(cut)[1] is not None


def test_the_dealers_table_is_the_rule_parsed_from_its_words():
    tables = table_gen.build_blackjack_tables()
    dealer = tables["DEALER"]
    assert [t for t in range(32) if dealer[t * 2] & 1] == list(range(17))  # s17, hard
    assert [t for t in range(32) if dealer[t * 2 + 1] & 2] == list(range(18))  # h17, soft
    assert dealer[17 * 2 + 1] == 2 and dealer[17 * 2] == 0  # soft 17: only h17 draws
    assert table_gen.check() is None  # the committed firmware/shoe/bjtable.py is that
    with pytest.raises(Exception, match="cannot read the dealer's rule"):
        table_gen.parse_dealer_rule("- s17: the dealer stands when it likes.\n")


def test_a_blackjack_result_that_does_not_fit_its_layout_is_refused():
    # seats 1, s17 with a hole card, five cards: the dealer's 20 against seat 1's 20, stood
    good = bytes([0, 1, 0, 3, 1, 2, 5, 40, 44, 36, 48, 0xF1, 0x0F, 0x0F])  # JS QS TS KS next
    rec = decode_blackjack_result(good)
    assert rec["events"][-1] == ("press", "next") and rec["placed"] == [0, "dealer", 0, "dealer"]
    assert check_result(rec)[1] is None
    for bad in (good[:-1], good + b"\0", good[:4], bytes([0, 1, 0, 3, 0]) + good[5:],
                good[:7] + bytes([0xF9]) + good[8:], good[:5] + b"\x08" + good[6:]):
        with pytest.raises(ValueError):
            decode_blackjack_result(bad)


def test_a_followed_round_is_what_settle_takes():
    """The host's follower gives the round as `sabot settle` takes it (dealer, hands with seat,
    cards and split): a split pair of eights and the dealer's six-card 18 settle from it."""
    from sabot.game.blackjack_settle import settle

    events = [("card", "8S"), ("card", "2C"), ("card", "8H"), ("card", "3D"),
              ("press", "split"), ("card", "9S"), ("press", "next"), ("card", "TS"),
              ("press", "next"), ("card", "2H"), ("card", "4C"), ("card", "2S"), ("card", "5S")]
    got = owners([4], events)
    assert got["complete"] and got["dealer"] == ["2C", "3D", "2H", "4C", "2S", "5S"]
    answer = settle({"table": {"game": "blackjack", "side_wagers": ["hit_and_run",
                                                                    "straight_jack"]},
                     "round": {"dealer": got["dealer"], "hands": got["hands"]},
                     "meters": {"hit_and_run": 100_000, "straight_jack": 500_000},
                     "wagers": [{"seat": 4, "wager": "hit_and_run", "amount_cents": 100},
                                {"seat": 4, "wager": "straight_jack", "amount_cents": 100}]})
    by = {s["wager"]: (s["hand"], s["win_cents"]) for s in answer["settlements"]}
    # six dealer cards: 25 for 1; Straight Jack takes the original two, the pair: no straight
    assert by == {"hit_and_run": ("6_cards", 2400), "straight_jack": ("no_straight", 0)}


@pytest.mark.parametrize("cards,up,rule,choice", [
    (["6S", "5H"], "TD", "s17", "double"), (["6S", "5H"], "AD", "s17", "hit"),
    (["6S", "5H"], "AD", "h17", "double"), (["TS", "6H"], "TD", "s17", "hit"),
    (["TS", "6H"], "6D", "s17", "stand"), (["TS", "2H"], "3D", "s17", "hit"),
    (["AS", "7H"], "9D", "s17", "hit"), (["AS", "7H"], "8D", "s17", "stand"),
    (["AS", "7H"], "2D", "h17", "double"), (["AS", "7H"], "2D", "s17", "stand"),
    (["8S", "8H"], "TD", "s17", "split"), (["TS", "KH"], "6D", "s17", "stand"),
    (["AS", "AH"], "AD", "s17", "split"), (["5S", "5H"], "6D", "s17", "double"),
    (["9S", "9H"], "7D", "s17", "stand"), (["2S", "3H", "4D"], "TD", "s17", "hit"),
])
def test_the_simulated_players_follow_basic_strategy(cards, up, rule, choice):
    from sabot.virtual.blackjack_dealer import decide

    assert decide(cards, up, rule, may_split=True) == choice


@pytest.mark.board
def test_rounds_dealt_by_basic_strategy_are_followed_by_shoe_and_host_alike(mpy, tmp_path):
    """A simulated table (sabot/virtual/blackjack_dealer.py): 300 rounds of six decks, random
    seats, each player's decision pressed by the dealer. The host takes every card and press
    (none refused, none not due), every round completes, and the shoe's follower on MicroPython
    attributes every card alike with the heap locked."""
    import itertools

    from sabot.game.cards import shuffled_shoe
    from sabot.virtual.blackjack_dealer import deal_round

    rng = random.Random(8)
    shoe = (c for s in itertools.count() for c in shuffled_shoe(6, seed=s) if c != "CUT")
    events, expected, presses = bytearray(), bytearray(), {"next": 0, "double": 0, "split": 0}
    for _ in range(300):
        mask = rng.randrange(1, 128)
        seats = [s + 1 for s in range(7) if mask >> s & 1]
        round_ = deal_round(shoe, seats, "h17")
        got = follow_round(seats, round_, "h17")
        assert got["complete"] and not any(o is None or o is False for o in got["owner"])
        events += bytes((1, mask))
        expected.append(1)
        for (kind, v), o in zip(round_, got["owner"], strict=True):
            events += bytes((2, code(v)) if kind == "card" else (3, PRESS[v]))
            expected.append(1 if o is True else 0xFE if o == "dealer" else o)
            if kind == "press":
                presses[v] += 1
    assert presses["split"] > 10 and presses["double"] > 50 and presses["next"] > 300
    (tmp_path / "events").write_bytes(events)
    r = mpy(ROOT / "tests" / "mp" / "blackjack_rounds.py", tmp_path / "events", tmp_path / "out",
            tmp_path / "placed", "1", "1")
    assert r.returncode == 0 and b"alloc_failures 0" in r.stdout, r.stderr
    assert (tmp_path / "out").read_bytes() == bytes(expected)

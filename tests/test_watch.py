"""The alarms on what is dealt (audit/watch.py): `player_advantage` from the exact edges of the
remaining shoe for the wagers the table offers, and `repeated_sequence` for 20 cards or more dealt
in the same order as in an earlier shoe of the audit store, one alarm per run, stating it all;
both reach `history --alarms`."""

import json
import random
import subprocess

import pytest

from sabot.audit.store import open_store
from sabot.audit.watch import WINDOW, LiveEdges, SequenceIndex, Watch, offered_wagers
from sabot.game import analyze, cards, edges, rules
from sabot.game.cards import BURN_VALUES, RANKS, SUITS
from sabot.registry import ShoeEntry

from kit import SABOT


def one_deck_but(keep):
    """Counts of a 1-deck shoe's cards out so that only `keep` (card codes) remain."""
    return {c: 1 for c in (r + s for r in cards.RANKS for s in cards.SUITS) if c not in keep}


def test_offered_wagers_follow_the_tables_rules():
    assert offered_wagers(ShoeEntry(1)) == {"banker": "banker", "player": "player", "tie": "tie"}
    ez = offered_wagers(ShoeEntry(2, ez=True, side_wagers=["dragon7", "panda8"]))
    assert ez["banker"] == "ez_banker" and ez["dragon7"] == "dragon7"
    free = offered_wagers(ShoeEntry(3, commission_free=True, side_wagers=["lucky_six"]))
    assert free["banker"] == "nocomm_banker"
    db = offered_wagers(ShoeEntry(4, side_wagers=["dragon_bonus_player"],
                                  dragon_bonus_paytable="A"))
    assert db["dragon_bonus_player"] == "dragon_bonus_a_player"


def test_live_edges_equal_analyze_on_the_validators_counts():
    out = {"AS": 1, "5H": 1, "KD": 1, "9C": 1, "9D": 1}
    live = LiveEdges(1)
    live.update(1, out)
    seen = [c for c, n in out.items() for _ in range(n)]
    want = analyze.analyze(1, seen)["wagers"]
    assert live.edges() == {w: v["house_edge"] for w, v in want.items()}
    live.update(1, out | {"2S": 1})  # one card more
    assert live.cards == 52 - 6
    live.update(2, {})  # a new shoe starts over
    assert live.cards == 52


def test_player_advantage_alarm_once_per_wager_per_shoe_while_favourable(tmp_path):
    store = open_store(str(tmp_path / "a.db"))
    raised = []
    cfg = ShoeEntry(9, decks=1, side_wagers=["player_pair"])
    w = Watch(store, 9, cfg, {"last_seq": 0, "inventory": {}},
              lambda kind, detail, **where: raised.append((kind, detail, where)))
    # Only kings and queens left: every round a tie, a Player pair all but certain.
    inv = {"shoe": 1, "counts": one_deck_but({"KS", "KH", "KD", "KC", "QS", "QH", "QD", "QC"}),
           "partial": False}
    rec = {"shoe": 1, "round": 30, "player": ["AS", "2S"], "banker": ["3S", "4S"]}
    w.after(10, "result", rec, inv)
    w.after(11, "result", dict(rec, round=31), inv)
    kinds = [(k, d.split()[0]) for k, d, _ in raised]
    assert sorted(kinds) == [("player_advantage", "player_pair"), ("player_advantage", "tie")]
    assert raised[0][2] == {"shoe": 1, "round": 30}
    assert "house edge -" in raised[0][1]
    w.after(12, "shoe_start", {"shoe": 2}, {"shoe": 2, "counts": {}, "partial": False})
    w.after(13, "result", {"shoe": 2, "round": 30, "player": ["AS", "2S"],
                           "banker": ["3S", "4S"]}, dict(inv, shoe=2))
    assert len(raised) == 4  # once per wager per shoe
    store.close()


def test_repeated_sequence_index_finds_a_shifted_run_and_confirms_the_cards():
    deck = list(range(1, 53)) * 2
    index = SequenceIndex()
    assert index.add((1, 1), deck[:60]) == []
    # Shoe 2 deals 5 other cards, then cards 11..35 of shoe 1 in the same order.
    hits = index.add((1, 2), [52, 51, 50, 49, 48] + deck[10:35])
    assert hits and hits[0] == (5, (1, 1), 10)  # positions from 0: 6th here, 11th there
    assert len(hits) == 25 - WINDOW + 1  # one per window of the run
    # 19 cards in the same order are not a repeated shuffle.
    assert SequenceIndex().add((1, 3), deck[:19]) == []
    other = SequenceIndex()
    other.add((1, 1), deck[:40])
    assert other.add((1, 4), deck[40:45] + deck[1:20]) == []  # 19 in order, then no more


@pytest.mark.long
@pytest.mark.board
def test_a_shoe_dealt_again_in_the_same_order_raises_repeated_sequence(tmp_path):
    def demo():
        args = ["demo", "--seed", 12, "--db", tmp_path / "a.db", "--key", tmp_path / "k",
                "--registry", tmp_path / "reg.json", "--json"]
        return subprocess.run([*SABOT, *map(str, args)], capture_output=True, text=True,
                              timeout=120)

    first = demo()
    assert first.returncode == 0, first.stderr
    again = demo()  # a notice: printed, stored, shown, the exit status unchanged
    assert again.returncode == 0 and "repeated_sequence" in again.stderr, again.stderr
    assert "game-protection notices" in again.stderr
    h = subprocess.run([*SABOT, "history", "--db", tmp_path / "a.db", "--alarms"],
                       capture_output=True, text=True, timeout=60)
    alarms = [json.loads(x) for x in h.stdout.splitlines()]
    rep = [a for a in alarms if a["kind"] == "repeated_sequence"]
    assert len(rep) == 1, alarms  # one alarm for the whole repeated run
    # the whole shoe, every card it dealt (burn included), against the same cards of shoe 1
    rounds = subprocess.run([*SABOT, "history", "--db", tmp_path / "a.db", "--shoe", "2",
                             "--json"], capture_output=True, text=True, timeout=60).stdout
    dealt = sum(len(r["player"]) + len(r["banker"])
                for r in map(json.loads, rounds.splitlines()) if "winner" in r)
    assert rep[0]["shoe"] == 2, rep
    first, last = (int(x) for x in rep[0]["detail"].split()[1].split(".."))
    assert first == 1 and dealt + 2 <= last <= dealt + 11, (rep, dealt)  # the burn's cards too
    assert f"as cards 1..{last} of shoe 1 of shoe id 0x{rep[0]['shoe_id']:08x}" in rep[0]["detail"]


def test_notices_change_the_exit_status_only_when_asked():
    """CONTRACTS "Exit status": player_advantage and repeated_sequence are printed, stored and
    shown, but fail a command only with --fail-on-notice; every other alarm fails it."""
    from sabot.cli.output import fail_on
    from sabot.errors import NotVerified

    notice = [{"kind": "player_advantage", "shoe": 1, "detail": "banker pays"}]
    fail_on([], notice)  # no exception: exit 0
    with pytest.raises(NotVerified, match="player_advantage"):
        fail_on([], notice, fail_on_notice=True)
    with pytest.raises(NotVerified, match="rules_mismatch"):
        fail_on([], notice + [{"kind": "rules_mismatch", "shoe": 1, "detail": "x"}])


def test_alarm_and_round_lines_print_the_shoe_id_as_every_command_does(capsys):
    """One way everywhere (0x and 8 hex digits), and no `shoe ?` for the shoe device's own
    alarms (an update, a rekey)."""
    from sabot.cli.output import format_round, print_alarm

    print_alarm({"kind": "firmware_update", "shoe": None, "round": None, "shoe_id": 7,
                 "detail": "version 20"})
    print_alarm({"kind": "rules_mismatch", "shoe": 2, "round": 5, "shoe_id": 7, "detail": "x"})
    err = capsys.readouterr().err.splitlines()
    assert err == ["ALARM firmware_update (shoe id 0x00000007): version 20",
                   "ALARM rules_mismatch (shoe 2, round 5, shoe id 0x00000007): x"]
    line = format_round({"shoe_id": 7, "shoe": 1, "round": 3, "player": ["AS", "2H"],
                         "banker": ["9S", "8D"], "player_total": 3, "banker_total": 7,
                         "winner": "banker", "flags": []})
    assert line.startswith("[shoe id 0x00000007] shoe 1 round   3:")


# Rank by rank, cards whose removal from one deck turns each analyzed wager favourable to the
# player (found by removing, one card at a time, the card that helps the wager most).
FAVOURABLE_AFTER = {
    "banker": "4444AAAATTTT3JJJ3222233J", "player": "6666777788889999",
    "tie": "TTTT88889999JJJJQ", "ez_banker": "4444AAAA222277773333TT", "dragon7": "888899992",
    "panda8": "99992222A", "nocomm_banker": "44666644AAAA3999938382", "lucky_six": "778888779",
    "player_pair": "AAAA222233334444", "banker_pair": "AAAA222233334444",
    "house_money": "AAAA22223333444455556666777", "dragon_bonus_a_player": "333322666",
    "dragon_bonus_a_banker": "444433336", "dragon_bonus_b_player": "333345555",
    "dragon_bonus_b_banker": "444433336", "dragon_bonus_c_player": "333322666",
    "dragon_bonus_c_banker": "444433355",
}
# Tables offering every side wager the registry knows, under each game's rules.
TABLES = (
    {"side_wagers": ["player_pair", "banker_pair", "house_money", "dragon_bonus_player",
                     "dragon_bonus_banker"], "dragon_bonus_paytable": "A"},
    {"ez": True, "side_wagers": ["dragon7", "panda8", "player_pair"]},
    {"commission_free": True, "side_wagers": ["lucky_six", "banker_pair", "house_money"]},
)


def stacked_shoe(ranks, decks, rng):
    """These ranks first (each rank's copies repeated `decks` times), then the rest shuffled; no
    cut card: dealt until the cards run out."""
    pool = [r + s for _ in range(decks) for r in RANKS for s in SUITS]
    first = []
    for r in ranks:
        for _ in range(decks):
            card = next(c for c in pool if c[0] == r)
            pool.remove(card)
            first.append(card)
    rng.shuffle(pool)
    return first + pool


def two_hundred_shoes():
    """200 shoes: each wager's stacked shoe, one deck with three shuffles of the rest and two
    decks; 128 shuffled one-deck shoes; four shuffled 8-deck shoes (cut card as dealt)."""
    rng = random.Random(21)
    shoes = [(d, stacked_shoe(ranks, d, rng)) for ranks in FAVOURABLE_AFTER.values()
             for d in (1, 1, 1, 2)]
    shoes += [(1, [c for c in cards.shuffled_shoe(1, rng.randrange(1 << 30)) if c != cards.CUT])
              for _ in range(128)]
    shoes += [(8, cards.shuffled_shoe(8, seed)) for seed in range(4)]
    return shoes


def exact_after_every_round(decks, tokens):
    """The burn, then (round, cards left, every wager's house edge or None) after each round:
    all outcome counts recomputed in Python for the cards left (the old watch's way, the
    brute-force reference)."""
    rounds = rules.deal_shoe(tokens)
    dealt = [c for c in tokens if c != cards.CUT]
    burn = dealt[: 1 + BURN_VALUES[dealt[0][0]]]
    shoe = edges.RemainingShoe(decks, burn, compiled=False)
    after = []
    for r in rounds:
        shoe.remove_all(rules.dealing_order(r["player"], r["banker"]))
        after.append((r, shoe.cards, shoe.house_edges() if shoe.cards >= 6 else None))
    return burn, after


@pytest.mark.parametrize("part", range(4))
def test_fast_watch_alarms_equal_an_exact_recompute_after_every_round(tmp_path, part):
    """player_advantage from the watch (the compiled kernel's exact integers) against the
    decision an exact recompute of every wager after every round gives, on 200 shoes, including
    shoes built to turn each analyzed wager favourable; and LiveEdges.favourable for all 17
    wagers, the engine any table's wagers go through."""
    assert edges.kernel() is not None, "the kernel is not built: `make` builds it"
    store = open_store(str(tmp_path / "a.db"))
    shoes = two_hundred_shoes()[part::4]  # each wager's stacked shoes: one in each part
    raised = {i: [] for i in range(len(TABLES))}
    want = {i: [] for i in range(len(TABLES))}
    watches, favourable = {}, {}
    turned = set()
    seq = 0
    for number, (decks, tokens) in enumerate(shoes, 1):
        burn, after = exact_after_every_round(decks, tokens)
        for i, table in enumerate(TABLES):
            entry = ShoeEntry(100 * decks + i, decks=decks, **table)
            key = (decks, i)
            if key not in watches:
                watches[key] = Watch(store, entry.shoe_id, entry, {"last_seq": 0, "inventory": {}},
                                     lambda kind, detail, i=i, **where: raised[i].append(
                                         (kind, detail, where)) if kind == "player_advantage"
                                     else None)
            favourable[key] = set()
        live = LiveEdges(decks)
        inv = {"shoe": number, "counts": {}, "partial": False}

        def deal(kind, rec, these, inv=inv, decks=decks):
            nonlocal seq
            seq += 1
            for c in these:
                inv["counts"][c] = inv["counts"].get(c, 0) + 1
            for (d, _), w in watches.items():
                if d == decks:
                    w.after(seq, kind, rec, inv)

        deal("shoe_start", {"shoe": number}, [])
        deal("burn", {"shoe": number, "cards": burn}, burn)
        for r, left, exact in after:
            rec = dict(r, shoe=number)
            deal("result", rec, rules.dealing_order(r["player"], r["banker"]))
            live.update(number, inv["counts"])
            below = live.favourable(edges.ANALYZED_WAGERS)
            if exact is None:
                assert below is None
                continue
            assert below == {w: e for w, e in exact.items() if e < 0}, (number, r["round"])
            turned |= set(below)
            for i in range(len(TABLES)):
                key = (decks, i)
                for wager, name in watches[key].offered.items():
                    if exact[name] >= 0:
                        favourable[key].discard(wager)
                    elif wager not in favourable[key]:
                        favourable[key].add(wager)
                        want[i].append(("player_advantage", f"{wager} ({name}) house edge "
                                        f"{exact[name]:.6%} with {left} cards left: the player "
                                        "has the edge", {"shoe": number, "round": r["round"]}))
        deal("shoe_end", {"shoe": number}, [])
    assert raised == want
    store.close()
    if part < 3:  # its stacked shoes have one deck: each turns its wager favourable
        assert turned >= set(FAVOURABLE_AFTER), set(FAVOURABLE_AFTER) - turned
        for i in range(len(TABLES)):
            alarmed = {d.split(" ", 1)[0] for _, d, _ in want[i]}
            assert alarmed == set(watches[1, i].offered), (i, alarmed)


DECK = [r + s for r in RANKS for s in SUITS]  # 52 distinct cards in a fixed order


class Dealt:
    """A Watch on its own store, fed rounds of four cards (P1 B1 P2 B2), as the validator does."""

    def __init__(self, tmp_path, shoe_id=7, store=None):
        self.store = store or open_store(str(tmp_path / "a.db"))
        self.alarms = []
        self.seq = 0
        self.shoe_id = shoe_id
        self.restart()

    def restart(self, seq=None):
        """A new Watch over the same store (a validator started again): the index is the
        store's, the runs under way are not remembered."""
        entry = ShoeEntry(self.shoe_id, table="Baccarat 3")
        self.watch = Watch(self.store, self.shoe_id, entry,
                           {"last_seq": self.seq, "inventory": {}},
                           lambda kind, detail, **where: self.alarms.append((kind, detail, where)))

    def shoe(self, number, codes, end=True, start=True):
        inv = {"shoe": number, "counts": {}, "partial": False}
        if start:
            self.record("shoe_start", {"shoe": number}, inv)
        for i in range(0, len(codes), 4):
            p1, b1, p2, b2 = codes[i:i + 4]
            self.record("result", {"shoe": number, "round": i // 4 + 1, "player": [p1, p2],
                                   "banker": [b1, b2]}, inv)
        if end:
            self.record("shoe_end", {"shoe": number}, inv)

    def record(self, kind, rec, inv):
        self.seq += 1
        self.watch.after(self.seq, kind, rec, inv)

    def repeated(self):
        return [(d, w) for k, d, w in self.alarms if k == "repeated_sequence"]


def test_a_repeated_run_is_one_alarm_stating_all_of_it_when_it_ends(tmp_path):
    """Shoe 2 deals 4 other cards, then cards 9..40 of shoe 1 in the same order, then others:
    nothing at 20 cards, one alarm when the run ends, with its first and last card, the table
    and the shoe it repeats."""
    d = Dealt(tmp_path)
    d.shoe(1, DECK)
    second = DECK[48:][::-1] + DECK[8:40] + DECK[40:48][::-1] + DECK[:8]
    d.shoe(2, second[:36], end=False)  # the run and nothing after it yet
    assert d.repeated() == []  # under way: not yet reported, not at its 20th card either
    d.shoe(2, second[36:40], start=False, end=False)  # the next card differs: the run is over
    assert d.repeated() == [(
        "cards 5..36 of this shoe (32 cards, table Baccarat 3) were dealt in the same order as "
        "cards 9..40 of shoe 1 of shoe id 0x00000007 (table Baccarat 3)",
        {"shoe": 2, "round": 6})]  # first seen in round 6, when its 20th card came out
    d.shoe(2, second[40:], start=False)
    assert len(d.repeated()) == 1


def test_a_whole_shoe_dealt_again_is_reported_at_its_end_once(tmp_path):
    d = Dealt(tmp_path)
    d.shoe(1, DECK)
    d.shoe(2, DECK, end=False)
    assert d.repeated() == []
    d.shoe(2, [], start=False)  # shoe_end
    (detail, where), = d.repeated()
    assert detail.startswith("cards 1..52 of this shoe (52 cards, table Baccarat 3) were dealt "
                             "in the same order as cards 1..52 of shoe 1 ")
    assert where == {"shoe": 2, "round": 5}
    d.shoe(3, DECK[::-1])  # another shoe: nothing repeated, nothing reported
    assert len(d.repeated()) == 1


def test_a_run_against_two_earlier_shoes_is_one_alarm_naming_both(tmp_path):
    d = Dealt(tmp_path)
    d.shoe(1, DECK)
    d.shoe(2, DECK[::-1][:8] + DECK[:44])
    d.shoe(3, DECK[::-1][:4] + DECK[:40] + DECK[::-1][4:12])
    details = [x for x, _ in d.repeated()]
    assert details[0].startswith("cards 9..52 of this shoe (44 cards")  # shoe 2 against 1
    assert details[1] == (
        "cards 5..44 of this shoe (40 cards, table Baccarat 3) were dealt in the same order as "
        "cards 1..40 of shoe 1 of shoe id 0x00000007 (table Baccarat 3); and as cards 9..48 of "
        "shoe 2 of shoe id 0x00000007 (table Baccarat 3)")
    assert len(details) == 2


def test_a_run_under_way_when_the_validator_starts_again_is_reported_whole(tmp_path):
    d = Dealt(tmp_path)
    d.shoe(1, DECK)
    d.shoe(2, DECK[:32], end=False)
    d.restart()  # a new validator, in the middle of the run
    d.shoe(2, DECK[32:36] + DECK[::-1][:4], start=False)
    (detail, where), = d.repeated()
    assert detail.startswith("cards 1..36 of this shoe (36 cards,"), detail
    assert where["shoe"] == 2


def test_a_run_the_received_frames_end_in_is_reported_by_finish(tmp_path):
    """A capture that ends in the middle of a run: Validator.finish asks the watch, which
    reports the run as far as it was received."""
    d = Dealt(tmp_path)
    d.shoe(1, DECK)
    d.shoe(2, DECK[:28], end=False)
    assert d.repeated() == []
    d.watch.finish()
    (detail, _), = d.repeated()
    assert detail.startswith("cards 1..28 of this shoe (28 cards,")
    d.watch.finish()
    assert len(d.repeated()) == 1

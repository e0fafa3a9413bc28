"""The alarms on what is dealt (audit/watch.py): `player_advantage` from the exact edges of the
remaining shoe for the wagers the table offers, and `repeated_sequence` for 20 cards dealt in the
same order as in an earlier shoe of the audit store; both reach `history --alarms`."""

import json
import subprocess

import pytest

from sabot.audit.store import AuditStore
from sabot.audit.watch import WINDOW, LiveEdges, SequenceIndex, Watch, offered_wagers
from sabot.game import analyze, cards
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
    store = AuditStore(str(tmp_path / "a.db"))
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
    assert rep[0]["shoe"] == 2 and "cards 1..20 of this shoe" in rep[0]["detail"]
    assert "shoe 1" in rep[0]["detail"] and f"shoe_id {alarms[0]['shoe_id']}" in rep[0]["detail"]


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

"""The firmware's table-driven decisions, run on real MicroPython, against the host's independent
rules over every point-value sequence of a round (10^6) and every rank sequence of the first four
cards."""

import pytest

from sabot.game import rules
from sabot.game.cards import RANKS, SUITS

from kit import ROOT

pytestmark = pytest.mark.board  # every test here starts a process

SCRIPT = ROOT / "tests" / "mp" / "exhaustive_decisions.py"
WINNER = {"player": 1, "banker": 2, "tie": 3}
FLAG = {"player_natural": 4, "banker_natural": 8, "dragon7": 16, "panda8": 32, "lucky_six": 64,
        "player_pair": 128, "banker_pair": 256}
VALUE_RANK = "TA23456789"


def host_bytes(seq):
    it = iter(seq)
    player, banker = rules.deal_round(lambda: next(it))
    o = rules.round_outcome(player, banker)
    v = WINNER[o["winner"]] | sum(FLAG[f] for f in o["flags"])
    return bytes((len(player) * 4 + len(banker), v & 0xFF, v >> 8))


def compare(device, expected_iter, describe):
    mismatches = []
    for i, want in enumerate(expected_iter):
        got = device[3 * i : 3 * i + 3]
        if got != want and len(mismatches) < 5:
            mismatches.append(f"{describe(i)}: firmware {got.hex()} host {want.hex()}")
    return mismatches


@pytest.mark.long
def test_firmware_decides_every_point_value_sequence_as_the_host_rules_do(mpy, tmp_path):
    out = tmp_path / "values.bin"
    r = mpy(SCRIPT, out, "values", timeout=600)
    assert r.returncode == 0, r.stderr.decode()
    device = out.read_bytes()
    assert len(device) == 3 * 10**6

    def seqs():
        # The host's answer for all 10^6 sequences, asking its rules once per distinct round: a
        # round that used k cards is the same round whatever the 6 - k values after them are.
        for head in range(10**4):
            first = [VALUE_RANK[int(d)] + "S" for d in f"{head:04d}"]
            for fifth in VALUE_RANK:
                want = host_bytes([*first, fifth + "S", "TS"])
                if want[0] // 4 + want[0] % 4 == 4:  # nobody drew: all 100 tails the same
                    yield from [want] * 100
                    break
                for sixth in VALUE_RANK:
                    if sixth != "T" and want[0] // 4 + want[0] % 4 == 6:
                        yield host_bytes([*first, fifth + "S", sixth + "S"])
                    else:
                        yield want

    mismatches = compare(device, seqs(), lambda i: f"values {i:06d}")
    assert mismatches == []


def test_firmware_flags_every_rank_sequence_of_the_first_four_cards_as_the_host(mpy, tmp_path):
    out = tmp_path / "ranks.bin"
    r = mpy(SCRIPT, out, "ranks")
    assert r.returncode == 0, r.stderr.decode()
    device = out.read_bytes()
    assert len(device) == 3 * 13**4

    def seqs():
        for head in range(13**4):
            h, first = head, []
            for _ in range(4):
                first.insert(0, h % 13)
                h //= 13
            cards = [RANKS[r] + SUITS[(head + k) % 4] for k, r in enumerate(first)]
            cards += [VALUE_RANK[head % 10] + "S", VALUE_RANK[(head // 10) % 10] + "H"]
            yield host_bytes(cards)

    assert compare(device, seqs(), lambda i: f"ranks #{i}") == []

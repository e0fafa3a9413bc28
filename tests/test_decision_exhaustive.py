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
    """All 10^6 point-value sequences of six cards, one record per distinct round (339,400):
    a sequence's cards after those its round deals are never read, on either side."""
    out = tmp_path / "values.bin"
    r = mpy(SCRIPT, out, "values", timeout=600)
    assert r.returncode == 0, r.stderr.decode()
    device = out.read_bytes()
    wants, labels, covered = [], [], 0
    for head in range(10**4):
        first = [VALUE_RANK[int(d)] + "S" for d in f"{head:04d}"]
        for fifth in range(10):
            want = host_bytes([*first, VALUE_RANK[fifth] + "S", "TS"])
            dealt = want[0] // 4 + want[0] % 4
            wants.append(want)
            labels.append(f"{head:04d}{fifth}0")
            if dealt == 4:
                covered += 100  # the other 99 tails deal this same round
                break
            if dealt == 5:
                covered += 10
                continue
            covered += 10
            for sixth in range(1, 10):
                wants.append(host_bytes([*first, VALUE_RANK[fifth] + "S",
                                         VALUE_RANK[sixth] + "S"]))
                labels.append(f"{head:04d}{fifth}{sixth}")
    assert covered == 10**6 and len(wants) == 339_400
    assert len(device) == 3 * len(wants), (len(device), 3 * len(wants))
    mismatches = compare(device, iter(wants), lambda i: f"values {labels[i]}")
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

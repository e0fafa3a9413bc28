"""`sabot deal`: shoe files through the firmware on real MicroPython, round by round against the
host's independent rules, including the burn and every place the cut card can come out."""

import json
import subprocess

import pytest

from sabot.game import cards, rules
from sabot.virtual.demo import run_deal

from kit import SABOT

pytestmark = pytest.mark.board  # every test here starts a process


def firmware_rounds(tokens, tmp_path, name="shoe.txt"):
    path = tmp_path / name
    path.write_text(cards.format_shoe(tokens))
    return [r for k, r in run_deal(str(path)) if k == "result"]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_eight_deck_shoes_agree_with_host_rules(tmp_path, seed):
    tokens = cards.shuffled_shoe(8, seed=seed)
    path = tmp_path / "shoe.txt"
    path.write_text(cards.format_shoe(tokens))
    r = subprocess.run([*SABOT, "deal", str(path), "--json"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    got = [json.loads(line) for line in r.stdout.splitlines()]
    want = rules.deal_shoe(tokens)
    assert len(want) > 60
    assert got == want


@pytest.mark.long
def test_cut_card_between_rounds_during_a_round_and_during_the_burn(tmp_path):
    deck = cards.shuffled_shoe(1, seed=9, cut_from_end=0)[:-1]  # one deck, no cut card yet
    want_counts = set()
    # the burn (1, 4, 8), then every place in a round of five or six cards: its first card on,
    # at least once each (12 to 24 in steps of one would deal each place twice)
    for at in (1, 4, 8, 12, 13, 14, 15, 16, 17, 19, 21, 23):
        tokens = deck[:at] + ["CUT"] + deck[at:]
        want = rules.deal_shoe(tokens)
        assert firmware_rounds(tokens, tmp_path, f"cut{at}.txt") == want, f"CUT at {at}"
        want_counts.add(len(want))
    assert len(want_counts) > 1  # the placements really do change how many rounds follow


def test_shoe_without_cut_card_ends_when_cards_run_out(tmp_path):
    tokens = cards.shuffled_shoe(1, seed=4, cut_from_end=0)[:-1]
    assert firmware_rounds(tokens, tmp_path) == rules.deal_shoe(tokens)


def test_bad_shoe_file_is_one_line_error(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("AS KD QQ\n")
    r = subprocess.run([*SABOT, "deal", str(path)], capture_output=True, text=True)
    assert r.returncode != 0 and "unknown card 'QQ'" in r.stderr and "Traceback" not in r.stderr

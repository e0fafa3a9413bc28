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


def shoes_dealt(shoes, tmp_path):
    """Several shoe files dealt one after another on one virtual board (real MicroPython), each
    after the host's new-shoe, through one validator: each shoe's round records."""
    import threading

    from sabot import keys
    from sabot.audit.records import contract_round
    from sabot.virtual.dealer import Dealer
    from sabot.virtual.demo import DRAIN_WAIT, Session

    key = keys.create(str(tmp_path / "command.pem"))
    s = Session(shoes[0], key, str(tmp_path / "audit.db"), str(tmp_path / "flash"))
    board, link = s.start_board()
    try:
        for tokens in shoes:
            s.ensure_new_shoe(board, link)
            done = threading.Event()
            threading.Thread(target=lambda t=tokens: (Dealer(board, t).deal(), done.set()),
                             daemon=True).start()
            while not done.is_set():
                link.pump()
            assert link.drain(DRAIN_WAIT)
    finally:
        s.close()
    assert s.validator.counts["rejected"] == 0
    by_shoe = {}
    for kind, rec in s.records:
        if kind == "result":
            by_shoe.setdefault(rec["shoe"], []).append(contract_round(rec))
    return [by_shoe.get(n, []) for n in range(1, len(shoes) + 1)]


@pytest.mark.long
def test_cut_card_between_rounds_during_a_round_and_during_the_burn(tmp_path):
    deck = cards.shuffled_shoe(1, seed=9, cut_from_end=0)[:-1]  # one deck, no cut card yet
    # the burn (1, 4, 8), then every place in a round of five or six cards: its first card on,
    # at least once each (12 to 24 in steps of one would deal each place twice); the shoes one
    # after another on one board, as a table deals them
    places = (1, 4, 8, 12, 13, 14, 15, 16, 17, 19, 21, 23)
    shoes = [deck[:at] + ["CUT"] + deck[at:] for at in places]
    got = shoes_dealt(shoes, tmp_path)
    for n, (at, tokens) in enumerate(zip(places, shoes, strict=True), 1):
        assert got[n - 1] == rules.deal_shoe(tokens, shoe=n), f"CUT at {at}"
    assert len({len(rounds) for rounds in got}) > 1  # the placements change the rounds after


def test_shoe_without_cut_card_ends_when_cards_run_out(tmp_path):
    tokens = cards.shuffled_shoe(1, seed=4, cut_from_end=0)[:-1]
    assert firmware_rounds(tokens, tmp_path) == rules.deal_shoe(tokens)


def test_bad_shoe_file_is_one_line_error(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("AS KD QQ\n")
    r = subprocess.run([*SABOT, "deal", str(path)], capture_output=True, text=True)
    assert r.returncode != 0 and "unknown card 'QQ'" in r.stderr and "Traceback" not in r.stderr

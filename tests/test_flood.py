"""A forger floods the shoe's link with counted commands that pass every cheap check (this shoe's
id, the counter + 1 from a status, a bad signature): the lamps still answer each card at once, and
the refusals are counted (docs/PROTOCOL.md). make bench's `flood` section gives the figures."""

import time

import pytest

from kit import SIGN_MS, provision_shoe
from kit.flood import Flood
from kit.procs import free_port_for_tests


@pytest.mark.board
def test_lamps_keep_up_with_the_cards_under_a_flood_of_forged_commands(tmp_path):
    from sabot.audit.validator import Validator
    from sabot.game import cards
    from sabot.link.host import HostLink
    from sabot.virtual.board import VirtualBoard
    from sabot.virtual.dealer import Dealer

    key, flash, config, _ = provision_shoe(tmp_path)
    # the emulated element's Verify takes a real chip's 60 ms: the cost a forged frame once
    # put inside the board loop
    board = VirtualBoard(flash, port=free_port_for_tests(), sign_ms=SIGN_MS).start()
    flood = Flood(board.host, board.port, config.shoe_id, rate=300)
    try:
        dealer = Dealer(board, cards.shuffled_shoe(8, seed=21))
        board.wait(lambda s: True)
        flood.start()
        assert flood.ready.wait(10), "the forger got no status"
        waits = []  # the card's bytes sent -> its lamps, as the dealer sees them
        while board.indicator[2] < 12:
            position, sent = board.indicator[2], time.monotonic()
            dealer.step()
            if board.indicator[2] > position:
                waits.append(time.monotonic() - sent)
            time.sleep(0.03)
        flood.stop()
        v = Validator(config, str(tmp_path / "audit.db"))
        link = HostLink(board.url, v, key)
        st = link.ask(5)
        link.close()
        v.store.close()
    finally:
        flood.stop()
        board.stop()
    assert flood.sent > 50 and st is not None
    # Before the slot, each forged frame held the loop for a Verify: the median card waited
    # ~110 ms and every card waited one. The bounds leave room for a loaded test machine, whose
    # scheduler alone once held one card 92 ms (make bench gives the figures).
    waits.sort()
    assert waits[len(waits) // 2] < 0.03 and waits[-1] < 0.25, waits
    assert st["refused"] > flood.sent // 2  # nearly all refused at no cost, each counted
    # only those the element checked are refused for the key: the rest for the rate, so a host
    # is never told a busy shoe holds another command key
    assert 1 <= st["refused_bad_key"] < st["refused"] // 4


@pytest.mark.board
def test_a_shoe_refusing_our_commands_for_its_rate_is_not_called_a_wrong_key(tmp_path,
                                                                             monkeypatch):
    """A host sending its signed commands faster than the shoe takes them (4 a second) has
    most refused for the rate: counted in status `refused`, none in `refused_bad_key`. The host
    judges its key by the latter, so a busy shoe is never said to refuse our key; with another
    key the element's verdict says so."""
    from sabot import keys
    from sabot import protocol as pr
    from sabot.audit.validator import Validator
    from sabot.link import host
    from sabot.link.host import HostLink
    from sabot.virtual.board import VirtualBoard

    key, flash, config, _ = provision_shoe(tmp_path)
    board = VirtualBoard(flash, port=free_port_for_tests(), sign_ms=SIGN_MS).start()
    monkeypatch.setattr(host, "SIGNED_GAP", 0.02)  # 50 signed commands a second
    verdicts = {}
    try:
        for name, k in (("ours", key), ("other", keys.create(str(tmp_path / "other.pem")))):
            v = Validator(config, str(tmp_path / f"{name}.db"))
            link = HostLink(board.url, v, k)
            try:
                st = link.ask(5)
                for _ in range(12):
                    link._command(pr.C_ACK, st["acked"].to_bytes(4, "big"), counted=False)
                time.sleep(0.5)
                link.ask(5)
                verdicts[name] = (link.check_key(5), v.status)
            finally:
                link.close()
                v.store.close()
    finally:
        board.stop()
    verdict, st = verdicts["ours"]
    assert st["refused"] >= 6 and st["refused_bad_key"] == 0  # refused for the rate only
    assert verdict != "refused"
    verdict, st = verdicts["other"]
    assert verdict == "refused" and st["refused_bad_key"] >= 2

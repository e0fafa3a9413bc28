"""The shoe's whole card path on real MicroPython — sensor bytes, the decision, frame bodies, the
flash log, then service() polling while the secure element (the emulator process) digests and
signs, and the COBS-encoded frames on the link — allocates nothing in steady state (heap locked
over a whole 8-deck shoe), and a whole shoe fits a small heap (firmware compiled to .mpy).

The small heap was 64 KB before the secure element; on the 64-bit unix port the element driver
and its socket bus take ~17 KB of it as loaded .mpy (bytecode and qstrs, which a board's frozen
firmware keeps in flash), and loading fragments the heap, so the bound was 96 KB; the command
port's one-command check slot and the hello's status, both made by the element step by step
from service(), the status flags and the ring's room for a maintenance frame (30 B
more a slot) put it at 104 KB; the shoe's own log (its right edge, leaf, node and note
buffers, 1.6 KB, and its code, which a board keeps frozen in flash) and the squeeze's kept
digest at 116 KB (measured; see the firmware section, bench/sections_firmware.py); a status that
counts its refusals apart and says why a shoe tilted, refusals counted beyond the flash's reserve
and the reserve itself, the update session's idle check at 120 KB (118 KB measured fits; 120 KB
is release/build.py's HEAP_NEEDED, the figure every build reports). The run is made independent
of where it lies: the .mpy files embed their own names, not this clone's path (as the release
build's do), and MicroPython runs in the shoe's directory with short relative paths, as a
board's are."""

import re

import pytest

from sabot.game import cards, rules
from sabot.release.build import HEAP_NEEDED

from kit import ROOT
from kit.fw import write_acks

SCRIPT = ROOT / "tests" / "mp" / "card_path.py"
FIGURES = ("cards", "results", "alloc_failures", "us_per_card", "heap_min_free",
           "heap_free_collected",
           "full_path_heap_bytes_per_card", "full_path_heap_bytes", "signed", "element_errors",
           "log_size")


def figures(out):
    got = dict(re.findall(rb"(\w+) (\d+)", out))
    assert all(k.encode() in got for k in FIGURES), out
    return {k: int(got[k.encode()]) for k in FIGURES}


def expected_rounds(shoe):
    return len(rules.deal_shoe(cards.read_shoe_file(shoe)))


def run(mpy, shoe_flash, element, mode, *extra, **kw):
    flash, shoe, provisioned = shoe_flash
    args = [shoe, flash, element, mode]
    if "ack" in extra:
        acks = flash.parent / "acks.bin"
        write_acks(provisioned, acks)
        args.append(acks)
    r = mpy(SCRIPT, *args, **kw)
    assert r.returncode == 0, r.stderr.decode()
    f = figures(r.stdout)
    assert f["results"] == expected_rounds(shoe) and f["element_errors"] == 0
    assert f["cards"] > 300 and f["signed"] > 2 * f["results"]
    return f


@pytest.mark.board
def test_whole_card_path_allocates_nothing_under_heap_lock(mpy, shoe_flash, element):
    f = run(mpy, shoe_flash, element, "lock", "ack")
    assert f["alloc_failures"] == 0
    assert f["log_size"] == f["signed"]  # every finished frame a leaf of the shoe's log


@pytest.mark.board
def test_whole_card_path_allocates_zero_bytes_per_card(mpy, shoe_flash, element):
    f = run(mpy, shoe_flash, element, "measure", "ack")
    assert f["full_path_heap_bytes"] == 0 and f["full_path_heap_bytes_per_card"] == 0
    # Its time per card is a figure of `make bench` (card_path_us_per_card), not a test's: beside
    # the suite's other workers it measures the machine's load, not the path.
    assert f["us_per_card"] > 0


@pytest.mark.board
def test_with_a_chip_that_takes_real_time_a_patient_driver_allocates_nothing(
        mpy, shoe_flash, tmp_path):
    """The emulator at the real part's speed (Sign 50 ms, other commands 1 ms): a driver that
    polled a busy chip would meet NACKs, which machine.I2C raises as OSError (an allocation); the
    patient driver never addresses the chip before a command's maximum time."""
    from kit.fw import EmulatorProcess

    flash, shoe, provisioned = shoe_flash
    short = tmp_path / "short.txt"
    short.write_text(" ".join(shoe.read_text().split()[:30]))  # the burn and a few rounds
    em = EmulatorProcess(provisioned.store, tmp_path / "real.sock", "--sign-ms", 50)
    try:
        r = mpy(SCRIPT, short, flash, em.spec, "measure-patient")
    finally:
        em.stop()
    assert r.returncode == 0, r.stderr.decode()
    f = figures(r.stdout)
    assert f["results"] >= 3 and f["element_errors"] == 0
    assert f["full_path_heap_bytes"] == 0


@pytest.mark.board
def test_heap_lock_would_catch_an_allocation(mpy, tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("import micropython\nmicropython.heap_lock()\ntry:\n    x = [1, 2]\n"
                     "    print('no')\n"
                     "except MemoryError:\n    print('caught')\nmicropython.heap_unlock()\n")
    assert mpy(probe).stdout.strip() == b"caught"


SMALL_HEAP = f"{HEAP_NEEDED >> 10}K"  # what every build reports as the heap a shoe needs


@pytest.mark.board
def test_whole_shoe_in_a_small_heap_with_no_host_acknowledging(mpy, mpy_build, shoe_flash,
                                                             element):
    f = run(mpy, shoe_flash, element, "lock", heapsize=SMALL_HEAP, path=[mpy_build],
            cwd=shoe_flash[0].parent)
    assert f["alloc_failures"] == 0


@pytest.mark.board
def test_whole_shoe_in_a_small_heap_with_a_host_acknowledging_through_the_command_port(
        mpy, mpy_build, shoe_flash, element):
    f = run(mpy, shoe_flash, element, "lock", "ack", heapsize=SMALL_HEAP, path=[mpy_build],
            cwd=shoe_flash[0].parent)
    assert f["alloc_failures"] == 0


@pytest.mark.board
def test_service_passes_that_obey_host_commands_allocate_nothing(mpy, shoe_flash, element):
    """Each command arrives after a card (receiving and parsing it may allocate); the service()
    passes that check and obey it run with the heap locked: an ack (one that moves nothing too),
    a checkpoint, a hello (its status made, signed and sent, and what the host has not
    acknowledged resent from RAM), and the refusals of a resolve, a new shoe and an unknown
    command (each a chained frame, the element's counter moved first)."""
    from shoe import frames

    flash, shoe, provisioned = shoe_flash
    c = provisioned.command
    entries = []
    for _ in range(2):  # each counted command signed anew: the element's next counter
        entries += [(provisioned.ack(1),), (provisioned.ack(3),),
                    (c(frames.C_CHECKPOINT, counter=0),), (provisioned.ack(3),),
                    (c(frames.C_HELLO, counter=0),),
                    (c(frames.C_RESOLVE, b"\x01"),), (provisioned.ack(6),),
                    (c(frames.C_NEW_SHOE),), (c(0x84),), (provisioned.ack(10**6),)]
    cmds = flash.parent / "cmds.bin"
    cmds.write_bytes(b"".join(b"".join(e) + b"\0" for e in entries))  # (each frame ends in 0)
    r = mpy(ROOT / "tests" / "mp" / "service_commands.py", shoe, flash, element, cmds)
    assert r.returncode == 0, r.stderr.decode()
    out = r.stdout.decode()
    kinds = dict(re.findall(r"cmd (\S+) passes \d+ failures (\d+)", out))
    assert set(kinds) == {"81", "8a", "80", "82", "83", "84"}, out
    assert all(f == "0" for f in kinds.values()), out
    got = dict(re.findall(r"(\w+) (\d+)", out.splitlines()[-1]))
    assert got["commands"] == str(len(entries)) and got["card_failures"] == "0", out
    assert got["element_errors"] == "0" and got["refused"] == "0", out
    assert got["acked"] == got["done"] and int(got["done"]) > 6, out  # the last: ack(10**6)

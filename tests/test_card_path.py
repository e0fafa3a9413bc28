"""The shoe's card path on real MicroPython: no heap allocation in steady state, and a whole 8-deck
shoe within a 64 KB heap (firmware compiled to .mpy, as it ships)."""

import re

from sabot import cards, rules

from conftest import ROOT

SCRIPT = ROOT / "tests" / "mp" / "card_path.py"


def figures(out):
    m = re.search(rb"cards (\d+) results (\d+) alloc_failures (\d+) us_per_card (\d+) "
                  rb"heap_min_free (\d+)", out)
    assert m, out
    return [int(x) for x in m.groups()]


def expected_rounds(shoe):
    return len(rules.deal_shoe(cards.read_shoe_file(shoe)))


def test_card_path_allocates_nothing_under_heap_lock(mpy, shoe_flash):
    flash, shoe, _ = shoe_flash
    r = mpy(SCRIPT, shoe, flash)
    assert r.returncode == 0, r.stderr.decode()
    n_cards, results, failures, _, _ = figures(r.stdout)
    assert failures == 0
    assert n_cards > 300 and results == expected_rounds(shoe)


def test_heap_lock_would_catch_an_allocation(mpy, tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("import micropython\nmicropython.heap_lock()\ntry:\n    x = [1, 2]\n"
                     "    print('no')\n"
                     "except MemoryError:\n    print('caught')\nmicropython.heap_unlock()\n")
    assert mpy(probe).stdout.strip() == b"caught"


def test_whole_shoe_in_a_64k_heap_with_no_host_acknowledging(mpy, mpy_build, shoe_flash):
    flash, shoe, _ = shoe_flash
    r = mpy(SCRIPT, shoe, flash, heapsize="64K", path=[mpy_build])
    assert r.returncode == 0, r.stderr.decode()
    _, results, failures, _, _ = figures(r.stdout)
    assert failures == 0 and results == expected_rounds(shoe)


def test_whole_shoe_in_a_64k_heap_with_a_host_acknowledging_through_the_command_port(
        mpy, mpy_build, shoe_flash):
    flash, shoe, _ = shoe_flash
    r = mpy(SCRIPT, shoe, flash, "ack", heapsize="64K", path=[mpy_build])
    assert r.returncode == 0, r.stderr.decode()
    assert figures(r.stdout)[1] == expected_rounds(shoe)

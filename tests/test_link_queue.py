"""The host link classes of shoe/drivers/hw.py keep what their driver did not take and send it on
the next passes, frame boundaries intact: with timeout=0 usb-device-cdc's write (and a full
UART's) returns a short count, and a link that ignored it lost the rest of the frame, whose head
then ran into the next one. On real MicroPython, with a driver stand-in that takes a few bytes at
a time (tests/mp/link_queue.py)."""

import re

import pytest

from kit import ROOT, run_micropython


@pytest.mark.board
def test_a_driver_that_takes_a_few_bytes_at_a_time_loses_and_merges_nothing():
    r = run_micropython(ROOT / "tests" / "mp" / "link_queue.py", timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    seen = {m[0]: tuple(map(int, m[1:])) for m in
            re.findall(rb"(\w+) written (\d+) received (\d+) dropped (\d+) intact (\d+) cut (\d+)",
                       r.stdout)}
    assert set(seen) == {b"cdc", b"uart"}, r.stdout
    for name, (written, received, dropped, intact, cut) in seen.items():
        assert cut == 0, name  # no frame cut, none run into the next
        assert intact == received and received + dropped == written, (name, seen[name])
        # only the stall (the host reading nothing for 20 frames) drops frames, and whole
        assert 0 < dropped <= 20, (name, dropped)

"""The virtual shoe on a slow host: a whole demo with the machine's cores oversubscribed, the
shoe's processes (the board's MicroPython, the element emulator) held off their core now and then
for up to 1.6 s, as an overloaded host does to them. Every round comes late, none is lost: the
board never gives up on an element that answers late, or whose answer its watchdog lost while the
MCU was held up (it asks again), and the link is never reset."""

import os
import random
import signal
import subprocess
import sys
import threading
import time

import pytest

from sabot import keys
from sabot.game.cards import shuffled_shoe
from sabot.virtual.demo import Session

pytestmark = [pytest.mark.board, pytest.mark.long]

# busy loops: with the demo's own three processes, more than the cores can run. At the lowest
# priority, so the suite's other tests beside this one are not slowed by them; what a loaded host
# does to the shoe's processes, holding them off their core, hold_up does outright.
BUSY = 4


def hold_up(session, stop, rnd):
    """Until `stop`: every 0.2-0.6 s, the board, its element or both off their core for 0.1-1.6 s
    (past the element's 1.3 s watchdog at times); always let go again."""
    while not stop.wait(rnd.uniform(0.2, 0.6)):
        board = session.board
        if board is None or board.proc is None or board.element.proc is None:
            continue
        pids = rnd.choice([[board.proc.pid], [board.element.proc.pid],
                           [board.proc.pid, board.element.proc.pid]])
        try:
            for pid in pids:
                os.kill(pid, signal.SIGSTOP)
            time.sleep(rnd.uniform(0.1, 1.6))
        finally:
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass  # it ended meanwhile (the failure the test reports)


def test_a_whole_demo_on_an_oversubscribed_host_verifies_every_round(tmp_path):
    key = keys.create(str(tmp_path / "command.pem"))
    session = Session(shuffled_shoe(2, 11), key, str(tmp_path / "audit.db"),
                      str(tmp_path / "flash"), sign_ms=50)  # a real chip's Sign time
    busy = []
    stop = threading.Event()
    holder = threading.Thread(target=hold_up, args=(session, stop, random.Random(5)),
                              daemon=True)
    try:
        busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"],
                                 preexec_fn=lambda: os.nice(19)) for _ in range(BUSY)]
        holder.start()
        session.run()
    finally:
        stop.set()
        holder.join()
        for p in busy:
            p.kill()
            p.wait()
        boots = session.board.boots if session.board else 0
        session.close()
    s = session.summary()
    assert boots == 1  # never reset
    assert s["rounds"] == s["expected_rounds"] > 5, s
    assert s["lost"] == 0 and s["rejected"] == 0 and s["irregularities"] == 0, s
    assert s["checkpoint"] and s["verified"] >= 2 * s["rounds"], s

"""The Pico's and the ESP32's own code in the tests: their board.py, firmware/shoe/drivers/hw.py
and firmware/main.py, built as for the board (`sabot firmware --board B`), run on the unix-port
MicroPython over the emulated machine (boards/emulated/) and deal the same shoe as the virtual
board, round for round, every frame verified; and every statement of hw.py runs."""

import json
import os
import re
import subprocess
import threading

import pytest

from kit import ROOT, free_port_for_tests, micropython_bin
from kit.lines import write_instrumented

pytestmark = pytest.mark.board  # every test here starts MicroPython

# a short shoe (the emulated boards drive the element patiently: a Sign waits its datasheet
# 115 ms, so a whole 8-deck shoe takes about 35 s there); its own cut card near the end
CARDS = 60


@pytest.fixture(scope="module")
def code_trees(tmp_path_factory):
    """Each emulated board's built code tree, signed by a throwaway release key."""
    from sabot.release.build import build

    tmp = tmp_path_factory.mktemp("code")
    return {b: build(b, tmp / b, tmp / "release.pem", log=lambda line: None)["dir"]
            for b in ("rpi_pico", "esp32")}


def deal(board, tokens, tmp, code=None, chunk=0):
    from sabot import keys
    from sabot.virtual.demo import Session

    os.makedirs(tmp)
    key = keys.create(os.path.join(tmp, "command.pem"))
    s = Session(tokens, key, os.path.join(tmp, "audit.db"), os.path.join(tmp, "flash"),
                board=board, code=code, chunk=chunk)
    try:
        s.run()
    finally:
        s.close()
    return s


@pytest.mark.long
def test_both_boards_deal_the_virtual_boards_rounds_every_frame_verified(code_trees, tmp_path):
    from sabot.game.cards import CUT, shuffled_shoe

    tokens = shuffled_shoe(8, seed=19)[:CARDS]
    tokens.insert(CARDS - 8, CUT)
    runs = {"virtual": {}, "rpi_pico": {"chunk": 64}, "esp32": {}}  # the CDC: 64 B a write
    sessions, errors = {}, []

    def run(board):
        try:
            sessions[board] = deal(board, tokens, str(tmp_path / board), code_trees.get(board),
                                   **runs[board])
        except Exception as e:
            errors.append((board, e))

    threads = [threading.Thread(target=run, args=(b,)) for b in runs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    rounds = {b: [json.dumps(r, sort_keys=True) for r in s.rounds()] for b, s in sessions.items()}
    assert len(rounds["virtual"]) >= 8
    assert rounds["rpi_pico"] == rounds["virtual"] and rounds["esp32"] == rounds["virtual"]
    for board, s in sessions.items():
        summary = s.summary()
        assert summary["rejected"] == 0 and summary["lost"] == 0, (board, summary)
        assert summary["verified"] == s.validator.counts["verified"] > len(rounds[board])
    # each board's log on its raw partition (a NOR chip in a file), none in its filesystem
    for board, start, size in (("rpi_pico", 1152 * 1024, 256 * 1024),
                               ("esp32", 0x3C0000, 0x40000)):
        flash = tmp_path / board / "flash"
        chip = (flash / "chip.img").read_bytes()
        halves = (chip[start], chip[start + size // 2])
        assert not (flash / "log").exists() and ord("S") in halves, (board, halves)
    pico = sessions["rpi_pico"].board
    # the Pico's link really was cut: its CDC took a USB packet (64 B) a write, frames still verify
    assert pico is not None and pico.chunk == 64
    for board in ("rpi_pico", "esp32"):
        b = sessions[board].board
        assert b is not None
        lit = {name for name, level in b.lamp_changes if level}
        assert {"player", "banker", "result"} <= lit, (board, b.lamp_changes[:20])
        assert b.lamps.get("alarm", 0) == 0 and b.lamps.get("buzzer") == 0
    pico_deals_blackjack(code_trees["rpi_pico"], tmp_path / "blackjack")


def pico_deals_blackjack(code, tmp):
    """The Pico's own code over the emulated machine, its bet spots and next / double / split
    buttons as its board data wires them: a short six-deck blackjack shoe, every round the one
    the simulated table dealt and settled so; an ESP32, which has no bet spots, is refused in
    one line. (In the test above: the code trees are built once.)"""
    from sabot import keys
    from sabot.cli.virtual import refuse_without_bet_spots
    from sabot.errors import SabotError
    from sabot.game.cards import CUT, shuffled_shoe
    from sabot.registry import ShoeEntry
    from sabot.virtual.demo import Session

    tokens = shuffled_shoe(6, seed=24)[:CARDS]
    tokens.insert(CARDS - 12, CUT)
    tmp.mkdir()
    key = keys.create(str(tmp / "command.pem"))
    entry = ShoeEntry(0x5AB0_0024, game="blackjack", decks=6,
                      side_wagers=["hit_and_run", "straight_jack", "house_money"])
    s = Session(tokens, key, str(tmp / "audit.db"), str(tmp / "flash"), board="rpi_pico",
                code=code, config=entry, seed=3)
    try:
        s.run()
    finally:
        s.close()
    played = [r for k, r in s.records if k == "blackjack_result"]
    summary = s.summary()
    # (what the board said last and how often it booted, for a failure to say why)
    said = (summary, getattr(s.board, "boots", None), getattr(s.board, "unread", None),
            {n: t.get("why") for n, t in s.dealer.truth.items() if t["status"] != "confirmed"},
            [r for k, r in s.records if k not in ("blackjack_result", "card")][-6:])
    assert len(played) >= 3 and summary["rounds"] == len(played), said
    assert summary["wrong"] == summary["lost"] == summary["rejected"] == summary["voided"] == 0, \
        said
    assert all((r["seats"], r["events"]) == (s.dealer.truth[r["round"]]["seats"],
                                             s.dealer.truth[r["round"]]["events"])
               for r in played)
    with pytest.raises(SabotError, match="the esp32 board has no bet-spot sensors"):
        refuse_without_bet_spots("esp32")


def test_every_statement_of_hw_py_runs(tmp_path, shoe_flash, element):
    hw = ROOT / "firmware" / "shoe" / "drivers" / "hw.py"
    probes = tmp_path / "probes"
    lines = write_instrumented(hw, probes)
    listen = f"127.0.0.1:{free_port_for_tests()}"
    path = os.pathsep.join(map(str, (probes, ROOT / "boards" / "emulated", ROOT / "firmware",
                                     ROOT / "boards" / "virtual")))
    proc = subprocess.Popen([micropython_bin(), str(ROOT / "tests" / "mp" / "hw_lines.py"),
                             element, listen, str(ROOT / "boards"), str(tmp_path / "chip.img")],
                            env=dict(os.environ, MICROPYPATH=path), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        proc.stdin.write(b"hi")  # what a development board's host sends on its stdin
        proc.stdin.flush()
        said = proc.stdout.readline()
        assert said == b"close stdin\n", said + proc.stderr.read()
        proc.stdin.close()  # and then it goes away
        out_b, err = proc.stdout.read(), proc.stderr.read()
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
    out = out_b.decode(errors="replace")
    assert proc.returncode == 0 and out.rstrip().endswith("ok"), out[-800:] + err.decode()
    ran = {int(n) for n in re.search(r"LINES ([\d ]*)", out).group(1).split()}
    source = hw.read_text().splitlines()
    missed = {n: source[n - 1].strip() for n in sorted(lines - ran)}
    assert not missed, f"statements of hw.py no test ran: {missed}"
    assert len(lines) > 100  # the probes really counted hw.py's statements


"""The dealer channel and the presses, one rule on both sides: the bytes the host's simulated
dealer writes (sabot/virtual/dealer_channel.py) are the ones the virtual board and the emulated
machine read (boards/virtual/dealer_channel.py), each button named as the firmware's board loop
names it; and the press kinds and resolution codes the host decodes are the shoe's own
(shoe/blackjack.py, shoe/dealing.py). The firmware cannot import host code, so each side keeps
its definition and this test holds them to each other."""

import runpy
import sys

from sabot import protocol as pr
from sabot.virtual import dealer_channel as host

from kit import FIRMWARE, ROOT

sys.path.insert(0, str(FIRMWARE))

from shoe import blackjack, dealing, loop

BOARD = runpy.run_path(str(ROOT / "boards" / "virtual" / "dealer_channel.py"))
BYTES = ("EXIT_EDGE", "CONFIRM", "EMPTY", "REVEAL", "BETS", "SUPERVISOR", "PRESS")


def test_the_host_writes_the_bytes_the_board_reads():
    assert {name: getattr(host, name) for name in BYTES} == {name: BOARD[name] for name in BYTES}
    assert {b: name for name, b in host.BUTTONS.items()} == BOARD["BUTTONS"]


def test_every_button_on_the_channel_is_one_the_board_loop_takes_and_none_is_a_sensor_byte():
    assert set(BOARD["BUTTONS"].values()) == {name for name, _ in loop.BUTTON_BITS}
    assert min(BOARD["BUTTONS"]) > BOARD["EXIT_EDGE"] and BOARD["BETS"] not in BOARD["BUTTONS"]


def test_presses_and_resolutions_are_the_shoes_own_codes():
    assert pr.PRESSES == {blackjack.PRESS_NEXT: "next", blackjack.PRESS_DOUBLE: "double",
                          blackjack.PRESS_SPLIT: "split"}
    assert pr.PRESS_EVENT == blackjack.PRESS_EVENT
    assert pr.RESOLUTIONS.index("void_card") == pr.VOID_CARD == dealing.RES_VOID_CARD
    assert pr.RESOLUTIONS.index("keep_dummy") == pr.KEEP_DUMMY == dealing.RES_KEEP_DUMMY
    assert pr.RESOLUTIONS.index("void_round") == pr.VOID_ROUND == dealing.RES_VOID_ROUND
    assert pr.RESOLUTIONS.index("end_shoe") == pr.END_SHOE == dealing.RES_END_SHOE

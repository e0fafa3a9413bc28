"""The dealer channel and the presses, one rule on both sides: the bytes are defined once, in the
board's file (boards/virtual/dealer_channel.py), which the virtual board and the emulated machine
read and the host's simulated dealer loads (sabot/virtual/dealer_channel.py); each button is
named as the firmware's board loop names it, and the supervisor's and the presses' bytes carry
the codes the host decodes (protocol.RESOLUTIONS, PRESSES), which are the shoe's own
(shoe/blackjack.py, shoe/dealing.py). The firmware cannot import host code, so the protocol's
codes are held to the shoe's here."""

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
    # the supervisor's and the presses' buttons carry the protocol's codes
    assert {name: host.SUPERVISOR + code for code, name in enumerate(pr.RESOLUTIONS) if code} \
        | {name: host.PRESS + kind for kind, name in pr.PRESSES.items()} == {
            name: b for name, b in host.BUTTONS.items()
            if name not in ("confirm", "empty", "reveal")}


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

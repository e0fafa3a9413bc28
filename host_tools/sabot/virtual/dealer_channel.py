"""The dealer channel: the bytes a virtual or emulated board reads on its stdin as the dealer's
recognition module, exit sensor, buttons and bet spots, and the recognition module's frames for a
card read. The bytes are defined once, in the board's own file (boards/virtual/dealer_channel.py,
which the firmware side reads as it is): the host reads that file too, so the dealer it simulates
writes what the board reads."""

from __future__ import annotations

import runpy

from sabot.game.cards import CUT
from sabot.paths import BOARDS

_BOARD = runpy.run_path(str(BOARDS / "virtual" / "dealer_channel.py"))
EXIT_EDGE: int = _BOARD["EXIT_EDGE"]  # the exit sensor's edge: a card left the shoe
CONFIRM: int = _BOARD["CONFIRM"]  # the dealer's confirm
EMPTY: int = _BOARD["EMPTY"]  # the shoe-empty sensor
REVEAL: int = _BOARD["REVEAL"]  # squeeze: the dealer releases the hands
BETS: int = _BOARD["BETS"]  # blackjack: the next byte is the bet spots (bit s-1: seat s)
SUPERVISOR: int = _BOARD["SUPERVISOR"]  # + the supervisor's resolution (protocol.RESOLUTIONS)
PRESS: int = _BOARD["PRESS"]  # + blackjack's press (protocol.PRESSES)
# every button's byte, by the name boards give it (board.BUTTONS)
BUTTONS: dict[str, int] = {name: byte for byte, name in _BOARD["BUTTONS"].items()}


def crc8(data: bytes) -> int:
    """CRC-8/DVB-S2 (poly 0xD5, init 0, not reflected, xorout 0): the recognition module's check
    (docs/HARDWARE.md "The recognition module's frames"), computed bit by bit here,
    independently of the firmware's table."""
    c = 0
    for b in data:
        c ^= b
        for _ in range(8):
            c = ((c << 1) ^ 0xD5) & 0xFF if c & 0x80 else (c << 1) & 0xFF
    return c


def sensor_frame(kind: str, rank_suit: str = "--", confidence: int = 0xF0) -> bytes:
    """The recognition module's frame for a card read (see firmware/shoe/sensor.py)."""
    body = (kind + rank_suit).encode() + f"{confidence:02X}".encode()
    return b"$" + body + b"*" + f"{crc8(body):02X}".encode() + b"\n"


def card_bytes(token: str, confidence: int = 0xF0) -> bytes:
    """What the dealer's draw of one shoe-file token puts on the dealer channel."""
    if token == CUT:
        return sensor_frame("C", "--", confidence) + bytes([EXIT_EDGE])
    return sensor_frame("R", token, confidence) + bytes([EXIT_EDGE])


"""The dealer channel: the bytes a virtual or emulated board reads on its stdin as the dealer's
recognition module, exit sensor, buttons and bet spots, and the recognition module's frames for a
card read. The board reads them as boards/virtual/dealer_channel.py says (tests/
test_dealer_channel.py holds the two to each other)."""

from __future__ import annotations

from sabot.game.cards import CUT
from sabot.protocol import PRESSES, RESOLUTIONS

EXIT_EDGE = 0x80  # the exit sensor's edge: a card left the shoe
CONFIRM, EMPTY, REVEAL = 0x81, 0x82, 0x83  # the dealer's confirm, shoe-empty, squeeze reveal
BETS = 0x84  # blackjack: the next byte is the bet spots (bit s-1: a wager at seat s)
SUPERVISOR = 0x90  # + the supervisor's resolution (protocol.RESOLUTIONS, 1..4)
PRESS = 0xA0  # + blackjack's press (protocol.PRESSES, 1..3)
# every button's byte, by the name boards give it (board.BUTTONS)
BUTTONS = {"confirm": CONFIRM, "empty": EMPTY, "reveal": REVEAL,
           **{name: SUPERVISOR + code for code, name in enumerate(RESOLUTIONS) if code},
           **{name: PRESS + kind for kind, name in PRESSES.items()}}


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


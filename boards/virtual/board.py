"""The virtual board: the shoe firmware on the MicroPython unix port. Its peripherals are data too.

Dealer channel (the simulated recognition module, exit sensor, buttons and bet spots): the
process's stdin, one byte at a time (dealer_channel.py). Indicators: a line on stdout per change:
`I <phase> <due> <position> <shoe> <round> <alarm> <reveal>`, at each result the display's
`A <player total> <banker total> <winner> <announcements>`, and at a blackjack table `H <hex>`
when the dealer's hand is complete: each card's hand, a nibble each (15 the dealer's), for the
dealer to confirm. Host link: a TCP socket (pyserial `socket://HOST:PORT`). Secure element: the
emulator's socket (host_tools/sabot/virtual/element_emulator.py), `--element
unix:PATH|tcp:HOST:PORT` or $SABOT_ELEMENT."""

import os

NAME = "virtual"
DECKS = 8  # the most decks this shoe holds; each shoe deals its provisioned count
MIN_CONFIDENCE = 0x80  # recognition confidence below this is an unreadable card

# The blank shoe's REPL helpers (firmware/maint.py) find flash and element as the board's main did.
FLASH_DIR = os.getenv("SABOT_FLASH") or "flash"


# The emulator is another process on a machine shared with other work: its answer can wait for
# a core far longer than a chip's bus ever makes a driver wait (a loaded test run stalled it past
# the 50 ms a board allows). The slack only lengthens how long a silent element is waited for.
SOCKET_SLACK_MS = 1000


def element(spec=None, patient=False):
    """The secure element behind the emulator's socket: `spec`, else $SABOT_ELEMENT. Impatient:
    the emulator answers as soon as its configured time is up (see shoe/element.py)."""
    from i2c_socket import SocketI2C

    from shoe.element import Element

    spec = spec or os.getenv("SABOT_ELEMENT")
    if not spec:
        raise ValueError("no secure element: --element unix:PATH|tcp:HOST:PORT or SABOT_ELEMENT")
    return Element(SocketI2C(spec), patient=patient, slack_ms=SOCKET_SLACK_MS)

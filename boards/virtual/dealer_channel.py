"""The dealer channel: what the simulated dealer's recognition module, exit sensor, buttons and bet
spots put on a virtual or emulated board's stdin, one byte at a time. The virtual board
(main.py) and the emulated machine (boards/emulated/emulated_machine.py) both read it here; the
host's simulated dealer writes the same bytes (host_tools/sabot/virtual/dealer_channel.py, held
to these by tests/test_dealer_channel.py).

0x00-0x7F are recognition-module UART bytes; BETS is followed by one byte, the bet spots (bit
s-1: a wager at seat s); every other byte is a button, named as boards name theirs
(board.BUTTONS, shoe/loop.py BUTTON_BITS)."""

EXIT_EDGE = 0x80  # the exit sensor's edge: a card left the shoe
CONFIRM = 0x81
EMPTY = 0x82  # the shoe-empty sensor
REVEAL = 0x83  # squeeze: the dealer releases the hands
BETS = 0x84  # blackjack: the next byte is the bet spots
SUPERVISOR = 0x90  # + the supervisor's resolution 1..4
PRESS = 0xA0  # + blackjack's press 1..3 (shoe/blackjack.py PRESS_*)

BUTTONS = {CONFIRM: "confirm", EMPTY: "empty", REVEAL: "reveal",
           SUPERVISOR + 1: "void_card", SUPERVISOR + 2: "keep_dummy",
           SUPERVISOR + 3: "void_round", SUPERVISOR + 4: "end_shoe",
           PRESS + 1: "next", PRESS + 2: "double", PRESS + 3: "split"}

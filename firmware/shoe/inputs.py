"""What the dealing shoe logs as its inputs (shoe/app.py, and the host's commands that act as
one, shoe/commands.py): a kind, and its two arguments."""

try:
    from micropython import const
except ImportError:  # CPython (tests): const is only a compiler hint
    def const(x):  # type: ignore[misc]
        return x

# Inputs, as logged: kind, arg, arg2
IN_NONE = const(0)  # no input: a frame of the shoe's own (command_rejected)
IN_CARD = const(1)
IN_TWO_CARDS = const(2)
IN_FOREIGN = const(3)
IN_CONFIRM = const(4)
IN_EMPTY = const(5)
IN_RESOLVE = const(6)  # arg: resolution code, arg2: 0 supervisor button, 1 host command
IN_NEW_SHOE = const(7)
IN_REVEAL = const(8)  # squeeze: the dealer releases the hands' identities to the link
IN_PRESS = const(9)  # blackjack: the dealer's NEXT, DOUBLE or SPLIT (arg: shoe/blackjack.py)
IN_DISPUTE = const(10)  # blackjack: the supervisor's void-round key on an unconfirmed round
# (an IN_CARD's arg2: the bet spots as the card left, the seats of a blackjack round it opens)

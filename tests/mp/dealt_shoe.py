# A shoe file as the MicroPython test scripts deal it: its cards as numbers, and each card's
# bytes from the recognition module (shoe/sensor.py's frame).
from shoe.cards import RANKS, SUITS
from shoe.sensor import encode


def read_shoe(path):
    """Card numbers (52 = cut card) in a bytearray: small enough for a 64K heap."""
    out = bytearray()
    for line in open(path):
        for t in line.split():
            out.append(52 if t == "CUT" else "A23456789TJQK".find(t[0]) * 4 + "SHDC".find(t[1]))
    return out


def sensor_bytes(card):
    """What the recognition module sends for card number `card` (52: the cut card)."""
    if card == 52:
        return encode(ord("C"))
    return encode(ord("R"), bytes((RANKS[card >> 2], SUITS[card & 3])))

# Runs on the unix-port MicroPython: 21 Baccarat rounds through the firmware's rules
# (shoe/b21.py, deciding from the generated shoe/b21table.py), the heap locked over every round
# (a MemoryError there is an allocation on the card path, counted).
# usage: micropython rounds21.py ROUNDS OUT
# ROUNDS: records of 2 rule bytes then 24 card codes (the round's cards, in the order they leave
# the shoe; those it does not take are left over). OUT: a record per round: np, nb, the outcome
# byte, the Player's total, the Banker's. Prints "rounds N alloc_failures K".
import sys

import micropython

from shoe.b21 import Rules21
from shoe.decision import DUE_NONE, DUE_PLAYER

RECORD = 26


def main():
    with open(sys.argv[1], "rb") as f:
        data = f.read()
    n = len(data) // RECORD
    out = bytearray(5 * n)
    player = bytearray(11)
    banker = bytearray(11)
    rules = Rules21(0, 0)
    failures = 0
    for r in range(n):
        at = r * RECORD
        micropython.heap_lock()
        try:
            rules.p = data[at]
            rules.b = data[at + 1]
            np = 0
            nb = 0
            k = at + 2
            while True:
                d = rules.due(player, np, banker, nb)
                if d == DUE_NONE:
                    break
                if d == DUE_PLAYER:
                    player[np] = data[k]
                    np += 1
                else:
                    banker[nb] = data[k]
                    nb += 1
                k += 1
            o = 5 * r
            out[o] = np
            out[o + 1] = nb
            out[o + 2] = rules.outcome(player, np, banker, nb)
            out[o + 3] = rules.total(player, np)
            out[o + 4] = rules.total(banker, nb)
        except MemoryError:
            failures += 1
        micropython.heap_unlock()
    with open(sys.argv[2], "wb") as f:
        f.write(out)
    print("rounds %d alloc_failures %d" % (n, failures))


main()

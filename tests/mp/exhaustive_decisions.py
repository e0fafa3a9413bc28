# Runs on the unix-port MicroPython: plays every six-card sequence through the firmware's decision
# code and writes two bytes per sequence (cards per hand, outcome bits) for the host to compare.
# usage: micropython exhaustive_decisions.py OUT values|ranks
import sys

from shoe.decision import DUE_NONE, DUE_PLAYER, due, outcome

VALUE_RANK = b"\x09\x00\x01\x02\x03\x04\x05\x06\x07\x08"  # point value -> rank number (0 -> T)
player = bytearray(3)
banker = bytearray(3)
seq = bytearray(6)


def play(res, at):
    np = 0
    nb = 0
    i = 0
    while True:
        d = due(player, np, banker, nb)
        if d == DUE_NONE:
            break
        if d == DUE_PLAYER:
            player[np] = seq[i]
            np += 1
        else:
            banker[nb] = seq[i]
            nb += 1
        i += 1
    v = outcome(player, np, banker, nb)
    res[at] = np * 4 + nb
    res[at + 1] = v & 0xFF
    res[at + 2] = v >> 8


def main():
    mode = sys.argv[2]
    out = open(sys.argv[1], "wb")
    res = bytearray(300)
    if mode == "values":
        # Every point-value sequence of a round (P1 B1 P2 B2, then P3/B3 values), one record per
        # distinct round: the cards after the ones a round deals are never read (play() hands a
        # card over only when due() asks for one), so once a round of four cards is dealt the
        # other 99 tails deal it again, and a round of five the other 9 sixth cards. The
        # firmware's own card count decides which are skipped; the host lays its records out by
        # its rules' count, so a round dealt differently breaks the alignment: a mismatch.
        one = memoryview(res)[:3]
        for head in range(10000):
            h = head
            for k in range(4):
                seq[3 - k] = VALUE_RANK[h % 10] * 4
                h //= 10
            for fifth in range(10):
                seq[4] = VALUE_RANK[fifth] * 4
                seq[5] = VALUE_RANK[0] * 4
                play(res, 0)
                out.write(one)
                dealt = (res[0] >> 2) + (res[0] & 3)
                if dealt == 4:
                    break
                if dealt == 6:
                    for sixth in range(1, 10):
                        seq[5] = VALUE_RANK[sixth] * 4
                        play(res, 0)
                        out.write(one)
    else:
        for head in range(13**4):  # every rank sequence of the first four cards, varied suits
            h = head
            for k in range(4):
                seq[3 - k] = (h % 13) * 4 + (head + 3 - k) % 4
                h //= 13
            seq[4] = VALUE_RANK[head % 10] * 4
            seq[5] = VALUE_RANK[(head // 10) % 10] * 4 + 1
            play(res, 0)
            out.write(memoryview(res)[:3])
    out.close()


main()

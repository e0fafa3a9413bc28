# Runs on the unix-port MicroPython: blackjack rounds through the firmware's round follower
# (shoe/blackjack.py), the heap locked over every event (a MemoryError there is an allocation on
# the card path, counted).
# usage: micropython blackjack_rounds.py EVENTS OUT PLACED H17 HOLE [RESULTS]
# EVENTS: byte pairs (1, seat mask) a round begins, (2, card code) a card read, (3, press) a press;
# OUT: a byte per event: 1/0 for a begin or a press taken or not, the hand a card went to
# (0xFE the dealer's, 0xFF not due); PLACED: at each round's end, the hand each of its cards is
# in (a split moves hands on); RESULTS: each round's result frame body as it completes, a length
# byte before each (made under the heap lock too). Prints "events N alloc_failures K us T" (T:
# the events' time).
import sys
import time

import micropython

from shoe.blackjack import Round


def main():
    with open(sys.argv[1], "rb") as f:
        events = f.read()
    h17 = sys.argv[4] == "1"
    hole = sys.argv[5] == "1"
    out = bytearray(len(events) // 2)
    placed = bytearray(len(events) // 2)
    at = 0
    results = bytearray(len(events) * 2 + 256)
    rat = 0
    rounds = 0
    written = True
    r = Round()
    failures = 0
    n = len(out)
    i = 0
    t0 = time.ticks_us()
    while i < n:
        micropython.heap_lock()
        try:
            while i < n:
                kind = events[2 * i]
                v = events[2 * i + 1]
                if kind == 1:
                    for k in range(r.cards):  # the round before, as it ended
                        placed[at] = r.hand_of[k]
                        at += 1
                    r.cards = 0
                    out[i] = 1 if r.begin(v, h17, hole) else 0
                    rounds += 1
                    written = False
                elif kind == 2:
                    out[i] = r.card(v)
                else:
                    out[i] = 1 if r.press(v) else 0
                if not written and r.done():
                    m = r.result_into(results, rat + 1, 1, rounds)
                    results[rat] = m
                    rat += 1 + m
                    written = True
                i += 1
        except MemoryError:
            failures += 1
            i += 1
        micropython.heap_unlock()
    spent = time.ticks_diff(time.ticks_us(), t0)
    for k in range(r.cards):
        placed[at] = r.hand_of[k]
        at += 1
    with open(sys.argv[2], "wb") as f:
        f.write(out)
    with open(sys.argv[3], "wb") as f:
        f.write(placed[:at])
    if len(sys.argv) > 6:
        with open(sys.argv[6], "wb") as f:
            f.write(results[:rat])
    print("events", n, "alloc_failures", failures, "us", spent)


main()

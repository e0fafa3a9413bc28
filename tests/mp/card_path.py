# Runs on the unix-port MicroPython: a whole shoe through the shoe app's real card path.
# usage: micropython card_path.py SHOEFILE FLASHDIR [ack]   (ack: a host acknowledges every frame)
# For every card: the sensor bytes and the exit edge's decision run with the heap locked (any
# allocation raises MemoryError); frames, HMAC and flash log then run unlocked, as on the board.
# Prints: "cards N results R alloc_failures F us_per_card U heap_min_free M
# full_path_heap_bytes_per_card B" (B: what frames, flash log and link still allocate per card).
import gc
import sys
import time

import micropython
from nulls import Host, Null

from shoe.app import ShoeApp
from shoe.cards import RANKS, SUITS
from shoe.dealing import PH_ENDED
from shoe.sensor import encode
from shoe.store import Flash


def read_shoe(path):
    """Card numbers (52 = cut card) in a bytearray: small enough for a 64K heap."""
    out = bytearray()
    for line in open(path):
        for t in line.split():
            out.append(52 if t == "CUT" else "A23456789TJQK".find(t[0]) * 4 + "SHDC".find(t[1]))
    return out


def sensor_bytes(card):
    if card == 52:
        return encode(ord("C"))
    return encode(ord("R"), bytes((RANKS[card >> 2], SUITS[card & 3])))


def main():
    shoe = read_shoe(sys.argv[1])
    flash = Flash(sys.argv[2])
    lamps = Null()
    app = ShoeApp(flash, Null(), lamps)
    app.start()
    host = Host(app) if len(sys.argv) > 3 and sys.argv[3] == "ack" else None
    failures = 0
    committed = 0  # heap bytes allocated after the decision: frames, flash log, link
    spent = 0
    cards = 0
    heap_min = gc.mem_free()
    for card in shoe:
        if app.shoe.phase == PH_ENDED:
            break
        f = sensor_bytes(card)
        gc.collect()
        heap_min = min(heap_min, gc.mem_free())
        t0 = time.ticks_us()
        micropython.heap_lock()
        try:
            for i in range(len(f)):  # iterating the bytes object itself would allocate an iterator
                app.sensor_byte(f[i])
            done = app.card_path()
            ok = True
        except MemoryError:
            ok = False
        micropython.heap_unlock()
        spent += time.ticks_diff(time.ticks_us(), t0)
        if not ok:
            failures += 1
            continue
        cards += 1
        before = micropython.mem_total()  # the rest of the card's path: frames, flash log, link
        app.commit_card(done)
        committed += micropython.mem_total() - before
        if host:
            host.ack_all()
    gc.collect()
    print("cards %d results %d alloc_failures %d us_per_card %d heap_min_free %d "
          "full_path_heap_bytes_per_card %d" % (cards, lamps.results, failures,
                                                spent // max(cards, 1), heap_min,
                                                committed // max(cards, 1)))


main()

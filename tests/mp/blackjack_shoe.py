# Runs on the unix-port MicroPython: a blackjack shoe (the flash provisioned with a blackjack
# variant) through the shoe app's whole path — each card's sensor bytes, the exit edge's
# decision, the round follower, frame bodies and the flash log, then service() while the element
# (the emulator) digests and signs — and each press and confirm of the dealer's, the heap locked
# around every input's whole path (any allocation raises MemoryError and is counted).
# usage: micropython blackjack_shoe.py EVENTS FLASHDIR ELEMENT_SPEC ACKFILE
#   EVENTS: bytes, two per input: 0x01 bets (the bet spots for the next card), 0x02 card (0-51),
#   0x03 press (1 next, 2 double, 3 split), 0x04 confirm (second byte 0)
# Prints: "inputs N placed P alloc_failures F signed S element_errors E rounds R phase H"
import gc
import sys
import time

import board
import micropython
from nulls import Host, Null

from shoe import element  # noqa: F401  (loaded before the app's buffers, as a board's main does)
from shoe.app import ShoeApp
from shoe.cards import RANKS, SUITS
from shoe.sensor import encode
from shoe.store import Flash


def finish(app):
    t1 = time.ticks_ms()
    while app.busy():
        app.service(0)
        if time.ticks_diff(time.ticks_ms(), t1) > 5000:
            raise RuntimeError("frames never finished")


def one(app, kind, arg, sensor):
    if kind == 1:
        app.bets = arg
        return
    if kind == 2:
        for i in range(len(sensor)):
            app.sensor_byte(sensor[i])
        app.commit_card(app.card_path())
    elif kind == 3:
        app.blackjack_press(arg)
    else:
        app.confirm_button()
    finish(app)


def main():
    events = open(sys.argv[1], "rb").read()
    lamps = Null()
    link = Null()
    gc.collect()
    app = ShoeApp(Flash(sys.argv[2]), link, lamps, board.element(sys.argv[3]))
    app.start()
    finish(app)
    host = Host(app, sys.argv[4])
    failures = 0
    inputs = 0
    for k in range(0, len(events), 2):
        kind, arg = events[k], events[k + 1]
        sensor = b""
        if kind == 2:  # the recognition module's frame: the dealer's business, before the path
            sensor = encode(ord("R"), bytes((RANKS[arg >> 2], SUITS[arg & 3])))
        micropython.heap_lock()
        try:
            one(app, kind, arg, sensor)
        except MemoryError:
            failures += 1
        micropython.heap_unlock()
        inputs += 1
        host.ack_all()
    print("inputs %d placed %d alloc_failures %d signed %d element_errors %d rounds %d phase %d"
          % (inputs, lamps.results, failures, app.outbox.done, app.element_errors,
             app.shoe.round_no, app.shoe.phase))


main()

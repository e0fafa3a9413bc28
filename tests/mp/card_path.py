# Runs on the unix-port MicroPython: a whole shoe through the shoe app's whole card path — sensor
# bytes, the exit edge's decision, frame bodies and the flash log, then service() polling while
# the secure element (the emulator, over the virtual board's socket I2C) digests and signs each
# frame, and the COBS-encoded frames on the link — until every frame is finished and sent.
# usage: micropython card_path.py SHOEFILE FLASHDIR ELEMENT_SPEC MODE [ACKFILE]
#   MODE lock:    the heap is locked around each card's whole path (any allocation raises
#                 MemoryError and is counted); gc.collect() only before the shoe
#   MODE measure: unlocked; gc.mem_alloc() before and after each card's whole path
#   MODE ...-patient: the element driver never polls a busy chip (as on a board with a real
#                 chip: a NACK raises OSError, which allocates); run the emulator with real timings
#   MODE ...-notree: the shoe's log left out (its tree marked lost): what the log costs is the
#                 difference (make bench)
#   ACKFILE: a host acknowledges everything sent after each card (tests/mp/nulls.py Host)
# Prints: "cards N results R alloc_failures F us_per_card U heap_min_free M heap_free_collected C
# full_path_heap_bytes_per_card B full_path_heap_bytes T signed S element_errors E service_us V
# link_bytes L log_size Z" (U: sensor bytes + decision only; M: the lowest gc.mem_free() after a
# card, garbage not collected; C: free after the shoe, collected; V: the whole shoe's time in
# service() passes; L: bytes written to the link; Z: the leaves in the shoe's log).
import gc
import sys
import time

import board
import micropython
from dealt_shoe import read_shoe, sensor_bytes
from nulls import Host, Null

from shoe import element  # noqa: F401  (loaded before the app's buffers, as a board's main does)
from shoe.app import ShoeApp
from shoe.dealing import PH_ENDED
from shoe.store import Flash

SERVICE_US = [0]


def deal_one(app, buf, at, n):
    """The whole path of one card; returns the decision's time in µs."""
    t0 = time.ticks_us()
    for i in range(at, at + n):
        app.sensor_byte(buf[i])
    done = app.card_path()
    spent = time.ticks_diff(time.ticks_us(), t0)
    app.commit_card(done)
    t1 = time.ticks_ms()
    t2 = time.ticks_us()
    while app.busy():
        app.service(0)
        if time.ticks_diff(time.ticks_ms(), t1) > 5000:
            raise RuntimeError("frames never finished: %d of %d" % (app.outbox.done,
                                                                     app.outbox.seq))
    SERVICE_US[0] += time.ticks_diff(time.ticks_us(), t2)
    return spent


def main():
    shoe = read_shoe(sys.argv[1])
    lock = sys.argv[4].startswith("lock")
    patient = "-patient" in sys.argv[4]
    lamps = Null()
    link = Null()
    gc.collect()
    app = ShoeApp(Flash(sys.argv[2]), link, lamps, board.element(sys.argv[3], patient))
    app.start()
    if "-notree" in sys.argv[4]:
        app.outbox.tree.lost = True
    while app.busy():
        app.service(0)
    host = Host(app, sys.argv[5]) if len(sys.argv) > 5 else None
    failures = 0
    allocated = 0
    spent = 0
    cards = 0
    gc.collect()
    heap_min = gc.mem_free()
    for card in shoe:
        if app.shoe.phase == PH_ENDED:
            break
        f = sensor_bytes(card)  # the dealer's business, before the shoe's path starts
        if lock:
            micropython.heap_lock()
            try:
                spent += deal_one(app, f, 0, len(f))
            except MemoryError:
                failures += 1
            micropython.heap_unlock()
        else:
            before = gc.mem_alloc()
            spent += deal_one(app, f, 0, len(f))
            allocated += gc.mem_alloc() - before
        cards += 1
        heap_min = min(heap_min, gc.mem_free())
        if host:
            host.ack_all()  # a command: may allocate and wait for the element; no card's path
    gc.collect()
    print("cards %d results %d alloc_failures %d us_per_card %d heap_min_free %d "
          "heap_free_collected %d full_path_heap_bytes_per_card %d full_path_heap_bytes %d "
          "signed %d element_errors %d service_us %d link_bytes %d log_size %d"
          % (cards, lamps.results, failures, spent // max(cards, 1), heap_min, gc.mem_free(),
             allocated // max(cards, 1), allocated, app.outbox.done, app.element_errors,
             SERVICE_US[0], link.bytes, app.outbox.tree.size))


main()

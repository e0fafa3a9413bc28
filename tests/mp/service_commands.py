# Runs on the unix-port MicroPython: service() passes that obey host commands allocate nothing.
# A shoe is dealt card by card; after each card the next entry of CMDFILE arrives on the link
# (receiving it may allocate: the frame is parsed there), then the heap is locked over the
# service() passes that check and obey it — an ack, a checkpoint, a refused resolve, new shoe or
# unknown command — until the shoe is idle again. Cards are dealt with the heap locked too.
# CMDFILE: entries of COBS frames made and signed on CPython, each frame ending in a zero and
# each entry in one more.
# usage: micropython service_commands.py SHOEFILE FLASHDIR ELEMENT_SPEC CMDFILE
# Prints: "cmd T passes P failures F" for each kind of entry T (its frames' types in hex, joined
# by +), then "commands N card_failures C acked A done D element_errors E refused R".
import sys
import time

import board
import micropython
from dealt_shoe import read_shoe, sensor_bytes
from nulls import Null

from shoe import cobs, element  # noqa: F401  (element before the app's buffers, as on a board)
from shoe.app import ShoeApp
from shoe.dealing import PH_ENDED
from shoe.store import Flash


def drain(app, limit_ms=5000):
    t0 = time.ticks_ms()
    while app.busy():
        app.service(0)
        if time.ticks_diff(time.ticks_ms(), t0) > limit_ms:
            raise RuntimeError("service never idle")


def locked(fn, app):
    """fn() with the heap locked: 1 if it allocated (MemoryError; the passes are then finished
    unlocked, so the next step starts from an idle shoe), else 0."""
    micropython.heap_lock()
    try:
        fn()
        failed = 0
    except MemoryError:
        failed = 1
    micropython.heap_unlock()
    if failed:
        drain(app)
    return failed


def main():
    shoe = read_shoe(sys.argv[1])
    raw = open(sys.argv[4], "rb").read()
    cmds = [e + b"\x00" for e in raw.split(b"\x00\x00") if e]
    link = Null()
    app = ShoeApp(Flash(sys.argv[2]), link, Null(), board.element(sys.argv[3]))
    app.start()
    drain(app)
    stats = {}
    plain = bytearray(256)
    card_failures = 0
    i = 0
    for card in shoe:
        if app.shoe.phase == PH_ENDED or i >= len(cmds):
            break
        f = sensor_bytes(card)

        def deal():
            for j in range(len(f)):
                app.sensor_byte(f[j])
            app.commit_card(app.card_path())
            drain(app)

        def obey():
            drain(app)

        card_failures += locked(deal, app)
        cmd = cmds[i]
        i += 1
        name = "+".join("%02x" % plain[1] for part in cmd.split(b"\x00") if part
                        and cobs.decode_into(part, len(part), plain) > 1)
        app.port._window = time.ticks_add(time.ticks_ms(), -1000)  # as if a second had passed
        app.host_bytes(cmd, len(cmd))  # received and parsed: not a service pass
        s = stats.setdefault(name, [0, 0])
        s[0] += 1
        s[1] += locked(obey, app)
    for t in sorted(stats):
        print("cmd %s passes %d failures %d" % (t, stats[t][0], stats[t][1]))
    print("commands %d card_failures %d acked %d done %d element_errors %d refused %d"
          % (i, card_failures, app.outbox.acked, app.outbox.done, app.element_errors,
             app.port.refused))


main()

"""Boot entry on a shoe (RP2040 / ESP32)."""
import micropython

micropython.kbd_intr(-1)  # first line that runs: no byte on the data port interrupts the shoe

import time  # noqa: E402  (after the line above, on purpose)

import board  # noqa: E402

from shoe import loop, tilt  # noqa: E402
from shoe.drivers import hw  # noqa: E402
from shoe.store import Flash  # noqa: E402

# Reads the board's data, builds its drivers and runs the shoe through the board loop
# (shoe/loop.py). The REPL gets the port only on a blank shoe or after an authenticated
# maintenance command; any exception, a full flash or a failed recovery ends in the tilt state or
# a reset, never the REPL.


def make_app(link, lamps, element):
    skip = (board.FLASH_DIR.strip("/"),)
    if tilt.boot("/", skip, element):  # not the certified build: run nothing of it but the tilt
        return tilt.TiltShoe(Flash(board.FLASH_DIR), link, lamps, "/", skip, element)
    from shoe.app import ShoeApp

    return ShoeApp(Flash(board.FLASH_DIR), link, lamps, element, board.DECKS,
                   board.MIN_CONFIDENCE, code_root="/", code_skip=skip)


def blank(element):
    """A factory-fresh shoe: its element's data zone is unlocked, so it was never provisioned
    (shoe/provision.py). Only such a shoe keeps the REPL, for its first deploy and provisioning;
    no element answering is a fault, not a blank shoe."""
    try:
        from shoe.provision import locked

        return not locked(element)[1]
    except Exception:
        return False


def run():
    element = None
    try:
        element = hw.element(board)
    except Exception:
        pass
    if element is not None and blank(element):
        return False  # before the link is built: the port stays the REPL's
    io = hw.build(board)
    try:
        if element is None:
            raise ValueError("no secure element")
        app = make_app(io.link, io.lamps, element)
        app.start()
    except Exception:
        app = tilt.TiltShoe(Flash(board.FLASH_DIR), io.link, io.lamps, "/",
                            (board.FLASH_DIR.strip("/"),), element)
        app.start()
    while not app.maintenance:
        loop.step(app, io, time.ticks_ms())
        if not app.busy():  # frames waiting for the element or the link: straight on
            time.sleep_ms(1)
    return True


try:
    run()  # False: a blank shoe; True: authenticated maintenance
    micropython.kbd_intr(3)  # either way the REPL may have the port now
except Exception:
    hw.reset()

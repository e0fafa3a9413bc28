"""Boot entry on a shoe (RP2040 / ESP32)."""
import micropython

micropython.kbd_intr(-1)  # first line that runs: no byte on the data port interrupts the shoe

import time  # noqa: E402  (after the line above, on purpose)

import board  # noqa: E402

from shoe import loop, tilt  # noqa: E402
from shoe.drivers import hw  # noqa: E402
from shoe.store import Flash  # noqa: E402

# Reads the board's data, builds its drivers and runs the shoe through the board loop
# (shoe/loop.py). The REPL gets the port only on a blank shoe (its element never provisioned);
# a provisioned shoe changes its code only through a signed update (shoe/update.py), which ends
# in a reset; any exception, a full flash or a failed recovery ends in the tilt state or a reset,
# never the REPL.


def flash():
    """The shoe's flash: its files in FLASH_DIR, its log on the board's raw partition."""
    return Flash(board.FLASH_DIR, hw.log_device(board))


def make_app(link, lamps, element):
    skip = (board.FLASH_DIR.strip("/"),)
    if tilt.boot("/", skip, element):  # not the certified build: run nothing of it but the tilt
        return tilt.TiltShoe(flash(), link, lamps, "/", skip, element)
    from shoe.app import ShoeApp

    return ShoeApp(flash(), link, lamps, element, board.DECKS,
                   board.MIN_CONFIDENCE, code_root="/", code_skip=skip)


def element_state(element):
    """shoe/provision.py's state of the element: "blank" or "configured" (its data zone unlocked:
    never provisioned, the only state that keeps the REPL, for the first deploy and provisioning),
    "provisioned", or "foreign" (locked with another configuration than sabot's, which could let
    a key be made again or the command key be rewritten: the shoe trusts no such chip). No element
    answering is a fault (None), not a blank shoe."""
    try:
        from shoe.provision import state

        return state(element)
    except Exception:
        return None


def finish_update():
    """A switch to an update's new tree that a power cut interrupted is finished first, before
    any of the firmware is imported (shoe/update.py); a failure leaves the tree to the boot
    check (a mixed tree tilts, and a tilted shoe takes an update)."""
    try:
        from shoe import update

        update.resume("/", (board.FLASH_DIR.strip("/"),))
    except Exception:
        pass


def run():
    finish_update()
    element = None
    try:
        element = hw.element(board)
    except Exception:
        pass
    state = element_state(element) if element is not None else None
    if state in ("blank", "configured"):
        return False  # before the link is built: the port stays the REPL's
    if state != "provisioned":
        element = None  # nothing is signed with a chip that is not sabot's: the shoe tilts
    io = hw.build(board)
    try:
        if element is None:
            raise ValueError("no secure element")
        app = make_app(io.link, io.lamps, element)
        app.start()
    except Exception as e:
        try:
            fl = flash()
        except Exception:  # no log partition: the tilt answers from no log
            fl = Flash(board.FLASH_DIR)
        app = tilt.TiltShoe(fl, io.link, io.lamps, "/", (board.FLASH_DIR.strip("/"),), element,
                            tilt.cause_of(e, element))
        app.start()
    while not app.restart:
        loop.step(app, io, time.ticks_ms())
        if app.busy():  # frames waiting for the element or the link: back at the next interrupt
            hw.idle()
        else:
            time.sleep_ms(1)
    return True


try:
    if run():  # an update switched the code: boot it
        hw.reset()
    micropython.kbd_intr(3)  # a blank shoe: the REPL may have the port, for the first deploy
except Exception:
    hw.reset()

"""Boot entry on a shoe (RP2040 / ESP32): reads the board's data, builds its drivers, runs the shoe
through the board loop (shoe/loop.py).

Hold the confirm button at power-on to stay in the MicroPython REPL (maintenance: mpremote
deploy)."""

import time

import board

from shoe import loop, tilt
from shoe.drivers import hw
from shoe.store import Flash


def make_app(link, lamps):
    skip = (board.FLASH_DIR.strip("/"),)
    if tilt.boot("/", skip):  # the code is not the certified build: run nothing of it but the tilt
        return tilt.TiltShoe(Flash(board.FLASH_DIR), link, lamps, "/", skip)
    from shoe.app import ShoeApp

    return ShoeApp(Flash(board.FLASH_DIR), link, lamps, board.DECKS, board.MIN_CONFIDENCE,
                   code_root="/", code_skip=skip)


def run():
    if hw.confirm_held(board):
        print("sabot: confirm held at power-on: maintenance mode, REPL left open")
        return
    io = hw.build(board)
    app = make_app(io.link, io.lamps)
    app.start()
    hw.keyboard_interrupt(False)
    try:
        while not app.maintenance:
            loop.step(app, io, time.ticks_ms())
            time.sleep_ms(1)
    finally:
        hw.keyboard_interrupt(True)


run()

"""Boot entry on a shoe (RP2040 / ESP32): reads the board's data, builds its drivers, runs the shoe.

Hold the confirm button at power-on to stay in the MicroPython REPL (maintenance: mpremote deploy)."""

import time

import board
from shoe import tilt
from shoe.drivers import hw
from shoe.store import Flash


def make_app(link, lamps):
    skip = (board.FLASH_DIR.strip("/"),)
    if tilt.boot("/", skip):  # the code is not the certified build: run nothing of it but the tilt
        return tilt.TiltShoe(Flash(board.FLASH_DIR), link, lamps, "/", skip)
    from shoe.app import ShoeApp

    return ShoeApp(Flash(board.FLASH_DIR), link, lamps, board.DECKS, board.MIN_CONFIDENCE, code_root="/",
                   code_skip=skip)


def run():
    uart, exit_sensor, buttons, lamps, link = hw.build(board)
    if buttons["confirm"].pin.value() == 0:
        print("sabot: confirm held at power-on: maintenance mode, REPL left open")
        return
    app = make_app(link, lamps)
    app.start()
    hw.keyboard_interrupt(False)
    sensor_buf = bytearray(32)
    supervisor = {"void_card": 1, "keep_dummy": 2, "void_round": 3}
    try:
        while not app.maintenance:
            n = uart.readinto(sensor_buf) if uart.any() else 0
            for i in range(n or 0):
                app.sensor_byte(sensor_buf[i])
            for _ in range(exit_sensor.take()):
                app.exit_edge()
            now = time.ticks_ms()
            if buttons["confirm"].pressed(now):
                app.confirm_button()
            if buttons["empty"].pressed(now):
                app.empty_sensor()
            if "reveal" in buttons and buttons["reveal"].pressed(now):
                app.reveal_button()
            for name, code in supervisor.items():
                if buttons[name].pressed(now):
                    app.supervisor(code)
            data = link.read_available()
            if data:
                app.host_bytes(data)
            time.sleep_ms(1)
    finally:
        hw.keyboard_interrupt(True)


run()

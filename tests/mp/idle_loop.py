# Runs on the unix-port MicroPython: the board loop (shoe/loop.py) over the real drivers with dummy
# pins, a whole shoe's worth of idle passes with the heap locked (any allocation raises
# MemoryError), then a card and a button press through the same loop to show it is really wired.
# usage: micropython idle_loop.py FLASHDIR ELEMENT_SPEC  ->  "idle_passes N alloc_failures F
# position P confirmed C"
import sys

import board
import micropython
from panel import UART, Link, Pin

from shoe import loop
from shoe.app import ShoeApp
from shoe.drivers.controls import Button, ExitSensor, LampIndicators, PanelIO
from shoe.sensor import encode
from shoe.store import Flash

uart, link, exit_pin = UART(), Link(), Pin()
buttons = tuple((Button(Pin()), bit) for _, bit in loop.BUTTON_BITS)
lamps = LampIndicators(Pin(), Pin(), Pin(), Pin())
io = PanelIO(uart, ExitSensor(exit_pin, Pin.IRQ_FALLING), buttons, lamps, link)
app = ShoeApp(Flash(sys.argv[1]), link, lamps, board.element(sys.argv[2]))
app.start()
while app.busy():  # the new shoe's first frame: finished before the idle passes are counted
    loop.step(app, io, 0)
failures = 0
now = 0
for _ in range(10000):
    micropython.heap_lock()
    try:
        loop.step(app, io, now)
    except MemoryError:
        failures += 1
    micropython.heap_unlock()
    now += 1
uart.waiting += encode(ord("R"), b"AS")
loop.step(app, io, now)
exit_pin.fall()
loop.step(app, io, now + 1)
confirm = buttons[0][0]
confirm.pin.level = 0
for t in range(60):
    loop.step(app, io, now + 2 + t)
confirmed = 1 if confirm.reported else 0
print("idle_passes 10000 alloc_failures %d position %d confirmed %d"
      % (failures, app.shoe.position, confirmed))

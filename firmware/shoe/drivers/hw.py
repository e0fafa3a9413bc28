"""The reference hardware's pins, UARTs and host link, built from a board's data
(boards/<name>/board.py) by `build(board)`: the only firmware module that imports `machine`."""

import select
import sys
import time

import machine

from shoe.drivers.controls import Button, ExitSensor, LampIndicators, PanelIO
from shoe.loop import BUTTON_BITS


class _Views:
    """memoryviews of the app's one transmit buffer, made once per length: the drivers' write()
    takes no length, and a fresh slice per frame would allocate in the card's path."""

    def __init__(self):
        self.buf = None
        self.views = {}

    def of(self, buf, n):
        if n < 0:
            return buf
        if buf is not self.buf:
            self.buf = buf
            self.views = {}
        v = self.views.get(n)
        if v is None:
            v = self.views[n] = memoryview(buf)[:n]
        return v


class CdcLink:
    """rp2: the host link is a USB CDC interface of its own (micropython-lib's usb-device-cdc),
    and the built-in USB REPL interface is switched off: no REPL exists on the USB cable at all."""

    def __init__(self):
        import usb.device
        from usb.device.cdc import CDCInterface

        self.cdc = CDCInterface()
        self.cdc.init(timeout=0)  # never block the board loop
        usb.device.get().init(self.cdc, builtin_driver=False)
        self._views = _Views()

    def write(self, buf, n=-1):
        """buf[:n] (all of it when n < 0)."""
        self.cdc.write(self._views.of(buf, n))

    def readinto(self, buf):
        return self.cdc.readinto(buf) or 0


class UartLink:
    """ESP32: the host link is UART0 through the USB bridge, detached from the REPL (os.dupterm),
    read and written by the shoe alone."""

    def __init__(self, uart):
        import os

        os.dupterm(None, 0)
        self.uart = uart
        self._views = _Views()

    def write(self, buf, n=-1):
        """buf[:n] (all of it when n < 0)."""
        self.uart.write(self._views.of(buf, n))

    def readinto(self, buf):
        if not self.uart.any():
            return 0
        return self.uart.readinto(buf) or 0


class StdioLink:
    """A host link on the REPL's own stdin/stdout: development boards only (LINK = "stdio")."""

    def __init__(self):
        self.out = sys.stdout.buffer
        self.inp = sys.stdin.buffer
        self.poll = select.poll()
        self.poll.register(self.inp, select.POLLIN)
        self.one = bytearray(1)

    def write(self, buf, n=-1):
        self.out.write(buf if n < 0 else bytes(buf[:n]))  # development boards only

    def readinto(self, buf):
        """The host bytes waiting, up to len(buf); allocation-free (ipoll reuses its tuple)."""
        n = 0
        while n < len(buf):
            ready = False
            for _ in self.poll.ipoll(0):
                ready = True
            if not ready:
                break
            self.inp.readinto(self.one)
            buf[n] = self.one[0]
            n += 1
        return n


def build(board):
    """The board loop's io (shoe/drivers/controls.PanelIO) for a board described as data."""
    Pin = machine.Pin
    uart = machine.UART(board.SENSOR_UART, baudrate=board.SENSOR_BAUD, tx=Pin(board.SENSOR_TX),
                        rx=Pin(board.SENSOR_RX))
    exit_sensor = ExitSensor(Pin(board.EXIT_SENSOR, Pin.IN, Pin.PULL_UP), Pin.IRQ_FALLING)
    buttons = tuple((Button(Pin(board.BUTTONS[name], Pin.IN, Pin.PULL_UP)), bit)
                    for name, bit in BUTTON_BITS if name in board.BUTTONS)
    lamp = {n: Pin(p, Pin.OUT) for n, p in board.LAMPS.items()}
    buzzer = None
    if board.BUZZER is not None:
        buzzer = machine.PWM(Pin(board.BUZZER), freq=2000, duty_u16=0)
    lamps = LampIndicators(lamp["player"], lamp["banker"], lamp["result"], lamp["alarm"], buzzer)
    return PanelIO(uart, exit_sensor, buttons, lamps, link(board))


def link(board):
    """The board's host link, as its data names it."""
    if board.LINK == "usb_cdc":
        return CdcLink()
    if board.LINK == "uart":
        return UartLink(machine.UART(board.LINK_UART, baudrate=board.LINK_BAUD))
    return StdioLink()


def element(board):
    """The secure element on the board's I2C bus (board.ELEMENT_I2C, _SDA, _SCL, _FREQ), driven
    patiently: the chip is never polled while busy, since machine.I2C raises (and so allocates)
    on the NACK a busy chip answers."""
    from shoe.element import Element

    Pin = machine.Pin

    def bus():
        return machine.I2C(board.ELEMENT_I2C, sda=Pin(board.ELEMENT_SDA),
                           scl=Pin(board.ELEMENT_SCL), freq=board.ELEMENT_FREQ)

    def wake():
        # the datasheet's wake: SDA held low >= 60 us (a write to address 0 does that only at
        # 100 kHz, and its NACK would raise); then the pins back to the I2C peripheral
        Pin(board.ELEMENT_SDA, Pin.OUT, value=0)
        time.sleep_us(80)
        bus()

    return Element(bus(), wake=wake, patient=True)


def reset():
    """A hard reset: the shoe boots again into main.py (never a REPL)."""
    machine.reset()

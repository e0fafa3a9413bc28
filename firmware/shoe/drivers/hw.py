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
        if buf is not self.buf:
            self.buf = buf
            self.views = {}
        v = self.views.get(n)
        if v is None:
            v = self.views[n] = memoryview(buf)[:n]
        return v


_QUEUE = 2048  # bytes the driver has not taken yet: about ten frames (frames.MAX_ENCODED 203)


class _Queued:
    """A host link's write side. The app writes a whole COBS frame from its one transmit buffer
    and reuses that buffer at once, while a driver that never blocks (usb-device-cdc with
    timeout=0, a UART) may take only part of it: what it did not take is copied here, in order,
    and sent by flush() on the next passes of the board loop (PanelIO.tick) and before any newer
    frame. A frame goes out whole or not at all: one that finds no room behind the bytes still
    waiting is dropped entire (counted in `dropped`), never cut, so no cut frame runs into the
    next; the host's hello has the shoe resend it. The queue is made once; a pass
    where the driver takes everything allocates nothing (the rare partial flush makes one view,
    as the driver's own partial write does). The app sends no new frame while busy()."""

    def __init__(self, put, size=_QUEUE):
        self._put = put  # the driver's write: how many bytes it took (a count, or None)
        self._views = _Views()
        self._q = bytearray(size)
        self._qv = memoryview(self._q)
        self._head = 0  # the first byte waiting
        self._len = 0  # bytes waiting
        self.dropped = 0

    def write(self, buf, n=-1):
        """buf[:n] (all of it when n < 0)."""
        if n < 0:
            n = len(buf)
        if self._len:
            self.flush()
        if self._len:  # still bytes waiting: this frame goes behind them, whole or not at all
            if n > len(self._q) - self._len:
                self.dropped += 1
                return
            self._keep(buf, 0, n)
            return
        took = self._put(self._views.of(buf, n)) or 0
        if took < n:
            self._keep(buf, took, n)

    def _keep(self, buf, start, end):
        q = self._q
        size = len(q)
        at = self._head + self._len
        if at >= size:
            at -= size
        for i in range(start, end):  # a byte loop: a slice of buf would be a new object
            q[at] = buf[i]
            at += 1
            if at == size:
                at = 0
        self._len += end - start

    def flush(self):
        """Hand the driver what it did not take before, as much as it takes now."""
        size = len(self._q)
        while self._len:
            head = self._head
            end = head + self._len
            if end > size:
                end = size  # up to the ring's end now, then on from its start
            took = self._put(self._qv[head:end]) or 0
            self._len -= took
            head += took
            self._head = 0 if head == size else head
            if took < end - (head - took):
                return  # the driver is full: the rest on the next pass

    def busy(self):
        """Bytes are waiting for the driver."""
        return self._len > 0


class CdcLink(_Queued):
    """rp2: the host link is a USB CDC interface of its own (micropython-lib's usb-device-cdc),
    and the built-in USB REPL interface is switched off: no REPL exists on the USB cable at all."""

    def __init__(self):
        import usb.device
        from usb.device.cdc import CDCInterface

        self.cdc = CDCInterface()
        self.cdc.init(timeout=0)  # never block the board loop: a short write is queued above
        usb.device.get().init(self.cdc, builtin_driver=False)
        super().__init__(self.cdc.write)

    def readinto(self, buf):
        return self.cdc.readinto(buf) or 0


class UartLink(_Queued):
    """ESP32: the host link is UART0 through the USB bridge, detached from the REPL (os.dupterm),
    read and written by the shoe alone."""

    def __init__(self, uart):
        import os

        super().__init__(uart.write)
        os.dupterm(None, 0)
        self.uart = uart

    def readinto(self, buf):
        if not self.uart.any():
            return 0
        return self.uart.readinto(buf) or 0


class StdioLink(_Queued):
    """A host link on the REPL's own stdin/stdout: development boards only (LINK = "stdio")."""

    def __init__(self):
        self.out = sys.stdout.buffer
        super().__init__(self.out.write)
        self.inp = sys.stdin.buffer
        self.poll = select.poll()
        self.poll.register(self.inp, select.POLLIN)
        self.one = bytearray(1)

    def readinto(self, buf):
        """The host bytes waiting, up to len(buf); allocation-free (ipoll reuses its tuple)."""
        n = 0
        while n < len(buf):
            ready = False
            for _ in self.poll.ipoll(0):
                ready = True
            if not ready:
                break
            if not self.inp.readinto(self.one):
                break  # the end of the input (a closed pipe polls ready)
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
    spots = tuple(Pin(p, Pin.IN, Pin.PULL_UP) for p in getattr(board, "BET_SPOTS", ()))
    return PanelIO(uart, exit_sensor, buttons, lamps, link(board), bet_spots=spots)


def log_device(board):
    """The shoe log's raw partition as shoe/store.Flash takes it, (block device, first block,
    blocks), from the board's data: rp2.Flash over the end of the port's flash storage (LOG_START,
    LOG_BYTES) or an ESP32 data partition (LOG_PARTITION); None when the board names none (the
    log is then a file in FLASH_DIR)."""
    if hasattr(board, "LOG_START"):
        import os

        # (each port's module is absent from the other port's stubs)
        import rp2  # type: ignore[import-not-found]

        st = os.statvfs("/")
        if st[1] * st[2] > board.LOG_START:  # a stock image's littlefs spans the whole storage
            raise OSError("the filesystem takes the log's partition: flash the board's image")
        dev = rp2.Flash(start=board.LOG_START, len=board.LOG_BYTES)
    elif hasattr(board, "LOG_PARTITION"):
        import esp32  # type: ignore[import-not-found]

        found = esp32.Partition.find(esp32.Partition.TYPE_DATA, label=board.LOG_PARTITION)
        if not found:
            raise OSError("no %s partition: flash the board's image" % board.LOG_PARTITION)
        dev = found[0]
    else:
        return None
    return dev, 0, dev.ioctl(4, 0)


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


def idle():
    """Until the next interrupt (an RP2040 wakes at its 1 ms tick, or at once on a UART byte or
    the exit edge; an ESP32 yields to its tasks): the board loop's pause while the element
    works, instead of spinning the core at full power."""
    machine.idle()


def reset():
    """A hard reset: the shoe boots again into main.py (never a REPL)."""
    machine.reset()

# Dummy pins, UART and host link for the board loop's drivers (shoe/drivers/controls.py), on
# MicroPython and CPython alike: what a test needs to drive them without a board.


class Pin:
    IRQ_FALLING = 2

    def __init__(self, level=1):
        self.level = level
        self.handler = None
        self.writes = 0

    def value(self, v=None):
        if v is None:
            return self.level
        self.level = v
        self.writes += 1

    def irq(self, trigger, handler):
        self.handler = handler

    def fall(self):
        self.handler(self)


class UART:
    """Bytes waiting to be read, as a UART (or a host link) holds them."""

    def __init__(self):
        self.waiting = bytearray()

    def any(self):
        return len(self.waiting)

    def readinto(self, buf):
        if not self.waiting:
            return 0  # nothing waiting: allocate nothing, as the real drivers do
        n = min(len(buf), len(self.waiting))
        buf[:n] = self.waiting[:n]
        self.waiting = self.waiting[n:]
        return n


class Link(UART):
    def __init__(self):
        super().__init__()
        self.sent = bytearray()

    def write(self, buf, n=-1):
        self.sent += buf if n < 0 else buf[:n]

    def flush(self):
        pass  # it takes every byte at once

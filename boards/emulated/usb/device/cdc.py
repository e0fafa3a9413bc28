"""micropython-lib's usb.device.cdc.CDCInterface, emulated: the host link on the emulated
machine's TCP socket. As the real one with timeout=0, write() returns how many bytes it took
(the emulated machine's `chunk` caps it) and readinto() returns None when nothing is waiting."""

import machine  # the emulated one: boards/emulated/launch.py put it in sys.modules


class CDCInterface:
    def __init__(self, **kwargs):
        self.timeout = None

    def init(self, baudrate=9600, bits=8, parity="N", stop=1, timeout=1000, txbuf=256,
             rxbuf=256, flow=0):
        self.timeout = timeout
        self.port = machine.host_port()

    def is_open(self):
        return self.port.conn is not None

    def write(self, buf):
        return self.port.write(buf)

    def readinto(self, buf):
        return self.port.readinto(buf)

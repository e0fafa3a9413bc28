# Runs on the unix-port MicroPython: the host link classes of shoe/drivers/hw.py (CdcLink,
# UartLink) over a driver stand-in that takes a few bytes per write, none at all on some passes,
# as usb-device-cdc with timeout=0 and a full UART do. Frames are written as the app writes them:
# COBS-encoded into one transmit buffer that the next frame overwrites at once, six to a burst
# (a result's frames), with a pass of the board loop after each; then a stall (the host reads
# nothing) long enough to fill the link's queue. Prints, per link: "<name> written W received R
# dropped D intact I cut C" (intact: received frames equal, in order, to written ones).
import sys

from shoe import cobs

TAKES = (3, 0, 5, 1, 7, 2, 0, 0, 4, 6)  # bytes the driver takes per call, in turn


class Driver:
    """A CDC interface / UART that takes a few bytes at a time."""

    def __init__(self):
        self.wire = bytearray()
        self.turn = 0
        self.stalled = False

    def write(self, buf):
        if self.stalled:
            return 0
        n = min(len(buf), TAKES[self.turn % len(TAKES)])
        self.turn += 1
        self.wire += bytes(buf[:n])
        return n if n or self.turn % 2 else None  # nothing taken: 0 or None, as drivers say

    def any(self):
        return 0

    def readinto(self, buf):
        return None

    def init(self, **kw):
        pass


class _Stub:
    pass


driver = Driver()
usb = _Stub()
usb.device = _Stub()
usb.device.get = lambda: _Stub()
_Stub.init = lambda self, *a, **k: None
usb.device.cdc = _Stub()
usb.device.cdc.CDCInterface = lambda: driver
sys.modules["usb"] = usb
sys.modules["usb.device"] = usb.device
sys.modules["usb.device.cdc"] = usb.device.cdc
os = _Stub()
os.dupterm = lambda stream, index=0: None  # the unix port has no dupterm; the ESP32 has
sys.modules["os"] = os

from shoe.drivers import hw  # noqa: E402


def frames(n, seed):
    out = []
    x = seed
    for i in range(n):
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        length = 20 + x % 180  # up to frames.MAX_FRAME (200)
        out.append(bytes((i * 7 + j * x) & 0xFF for j in range(length)))
    return out


def run(name, link):
    global driver
    tx = bytearray(203)
    sent = frames(120, len(name))
    for i, body in enumerate(sent):
        if i == 80:
            driver.stalled = True  # the host stops reading: the queue fills, frames drop whole
        if i == 100:
            driver.stalled = False
        m = cobs.encode_into(body, len(body), tx)
        link.write(tx, m)
        for j in range(len(tx)):
            tx[j] = 0xEE  # the app's buffer is the next frame's at once
        link.flush()  # the board loop's pass (PanelIO.tick)
        if i % 6 == 5 and not driver.stalled:  # a burst's end: the loop passes until it is out
            while link.busy():
                link.flush()
    while link.busy():
        link.flush()
    got = [cobs.decode(p) for p in bytes(driver.wire).split(b"\x00")[:-1]]
    intact = 0
    cut = 0
    k = 0
    for g in got:
        while k < len(sent) and sent[k] != g:
            k += 1
        if k == len(sent):
            cut += 1
        else:
            intact += 1
            k += 1
    print("%s written %d received %d dropped %d intact %d cut %d" % (
        name, len(sent), len(got), link.dropped, intact, cut))


run("cdc", hw.CdcLink())
driver = Driver()
run("uart", hw.UartLink(driver))

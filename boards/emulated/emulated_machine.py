"""An emulated `machine` module for the unix-port MicroPython: the Pico's and the ESP32's own code
(their board.py, firmware/shoe/drivers/hw.py, firmware/main.py) runs over it unchanged, with
boards/emulated/launch.py putting it in sys.modules as `machine` before the firmware imports.
Test and bench infrastructure: no board manifest freezes anything from boards/emulated/.

What it wires, from the board's data (`wire(board, ...)`):
  - the recognition module's UART (board.SENSOR_UART): fed from the dealer channel, the process's
    stdin, one byte at a time as on the virtual board (boards/virtual/dealer_channel.py): the
    module's bytes; the exit sensor's falling edge (its Pin IRQ handler runs); a button, whose
    named pin (board.BUTTONS) is held low for HOLD_MS, as a finger does; the bet-spot sensors
    (board.BET_SPOTS), a spot's pin low while bit s-1 says a wager lies at seat s;
  - the lamps (board.LAMPS) and the buzzer's PWM (board.BUZZER): each change is a line on stdout,
    `P <lamp> <0|1>` and `B <duty_u16>`;
  - I2C: a SocketI2C (boards/virtual/i2c_socket.py) to the secure-element emulator; SDA driven low
    as an output (hw.element's wake) is the chip's wake pulse;
  - the host link on a TCP socket (`L <host> <port>` on stdout once it listens): the USB CDC
    interface of usb.device.cdc (boards/emulated/usb/, for LINK = "usb_cdc") or the link UART
    (board.LINK_UART, for LINK = "uart"). `chunk` caps the bytes a write takes, as a full CDC
    buffer or a UART FIFO does. One host at a time, as on the virtual board (docs/PROTOCOL.md
    "One host at a time"): a second connection while a host holds the link (connected, heard
    from within LINK_IDLE_MS: $SABOT_LINK_IDLE_MS, 10000 by default) is answered with one line,
    `sabot-link taken by IP:PORT for N s`, and closed; a holder silent that long is replaced;
  - reset(): the process ends with status 4, the virtual board's reset (the harness powers the
    board up again); os.dupterm (the unix port has none) is recorded in `dupterm_calls`.
"""

import os  # the unix port's own, before launch.py puts emulated_os() in its place
import select
import socket
import sys
import time

import dealer_channel as dealer
from i2c_socket import SocketI2C
from one_host import Holder

HOLD_MS = 50  # a button press held this long: more than the firmware's 30 ms debounce
# (counted from the firmware's first read of the pin held down, to a read that long after, and
# then one read more: the firmware debounces on the time its loop pass began, which a loaded
# machine may have taken long before the read; the pass after a read comes after it, so a
# machine too loaded to run the board loop every few ms still sees every press whole)
_EAGAIN = 11

_levels = {}  # pin id -> level
_irqs = {}  # pin id -> IRQ handler
_names = {}  # output pin id -> lamp name
_buttons = {}  # dealer byte -> pin id
_held = {}  # pin id -> ticks_ms of the firmware's first read of it held down (None: not yet)
_late = set()  # held pins read down HOLD_MS after the first read: the next read sees it whole
_sda = {}  # SDA pin id -> I2C bus id
_buses = {}  # I2C bus id -> SocketI2C
_uarts = {}  # UART id -> "sensor" | "link"
_wired = {}  # element spec, exit pin, host port, bet spots
dupterm_calls = []


def _say(line):
    sys.stdout.write(line + "\n")


class Pin:
    IN = 0
    OUT = 1
    OPEN_DRAIN = 2
    PULL_UP = 1
    PULL_DOWN = 2
    IRQ_FALLING = 4
    IRQ_RISING = 8

    def __init__(self, id, mode=-1, pull=-1, value=None):
        self.id = id
        _levels.setdefault(id, 1 if pull == Pin.PULL_UP or mode == -1 else 0)
        if value is not None:
            self.value(value)
        if mode == Pin.OUT and value == 0 and id in _sda:
            # SDA held low by the MCU: the element's wake pulse (on the emulator's bus, a write
            # to the general call address)
            _bus(_sda[id]).writeto(0, b"\x00")

    def value(self, v=None):
        if v is None:
            if self.id in _held:  # a finger on the button: down until read down long enough
                now = time.ticks_ms()
                first = _held[self.id]
                if first is None:
                    _held[self.id] = now
                elif self.id in _late:
                    _seen.add(self.id)
                elif time.ticks_diff(now, first) >= HOLD_MS:
                    _late.add(self.id)
            elif self.id in _lifted:
                _lifted[self.id] = True  # read up again: it may be pressed again
            return _levels.get(self.id, 1)
        v = 1 if v else 0
        if _levels.get(self.id) != v:
            _levels[self.id] = v
            if self.id in _names:
                _say("P %s %d" % (_names[self.id], v))
        return None

    def on(self):
        self.value(1)

    def off(self):
        self.value(0)

    def irq(self, handler=None, trigger=IRQ_FALLING):
        _irqs[self.id] = handler


class PWM:
    def __init__(self, pin, freq=0, duty_u16=0):
        self.pin = pin
        self.freq = freq
        self._duty = -1
        self.duty_u16(duty_u16)

    def duty_u16(self, d=None):
        if d is None:
            return self._duty
        if d != self._duty:
            self._duty = d
            _say("B %d" % d)
        return None


def _bus(i2c_id):
    bus = _buses.get(i2c_id)
    if bus is None:
        bus = _buses[i2c_id] = SocketI2C(_wired["element"])
    return bus


def I2C(id, sda=None, scl=None, freq=400_000):  # machine.I2C, a class on a board
    """The element's bus; every I2C(id) is the one connection (a board re-creating its bus
    reconfigures the same pins)."""
    if sda is not None:
        _sda[sda.id] = id
    return _bus(id)


# ---- the dealer channel (stdin) -------------------------------------------------------------
_stdin = sys.stdin.buffer
_stdin_poll = select.poll()
_stdin_poll.register(_stdin, select.POLLIN)
_waking = select.poll()  # what ends idle(): the dealer's bytes, the host link's (_HostPort)
_waking.register(_stdin, select.POLLIN)
_rx = [b""]  # the recognition module's bytes not read yet
_pending = []  # a button's byte waiting for the finger to lift from it
_lifted = {}  # pin id -> whether the firmware has read it up since the finger last lifted
_seen = set()  # held pins the firmware has read held down for HOLD_MS and once more: may lift


def _pump():
    """Take the dealer's bytes waiting, up to and including the next exit edge or button press,
    so the board loop sees a card's frame before its edge, as a real module sends it first. A
    button pressed again while the finger is still on it waits until it lifts (two presses, as a
    dealer makes them, not one held longer)."""
    now = time.ticks_ms()
    for pin, first in list(_held.items()):
        if first is not None and time.ticks_diff(now, first) >= HOLD_MS and pin in _seen:
            del _held[pin]
            _seen.discard(pin)
            _late.discard(pin)
            _levels[pin] = 1  # the finger lifts
            _lifted[pin] = False
    while True:
        if _pending:
            b = _pending.pop()
            c = bytes((b,))
        elif _stdin_poll.poll(0):
            c = _stdin.read(1)
            if not c:
                sys.exit(0)  # the dealer went away: power off
            b = c[0]
        else:
            return
        pin = _buttons.get(b)
        if pin in _held or not _lifted.get(pin, True):
            _pending.append(b)  # pressed again once the firmware has seen the finger lift
            return
        if b == dealer.BETS:
            mask = _stdin.read(1)[0]
            for i, pin in enumerate(_wired["spots"]):
                _levels[pin] = 0 if mask >> i & 1 else 1
            return  # placed before the next card leaves: the loop reads the spots first
        if b < dealer.EXIT_EDGE:
            _rx[0] += c
            continue
        if b == dealer.EXIT_EDGE:
            pin = _wired["exit"]
            _levels[pin] = 0
            handler = _irqs.get(pin)
            if handler is not None:
                handler(Pin(pin))  # the falling edge's interrupt, between two bytecodes
            _levels[pin] = 1
        elif b in _buttons:
            pin = _buttons[b]
            _levels[pin] = 0
            _held[pin] = None
        else:
            sys.stderr.write("emulated machine: no button for dealer byte 0x%02x\n" % b)
        return


# ---- the host link (a TCP socket) -----------------------------------------------------------
class _HostPort(Holder):
    """The shoe's end of the host link: one host at a time. While a host holds it (connected, and
    heard from within LINK_IDLE_MS) a second connection is told who holds it, for how long, and
    closed; a holder silent that long (its host gone without closing: a power cut, a cut
    network) is replaced by the next connection, one that hung up is let go first. Bytes written
    while nobody is connected are lost, as on an unplugged cable."""

    def __init__(self, listen, chunk):
        Holder.__init__(self)
        host, port = listen.rsplit(":", 1)
        s = self.server = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(socket.getaddrinfo(host, int(port))[0][-1])
        s.listen(1)
        self.accepting = select.poll()
        self.accepting.register(s, select.POLLIN)
        _waking.register(s, select.POLLIN)
        self.reading = None
        self.chunk = chunk
        self.taken = []  # bytes each write took (the tests read how the link was cut)
        _say("L %s %s" % (host, port))

    def _accept(self):
        if not self.accepting.poll(0):
            return
        conn = self.admit(self.server)
        if conn is None:
            return  # kept by its holder; or the holder hung up, which readinto() finds first
        self._close()  # silent for LINK_IDLE_MS, if there is one: its host is gone
        self.conn = conn
        self.reading = select.poll()
        self.reading.register(conn, select.POLLIN)
        _waking.register(conn, select.POLLIN)

    def _close(self):
        if self.conn is not None:
            _waking.unregister(self.conn)
            self.conn.close()
        self.conn = self.reading = None

    def write(self, buf):
        self._accept()
        n = len(buf)
        if self.conn is None:
            return n  # nobody there: lost on the line
        if self.chunk and n > self.chunk:
            n = self.chunk
        try:
            took = self.conn.send(memoryview(buf)[:n])
        except OSError as e:
            if e.errno != _EAGAIN:
                self._close()
                return len(buf)
            took = 0
        if len(self.taken) < 100000:
            self.taken.append(took)
        return took

    def any(self):
        self._accept()
        return 1 if self.reading is not None and self.reading.poll(0) else 0

    def readinto(self, buf):
        if not self.any():
            return None
        try:
            n = self.conn.readinto(buf)
        except OSError:
            n = 0
        if not n:
            self._close()  # the host hung up
            return None
        self.heard = time.ticks_ms()
        return n


def host_port():
    """The host link's socket end, made on first use (the CDC interface or the link UART)."""
    port = _wired.get("port")
    if port is None:
        port = _wired["port"] = _HostPort(_wired["listen"], _wired["chunk"])
    return port


class UART:
    def __init__(self, id, baudrate=9600, tx=None, rx=None, **kw):
        self.id = id
        self.baudrate = baudrate
        self.role = _uarts.get(id)
        if self.role is None:
            raise ValueError("emulated machine: no UART %r on this board" % (id,))

    def any(self):
        if self.role == "link":
            return host_port().any()
        _pump()
        return len(_rx[0])

    def readinto(self, buf):
        if self.role == "link":
            return host_port().readinto(buf)
        _pump()
        rx = _rx[0]
        n = min(len(buf), len(rx))
        if not n:
            return None
        buf[:n] = rx[:n]
        _rx[0] = rx[n:]
        return n

    def write(self, buf):
        if self.role == "link":
            return host_port().write(buf)
        return len(buf)  # the recognition module ignores what it is sent


def idle():
    """machine.idle(): until the next interrupt, as a Pico's WFE wakes at its 1 ms tick or sooner
    on a byte: here a dealer's byte, a host's byte or a host connecting, within 1 ms."""
    if not (_pending or _held):  # a finger on a button lifts on time, not on a byte
        _waking.poll(1)


def reset():
    """The virtual board's reset (status 4: the harness powers it up again), saying on stderr what
    made the firmware reset when an exception did (main.py resets on any)."""
    e = sys.exc_info()[1]
    if e is not None:
        sys.stderr.write("emulated machine: reset after %r\n" % (e,))
        sys.print_exception(e, sys.stderr)
    sys.exit(4)


def dupterm(stream, index=0):
    dupterm_calls.append((stream, index))


def wire(board, element, listen, chunk=0):
    """Connect the emulated peripherals as the board's data names them."""
    _wired.update(element=element, listen=listen, chunk=chunk, exit=board.EXIT_SENSOR,
                  spots=getattr(board, "BET_SPOTS", ()))
    _uarts[board.SENSOR_UART] = "sensor"
    if board.LINK == "uart":
        _uarts[board.LINK_UART] = "link"
    for b, name in dealer.BUTTONS.items():
        if name in board.BUTTONS:
            _buttons[b] = board.BUTTONS[name]
    for name, pin in board.LAMPS.items():
        _names[pin] = name


def _rename(old, new):
    """os.rename, both paths relative to the directory they share: the v1.29 unix port's
    VfsPosix with a root (how launch.py mounts the board's filesystem) builds both paths in one
    buffer, so an absolute pair renames the new name onto itself (ENOENT; fixed in later
    MicroPython)."""
    at = old.rfind("/")
    if at < 0 or not new.startswith(old[: at + 1]):
        return os.rename(old, new)
    cwd = os.getcwd()
    os.chdir(old[:at] or "/")
    try:
        return os.rename(old[at + 1 :], new[at + 1 :])
    finally:
        os.chdir(cwd)


ROOT_FS_BYTES = 0  # the littlefs the image's boot mounts at / (launch.py; 0: the host's)


def _statvfs(path):
    """statvfs as on the board: "/" the size of the littlefs its image mounts (4 KB blocks)."""
    st = os.statvfs(path)
    if path == "/" and ROOT_FS_BYTES:
        blocks = ROOT_FS_BYTES // 4096
        return (4096, 4096, blocks, min(st[3], blocks), min(st[4], blocks)) + tuple(st[5:])
    return st


def emulated_os():
    """The unix port's os as the firmware sees it on a board: with dupterm (UartLink detaches the
    REPL with it; recorded in dupterm_calls), a rename that works on the mounted flash and the
    root filesystem's size as the board's image mounts it."""

    class Os:
        pass

    for name in dir(os):
        if not name.startswith("__"):
            setattr(Os, name, getattr(os, name))
    Os.dupterm = dupterm
    Os.rename = _rename
    Os.statvfs = _statvfs
    return Os

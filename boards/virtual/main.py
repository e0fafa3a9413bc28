"""Virtual board entry: micropython main.py --flash DIR --listen HOST:PORT [--code DIR]
[--element unix:PATH|tcp:HOST:PORT]  (default $SABOT_ELEMENT: the secure-element emulator)
[--nor-erase-ms MS [--nor-prog-us US] [--nor-log raw|littlefs]]  (a NOR chip: nor.py)
[--flash-bytes N]  (the most bytes a flash file may hold: the harness caps them so)

The shoe runs through the same board loop as on a Pico (shoe/loop.py); its io is the simulated
dealer's channel on stdin (dealer_channel.py) and the host link, a TCP socket.

The host link takes one host at a time (docs/PROTOCOL.md "One host at a time"): while a host
holds it (connected, and heard from within LINK_IDLE_MS), a second connection is answered with
one line, `sabot-link taken by IP:PORT for N s`, and closed; the holder is untouched. A holder
silent that long (its host gone without closing: a power cut, a cut network) is replaced by the
next connection; one that hung up is let go first. $SABOT_LINK_IDLE_MS sets LINK_IDLE_MS (10000
by default: a host's link is never that quiet). Bytes written while nobody is connected are lost,
as on an unplugged cable. $SABOT_UPDATE_IDLE_MS sets shoe/update.py's IDLE_MS (for tests)."""
import micropython

micropython.kbd_intr(-1)  # first line that runs, as on a board

import os  # noqa: E402  (after the line above, on purpose)
import select  # noqa: E402
import socket  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import board  # noqa: E402
import dealer_channel as dealer  # noqa: E402
from one_host import Holder  # noqa: E402

from shoe import loop, tilt  # noqa: E402
from shoe.store import Flash  # noqa: E402

_RESET_EXIT = 4  # a crash: the harness powers the board up again (a board's machine.reset())
_BLANK_EXIT = 5  # a factory-fresh shoe: the harness serves the REPL on its port, as a Pico

_EAGAIN = 11


class StdoutIndicators:
    """The shoe's lamps and display, as lines the simulated dealer reads. After a card's lamps,
    `T <µs> <erases>`: the time from its exit edge (the byte read off the dealer channel) to
    them, and the NOR chip's sector erases in between."""

    def __init__(self):
        self.last = None
        self.edge_at = -1  # ticks_us() of the exit edge not yet answered
        self.chip = None  # the NOR chip (nor.py), whose erases between edge and lamps count
        self.edge_erases = 0

    def show(self, phase, due, position, shoe_no, round_no, alarm, reveal):
        lit = time.ticks_us()
        state = (phase, due, position, shoe_no, round_no, alarm, reveal)
        if state != self.last:
            self.last = state
            sys.stdout.write("I %d %d %d %d %d %d %d\n" % state)
            if self.edge_at >= 0:
                erases = self.chip.erases - self.edge_erases if self.chip else 0
                sys.stdout.write("T %d %d\n" % (time.ticks_diff(lit, self.edge_at), erases))
                self.edge_at = -1

    def edge(self):
        self.edge_at = time.ticks_us()
        self.edge_erases = self.chip.erases if self.chip else 0

    def announce(self, player_total, banker_total, winner, announcements):
        sys.stdout.write("A %d %d %d %d\n" % (player_total, banker_total, winner, announcements))

    def placed(self, rnd):
        hands = "".join("%x" % (15 if rnd.hand_of[i] == 0xFE else rnd.hand_of[i])
                        for i in range(rnd.cards))
        sys.stdout.write("H %s\n" % hands)

    def tick(self, now):
        pass


class SocketLink(Holder):
    """The shoe's end of the host link (one_host.Holder: who holds it)."""

    def accept(self, server, poller):
        """A host connecting: the link is its own, unless another holds it (Holder.admit)."""
        conn = self.admit(server)
        if conn is None:
            return
        if self.conn is not None:  # silent for LINK_IDLE_MS: its host is gone
            poller.unregister(self.conn)
            self.conn.close()
        self.conn = conn
        poller.register(conn, select.POLLIN)

    def write(self, data, n=-1):
        """data[:n] (all of it when n < 0)."""
        if self.conn is None:
            raise OSError(107)
        mv = memoryview(data)
        if n >= 0:
            mv = mv[:n]
        while mv:
            try:
                n = self.conn.send(mv)
            except OSError as e:
                if e.errno == _EAGAIN:  # the host is slow; wait for room
                    select.poll().poll(10)
                    continue
                raise
            mv = mv[n:]


_BITS = dict(loop.BUTTON_BITS)
_BUTTON = {b: _BITS[name] for b, name in dealer.BUTTONS.items()}  # dealer byte -> pressed() bit


class DealerIO:
    """The board loop's io on the virtual board. Dealer bytes arrive in the order the dealer acted:
    `dealer_byte` says when one completes an exit edge or a button press, and the caller runs a
    loop step right then, so a card's sensor frame is always taken before its exit edge."""

    def __init__(self, link):
        self.link = link
        self.sensor_buf = bytearray(16)
        self.link_buf = bytearray(256)
        self.lamps = StdoutIndicators()
        self.link_ready = False
        self._sensor = 0
        self._edges = 0
        self._pressed = 0
        self._bets = 0
        self._bets_next = False
        self._taken = False

    def bets(self):
        return self._bets

    def dealer_byte(self, b):
        """One byte of the dealer channel; True when the loop should step now."""
        if self._bets_next:
            self._bets_next = False
            self._bets = b
            return False
        if b == dealer.BETS:
            self._bets_next = True
            return False
        if b < dealer.EXIT_EDGE:
            self.sensor_buf[self._sensor] = b
            self._sensor += 1
            return self._sensor == len(self.sensor_buf)
        if b == dealer.EXIT_EDGE:
            self._edges += 1
            self.lamps.edge()
        else:
            self._pressed |= _BUTTON.get(b, 0)
        return True

    def sensor_read(self):
        n = self._sensor
        self._sensor = 0
        return n

    def exit_edges(self):
        n = self._edges
        self._edges = 0
        return n

    def pressed(self, now):
        p = self._pressed
        self._pressed = 0
        self._taken = self._taken or bool(p)
        return p

    def link_read(self):
        if not self.link_ready or self.link.conn is None:
            return 0
        self.link_ready = False
        try:
            n = self.link.conn.readinto(self.link_buf)
        except OSError as e:
            if e.errno == _EAGAIN:
                return 0
            n = 0
        if n is None:  # nothing there after all
            return 0
        if n:
            self.link.heard = time.ticks_ms()
        return n or self.hang_up()

    def hang_up(self):
        self.link.conn.close()
        self.link.conn = None
        return 0

    def tick(self, now):
        if self._taken:  # the end of the pass that took a button: the dealer's pace
            self._taken = False
            sys.stdout.write("K\n")


def make_app(flash, flash_dir, link, lamps, code, element):
    idle_ms = os.getenv("SABOT_UPDATE_IDLE_MS")  # tests: an abandoned update removed sooner
    if idle_ms:
        from shoe import update

        update.IDLE_MS = int(idle_ms)
    skip = code_skip(code, flash_dir)
    if tilt.boot(code, skip, element):  # checked before any dealing code is imported
        return tilt.TiltShoe(flash, link, lamps, code, skip, element)
    from shoe.app import ShoeApp

    return ShoeApp(flash, link, lamps, element, board.DECKS, board.MIN_CONFIDENCE,
                   code_root=code, code_skip=skip)


def code_skip(code, flash_dir):
    """The data directory, when it lies inside the code tree: in no code digest."""
    if code and flash_dir.startswith(code.rstrip("/") + "/"):
        return (flash_dir[len(code.rstrip("/")) + 1 :].strip("/"),)
    return ()


def finish_update(code, flash_dir):
    """An update's switch that a power cut interrupted is finished first (shoe/update.py)."""
    try:
        from shoe import update

        update.resume(code, code_skip(code, flash_dir))
    except Exception as e:
        sys.stderr.write("board: finishing an update failed (%r)\n" % (e,))


def arg(name, default=None):
    if name in sys.argv:
        return sys.argv[sys.argv.index(name) + 1]
    return default


def main():
    flash_dir = arg("--flash", "flash")
    code = arg("--code")  # a built code tree (with MANIFEST), as deployed; absent: development run
    if code:
        finish_update(code, flash_dir)
    host, port = arg("--listen", "127.0.0.1:7000").rsplit(":", 1)
    link = SocketLink()
    io = DealerIO(link)
    element = None
    try:
        element = board.element(arg("--element"))
    except (ValueError, OSError) as e:
        sys.stderr.write("board: secure element: %s\n" % e)
        sys.exit(2)
    try:
        from shoe.provision import state

        chip = state(element)  # as a Pico's main.py: see firmware/main.py element_state()
    except Exception:
        chip = None
    if chip in ("blank", "configured"):
        sys.stderr.write("board: blank shoe (element never provisioned): REPL\n")
        sys.exit(_BLANK_EXIT)
    if chip == "foreign":
        sys.stderr.write("board: the element is locked with another configuration: tilt\n")
        element = None
    # --nor-erase-ms MS (or $SABOT_NOR_ERASE_MS): the flash is a NOR chip with a real erase time
    # (nor.py), the log on raw sectors, or with --nor-log littlefs in a littlefs file
    erase_ms = arg("--nor-erase-ms", os.getenv("SABOT_NOR_ERASE_MS"))
    if erase_ms:
        import nor

        flash = nor.mount(flash_dir, int(erase_ms), int(arg("--nor-prog-us", "400")),
                          arg("--nor-log", os.getenv("SABOT_NOR_LOG") or "raw"))
        io.lamps.chip = flash.device
    else:
        flash = Flash(flash_dir)
        flash.capacity = int(arg("--flash-bytes", "0"))  # the harness's cap on every file
    app = make_app(flash, flash_dir, link, io.lamps, code, element)
    try:
        app.start()
    except (ValueError, OSError) as e:
        # not provisioned (an identity lost beside a locked element), a recovery that failed
        # (flash full, damaged): tilt, as a Pico's main.py does, never a REPL
        sys.stderr.write("board: %s: tilt\n" % e)
        app = tilt.TiltShoe(flash, link, io.lamps, code, code_skip(code, flash_dir), element,
                            tilt.cause_of(e, element))
        app.start()

    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(socket.getaddrinfo(host, int(port))[0][-1])
    server.listen(1)
    sys.stdout.write("L %s %s\n" % (host, port))  # listening: the host link is up

    stdin = sys.stdin.buffer
    poller = select.poll()
    poller.register(stdin, select.POLLIN)
    poller.register(server, select.POLLIN)
    poller_stdin = select.poll()
    poller_stdin.register(stdin, select.POLLIN)
    while not app.restart:
        busy = app.busy()  # frames waiting for the element: come back within ~2 ms
        events = poller.poll(2 if busy else 1000)
        if not events:  # and a pass at least once a second, as a board's loop makes them
            loop.step(app, io, time.ticks_ms())
        for obj, ev, *_ in events:
            if obj is server:
                link.accept(server, poller)
            elif obj is stdin:
                # read() of fd 0 returns only when its buffer is full, so take the bytes one at a
                # time while poll says more are waiting.
                while True:
                    c = stdin.read(1)
                    if not c:
                        sys.exit(0)  # the dealer went away: power off
                    if io.dealer_byte(c[0]):
                        loop.step(app, io, time.ticks_ms())
                    if not poller_stdin.poll(0):
                        break
                loop.step(app, io, time.ticks_ms())
            elif obj is link.conn:
                if ev & (select.POLLHUP | select.POLLERR) and not ev & select.POLLIN:
                    # a host that wrote and hung up at once (its last ack): its bytes are read
                    # first, below, and the hang-up found by the read that returns nothing
                    poller.unregister(link.conn)
                    io.hang_up()
                    continue
                io.link_ready = True
                conn = link.conn
                loop.step(app, io, time.ticks_ms())
                if link.conn is None:
                    poller.unregister(conn)


try:
    main()
except Exception as e:
    sys.stderr.write("board: crashed (%r): reset\n" % (e,))
    sys.exit(_RESET_EXIT)
# an update switched the code tree: the board boots it (a board's machine.reset())
sys.exit(_RESET_EXIT)

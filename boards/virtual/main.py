"""Virtual board entry: micropython main.py --flash DIR --listen HOST:PORT [--code DIR]"""

import select
import socket
import sys

import board
from shoe import tilt
from shoe.store import Flash


class StdoutIndicators:
    """The shoe's lamps and display, as lines the simulated dealer reads."""

    def __init__(self):
        self.last = None

    def show(self, phase, due, position, shoe_no, round_no, alarm, reveal):
        state = (phase, due, position, shoe_no, round_no, alarm, reveal)
        if state != self.last:
            self.last = state
            sys.stdout.write("I %d %d %d %d %d %d %d\n" % state)

    def announce(self, player_total, banker_total, winner, announcements):
        sys.stdout.write("A %d %d %d %d\n" % (player_total, banker_total, winner, announcements))


class SocketLink:
    def __init__(self):
        self.conn = None

    def write(self, data):
        if self.conn is None:
            raise OSError(107)
        mv = memoryview(data)
        while mv:
            try:
                n = self.conn.send(mv)
            except OSError as e:
                if e.errno == 11:  # EAGAIN: the host is slow; wait for room
                    select.poll().poll(10)
                    continue
                raise
            mv = mv[n:]


def dealer_byte(app, b):
    if b < 0x80:
        app.sensor_byte(b)
    elif b == board.EXIT_EDGE:
        app.exit_edge()
    elif b == board.CONFIRM:
        app.confirm_button()
    elif b == board.EMPTY:
        app.empty_sensor()
    elif b == board.REVEAL:
        app.reveal_button()
    elif board.SUPERVISOR < b <= board.SUPERVISOR + 3:
        app.supervisor(b - board.SUPERVISOR)


def make_app(flash_dir, link, code):
    flash = Flash(flash_dir)
    skip = ()
    if code and flash_dir.startswith(code.rstrip("/") + "/"):
        skip = (flash_dir[len(code.rstrip("/")) + 1 :].strip("/"),)  # data inside the code tree, as /data
    if tilt.boot(code, skip):  # checked before any dealing code is imported
        return tilt.TiltShoe(flash, link, StdoutIndicators(), code, skip)
    from shoe.app import ShoeApp

    return ShoeApp(flash, link, StdoutIndicators(), board.DECKS, board.MIN_CONFIDENCE, code_root=code,
                   code_skip=skip)


def arg(name, default=None):
    if name in sys.argv:
        return sys.argv[sys.argv.index(name) + 1]
    return default


def main():
    flash_dir = arg("--flash", "flash")
    host, port = arg("--listen", "127.0.0.1:7000").rsplit(":", 1)
    link = SocketLink()
    code = arg("--code")  # a built code tree (with MANIFEST), as deployed; absent: development run
    app = make_app(flash_dir, link, code)
    try:
        app.start()
    except ValueError as e:
        sys.stderr.write("board: %s\n" % e)
        sys.exit(2)

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
    while not app.maintenance:
        for obj, ev, *_ in poller.poll(1000):
            if obj is server:
                conn, _ = server.accept()
                if link.conn is not None:
                    poller.unregister(link.conn)
                    link.conn.close()
                conn.setblocking(False)
                link.conn = conn
                poller.register(conn, select.POLLIN)
            elif obj is stdin:
                # read() of fd 0 returns only when its buffer is full, so take the bytes one at a time
                # while poll says more are waiting.
                while True:
                    c = stdin.read(1)
                    if not c:
                        sys.exit(0)  # the dealer went away: power off
                    dealer_byte(app, c[0])
                    if not poller_stdin.poll(0):
                        break
            elif obj is link.conn:
                try:
                    data = link.conn.recv(256)
                except OSError as e:
                    data = None if e.errno == 11 else b""  # EAGAIN: nothing after all
                if data == b"" or ev & (select.POLLHUP | select.POLLERR):
                    poller.unregister(link.conn)
                    link.conn.close()
                    link.conn = None
                elif data:
                    app.host_bytes(data)


main()
sys.exit(3)  # maintenance: the board's USB port goes to the REPL (the harness serves it on the same socket)

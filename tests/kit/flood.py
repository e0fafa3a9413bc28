"""A forger on the shoe's host link: the shoe's id and the command counter + 1 (both in every
status it answers to an unsigned hello), a signature by a key that is not the command key. Each
such frame passes every cheap check and would cost the element a Verify (~60 ms on a chip)."""

import socket
import threading
import time

from cryptography.hazmat.primitives.asymmetric import ec

from sabot import protocol as pr


class Flood(threading.Thread):
    """Connects to the board's link, learns the counter from a status, then sends `rate` forged
    counted commands a second (new_shoe, bad signature) until stop(); reads and drops what the
    shoe sends so its link never backs up."""

    def __init__(self, host, port, shoe_id, rate=500, hellos=False):
        """hellos: unsigned hellos instead (each answered with a signed status, at most 5 a
        second and 4 owed)."""
        super().__init__(daemon=True)
        self.hellos = hellos
        self.addr = (host, port)
        self.shoe_id = shoe_id
        self.rate = rate
        self.sent = 0
        self.counter = None  # host_counter + 1, as read from the shoe's status
        self.ready = threading.Event()
        self._halt = threading.Event()
        self._key = ec.generate_private_key(ec.SECP256R1())

    def run(self):
        sock = socket.create_connection(self.addr)
        sock.settimeout(0.001)
        deframer = pr.Deframer()
        sock.sendall(pr.command(None, 0, 0, pr.C_HELLO))
        gap = 1 / self.rate
        due = time.monotonic()
        with sock:
            while not self._halt.is_set():
                try:
                    data = sock.recv(4096)
                except (TimeoutError, BlockingIOError):
                    data = b""
                for enc in deframer.feed(data):
                    f = pr.parse(pr.decode_frame(enc))
                    if f.type == pr.T_STATUS and self.counter is None:
                        self.counter = pr.decode_status(f.payload)["host_counter"] + 1
                        self.ready.set()
                if self.counter is None:
                    continue
                now = time.monotonic()
                if now >= due:
                    sock.sendall(pr.command(None, self.shoe_id, 0, pr.C_HELLO) if self.hellos
                                 else pr.command(self._key, self.shoe_id, self.counter,
                                                 pr.C_NEW_SHOE))
                    self.sent += 1
                    due += gap
                    if due < now - 0.1:
                        due = now  # fell behind (a busy machine): no burst to catch up

    def stop(self):
        self._halt.set()
        self.join(5)

"""A shoe's port in this process: the host link's Port (sabot.link.transport) over one end of a
socket pair, and at the other end a shoe played by the test with frames from a ShoeSigner
(kit.shoes.signing_shoe), answering every hello with a status."""

import select
import socket
import threading

from sabot import protocol as pr
from sabot.virtual.capture_gen import status_payload


class SocketPairPort:
    """The Port protocol (closed, read_chunks, write, reopen, close) over a connected socket."""

    def __init__(self, sock):
        self.sock = sock
        self._closed = False

    @property
    def closed(self):
        return self._closed

    def read_chunks(self, wait):
        ready, _, _ = select.select([self.sock], [], [], wait)
        if not ready:
            return []
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("the shoe's side of the socket pair closed")
        return [data]

    def write(self, data):
        self.sock.sendall(data)

    def reopen(self, timeout):
        raise ConnectionError("a socket pair cannot be reopened")

    def close(self):
        self._closed = True
        self.sock.close()


class PlayedShoe:
    """The shoe's end of the pair: whatever the host writes, the shoe answers each hello with
    `answer()` (raw frames, COBS-encoded here); `noise` bytes are sent as they are."""

    def __init__(self, sock, answer):
        self.sock = sock
        self.answer = answer
        self.received = bytearray()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stopped.is_set():
            ready, _, _ = select.select([self.sock], [], [], 0.05)
            if not ready:
                continue
            try:
                data = self.sock.recv(65536)
            except OSError:
                return
            if not data:
                return
            self.received += data
            for _ in range(data.count(b"\x00")):  # one answer per frame the host sent
                for frame in self.answer():
                    self.sock.sendall(pr.encode_frame(frame))

    def stop(self):
        self.stopped.set()
        self.thread.join(5)
        self.sock.close()


def shoe_on_a_socket_pair(answer):
    """(the host's Port, the played shoe) over a fresh socket pair."""
    host, shoe = socket.socketpair()
    return SocketPairPort(host), PlayedShoe(shoe, answer)


def status_answer(signer, **fields):
    """An answer for PlayedShoe: the signer's status now (its fields as capture_gen's
    status_payload takes them)."""
    return lambda: [signer.status(status_payload(**fields))]

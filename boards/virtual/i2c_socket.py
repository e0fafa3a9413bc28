"""The virtual board's I2C bus: machine.I2C's writeto/readfrom_into over a socket to a device
emulator (the secure element: host_tools/sabot/virtual/element_emulator.py).

Framing, one request and one reply:
  b"W" addr(1) len(2, big-endian) data  ->  b"K" ack | b"N" nack
  b"R" addr(1) len(2, big-endian)       ->  b"K" data(len) | b"N"
A NACK raises OSError(ENODEV), as machine.I2C does for an address nobody acknowledges, but for
address 0 (the wake pulse), where writeto returns 0 acknowledgements.

Allocation-free for the caller's buffers: one 4-byte header and one 1-byte reply buffer are made
here once; the data goes straight from and into the caller's buffer. Runs on the unix port and on
CPython (the tests), which name the stream calls differently."""

import socket
import struct
import sys

_ENODEV = 19


def _connect(spec):
    kind, _, rest = spec.partition(":")
    if kind == "unix":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if sys.implementation.name == "micropython":  # the unix port takes a raw sockaddr_un
            s.connect(struct.pack("H", socket.AF_UNIX) + rest.encode() + b"\0")
        else:
            s.connect(rest)
        return s
    if kind == "tcp":
        host, _, port = rest.rpartition(":")
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.connect(socket.getaddrinfo(host, int(port))[0][-1])
        s.setsockopt(6, 1, 1)  # IPPROTO_TCP, TCP_NODELAY: a request is two small writes
        return s
    raise ValueError("unix:PATH or tcp:HOST:PORT")


class SocketI2C:
    def __init__(self, spec):
        self._sock = _connect(spec)
        self._head = bytearray(4)
        self._ack = bytearray(1)
        s = self._sock
        # CPython's socket has sendall/recv_into; the unix port's is a stream (write/readinto)
        self._send = getattr(s, "sendall", None) or s.write
        self._recv_into = getattr(s, "recv_into", None) or s.readinto

    def _request(self, op, addr, n):
        h = self._head
        h[0] = op
        h[1] = addr
        h[2] = n >> 8
        h[3] = n & 0xFF
        self._send(h)

    def _read_exact(self, buf, n):
        got = self._recv_into(buf, n)
        if got is None or got <= 0:
            raise OSError(_ENODEV)
        if got < n:  # a short read from the socket: rare; the rest into a view (allocates)
            self._read_exact(memoryview(buf)[got:], n - got)

    def writeto(self, addr, buf, stop=True):
        n = len(buf)
        self._request(0x57, addr, n)  # "W"
        if n:
            self._send(buf)
        self._read_exact(self._ack, 1)
        if self._ack[0] != 0x4B:  # "K"
            if addr == 0:
                # the general call address: the secure element's wake pulse, which nobody
                # acknowledges; no exception for it, since making one allocates (the driver
                # re-wakes the chip every 0.7 s while signing, on the card's path)
                return 0
            raise OSError(_ENODEV)
        return 1  # machine.I2C: the number of ACKs

    def readfrom_into(self, addr, buf, stop=True):
        n = len(buf)
        self._request(0x52, addr, n)  # "R"
        self._read_exact(self._ack, 1)
        if self._ack[0] != 0x4B:
            raise OSError(_ENODEV)
        if n:
            self._read_exact(buf, n)

    def close(self):
        self._sock.close()

"""One byte stream to a shoe: a pyserial URL (/dev/ttyACM0, socket://127.0.0.1:7000, ...) opened
with retries, read and written with serial errors turned into ConnectionError, and split into
frames. A networked shoe whose link another host holds says so in one line at the start of the
connection (docs/PROTOCOL.md "One host at a time"): LinkTaken."""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable
from typing import BinaryIO, Protocol

import serial
from serial.urlhandler import protocol_socket

try:
    from termios import error as TtyError  # a pty whose other end went (pyserial's tcdrain)
except ImportError:  # not POSIX
    TtyError = OSError  # type: ignore[misc, assignment]

from sabot.errors import SabotError
from sabot.keys import CommandKey
from sabot.protocol import (
    C_HELLO,
    T_STATUS,
    Deframer,
    Frame,
    FrameError,
    command,
    decode_frame,
    parse,
)

DEFAULT_BAUD = 115200
TIMEOUT = 0.05  # seconds a read waits for a first byte unless told otherwise
# what a networked shoe answers a host while another holds its link, then hangs up:
# `sabot-link taken by IP:PORT for N s\n` (boards/virtual/one_host.py)
TAKEN = b"sabot-link taken by "
TAKEN_LONGEST = 128  # bytes: a longer first line is no taken line
NETWORKED = ("socket://", "rfc2217://")  # ports where several hosts can reach one shoe
_TAKEN_REST = re.compile(rb"(\S+) for (\d+) s\r?")
_ERRNO = re.compile(r"\[Errno \d+\] ([^:]+)")  # the OS's words inside a pyserial error


class LinkTaken(SabotError):
    """Another host holds the shoe's link: `holder` (its IP:PORT, as the shoe saw it) for
    `seconds` so far. The shoe hung up on us; nothing of ours reached it."""

    def __init__(self, url: str, holder: str, seconds: int) -> None:
        super().__init__(f"{url}: the shoe's link is taken by another host ({holder}, for "
                         f"{seconds} s): one validator per shoe — stop that one first")
        self.url = url
        self.holder = holder
        self.seconds = seconds


class Port(Protocol):
    """What the host link needs of a port (ShoePort, or a port wrapped with faults by the soak)."""

    @property
    def closed(self) -> bool: ...

    def read_chunks(self, wait: float) -> list[bytes]: ...

    def write(self, data: bytes) -> None: ...

    def reopen(self, timeout: float) -> None: ...

    def close(self) -> None: ...


class ShoePort:
    """A shoe's port. Opening retries until `open_timeout` (a rebooting shoe, a board still
    starting), then fails with one SabotError; afterwards every serial or socket failure is a
    ConnectionError, and a shoe's word that another host holds its link is LinkTaken, from the
    read that completes its line on (write() too), until reopen(). With `capture` every byte
    received is appended to that file as it arrives."""

    def __init__(self, url: str, baud: int = DEFAULT_BAUD, open_timeout: float = 10.0,
                 capture: BinaryIO | None = None) -> None:
        self.url = url
        self.baud = baud
        self.capture = capture
        self.ser: serial.SerialBase | None = None
        self.deframer = Deframer()
        self.head: bytearray | None = None  # a connection's first bytes, while they may be TAKEN
        self._writing = threading.Lock()
        self.taken: LinkTaken | None = None  # what the shoe said of this connection, if so
        self.reopen(open_timeout)

    @property
    def closed(self) -> bool:
        return self.ser is None

    def reopen(self, timeout: float) -> None:
        """(Re)connect, trying until `timeout` seconds have passed."""
        self.close()
        self.taken = None
        end = time.monotonic() + timeout
        while True:
            try:
                self.ser = _open_url(self.url, self.baud)
                break
            except (serial.SerialException, OSError, ValueError) as e:
                if isinstance(e, ValueError) or _bad_socket_url(self.url):
                    # a URL no retry can mend: socket://HOST without a port, bogus://x
                    raise SabotError(f"cannot open {self.url}: "
                                     f"{_url_problem(self.url, e)}") from None
                if time.monotonic() >= end:
                    if "exclusively lock" in str(e):
                        raise SabotError(f"{self.url}: port busy (another program, perhaps "
                                         "another validator, has it open)") from None
                    # the OS's own words when there are some (pyserial repeats the path, and
                    # its socket:// port says them only inside its text, "[Errno 111] ...")
                    code = getattr(e, "errno", None)
                    said = _ERRNO.search(str(e))
                    reason = (os.strerror(code) if isinstance(code, int)
                              else said.group(1).strip() if said
                              else " ".join(str(e).split()))
                    raise SabotError(f"cannot open {self.url}: {reason}") from None
                time.sleep(0.1)
        self.deframer = Deframer()  # a partial frame from the last connection is gone
        # only a networked port's shoe answers a second host so; on a tty it is line noise
        self.head = bytearray() if self.url.startswith(NETWORKED) else None

    def _open(self) -> serial.SerialBase:
        if self.taken is not None:
            raise self.taken
        if self.ser is None:
            raise ConnectionError("link closed")
        return self.ser

    def write(self, data: bytes) -> None:
        """Put bytes on the line (flushed: a command is out when this returns); whole, whatever
        other thread writes too (a keepalive)."""
        ser = self._open()
        try:
            with self._writing:
                ser.write(data)
                ser.flush()
        except (serial.SerialException, OSError, TtyError) as e:
            if self.head is not None:  # the shoe may have hung up on us with its taken line
                try:
                    self.read(0)
                except ConnectionError:
                    pass
            raise ConnectionError(str(e)) from None

    def read(self, wait: float = TIMEOUT) -> bytes:
        """Wait up to `wait` seconds for a first byte, then take everything already there."""
        ser = self._open()
        try:
            ser.timeout = wait
            data = ser.read(1)
            if data:
                # all that is there at once: socket:// reports in_waiting only as 0 or 1
                ser.timeout = 0
                data += ser.read(65536)
        except (serial.SerialException, OSError, TtyError) as e:
            raise ConnectionError(str(e)) from None
        if data and self.capture:
            self.capture.write(data)
            self.capture.flush()
        if self.head is not None and data:
            return self._first_bytes(data)
        return data

    def _first_bytes(self, data: bytes) -> bytes:
        """The connection's first bytes: held while they may still be the shoe's taken line,
        handed on whole once they cannot be; LinkTaken once they are one."""
        assert self.head is not None
        head = self.head
        head += data
        if head[: len(TAKEN)] != TAKEN[: len(head)]:
            self.head = None
            return bytes(head)
        end = head.find(b"\n")
        if end < 0 and len(head) <= TAKEN_LONGEST:
            return b""  # more of the line to come
        said = _TAKEN_REST.fullmatch(bytes(head[len(TAKEN) : max(end, 0)]))
        if end < 0 or said is None:
            self.head = None
            return bytes(head)
        self.taken = LinkTaken(self.url, said[1].decode("ascii", "replace"), int(said[2]))
        self.close()  # the shoe has hung up on this connection
        raise self.taken

    def read_chunks(self, wait: float = TIMEOUT) -> list[bytes]:
        """What arrived, as the reads that delivered it (one read here)."""
        data = self.read(wait)
        return [data] if data else []

    def frames(self, wait: float = TIMEOUT) -> list[tuple[bytes, Frame | FrameError]]:
        """The frames completed by what arrived: (raw frame, Frame), or FrameError with the raw
        frame or, when it is not even COBS, the encoded bytes."""
        out: list[tuple[bytes, Frame | FrameError]] = []
        for encoded in self.deframer.feed(self.read(wait)):
            raw = encoded
            try:
                raw = decode_frame(encoded)
                out.append((raw, parse(raw)))
            except FrameError as e:
                out.append((raw, e))
        return out

    def send_command(self, key: CommandKey | None, shoe_id: int, ftype: int,
                     payload: bytes = b"", counter: int = 0) -> None:
        """A command to shoe `shoe_id`, signed with the command key (hello and verify: unsigned,
        `key` may be None)."""
        self.write(command(key.private_key if key else None, shoe_id, counter, ftype, payload))

    def status_where(self, shoe_id: int, accept: Callable[[Frame], bool],
                     wait: float, rest: list[Frame] | None = None) -> Frame | None:
        """Hello to `shoe_id` every half second until a status frame `accept` takes arrives (the
        caller checks its signature); None when none did within `wait` seconds. With `rest`, the
        frames that came after the status in the same read (the shoe's resends) are added to
        it."""
        end, asked = time.monotonic() + wait, 0.0
        while time.monotonic() < end:
            if time.monotonic() - asked > 0.5:
                self.send_command(None, shoe_id, C_HELLO)
                asked = time.monotonic()
            got = [f for _, f in self.frames(0.1) if isinstance(f, Frame)]
            for k, f in enumerate(got):
                if f.type == T_STATUS and accept(f):
                    if rest is not None:
                        rest.extend(got[k + 1 :])
                    return f
        return None

    def close(self) -> None:
        if self.ser is not None:
            try:
                self.ser.close()
            except Exception:
                pass
            self.ser = None


class _SocketPort(protocol_socket.Serial):
    """pyserial's socket:// port without its flush of what has arrived (reset_input_buffer): a
    fresh connection holds no stale backlog, and what a networked shoe says at once, as it
    accepts the connection, is its word that the link is taken; open() would drop it unread."""

    def reset_input_buffer(self) -> None:
        pass


def _open_url(url: str, baud: int) -> serial.SerialBase:
    """The port at a pyserial URL, opened exclusively."""
    if not url.startswith("socket://"):
        return serial.serial_for_url(url, baudrate=baud, timeout=TIMEOUT, exclusive=True)
    port = _SocketPort(None, baudrate=baud, timeout=TIMEOUT, exclusive=True)
    port.port = url
    port.open()
    return port


def _bad_socket_url(url: str) -> bool:
    """socket://HOST:PORT with the port missing or not a number (pyserial's own message for it
    is a TypeError's)."""
    if not url.startswith("socket://"):
        return False
    _, _, port = url[len("socket://"):].split("?")[0].rpartition(":")
    return not (port.isdigit() and 0 < int(port) < 65536)


def _url_problem(url: str, e: Exception) -> str:
    if url.startswith("socket://"):
        return "socket:// wants HOST:PORT, e.g. socket://127.0.0.1:7000"
    if "://" in url:
        return (f"unknown scheme {url.split('://')[0]!r} (a device such as /dev/ttyACM0, or "
                "socket://HOST:PORT, rfc2217://HOST:PORT, ...)")
    return " ".join(str(e).split())

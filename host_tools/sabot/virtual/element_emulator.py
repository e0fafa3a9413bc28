"""The virtual board's secure element: an ATECC608B emulated in its own process.

The firmware's driver (firmware/shoe/element.py) talks to it through a virtual I2C bus
(boards/virtual/i2c_socket.py) with the chip's real command protocol, so the same driver runs on a
real board. The chip's memory is modelled as the data sheet lays it out (docs/ELEMENT.md):

  configuration zone  128 bytes: serial number, revision, SlotConfig, KeyConfig, counters,
                      LockValue (byte 86), LockConfig (byte 87), SlotLocked (88-89)
  data zone           16 slots: 0-7 of 36 bytes, 8 of 416, 9-15 of 72
  OTP zone            64 bytes

and refuses what a real chip refuses, by the configuration it holds and the zones' lock state:
an empty store is a chip as it leaves the factory (both zones unlocked, no key anywhere). Sabot's
own configuration is written by the shoe at provisioning (firmware/shoe/provision.py), through
Write and Lock, never into the store's files.

A private key is the 32-byte scalar in its slot, made by GenKey; nothing the chip sends carries
one. This module is the process: the socket and the command line. The chip is element_chip.py
(its bus and key commands), element_zones.py (Read, Write, Lock), element_store.py (its memory,
kept in the store directory) and element_formats.py (the bytes it exchanges and hashes).

Bus framing over the socket (one request, one reply; a reply never carries key material):

  b"W" addr(1) len(2, big-endian) data   ->  b"K" (ack) | b"N" (nack)
  b"R" addr(1) len(2, big-endian)        ->  b"K" data(len) | b"N"

A write to bus address 0x00 is the wake pulse (NACKed: nobody lives there). While a command
executes (Sign: --sign-ms, 50 ms by default) the chip NACKs its address, as the real one does.

  python -m sabot.virtual.element_emulator --store DIR --listen unix:PATH | tcp:127.0.0.1:PORT"""

from __future__ import annotations

import argparse
import os
import select
import socket
import sys
import time
from collections.abc import Callable

from sabot.virtual.element_chip import ADDRESS, WATCHDOG_MS, Chip
from sabot.virtual.element_store import KeyStore

# -- the socket -----------------------------------------------------------------------------------


def _recv_exact(conn: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        part = conn.recv(n - len(buf))
        if not part:
            return None
        buf += part
    return bytes(buf)


def serve_request(chip: Chip, conn: socket.socket) -> bool:
    """One bus request from a virtual board and its reply; False when the board hung up."""
    head = _recv_exact(conn, 4)
    if head is None:
        return False
    op, addr, n = head[0], head[1], head[2] << 8 | head[3]
    if op == ord("W"):
        data = _recv_exact(conn, n)
        if data is None:
            return False
        conn.sendall(b"K" if chip.write(addr, data) else b"N")
        return True
    if op == ord("R"):
        got = chip.read(addr, n)
        conn.sendall(b"N" if got is None else b"K" + got)
        return True
    return False  # not our framing: drop the connection


def serve(chip: Chip, server: socket.socket) -> None:
    """For ever. A bus has one master: a new connection (the board restarted) replaces the old
    one; the chip's state carries over, as a real chip keeps power across an MCU reset."""
    conn: socket.socket | None = None
    while True:
        ready, _, _ = select.select([server] if conn is None else [server, conn], [], [])
        if server in ready:
            if conn is not None:
                conn.close()
            conn, _ = server.accept()
            if conn.family == socket.AF_INET:
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            continue
        assert conn is not None
        try:
            alive = serve_request(chip, conn)
        except OSError:
            alive = False
        if not alive:
            conn.close()
            conn = None


def listen(spec: str) -> tuple[socket.socket, str]:
    """A listening socket for `unix:PATH` or `tcp:HOST:PORT` (PORT 0: any), and its address."""
    kind, _, rest = spec.partition(":")
    if kind == "unix":
        if os.path.exists(rest):
            os.unlink(rest)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(rest)
        os.chmod(rest, 0o600)
        s.listen(1)
        return s, f"unix:{rest}"
    if kind == "tcp":
        host, _, port = rest.rpartition(":")
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, int(port)))
        s.listen(1)
        return s, f"tcp:{host}:{s.getsockname()[1]}"
    raise ValueError(f"--listen takes unix:PATH or tcp:HOST:PORT, not {spec!r}")


def waited_for_a_core() -> float:
    """Seconds this process has been ready to run yet kept waiting for a core (Linux's run delay,
    /proc/self/schedstat); 0 where the kernel does not say."""
    try:
        with open("/proc/self/schedstat", "rb") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def chip_clock() -> Callable[[], float]:
    """The chip's time: the host's monotonic clock less the time the emulator waited for a core.
    A real chip is never descheduled: a request that reached a busy host's emulator late reached
    the chip when the board sent it, so its watchdog and busy times do not count that wait (a
    board that keeps the chip awake too long still finds it asleep)."""
    last = 0.0

    def now() -> float:
        nonlocal last
        last = max(last, time.monotonic() - waited_for_a_core())
        return last

    return now


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sabot.virtual.element_emulator",
                                 description="The virtual board's secure element (ATECC608).")
    ap.add_argument("--store", required=True, help="key store directory (made 0700)")
    ap.add_argument("--listen", required=True, help="unix:PATH or tcp:127.0.0.1:PORT")
    ap.add_argument("--sign-ms", type=float, default=50.0, help="Sign's execution time")
    ap.add_argument("--ecc-ms", type=float, default=60.0, help="GenKey's and Verify's")
    ap.add_argument("--cmd-ms", type=float, default=1.0, help="every other command's")
    ap.add_argument("--watchdog-ms", type=float, default=WATCHDOG_MS,
                    help="awake time before the chip sleeps by itself (0: never)")
    ap.add_argument("--address", type=lambda s: int(s, 0), default=ADDRESS)
    args = ap.parse_args(argv)
    chip = Chip(KeyStore(args.store), sign_ms=args.sign_ms, ecc_ms=args.ecc_ms,
                cmd_ms=args.cmd_ms, watchdog_ms=args.watchdog_ms, address=args.address,
                clock=chip_clock())
    server, where = listen(args.listen)
    print(f"element emulator listening on {where}", file=sys.stderr, flush=True)
    try:
        serve(chip, server)
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A blank virtual board's USB port: the unix-port MicroPython REPL on a pseudo-terminal, bridged
to a TCP socket as mpremote reaches it."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from typing import Any

from sabot.paths import micropython


def serve_repl(host: str, port: int, root: str, element: str | None = None) -> None:
    """A blank virtual board's USB port: the unix-port MicroPython REPL on a
    pseudo-terminal, running in the board's filesystem `root` (what mpremote sees as `:`). Like a
    board's REPL it outlives USB reconnections; it ends with a hard reset (`machine.reset()`, as
    `mpremote reset` sends it: the unix port has no such function, so the harness plays the board
    and reboots) or a soft reset (which ends the unix process), and the board boots main.py.
    `element`: the secure element's address (env SABOT_ELEMENT), so REPL code (maint.rekey())
    reaches it."""
    import pty
    import select
    import tty

    master, slave = pty.openpty()
    tty.setraw(slave)
    repl = subprocess.Popen([micropython()], stdin=slave, stdout=slave, stderr=slave, cwd=root,
                            env=dict(os.environ, MICROPYPATH=":" + str(root),
                                     SABOT_FLASH="data",  # the board's data dir, as on a Pico
                                     **({"SABOT_ELEMENT": element} if element else {})))
    os.close(slave)
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((host, port))
    srv.listen(1)
    reset_at = 0.0
    try:
        while repl.poll() is None and not reset_at:
            waiting: list[Any] = [srv, master]  # a socket and a file descriptor
            ready, _, _ = select.select(waiting, [], [], 0.5)
            # nobody connected: what the REPL says is lost, as on an unplugged port
            if master in ready:
                try:
                    os.read(master, 4096)
                except OSError:
                    break
            if srv not in ready:
                continue
            conn, _ = srv.accept()
            with conn:
                reset_at = _connected(conn, master, repl)
    finally:
        srv.close()
        if repl.poll() is None:
            repl.kill()
        repl.wait()
        os.close(master)


def _connected(conn: socket.socket, master: int, repl: subprocess.Popen[bytes]) -> float:
    """One host connection to the REPL bridge, until it hangs up or a hard reset is due: the
    time of that reset (0.0: none). A host that hangs up, even as the REPL answers it, only
    unplugs the port; the REPL stays, as a board's does."""
    import select

    heard, reset_at = b"", 0.0
    while repl.poll() is None:
        if reset_at and time.monotonic() > reset_at:
            break  # the hard reset: the port drops and the board boots main.py
        waiting: list[Any] = [conn, master]  # a socket and a file descriptor
        ready, _, _ = select.select(waiting, [], [], 0.1)
        if conn in ready:
            try:
                data = conn.recv(4096)
            except OSError:
                data = b""
            if not data:
                break  # unplugged; the REPL stays
            heard = (heard + data)[-64:]
            # mpremote's `reset` runs exactly this in the raw REPL (a file copied that only
            # mentions machine.reset() is no reset)
            if b"machine.reset()\x04" in heard and not reset_at:
                reset_at = time.monotonic() + 0.3  # its answer goes out first
            os.write(master, data)
        if master in ready:
            try:
                data = os.read(master, 4096)
            except OSError:
                break
            try:
                conn.sendall(data)
            except OSError:
                break  # the host hung up as the REPL spoke
    return reset_at

"""Processes the board tests start (MicroPython, `sabot board`, socat) and what they wait with:
polling, ports, lines on a stream."""

import os
import queue
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kit.base import FIRMWARE, ROOT, SABOT


def micropython_bin():
    exe = Path(sys.executable).with_name("micropython")
    return str(exe) if exe.exists() else shutil.which("micropython")


def run_micropython(script, *args, heapsize=None, timeout=300, path=(), input=None, cwd=None):
    """Run a script on the unix-port MicroPython with the firmware on its path. Given `cwd`, it
    runs there with every path short and relative (its module path entries linked into `cwd`,
    arguments under `cwd` relative to it): what it allocates then does not depend on where the
    clone or the test's temporary directory lies, as a board's paths do not."""
    cmd = [micropython_bin()]
    if heapsize:
        cmd += ["-X", f"heapsize={heapsize}"]
    paths = [*map(str, path), str(FIRMWARE), str(ROOT / "boards" / "virtual"),
             str(ROOT / "tests" / "mp")]
    if cwd is not None:
        cwd = Path(cwd)
        for i, p in enumerate(paths):
            link = cwd / f"p{i}"
            if not link.is_symlink():
                link.symlink_to(p)
            paths[i] = link.name
        args = tuple(_relative(a, cwd) for a in args)
        script = _relative(script, cwd)
    cmd += [str(script), *map(str, args)]
    env = dict(os.environ, MICROPYPATH=os.pathsep.join(paths))
    return subprocess.run(cmd, env=env, capture_output=True, timeout=timeout, input=input,
                          cwd=cwd)


def _relative(arg, cwd):
    """`arg` relative to `cwd` when it names a path under it (or a unix: socket spec under it);
    a script outside it is linked in."""
    text = str(arg)
    prefix = "unix:" if text.startswith("unix:") else ""
    p = Path(text[len(prefix):])
    if p.is_absolute() and p.is_relative_to(cwd):
        return prefix + str(p.relative_to(cwd))
    if not prefix and p.suffix == ".py" and p.is_file():
        link = cwd / p.name
        if not link.is_symlink():
            link.symlink_to(p)
        return link.name
    return arg


def wait_for(condition, timeout=10.0):
    """Poll `condition()` until it holds; False if it still does not after `timeout` seconds."""
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.005)
    return True


# Ports for the boards and servers the tests start. A port the kernel picks (bind to 0, close,
# hand it on) may be picked again for another pytest-xdist worker before the first board binds it;
# so each worker draws from its own block, below the kernel's ephemeral range (32768 and up, where
# client sockets get theirs), starting at a random place (another run may be using the same
# block), and skips any port that is taken now.
_BLOCK = 400
_FIRST = 20000
_next_port: list[int] = []


def free_port_for_tests():
    """A TCP port nobody listens on now, from this worker's own block."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    n = int(worker[2:]) if worker[2:].isdigit() else 0
    start = _FIRST + _BLOCK * (n % 30)
    if not _next_port:
        _next_port.append(random.randrange(_BLOCK))
    for _ in range(_BLOCK):
        port = start + _next_port[0] % _BLOCK
        _next_port[0] += 1
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue  # in use: the next one
            return port
    raise AssertionError(f"no free port in {start}..{start + _BLOCK - 1}")


def port_accepts(port):
    """True when something listens on 127.0.0.1:port (the connection is closed straight away)."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


class BoardProcess:
    """`sabot board ...` in a subprocess; its stderr lines are collected so a test can wait for the
    one saying the board is up instead of sleeping."""

    def __init__(self, *args):
        self.proc = subprocess.Popen([*SABOT, "board", *map(str, args)],
                                     stderr=subprocess.PIPE, text=True)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stderr:
            self.lines.put(line)
        self.lines.put(None)

    def wait_line(self, text, timeout=60.0):
        """The next stderr line containing `text`; the test fails if none comes in time."""
        end = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(end - time.monotonic(), 0.01))
            except queue.Empty:
                pytest.fail(f"the board did not print {text!r} within {timeout} s")
            if line is None:
                pytest.fail(f"the board exited before printing {text!r}")
            if text in line:
                return line

    def said(self):
        """Every stderr line not yet taken by wait_line (for a failing test's message)."""
        out = []
        while True:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                return "".join(out)
            if line is None:
                return "".join(out) + "(the board exited)"
            out.append(line)

    def stop(self):
        """Ctrl-C, as at the terminal; a board that does not stop is killed."""
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class PtyBridge:
    """A real pseudo-terminal in front of a board's TCP host link, as a USB CDC shoe appears
    (socat; `make test` installs it). Like a USB device that re-enumerates when its board
    reboots, the bridge comes back whenever the board's side drops: the tty path stays."""

    def __init__(self, tmp, port):
        if not shutil.which("socat"):
            pytest.fail("socat is missing: run `make test` (it installs it)")
        self.path = str(tmp / f"ttyshoe{port}")
        self.port = port
        self.proc = None
        self.drops = 0  # how many times the board's side went away (each socat that ended)
        self.stopped = threading.Event()
        self.up = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()
        assert self.up.wait(30), "socat did not bring up the pseudo-terminal"

    def _run(self):
        while not self.stopped.is_set():
            if not port_accepts(self.port):
                time.sleep(0.05)
                continue
            proc = subprocess.Popen(
                ["socat", f"PTY,link={self.path},raw,echo=0", f"TCP:127.0.0.1:{self.port}"],
                stderr=subprocess.DEVNULL)
            self.proc = proc
            if wait_for(lambda: os.path.exists(self.path) or proc.poll() is not None, 5):
                self.up.set()
            proc.wait()
            self.drops += 1

    def wait_back(self, drops, timeout=30.0):
        """Wait until the board's side has dropped `drops` times in all (a reboot drops it) and the
        bridge is up again after the last: a tty opened before that may be the old pty, whose
        socat is about to end ("device reports readiness to read but returned no data")."""
        def back():
            proc = self.proc
            return (self.drops >= drops and proc is not None and proc.poll() is None
                    and os.path.exists(self.path))
        assert wait_for(back, timeout), (
            f"the pty did not come back after {drops} drops of the board's side "
            f"({self.drops} so far)")

    def stop(self):
        self.stopped.set()
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait()


def wait_until_served(url, tries=100):
    """A service just started (a witness, serve) answers GET `url`: its body (the test fails on
    what never answers)."""
    import urllib.request

    for _ in range(tries):
        try:
            return urllib.request.urlopen(url, timeout=5).read()
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"nothing answered {url}")

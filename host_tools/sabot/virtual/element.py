"""The virtual shoe's secure element: the emulator (element_emulator.py) in its own process, and
where its key store lies beside the board's flash."""

from __future__ import annotations

import atexit
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import weakref

from sabot.errors import SabotError

# The emulated element's Sign time: a real ATECC608's typical 50 ms, unless SABOT_SIGN_MS says
# otherwise (the test suite runs it at 2 ms: what it tests is not the chip's speed).
SIGN_MS = int(os.environ.get("SABOT_SIGN_MS") or 50)


def element_store(flash_dir: str | os.PathLike[str]) -> str:
    """The virtual shoe's secure element (its emulator's key store): a sibling of its flash
    directory, outside the board's filesystem, as a chip is outside the MCU's flash."""
    return os.path.normpath(os.fspath(flash_dir)) + ".element"


_RUNNING: weakref.WeakSet[Element] = weakref.WeakSet()


@atexit.register
def _stop_elements() -> None:
    """No emulator outlives the program that started it, whatever its boards' owners forgot."""
    for element in list(_RUNNING):
        element.stop()


class Element:
    """The virtual shoe's secure element: the emulator in its own process, listening on a unix
    socket in a private temporary directory. It outlives the board's power cuts (as a chip keeps
    its keys and counters, its state is in its store)."""

    def __init__(self, store: str, sign_ms: int = SIGN_MS) -> None:
        self.store = store
        self.sign_ms = sign_ms
        self.proc: subprocess.Popen[bytes] | None = None
        self.tmp: str | None = None
        self.address = ""

    def start(self, timeout: float = 10) -> str:
        """Start it unless it runs; its address (`unix:PATH`)."""
        if self.proc is not None and self.proc.poll() is None:
            return self.address
        if not os.path.isdir(self.store):
            raise SabotError(f"no secure element at {self.store}: provision the virtual shoe "
                             "(sabot provision --flash DIR)")
        self.tmp = self.tmp or tempfile.mkdtemp(prefix="sabot-element-")
        self.address = f"unix:{os.path.join(self.tmp, 'element.sock')}"
        proc = self.proc = subprocess.Popen(
            [sys.executable, "-m", "sabot.virtual.element_emulator", "--store", self.store,
             "--listen", self.address, "--sign-ms", str(self.sign_ms)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _RUNNING.add(self)
        said: queue.Queue[bytes] = queue.Queue()

        def read() -> None:
            for line in proc.stderr or ():
                said.put(line)
            said.put(b"")

        threading.Thread(target=read, daemon=True).start()
        lines: list[bytes] = []
        end = time.monotonic() + timeout
        while True:
            try:
                line = said.get(timeout=max(0.01, end - time.monotonic()))
            except queue.Empty:
                line = None
            if line and b"listening" in line:
                return self.address
            if line:
                lines.append(line)
                continue
            self.stop()
            last = lines[-1].decode(errors="replace").strip() if lines else "no message"
            raise SabotError(f"the virtual shoe's secure element did not start: {last}")

    def stop(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self.proc = None
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None


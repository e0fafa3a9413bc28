"""The virtual board: the firmware on the unix-port MicroPython (or a Pico's or an ESP32's own code
over the emulated machine) as a process, powered on, cut and stopped, its flash held by one board.

The dealer talks to the board's recognition-module UART, exit sensor and buttons over the process's
stdin (dealer_channel.py), and watches its indicators on stdout (boards/virtual/board.py); the
host link is a TCP socket."""

from __future__ import annotations

import contextlib
import fcntl
import os
import queue
import signal
import socket
import subprocess
import termios
import threading
import time
from collections.abc import Callable, Iterator
from typing import IO, Any

from sabot.errors import SabotError
from sabot.locks import try_lock
from sabot.paths import BOARDS, FIRMWARE, micropython
from sabot.virtual.element import SIGN_MS, Element, element_store


def free_port() -> int:
    """A TCP port free on this machine now, for a board's host link."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


BLANK_EXIT = 5  # boards/virtual/main.py: a factory-fresh shoe, whose port is the REPL's
RESET_EXIT = 4  # machine.reset() (boards/virtual/main.py, boards/emulated): a crash or an update
FLASH_LOCK = ".board.lock"  # in the flash directory (the data dir: in no code digest, no deploy
# touches it): held by the board that has the flash, from its first power-on until stop()


def lock_flash(flash_dir: str) -> int:
    """One board to a flash directory, as one chip is soldered to one board: an exclusive lock on
    FLASH_LOCK, its file descriptor (closing it lets go; so does the process ending). A flash
    another board has is refused in one line, before its element or firmware starts."""
    path = os.path.join(flash_dir, FLASH_LOCK)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except FileNotFoundError:
        raise SabotError(f"no flash directory {flash_dir}: provision the virtual shoe (sabot "
                         "provision --flash DIR)") from None
    except OSError as e:
        raise SabotError(f"flash directory {flash_dir}: cannot make its lock ({e.strerror})"
                         ) from None
    holder = try_lock(fd)
    if holder is not None:
        os.close(fd)
        raise SabotError(f"flash directory {flash_dir} is in use by another board (pid "
                         f"{holder}): one board to a flash, as one chip to a board")
    return fd


class Blank(SabotError):
    """The board found its element factory-fresh: it runs no firmware, its port is a REPL."""


EMULATED = ("rpi_pico", "esp32")  # boards whose own code runs over boards/emulated/'s machine


class VirtualBoard:
    """The virtual board (boards/virtual: its own entry, dealer channel on stdin), or with
    `board` "rpi_pico" / "esp32" that board's own code (its board.py, shoe/drivers/hw.py and
    firmware/main.py, built into `code` by `sabot firmware --board B`) over the emulated machine
    (boards/emulated/), the same dealer channel and indicator lines on its stdin and stdout.
    `chunk`: the most bytes the emulated host link's driver takes per write (0: all)."""

    def __init__(self, flash_dir: str | os.PathLike[str], host: str = "127.0.0.1", port: int = 0,
                 code: str | os.PathLike[str] | None = None, sign_ms: int = SIGN_MS,
                 element: str | None = None, board: str = "virtual", chunk: int = 0,
                 nor_erase_ms: int | None = None, nor_log: str = "raw") -> None:
        if board != "virtual" and board not in EMULATED:
            raise SabotError(f"unknown board {board!r} (virtual, {', '.join(EMULATED)})")
        if board != "virtual" and not code:
            raise SabotError(f"--board {board} runs a built code tree: sabot firmware --board "
                             f"{board} --out DIR, then --code DIR")
        self.board = board
        self.chunk = chunk
        self.code = str(code) if code else None  # a built code tree; None: the repository's source
        # a NOR chip under the board's flash, its sector erase taking nor_erase_ms (boards/virtual/
        # nor.py; $SABOT_NOR_ERASE_MS does the same for every board): the log on raw sectors, or
        # with nor_log "littlefs" in a littlefs file
        self.nor_erase_ms = nor_erase_ms
        self.nor_log = nor_log
        self.erases = 0  # the NOR chip's sector erases so far (this flash, every power-on)
        self.erases_before = 0
        self.lamp_us: list[int] = []  # each card's exit edge -> lamps, µs, as the board timed it
        self.path_erases = 0  # sector erases between a card's exit edge and its lamps
        self.flash_dir = str(flash_dir)
        # its secure element: the emulator process, started with the board's first power-on and
        # kept across power cuts until stop()
        self.element = Element(element or element_store(self.flash_dir), sign_ms)
        self.host = host
        self.port = port or free_port()
        self.flash_lock: int | None = None  # lock_flash's, from the first power-on to stop()
        self.proc: subprocess.Popen[bytes] | None = None
        self.indicator: tuple[int, ...] | None = None  # phase due position shoe round alarm reveal
        self.unread: list[bytes] = []  # the board's last lines that are none of the above
        # (player total, banker total, winner, announcement bits) per result
        self.announcements: list[tuple[int, ...]] = []
        self.placed: list[Any] = []  # blackjack: the hands the shoe last showed (H line)
        self.placed_count = 0
        self.taken = 0  # buttons the board has taken (K lines)
        self.changed = threading.Condition()
        self.boots = 0
        self.lamps: dict[str, int] = {}  # emulated boards: each lamp pin's level, by name
        # and every change, in order ("buzzer": its PWM duty)
        self.lamp_changes: list[tuple[str, int]] = []
        # called with ("I", indicator) on every change of the lamps and display, ("A", result) on
        # every result shown (`sabot board` prints them for the technician)
        self.on_show: Callable[[str, tuple[int, ...]], None] | None = None

    @property
    def url(self) -> str:
        return f"socket://{self.host}:{self.port}"

    def start(self, timeout: float = 10, flash_bytes: int | None = None) -> VirtualBoard:
        """Power on. `flash_bytes` caps every file the board writes (a full flash, for tests)."""
        took = self.flash_lock is None  # kept across power cuts: the flash stays this board's
        if took:
            self.flash_lock = lock_flash(self.flash_dir)
        try:
            return self._start(timeout, flash_bytes)
        except BaseException:
            self.element.stop()  # a board that will not come up leaves no element process behind
            if took:
                self._unlock_flash()
            raise

    def _unlock_flash(self) -> None:
        if self.flash_lock is not None:
            os.close(self.flash_lock)
            self.flash_lock = None

    def _start(self, timeout: float, flash_bytes: int | None) -> VirtualBoard:
        address = self.element.start(timeout)
        if self.board != "virtual":
            env = dict(os.environ, MICROPYPATH=os.pathsep.join(
                [str(BOARDS / "emulated"), str(BOARDS / "virtual")]))
            cmd = [micropython(), str(BOARDS / "emulated" / "launch.py"),
                   "--code", os.path.abspath(str(self.code)),
                   "--chunk", str(self.chunk)]  # paths absolute: "/" becomes the code tree
            cmd += ["--flash", os.path.abspath(self.flash_dir), "--listen",
                    f"{self.host}:{self.port}", "--element", address]
            if self.board == "esp32":  # its image's partition table: where the log's lies
                cmd += ["--partitions", str(BOARDS / "esp32" / "partitions-sabot-4MiB.csv")]
        elif self.code:
            env = dict(os.environ, MICROPYPATH=self.code)
            cmd = [micropython(), os.path.join(self.code, "main.py"), "--code", self.code]
        else:
            path = os.pathsep.join([str(FIRMWARE), str(BOARDS / "virtual")])
            env = dict(os.environ, MICROPYPATH=path)
            cmd = [micropython(), str(BOARDS / "virtual" / "main.py")]
        if self.board == "virtual":
            cmd += ["--flash", self.flash_dir, "--listen", f"{self.host}:{self.port}",
                    "--element", address]
            if self.nor_erase_ms is not None:
                cmd += ["--nor-erase-ms", str(self.nor_erase_ms), "--nor-log", self.nor_log]
            if flash_bytes:
                cmd += ["--flash-bytes", str(flash_bytes)]  # the shoe knows its flash's size
        env["SABOT_ELEMENT"] = address
        def full_flash() -> None:
            import resource
            import signal as sig

            sig.signal(sig.SIGXFSZ, sig.SIG_IGN)  # a write past the cap fails instead (EFBIG)
            resource.setrlimit(resource.RLIMIT_FSIZE, (flash_bytes or 0, flash_bytes or 0))

        proc = self.proc = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                            bufsize=0, preexec_fn=full_flash if flash_bytes
                                            else None)
        self.boots += 1
        self.erases_before = self.erases  # the chip counts from 0 at each power-on
        # this power-on's own queue: the reader of the one before, ending late, must not say
        # "not listening" here (start would return before this process showed its state)
        listening: queue.Queue[bool] = queue.Queue()
        threading.Thread(target=self._read_indicators, args=(proc, listening),
                         daemon=True).start()
        try:
            up = listening.get(timeout=timeout)
        except queue.Empty:
            self.kill()
            raise SabotError("the virtual board did not start listening") from None
        if not up:  # its output ended before it listened: it is ending, say how
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout)
        if proc.poll() is not None:
            said = (proc.stderr.read() if proc.stderr else b"").decode(errors="replace")
            # MicroPython's unix port prints an uncaught exception on standard output
            err = said.strip().splitlines() or [x.decode(errors="replace").strip()
                                               for x in self.unread if x.strip()]
            if proc.returncode == BLANK_EXIT:
                raise Blank(f"{self.url}: a blank shoe (its element was never provisioned)")
            raise SabotError(f"the virtual board stopped: {err[-1] if err else 'no message'}")
        return self

    def _read_indicators(self, proc: subprocess.Popen[bytes],
                         listening: queue.Queue[bool]) -> None:
        self.unread = []
        for line in _lines(proc):
            parts = line.split()
            if parts[:1] not in ([b"K"], [b"H"], [b"A"], [b"I"], [b"P"], [b"B"], [b"T"], [b"E"],
                                 [b"L"]):
                self.unread = (self.unread + [line])[-8:]  # what else it said: a traceback
            if parts[:1] == [b"K"]:  # a button the board has taken (and shown what it did)
                with self.changed:
                    self.taken += 1
                    self.changed.notify_all()
            if parts[:1] == [b"H"] and len(parts) == 2:  # blackjack: the shoe's hands shown
                self.placed = ["dealer" if c == "f" else int(c, 16) for c in parts[1].decode()]
                self.placed_count += 1
                if self.on_show:
                    self.on_show("H", tuple(self.placed))
            if parts[:1] == [b"A"] and len(parts) == 5:
                self.announcements.append(tuple(int(x) for x in parts[1:]))
                if self.on_show:
                    self.on_show("A", self.announcements[-1])
            if parts[:1] == [b"I"] and len(parts) == 8:
                with self.changed:
                    self.indicator = tuple(int(x) for x in parts[1:])
                    self.changed.notify_all()
                if self.on_show:
                    self.on_show("I", self.indicator)
            elif parts[:1] == [b"P"] and len(parts) == 3:  # emulated boards: a lamp pin
                self._lamp(parts[1].decode(), int(parts[2]))
            elif parts[:1] == [b"B"] and len(parts) == 2:  # and the buzzer's PWM duty
                self._lamp("buzzer", int(parts[1]))
            elif parts[:1] == [b"T"] and len(parts) == 3:
                self.lamp_us.append(int(parts[1]))
                self.path_erases += int(parts[2])
            elif parts[:1] == [b"E"] and len(parts) == 2:
                self.erases = self.erases_before + int(parts[1])
            elif parts[:1] == [b"L"]:
                listening.put(True)
        listening.put(False)
        with self.changed:
            self.changed.notify_all()

    def _lamp(self, name: str, level: int) -> None:
        self.lamps[name] = level
        self.lamp_changes.append((name, level))

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def send(self, data: bytes) -> None:
        try:
            self._stdin().write(data)
        except (BrokenPipeError, OSError):
            pass  # the board is off (a power cut): the dealer will wait for it

    def _stdin(self) -> IO[bytes]:
        """The board's dealer channel; OSError when it has never been powered on."""
        if self.proc is None or self.proc.stdin is None:
            raise OSError("the board is off")
        return self.proc.stdin

    def wait_read(self, timeout: float = 10) -> bool:
        """Wait until the board has read every byte sent to it; False on timeout or if it died."""
        end = time.monotonic() + timeout
        while self.alive():
            try:
                unread = fcntl.ioctl(self._stdin(), termios.FIONREAD, bytes(4))
            except (OSError, ValueError):
                return False  # its input is closed: powered off
            if unread == bytes(4):
                return True
            if time.monotonic() > end:
                return False
            time.sleep(0.001)
        return False

    def wait(self, predicate: Callable[[tuple[int, ...]], bool], timeout: float = 10) -> bool:
        """Wait until predicate(indicator) holds; False on timeout or if the board died."""
        end = time.monotonic() + timeout
        with self.changed:
            while not (self.indicator and predicate(self.indicator)):
                left = end - time.monotonic()
                if left <= 0 or not self.alive():
                    return False
                self.changed.wait(min(left, 0.2))
        return True

    def kill(self) -> None:
        """A power cut: the process dies at whatever instruction it was executing."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def cut_power_in(self, seconds: float) -> None:
        """A power cut `seconds` from now, mid-instruction; only this power-on: a late timer must
        not cut the next one."""
        proc = self.proc

        def cut() -> None:
            if proc is not None and proc.poll() is None:
                proc.kill()

        threading.Timer(seconds, cut).start()

    def wait_off(self) -> int:
        """Wait until the board's process ends (power off, a crash or an update's reset); its exit
        status."""
        return self.proc.wait() if self.proc else 0

    def stop(self) -> None:
        try:
            self._stop_board()
        finally:
            self.element.stop()
            self._unlock_flash()

    def _stop_board(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                self._stdin().close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.kill()
        for s in (self.proc.stdout, self.proc.stderr):
            if s:
                s.close()


def _lines(proc: subprocess.Popen[bytes]) -> Iterator[bytes]:
    """The board's output, line by line, until it ends or the board is stopped under it (its
    pipe closed by stop(): that ends the lines too, never the reading thread with an error)."""
    try:
        yield from proc.stdout or ()
    except (OSError, ValueError):
        return

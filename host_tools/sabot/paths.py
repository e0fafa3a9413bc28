"""Where the firmware and boards live (the host tools run them on the unix-port MicroPython)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

ROOT = Path(os.environ.get("SABOT_ROOT", Path(__file__).resolve().parents[2]))
FIRMWARE = ROOT / "firmware"
BOARDS = ROOT / "boards"


def micropython() -> str:
    exe = Path(sys.executable).with_name("micropython")
    found = str(exe) if exe.exists() else shutil.which("micropython")
    if not found:
        from .errors import SabotError

        raise SabotError(
            "the micropython command is missing: run `make test` or `make demo` to install it"
        )
    return found

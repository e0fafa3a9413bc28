"""Where the tests find the repository, and the one way they run the sabot command."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIRMWARE = ROOT / "firmware"
# this checkout's host package before any installed one (the editable install may point
# elsewhere), and the firmware's package `shoe`, which the in-process tests run under CPython
for _path in (FIRMWARE, ROOT / "host_tools"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

SABOT = [sys.executable, "-m", "sabot"]  # the sabot command, as a subprocess runs it
SIGN_MS = 2  # the emulated element's Sign time in tests (a real chip takes ~50 ms)

"""Helpers the tests import (fixtures live in tests/conftest.py).

base: ROOT, FIRMWARE, SABOT, SIGN_MS · procs: MicroPython and `sabot board` processes, a pty in
front of a board, polling, ports · shoes: signed frames without a board, provisioned virtual shoes,
the validator on a live board (Rig) · ports: an in-process shoe port over a socket pair · fw: the
firmware's own kit (a provisioned shoe, its element in-process) · serve_rig: `sabot serve` over
virtual shoes · browser: headless Chromium for the pages, its CSP reports."""

from kit.base import FIRMWARE, ROOT, SABOT, SIGN_MS
from kit.procs import (
    BoardProcess,
    PtyBridge,
    free_port_for_tests,
    micropython_bin,
    port_accepts,
    run_micropython,
    wait_for,
)
from kit.shoes import (
    Rig,
    flip_a_stored_result,
    provision_shoe,
    registry_of,
    signing_shoe,
    validated_capture,
)

__all__ = [
    "FIRMWARE", "ROOT", "SABOT", "SIGN_MS", "BoardProcess", "PtyBridge", "Rig",
    "flip_a_stored_result", "free_port_for_tests", "micropython_bin", "port_accepts",
    "provision_shoe", "registry_of", "run_micropython", "signing_shoe", "validated_capture",
    "wait_for",
]

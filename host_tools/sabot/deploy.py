"""`sabot deploy` / `make deploy BOARD=B PORT=URL`: build the board's firmware, put it on the shoe
with mpremote, provision the shoe's key if it has none, and check on the shoe that what landed is
the build.

A shoe that is dealing is first asked, with an authenticated maintenance command, to hand its port
to the MicroPython REPL; an empty board is already there. The virtual board's port is a socket, so
mpremote is told `resume` (its soft reset would end the unix process)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import keys as keyfiles
from . import protocol as pr
from .build import build
from .errors import SabotError
from .keys import ShoeKey
from .transport import DEFAULT_BAUD, ShoePort


def _ask_for_maintenance(url: str, key: ShoeKey, timeout: float = 5.0,
                         baud: int = DEFAULT_BAUD) -> bool:
    """True if a running shoe answered and was sent to maintenance; False if nothing answered."""
    port = ShoePort(url, baud, open_timeout=0)
    try:
        end, asked = time.monotonic() + timeout, 0.0
        while time.monotonic() < end:
            if time.monotonic() - asked > 0.5:
                port.send_command(key, pr.C_HELLO)
                asked = time.monotonic()
            for _, f in port.frames(0.1):
                if isinstance(f, pr.Frame) and f.type == pr.T_STATUS and pr.verify(key.key, f):
                    counter = pr.decode_status(f.payload)["host_counter"] + 1
                    port.send_command(key, pr.C_MAINTENANCE, counter=counter)
                    time.sleep(0.3)
                    return True
        return False
    finally:
        port.close()


def mpremote(url: str, *commands: list[str], timeout: float = 120) -> str:
    exe = Path(sys.executable).with_name("mpremote")
    args = [str(exe), "connect", url, "resume"]
    for i, c in enumerate(commands):
        args += (["+"] if i else []) + list(c)
    r = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    if r.returncode:
        lines = (r.stderr or r.stdout).strip().splitlines()
        raise SabotError(f"mpremote failed: {lines[-1] if lines else 'no output'}")
    return r.stdout


LISTING = ("import os\nprint('ROOT', os.listdir())\ntry:\n print('DATA', os.listdir('data'))\n"
           "except OSError:\n print('DATA', None)")


def deploy(url: str, board: str, key_file: str, log: Callable[[str], Any] = print,
           baud: int = DEFAULT_BAUD) -> dict[str, Any]:
    info = build(board)
    key = keyfiles.load_or_create(key_file)
    try:
        listing = mpremote(url, ["exec", LISTING], timeout=30)
    except SabotError:
        # Not at the REPL: the shoe is dealing. An authenticated command hands its port over.
        if not _ask_for_maintenance(url, key, baud=baud):
            raise SabotError(f"{url}: neither a REPL nor a shoe that answers with this key"
                             ) from None
        log("the shoe was dealing: sent it to maintenance")
        time.sleep(1.0)
        listing = mpremote(url, ["exec", LISTING], timeout=30)
    root = next(ln for ln in listing.splitlines() if ln.startswith("ROOT"))
    data = next(ln for ln in listing.splitlines() if ln.startswith("DATA"))
    files = sorted(info["files"]) + ["MANIFEST"]
    dirs = sorted({str(Path(f).parent) for f in files if "/" in f}, key=len)
    cmds = []
    if "'shoe'" in root:  # remove the old code first: no stale module may survive next to the new
        cmds.append(["exec", "import os\ndef rm(d):\n for e in os.ilistdir(d):\n"
                             "  p = d + '/' + e[0]\n"
                             "  rm(p) if e[1] == 0x4000 else os.remove(p)\n"
                             " os.rmdir(d)\nrm('shoe')"])
    cmds += [["fs", "mkdir", f":{d}"] for d in dirs]
    cmds += [["fs", "cp", str(Path(info["dir"]) / f), f":{f}"] for f in files]
    if "'key'" not in data:
        if "None" in data:
            cmds.append(["fs", "mkdir", ":data"])
        cmds.append(["fs", "cp", str(key_file), ":data/key"])
        log(f"provisioning shoe {key.shoe_id:#010x} with key {key.key_id} from {key_file}")
    log(f"copying {len(files)} files to {url}")
    mpremote(url, *cmds)
    check = mpremote(url, ["exec", "import os\nfrom shoe import integrity\n"
                                   "print('INTEGRITY', integrity.check(os.getcwd(), ('data',)))"])
    if "INTEGRITY None" not in check:
        raise SabotError(f"what landed on the shoe is not the build: {check.strip()}")
    log(f"checked on the shoe: its code tree matches MANIFEST {info['manifest'][:16]}...")
    try:
        mpremote(url, ["soft-reset"])  # boot the new firmware
    except SabotError as e:
        if "disconnected" not in str(e):  # the unix port's soft reset ends the REPL: expected
            raise
    return info

"""`sabot deploy` / `make deploy BOARD=B PORT=URL`: build the board's firmware, put it on the shoe with
mpremote, provision the shoe's key if it has none, and check on the shoe that what landed is the build.

A shoe that is dealing is first asked, with an authenticated maintenance command, to hand its port to the
MicroPython REPL; an empty board is already there. The virtual board's port is a socket, so mpremote is
told `resume` (its soft reset would end the unix process)."""

import os
import subprocess
import sys
import time
from pathlib import Path

import serial

from . import frames as fr
from . import keys as keyfiles
from .build import build
from .errors import SabotError


def _ask_for_maintenance(url, key, timeout=5.0):
    """True if a running shoe answered and was sent to maintenance; False if nothing answered."""
    from .validator import decode_status

    try:
        ser = serial.serial_for_url(url, timeout=0.1)
    except (serial.SerialException, ValueError) as e:
        raise SabotError(f"cannot open {url}: {e}") from None
    try:
        deframer, end, asked = fr.Deframer(), time.monotonic() + timeout, 0.0
        while time.monotonic() < end:
            if time.monotonic() - asked > 0.5:
                ser.write(fr.command(key.key, key.key_id, key.shoe_id, 0, fr.C_HELLO))
                asked = time.monotonic()
            for enc in deframer.feed(ser.read(4096)):
                raw = fr.cobs_decode(enc)
                f = fr.parse(raw) if raw else None
                if isinstance(f, fr.Frame) and f.type == fr.T_STATUS and fr.verify(key.key, f):
                    counter = decode_status(f.payload)["host_counter"] + 1
                    ser.write(fr.command(key.key, key.key_id, key.shoe_id, counter, fr.C_MAINTENANCE))
                    ser.flush()
                    time.sleep(0.3)
                    return True
        return False
    finally:
        ser.close()


def mpremote(url, *commands, timeout=120):
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


def deploy(url, board, key_file, log=print):
    info = build(board)
    key = keyfiles.load_or_create(key_file)
    try:
        listing = mpremote(url, ["exec", LISTING], timeout=30)
    except SabotError:
        # Not at the REPL: the shoe is dealing. An authenticated command hands its port over.
        if not _ask_for_maintenance(url, key):
            raise SabotError(f"{url}: neither a REPL nor a shoe that answers with this key") from None
        log("the shoe was dealing: sent it to maintenance")
        time.sleep(1.0)
        listing = mpremote(url, ["exec", LISTING], timeout=30)
    root = next(ln for ln in listing.splitlines() if ln.startswith("ROOT"))
    data = next(ln for ln in listing.splitlines() if ln.startswith("DATA"))
    files = sorted(info["files"]) + ["MANIFEST"]
    dirs = sorted({str(Path(f).parent) for f in files if "/" in f}, key=len)
    cmds = []
    if "'shoe'" in root:  # remove the old code first: a stale module must not survive next to the new
        cmds.append(["exec", "import os\ndef rm(d):\n for e in os.ilistdir(d):\n  p = d + '/' + e[0]\n"
                             "  rm(p) if e[1] == 0x4000 else os.remove(p)\n os.rmdir(d)\nrm('shoe')"])
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
        if "disconnected" not in str(e):  # the unix port's soft reset ends the REPL process: expected
            raise
    return info

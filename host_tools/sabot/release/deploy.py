"""`sabot deploy` / `make deploy BOARD=B PORT=URL`: build the board's firmware, put it on the shoe
with mpremote, check on the shoe that what landed is the build, and register the shoe's result key
(read from its secure element at the REPL: `maint.public()`, or a new version made there with
`--rekey`: `maint.rekey()`) in the shoe registry. No key travels to the shoe: its result keys are
made inside its element.

A shoe that is dealing is first asked, with an authenticated maintenance command, to hand its port
to the MicroPython REPL; an empty board is already there. The virtual board's port is a socket, so
mpremote is told `resume` (its soft reset would end the unix process)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sabot import keys as keyfiles
from sabot import protocol as pr
from sabot.errors import SabotError
from sabot.keys import CommandKey
from sabot.link.transport import DEFAULT_BAUD, ShoePort
from sabot.registry import ShoeEntry, public_from_xy
from sabot.release.build import build


def _ask_for_maintenance(url: str, key: CommandKey, config: ShoeEntry, timeout: float = 5.0,
                         baud: int = DEFAULT_BAUD) -> bool:
    """True if a running shoe answered and was sent to maintenance; False if nothing answered."""
    port = ShoePort(url, baud, open_timeout=0)
    try:
        def this_shoe(f: pr.Frame) -> bool:
            public = config.public_key(f.key_id)
            return f.shoe_id == config.shoe_id and (public is None or pr.verify(public, f))

        status = port.status_where(config.shoe_id, this_shoe, timeout)
        if status is None:
            return False
        counter = pr.decode_status(status.payload)["host_counter"] + 1
        port.send_command(key, config.shoe_id, pr.C_MAINTENANCE, counter=counter)
        time.sleep(0.3)
        return True
    finally:
        port.close()


def parse_key_line(output: str, tag: str) -> tuple[int, str, str | None]:
    """(version, public PEM, certificate hex or None) from the shoe's `KEY <version> <X||Y hex>`
    (maint.public()) or `REKEY <version> <X||Y hex> <r||s hex>` (maint.rekey(): the previous key's
    signature of the new one) line; SabotError when there is none."""
    for line in output.splitlines():
        words = line.split()
        if len(words) in (3, 4) and words[0] == tag:
            try:
                version, xy = int(words[1]), bytes.fromhex(words[2])
                cert = bytes.fromhex(words[3]) if len(words) == 4 else None
            except ValueError:
                break
            if len(xy) != 64 or not 1 <= version <= 0xFFFF or (cert is not None
                                                               and len(cert) != 64):
                break
            try:
                return (version, keyfiles.public_pem(public_from_xy(xy)),
                        cert.hex() if cert is not None else None)
            except SabotError as e:
                raise SabotError(f"the shoe's {tag} line holds no P-256 key: {e}") from None
    said = output.strip().splitlines()
    raise SabotError(f"the shoe did not print its {tag} line (`{tag} <version> <128 hex>`): "
                     f"{said[-1] if said else 'no output'}")


def parse_identity(output: str) -> int | None:
    """The shoe id from the `ID <hex>` line (its flash file `identity`: >IH shoe_id, version)."""
    for line in output.splitlines():
        words = line.split()
        if len(words) == 2 and words[0] == "ID" and len(words[1]) == 12:
            try:
                return int(words[1][:8], 16)
            except ValueError:
                return None
    return None


READ_KEY = ("try:\n"
            " print('ID', open('data/identity', 'rb').read().hex())\n"
            "except OSError:\n"
            " print('ID none')\n"
            "import maint\n"
            "maint.{}()")


def mpremote(url: str, *commands: list[str], timeout: float = 120,
             on_line: Callable[[str], Any] | None = None) -> str:
    """Run one mpremote session (`resume`: no soft reset on connecting); its output. With
    `on_line`, each line mpremote prints is passed on as it comes (a line per file copied)."""
    exe = Path(sys.executable).with_name("mpremote")
    args = [str(exe), "connect", url, "resume"]
    for i, c in enumerate(commands):
        args += (["+"] if i else []) + list(c)
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    out: list[str] = []
    try:
        for line in proc.stdout or ():
            out.append(line)
            if on_line:
                on_line(line.rstrip("\n"))
        err = proc.stderr.read() if proc.stderr else ""
        code = proc.wait()
    finally:
        timer.cancel()
        for s in (proc.stdout, proc.stderr):
            if s:
                s.close()
    if code:
        lines = (err or "".join(out)).strip().splitlines()
        raise SabotError(f"mpremote failed: {lines[-1] if lines else 'no output'}")
    return "".join(out)


PROBE_WAIT = 6.0  # seconds for a board's REPL to list its files
DATA = "data"  # the shoe's data directory: identity, log, boot counter; never touched by a deploy
# Every file and directory on the board, the data directory's contents aside, one a line.
LISTING = ("import os\n"
           "def walk(d):\n"
           " for e in os.ilistdir(d or '.'):\n"
           "  p = (d + '/' if d else '') + e[0]\n"
           "  if p == 'data':\n"
           "   print('DATA', [x[0] for x in os.ilistdir('data')])\n"
           "  elif e[1] == 0x4000:\n"
           "   print('D', p)\n"
           "   walk(p)\n"
           "  else:\n"
           "   print('F', p)\n"
           "walk('')\n"
           "print('END')")
HARD_RESET = "reset"  # mpremote's machine.reset(): boots main.py, on a Pico, an ESP32 and here


def board_tree(listing: str) -> tuple[list[str], list[str], list[str] | None]:
    """(files, directories, data directory entries or None) from LISTING's output."""
    import ast

    if "END" not in listing.split():
        raise SabotError(f"could not list the board's files: {listing.strip()[-200:]}")
    files, dirs, data = [], [], None
    for line in listing.splitlines():
        tag, _, rest = line.partition(" ")
        if tag == "F":
            files.append(rest)
        elif tag == "D":
            dirs.append(rest)
        elif tag == "DATA":
            data = ast.literal_eval(rest)
    return files, dirs, data


def to_remove(files: list[str], dirs: list[str], owned: set[str]) -> tuple[list[str], list[str]]:
    """What the build does not own, the data directory aside: (files, directories deepest
    first). Files the build owns are overwritten by the copy."""
    owned_dirs = {str(Path(f).parent) for f in owned if "/" in f}
    owned_dirs |= {str(p) for d in list(owned_dirs) for p in Path(d).parents if str(p) != "."}
    gone_files = [f for f in files if f not in owned]
    gone_dirs = sorted((d for d in dirs if d not in owned_dirs), key=lambda d: -d.count("/"))
    return gone_files, gone_dirs


def deploy(url: str, board: str, key_file: str, log: Callable[[str], Any] = print,
           baud: int = DEFAULT_BAUD, rekey: bool = False, config: ShoeEntry | None = None,
           release: str | None = None) -> dict[str, Any]:
    """`key_file` is the host command key (it signs the maintenance command to a dealing shoe,
    whose registry entry `config` names it); `rekey`: have the shoe's element make its next result
    key version. The info returned carries the shoe's `shoe_id`, `key_version` and `public_key`
    (PEM) for the registry."""
    info = build(board, release=release, log=log)
    try:
        # a board at its REPL answers at once; a dealing shoe never does (mpremote would wait 10 s)
        listing = mpremote(url, ["exec", LISTING], timeout=PROBE_WAIT)
    except SabotError:
        # Not at the REPL: the shoe is dealing. An authenticated command hands its port over.
        if config is None:
            raise SabotError(f"{url}: no REPL answers, and a dealing shoe can only be sent to "
                             "maintenance by its registered id (--shoe-id, --registry)") from None
        key = keyfiles.load(key_file)
        if not _ask_for_maintenance(url, key, config, baud=baud):
            raise SabotError(f"{url}: neither a REPL nor shoe {config.shoe_id:#010x} answering"
                             ) from None
        log("the shoe was dealing: sent it to maintenance")
        listing = _listing_after_maintenance(url)
    files, dirs, data = board_tree(listing)
    if rekey and (data is None or "identity" not in data):
        raise SabotError(f"{url}: a blank shoe has no result key to rekey: deploy without "
                         "--rekey, then provision it (sabot provision --port URL --key FILE)")
    owned = set(info["files"]) | {"MANIFEST"}
    gone_files, gone_dirs = to_remove(files, dirs, owned)
    copy = sorted(owned)
    new_dirs = sorted({str(Path(f).parent) for f in copy if "/" in f} - set(dirs), key=len)
    cmds = []
    for f in gone_files:
        log(f"removing {f} (not part of the build)")
        cmds.append(["fs", "rm", f":{f}"])
    for d in gone_dirs:
        log(f"removing directory {d}/ (not part of the build)")
        cmds.append(["fs", "rmdir", f":{d}"])
    cmds += [["fs", "mkdir", f":{d}"] for d in new_dirs]
    cmds += [["fs", "cp", str(Path(info["dir"]) / f), f":{f}"] for f in copy]
    log(f"copying {len(copy)} files to {url}")
    sizes = info["files"]

    def progress(line: str) -> None:
        words = line.split()
        if words[:1] == ["cp"] and len(words) >= 3:
            name = words[-1].lstrip(":")
            if name in sizes:
                log(f"  copied {name} ({sizes[name]:,} B)")
            elif name == "MANIFEST":
                log("  copied MANIFEST")

    mpremote(url, *cmds, on_line=progress)
    # one session: the element's state, then the boot check of the tree (with the element)
    check = mpremote(url, ["exec", FRESH + "import maint; maint.state(); maint.check()"])
    state = element_state(check, url)
    if state == "foreign":
        raise SabotError(f"{url}: the shoe's element is locked with another configuration than "
                         "sabot's: it cannot sign for sabot")
    provisioned = state == "provisioned"
    if "INTEGRITY None" not in check and (provisioned or BLANK_CHECK not in check):
        raise SabotError(f"what landed on the shoe is not the build: {check.strip()}")
    log(f"checked on the shoe: its code tree matches MANIFEST {info['manifest'][:16]}..."
        + ("" if provisioned else " (the element checks its signature at every boot once "
           "provisioned)"))
    if not provisioned:
        if rekey:
            raise SabotError(f"{url}: a blank shoe has no result key to rekey: provision it "
                             "(sabot provision --port URL --key FILE)")
        return dict(info, shoe_id=None, key_version=None, public_key=None, certificate=None)
    shoe_id, version, pem, certificate = _result_key(url, rekey, log)
    return dict(info, shoe_id=shoe_id, key_version=version, public_key=pem,
                certificate=certificate)


def _result_key(url: str, rekey: bool, log: Callable[[str], Any]
                ) -> tuple[int, int, str, str | None]:
    """The shoe's id and current result key (made anew with `rekey`), then the hard reset that
    boots the new firmware."""
    tag = "REKEY" if rekey else "KEY"
    said = mpremote(url, ["exec", FRESH + READ_KEY.format("rekey" if rekey else "public")])
    shoe_id = parse_identity(said)
    if shoe_id is None:
        raise SabotError(f"{url}: the shoe's identity (data/identity) cannot be read")
    version, pem, certificate = parse_key_line(said, tag)
    log(f"{'made' if rekey else 'read'} result key version {version} of shoe {shoe_id:#010x}"
        + (" in its element (the old versions stay registered for old frames)" if rekey else ""))
    hard_reset(url)
    log("hard reset: the shoe boots the new firmware")
    return shoe_id, version, pem, certificate


def hard_reset(url: str) -> None:
    """machine.reset() at the shoe's REPL: the board boots main.py."""
    try:
        mpremote(url, [HARD_RESET], timeout=30)
    except SabotError as e:
        if "disconnected" not in str(e) and "failed to access" not in str(e):
            raise  # a board that resets drops its port: expected


# Code run at the REPL after a copy imports what was copied, not a module an earlier session of
# the same REPL left in sys.modules.
FRESH = ("import sys\n"
         "for m in list(sys.modules):\n"
         " if m in ('maint', 'board') or m.startswith('shoe'):\n"
         "  del sys.modules[m]\n")
BLANK_CHECK = "INTEGRITY no secure element to check the MANIFEST signature"  # maint.check()


def element_state(said: str, url: str) -> str:
    """blank | configured | provisioned | foreign, from maint.state()'s STATE line in `said`."""
    for line in said.splitlines():
        words = line.split()
        if words[:1] == ["STATE"] and len(words) == 2:
            return words[1]
    lines = said.strip().splitlines()
    raise SabotError(f"{url}: the shoe did not say its element's state: "
                     f"{lines[-1] if lines else 'no output'}")


def _listing_after_maintenance(url: str, timeout: float = 10.0) -> str:
    """The REPL comes up once the shoe has left its firmware: retry until it answers."""
    end = time.monotonic() + timeout
    while True:
        try:
            return mpremote(url, ["exec", LISTING], timeout=30)
        except SabotError:
            if time.monotonic() >= end:
                raise
            time.sleep(0.3)

"""`sabot deploy` / `make deploy BOARD=B PORT=URL`: build the board's firmware and put it on the
shoe.

A provisioned shoe has no REPL on any port: it is updated through the sabot protocol
(release/update.py) — the build's files and its release-signed MANIFEST in authenticated commands;
the shoe checks everything against the release key it already trusts before it switches, and
records the update in its signed chain. `--rekey` then has its element make the next result key,
certified by its attestation key. A blank shoe (its element never provisioned) is the only one at
its MicroPython REPL: its first firmware is copied there with mpremote and checked on the shoe
(the virtual board's port is a socket, so mpremote is told `resume`: its soft reset would end the
unix process); then `sabot provision` gives it its identity and keys."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sabot import keys as keyfiles
from sabot import protocol as pr
from sabot.errors import SabotError
from sabot.keys import CommandKey
from sabot.link.answering import answering_shoe, at_repl, silence_line
from sabot.link.operate import user_name
from sabot.link.transport import DEFAULT_BAUD, ShoePort
from sabot.registry import Registry, ShoeEntry, public_from_xy
from sabot.release.build import build

IDENTIFY_WAIT = 3.0  # seconds for a provisioned shoe to answer a hello


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
        if proc.poll() is None:  # interrupted (Ctrl-C): the session goes with this command
            proc.kill()
            proc.wait()
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
           release: str | None = None, registry: Registry | None = None,
           by: str = "") -> dict[str, Any]:
    """`key_file` is the host command key (it signs the update and rekey commands); `config`
    the registered shoe expected on the port (else whichever shoe of `registry` answers); `rekey`:
    have the shoe's element make its next result key version. The info returned carries the
    shoe's `shoe_id`, `key_version`, `public_key` (PEM) and `certificate` for the registry (all
    None for a blank shoe). The build lands in build/BOARD (what verify-firmware compares with)
    only once the shoe took it."""
    import shutil
    import tempfile

    from sabot.release.build import BUILD

    if by and (len(by) > pr.BY_LEN or not by.isascii() or not by.isprintable()):
        raise SabotError(f"--by {by!r}: at most {pr.BY_LEN} printable ASCII characters (it is "
                         "signed into the command and recorded in the shoe's chain)")
    key = keyfiles.load(key_file) if os.path.exists(key_file) else None  # checked before all
    heard = bytearray()
    # with no --shoe-id, the registered shoe that answers a hello to any shoe is the one updated
    shoe = answering_shoe(url, registry, baud, IDENTIFY_WAIT, config, heard=heard)
    if shoe is None and heard and not at_repl(bytes(heard)):  # no REPL to copy to either
        raise SabotError(silence_line(url, bytes(heard), IDENTIFY_WAIT))
    if shoe is not None and key is None:
        raise SabotError(f"no command key file {key_file}: a provisioned shoe takes an update "
                         "only signed with the command key it was provisioned for")
    with tempfile.TemporaryDirectory(prefix="sabot-deploy-") as tmp:
        info = build(board, out=os.path.join(tmp, board), release=release, log=log)
        if shoe is not None:
            assert key is not None
            done = _update(url, baud, key, shoe, info, rekey, by, log)
        else:
            done = _deploy_blank(url, info, config, registry, rekey, log)
        target = BUILD / board
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(info["dir"], target)
    return dict(done, dir=str(target))


def _deploy_blank(url: str, info: dict[str, Any], config: ShoeEntry | None,
                  registry: Registry | None, rekey: bool,
                  log: Callable[[str], Any]) -> dict[str, Any]:
    try:
        # a blank shoe at its REPL answers at once (mpremote would wait 10 s for a silent one)
        listing = mpremote(url, ["exec", LISTING], timeout=PROBE_WAIT)
    except SabotError:
        who = (f"shoe {pr.shoe_id_text(config.shoe_id)}" if config is not None
               else "a shoe of the registry" if registry and registry.shoes else "a shoe")
        raise SabotError(f"{url}: no blank shoe's REPL and no reply from {who} in the sabot "
                         "protocol (powered? the right port? a provisioned shoe must be in the "
                         "registry: --registry, --shoe-id)") from None
    if rekey:
        raise SabotError(f"{url}: a blank shoe has no result key to rekey: deploy without "
                         "--rekey, then provision it (sabot provision --port URL --key FILE)")
    _copy_to_repl(url, info, listing, log)
    return dict(info, shoe_id=None, key_version=None, public_key=None, certificate=None)


def _update(url: str, baud: int, key: CommandKey, shoe: ShoeEntry, info: dict[str, Any],
            rekey: bool, by: str, log: Callable[[str], Any]) -> dict[str, Any]:
    from sabot.release import update as channel
    from sabot.release.verify_firmware import verify_firmware

    by = by or user_name()
    port = ShoePort(url, baud)
    try:
        try:
            channel.update(port, key, shoe, info, by, log)
        except channel.OutcomeUnseen as e:
            # every chunk taken: the shoe switched (its reset dropped the port with the outcome)
            # or refused; what it boots, and the seeded HMAC below, say which
            log(f"the link went ({e}) after the shoe took the whole build, before its outcome "
                "was read: asking the shoe what it runs")
        except (ConnectionError, KeyboardInterrupt) as e:
            # an interrupted stream leaves the shoe's tree untouched (firmware/shoe/update.py)
            state = (f"the update of shoe {pr.shoe_id_text(shoe.shoe_id)} stopped before the "
                     "shoe switched"
                     f"{' (link lost: ' + str(e) + ')' if isinstance(e, ConnectionError) else ''}:"
                     " it runs and deals with the firmware it ran (nothing staged runs; its next "
                     "boot or update records this one as interrupted); run sabot deploy again")
            if isinstance(e, KeyboardInterrupt):
                log(state)
                raise
            raise SabotError(state) from None
        try:
            st = channel.back_after_boot(port, key, shoe)
        except SabotError as e:
            if rekey:  # the shoe took the update; the rekey was never asked for
                raise SabotError(f"{e}; no new result key was made: once it answers, run this "
                                 "deploy again with --rekey (the update is already taken)"
                                 ) from None
            raise
        if st["integrity"] != "ok":
            raise SabotError(f"shoe {pr.shoe_id_text(shoe.shoe_id)} booted the update but "
                             f"reports integrity {st['integrity']}")
        log(f"the shoe booted it (boot {st['boot']}, integrity ok)")
        version, pem, certificate = shoe.key_versions[-1], None, None
        if rekey:
            version, xy, cert = channel.rekey(port, key, shoe, by)
            pem, certificate = keyfiles.public_pem(public_from_xy(xy)), cert.hex()
            shoe = copy.deepcopy(shoe)  # the registry's own entry changes only when it is saved
            shoe.add_public_key(version, pem, certificate)  # the attestation key's word, checked
            log(f"made result key version {version} of shoe {pr.shoe_id_text(shoe.shoe_id)} in "
                "its element "
                "(certified by its attestation key; the old versions stay registered for old "
                "frames)")
    finally:
        port.close()
    seed = os.urandom(16).hex()
    check = verify_firmware(url, seed, shoe, info["dir"], baud=baud)
    if check["result"] != "pass":
        raise SabotError(f"shoe {pr.shoe_id_text(shoe.shoe_id)} runs another tree than the build "
                         "(seeded HMAC differs)")
    log(f"checked on the shoe: its seeded HMAC of its code tree (seed {seed}) matches the build")
    current = shoe.public_key(version)
    assert pem is not None or current is not None  # the key the shoe's status verified under
    public = pem or keyfiles.public_pem(current)  # type: ignore[arg-type]
    return dict(info, shoe_id=shoe.shoe_id, key_version=version, public_key=public,
                certificate=certificate, updated=True)


def hard_reset(url: str) -> None:
    """machine.reset() at a blank shoe's REPL: the board boots main.py."""
    try:
        mpremote(url, [HARD_RESET], timeout=30)
    except SabotError as e:
        if "disconnected" not in str(e) and "failed to access" not in str(e):
            raise  # a board that resets drops its port: expected


def _copy_to_repl(url: str, info: dict[str, Any], listing: str,
                  log: Callable[[str], Any]) -> None:
    """A blank shoe's first firmware, copied at its REPL and checked there."""
    files, dirs, _ = board_tree(listing)
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

    done: list[str] = []

    def copied(line: str) -> None:
        words = line.split()
        if words[:1] == ["cp"]:
            done.append(words[-1])
        progress(line)

    try:
        mpremote(url, *cmds, on_line=copied)
    except (SabotError, KeyboardInterrupt) as e:
        # what the shoe is left as: still blank, at its REPL, with part of the build
        state = (f"the copy to {url} stopped after {len(done)} of {len(copy)} files"
                 f"{' (' + str(e) + ')' if isinstance(e, SabotError) else ''}: the shoe is still "
                 "blank and at its REPL, with part of the build (it runs none of it: nothing is "
                 f"provisioned); run sabot deploy --port {url} --board {info['board']} again")
        if isinstance(e, KeyboardInterrupt):
            log(state)
            raise
        raise SabotError(state) from None
    # one session: the element's state, then the boot check of the tree (with the element)
    check = mpremote(url, ["exec", FRESH + "import maint; maint.state(); maint.check()"])
    state = element_state(check, url)
    if state not in ("blank", "configured"):
        raise SabotError(f"{url}: the shoe at this REPL has a {state} element: a provisioned "
                         "shoe must offer no REPL (its firmware is not sabot's?)")
    if "INTEGRITY None" not in check and BLANK_CHECK not in check:
        raise SabotError(f"what landed on the shoe is not the build: {check.strip()}")
    log(f"checked on the shoe: its code tree matches MANIFEST {info['manifest'][:16]}... (the "
        "element checks its signature at every boot once provisioned)")


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



"""No private key on the shoe: a dealing virtual board whose result keys live in its secure
element (the emulator process, its store outside the board's filesystem): the board's whole
filesystem and the dealing shoe's MicroPython process hold neither the result key nor the host's
command key, in any form (and a provisioned shoe offers no REPL to look with: test_update.py,
test_no_repl.py)."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from kit import SABOT, BoardProcess, free_port_for_tests

pytestmark = pytest.mark.board  # every test here starts a process


def private_forms(pem_path):
    """Every form a P-256 private key could be found in: its scalar (big- and little-endian, and
    as hex), its PEM and DER encodings."""
    key = serialization.load_pem_private_key(Path(pem_path).read_bytes(), password=None)
    return key_forms(key)


def key_forms(key):
    d = key.private_numbers().private_value.to_bytes(32, "big")  # type: ignore[union-attr]
    der = key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    body = b"".join(pem.split(b"\n")[1:-2])  # the PEM's base64 lines
    return [d, d[::-1], d.hex().encode(), d.hex().upper().encode(), der, body[:48]]


def secrets_of(tmp_path, root):
    from sabot.virtual.element import element_store

    store = Path(element_store(root / "data"))
    if not store.exists():
        store = Path(element_store(root))
    from sabot.virtual.element_store import KeyStore

    chip = KeyStore(store)  # the chip's memory, which nothing outside the chip can read
    keys = [k for k in (chip.private_key(slot) for slot in range(8)) if k is not None]
    assert keys, f"no result key in the element's store {store}"
    found = [form for k in keys for form in key_forms(k)]
    return found + private_forms(tmp_path / "command.pem")


def processes():
    """(pid, command line) of every process still there."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                yield int(entry), Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue  # gone meanwhile


def micropython_pids(root):
    """The MicroPython processes of this board: the shoe (main.py of the root) or its REPL (run in
    the root). The pip-installed unix port runs inside a CPython process."""
    pids = []
    for pid, cmdline in processes():
        cmd = cmdline.split(b"\0")
        if not any(c.endswith(b"micropython") for c in cmd[:2]):
            continue
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if str(root).encode() in b" ".join(cmd) or cwd == str(root):
            pids.append(pid)
    return pids


def memory_of(pid):
    """Every readable mapping of a process (the test is its ancestor, so ptrace rules allow it)."""
    out = []
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb") as mem:
        for line in maps:
            span, perms = line.split()[:2]
            if "r" not in perms:
                continue
            lo, hi = (int(x, 16) for x in span.split("-"))
            try:
                mem.seek(lo)
                out.append(mem.read(hi - lo))
            except (OSError, OverflowError, ValueError):
                continue  # vvar and friends
    return b"".join(out)


def assert_none_in(blob, secrets, where):
    for s in secrets:
        assert s not in blob, f"a private key form found in {where}"


def mpremote(url, *args):
    """mpremote on the board's REPL; a port still changing hands (the dealing firmware going,
    the REPL bridge coming) is tried again for a few seconds, as a technician would."""
    exe = os.path.join(os.path.dirname(sys.executable), "mpremote")
    end = time.monotonic() + 10
    while True:
        r = subprocess.run([exe, "connect", url, "resume", *args], capture_output=True,
                           text=True, timeout=120)
        if r.returncode == 0 or "failed to access" not in r.stderr or time.monotonic() > end:
            break
        time.sleep(0.2)
    assert r.returncode == 0, r.stderr
    return r.stdout


# Run in the REPL: every file of the board's filesystem, as hex, one per line.
DUMP_ALL = """
import os, binascii
def walk(d):
    for e in os.ilistdir(d):
        p = d + '/' + e[0]
        if e[1] == 0x4000:
            walk(p)
        else:
            with open(p, 'rb') as f:
                print('FILE', p, binascii.hexlify(f.read()).decode())
walk('.')
"""


def test_full_repl_access_finds_no_private_key(tmp_path):
    from sabot import keys

    from kit.run import install_build

    root, key, reg = tmp_path / "board", tmp_path / "command.pem", tmp_path / "shoes.json"
    install_build(root, tmp_path / "release.pem")  # the run's build (kit/run.py)
    keys.create(str(key))
    port = free_port_for_tests()
    url = f"socket://127.0.0.1:{port}"
    board = BoardProcess("--listen", f"127.0.0.1:{port}", "--root", root, "--key", key,
                         "--registry", reg)
    try:
        board.wait_line("firmware running")
        secrets = secrets_of(tmp_path, root)
        # the shoe signs through its element (a status answers the hello), then its memory
        st = subprocess.run([*SABOT, "status", "--port", url, "--db", tmp_path / "a.db",
                             "--key", key, "--registry", reg, "--json"],
                            capture_output=True, text=True, timeout=60)
        assert st.returncode == 0 and '"phase"' in st.stdout, st.stderr
        # the scan can find a key where there is one: the element emulator's own memory
        emulators = [pid for pid, cmd in processes()
                     if b"sabot.virtual.element_emulator" in cmd and str(root).encode() in cmd]
        assert emulators and any(s in memory_of(emulators[0]) for s in secrets[:6])
        shoes = micropython_pids(root)
        assert shoes, "the dealing shoe's process was not found"
        for pid in shoes:
            assert_none_in(memory_of(pid), secrets, f"the dealing shoe's memory (pid {pid})")

        # the board's whole filesystem (what a REPL would have seen; a provisioned shoe offers
        # none, so the test reads the directory itself) holds no secret either
        names = [p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()]
        assert "data/identity" in names and "main.py" in names
        blob = b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file())
        assert_none_in(blob, secrets, "the board's filesystem")
    finally:
        board.stop()

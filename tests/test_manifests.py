"""Every board's MicroPython manifest include()s the one firmware/manifest.py and freezes exactly
the files the build ships: the shoe package, the board's data and its entry point."""

from pathlib import Path

import pytest

from kit import ROOT

BOARDS = ("rpi_pico", "esp32", "virtual")


def frozen(manifest):
    """The files a manifest freezes, evaluated with MicroPython's manifest functions' semantics."""
    files, meta, requires = set(), {}, set()

    def run(path):
        here = path.parent

        def include(p):
            run((here / p).resolve())

        def metadata(**kw):
            meta.update(kw)

        def package(name, base_path="."):
            base = (here / base_path).resolve()
            files.update(p.relative_to(base).as_posix() for p in (base / name).rglob("*.py"))

        def module(name, base_path="."):
            p = (here / base_path / name).resolve()
            assert p.exists(), p
            files.add(name)

        def require(name):
            requires.add(name)

        exec(path.read_text(), {"include": include, "metadata": metadata, "package": package,
                                "module": module, "require": require})

    run(Path(manifest).resolve())
    return files, meta


@pytest.mark.parametrize("board", BOARDS)
def test_board_manifest_includes_the_shared_firmware_manifest(board):
    text = (ROOT / "boards" / board / "manifest.py").read_text()
    assert 'include("../../firmware/manifest.py")' in text
    files, meta = frozen(ROOT / "boards" / board / "manifest.py")
    fw = ROOT / "firmware"
    shoe = {p.relative_to(fw).as_posix() for p in (fw / "shoe").rglob("*.py")}
    extra = {"i2c_socket.py"} if board == "virtual" else set()  # its element bus: a socket
    assert files == shoe | {"board.py", "main.py", "maint.py"} | extra
    assert meta["version"] and "sabot" in meta["description"]

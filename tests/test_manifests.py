"""Every board's MicroPython manifest, evaluated by MicroPython's own manifest tool (a pinned
copy of tools/manifestfile.py, tests/kit/vendor/) as a port build evaluates a FROZEN_MANIFEST: it
includes its port's own manifest first (so the frozen image has the port's `_boot.py`, which
mounts the flash; without it a Pico finds no MANIFEST and tilts), then the one
freezes nothing of sabot's (the Pico adds micropython-lib's usb-device-cdc): MicroPython runs a
frozen main.py in place of /main.py and a frozen module wherever the filesystem lacks one, so
anything of sabot frozen would run beside the tree MANIFEST and the boot check cover, and no
update could replace it. What boots is the deployed, signed tree.

$(PORT_DIR) and $(MPY_LIB_DIR) point at stand-ins: a port directory whose manifest freezes its
`modules/_boot.py` (as ports/rp2/boards/manifest.py, ports/esp32/boards/manifest.py and
ports/unix/variants/manifest.py do), and a micropython-lib holding the packages the boards
require."""

import pytest

from kit import ROOT
from kit.vendor import manifestfile

BOARDS = ("rpi_pico", "esp32", "virtual")
# where each port keeps the manifest a board's own manifest must include (MicroPython's source)
PORT_MANIFEST = {"rpi_pico": "boards/manifest.py", "esp32": "boards/manifest.py",
                 "virtual": "variants/manifest.py"}


def stub_port(tmp, board):
    """A port directory as MicroPython's: its manifest freezes modules/, which holds _boot.py."""
    port = tmp / "port"
    (port / "modules").mkdir(parents=True)
    (port / "modules" / "_boot.py").write_text("# mounts the flash filesystem at /\n")
    manifest = port / PORT_MANIFEST[board]
    manifest.parent.mkdir(parents=True, exist_ok=True)
    manifest.write_text('freeze("$(PORT_DIR)/modules")\n')
    return port


def stub_lib(tmp):
    """micropython-lib's layout for the packages the boards require (usb-device-cdc, which
    requires usb-device)."""
    lib = tmp / "micropython-lib" / "micropython" / "usb"
    for name, module, text in (("usb-device", "__init__.py", 'package("usb")\n'),
                               ("usb-device-cdc", "cdc.py",
                                'require("usb-device")\npackage("usb")\n')):
        (lib / name / "usb" / "device").mkdir(parents=True)
        (lib / name / "usb" / "device" / module).write_text("")
        (lib / name / "manifest.py").write_text(text)
    return tmp / "micropython-lib"


def evaluate(board, tmp):
    """The target paths, in freeze order, of boards/<board>/manifest.py, by MicroPython's
    manifest tool."""
    m = manifestfile.ManifestFile(manifestfile.MODE_FREEZE, {
        "MPY_DIR": str(tmp / "mpy"), "MPY_LIB_DIR": str(stub_lib(tmp)),
        "PORT_DIR": str(stub_port(tmp, board)), "BOARD_DIR": str(tmp / "board")})
    m.execute(str(ROOT / "boards" / board / "manifest.py"))
    return [f.target_path for f in m.files()]


@pytest.mark.parametrize("board", BOARDS)
def test_board_manifest_freezes_the_ports_boot_and_nothing_of_sabot(board, tmp_path):
    targets = evaluate(board, tmp_path)
    assert targets[0] == "_boot.py"  # the port's own manifest came first
    usb = {t for t in targets if t.startswith("usb/")}
    assert set(targets) - usb == {"_boot.py"}  # no main.py, no shoe package, no board data
    assert bool(usb) == (board == "rpi_pico")  # its host link is usb-device-cdc
    ours = {p.relative_to(ROOT / "firmware").as_posix() for p in (ROOT / "firmware").rglob("*.py")}
    ours |= {p.name for p in (ROOT / "boards" / board).glob("*.py")}
    assert not set(targets) & ours
    assert len(targets) == len(set(targets))  # nothing frozen twice


@pytest.mark.parametrize("board", BOARDS)
def test_a_board_manifest_without_its_ports_manifest_is_caught(board, tmp_path):
    """What the test above guards against: a manifest without an include of the port's own,
    which freezes no _boot.py."""
    text = (ROOT / "boards" / board / "manifest.py").read_text()
    line = f'include("$(PORT_DIR)/{PORT_MANIFEST[board]}")\n'
    assert line in text
    copy = tmp_path / "boards" / board
    copy.mkdir(parents=True)
    for p in (ROOT / "boards" / board).iterdir():
        if p.is_file():
            (copy / p.name).write_text(p.read_text().replace(line, "") if p.name == "manifest.py"
                                       else p.read_text())
    m = manifestfile.ManifestFile(manifestfile.MODE_FREEZE, {
        "MPY_DIR": str(tmp_path / "mpy"), "MPY_LIB_DIR": str(stub_lib(tmp_path)),
        "PORT_DIR": str(stub_port(tmp_path, board))})
    m.execute(str(copy / "manifest.py"))
    assert "_boot.py" not in [f.target_path for f in m.files()]


def test_the_emulated_machine_is_in_no_board_manifest():
    """boards/emulated/ (the `machine` the tests run the boards' code on) is never frozen."""
    for board in BOARDS:
        assert "emulated" not in (ROOT / "boards" / board / "manifest.py").read_text()
    assert not (ROOT / "boards" / "emulated" / "manifest.py").exists()

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

import itertools

import pytest

from kit import ROOT
from kit.vendor import manifestfile

BOARDS = ("rpi_pico", "esp32", "virtual")
# where each port keeps the manifest a board's own manifest must include (MicroPython's source)
PORT_MANIFEST = {"rpi_pico": "boards/manifest.py", "esp32": "boards/manifest.py",
                 "virtual": "variants/manifest.py"}


def stub_port(tmp, board):
    """A port directory as MicroPython's: its manifest freezes modules/, which holds _boot.py
    (and, on rp2, rp2.py)."""
    port = tmp / "port"
    (port / "modules").mkdir(parents=True)
    (port / "modules" / "_boot.py").write_text("# mounts the flash filesystem at /\n")
    if board == "rpi_pico":
        (port / "modules" / "rp2.py").write_text("# the PIO helpers\n")
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
    usb = {t for t in targets if t.startswith("usb/")}
    if board == "rpi_pico":  # its own boot (the log's partition), the port's rp2 module
        assert set(targets) - usb == {"_boot.py", "rp2.py"} and usb  # its link: usb-device-cdc
    else:
        assert targets[0] == "_boot.py" and set(targets) == {"_boot.py"}  # the port's own
    ours = {p.relative_to(ROOT / "firmware").as_posix() for p in (ROOT / "firmware").rglob("*.py")}
    ours |= {p.name for p in (ROOT / "boards" / board).glob("*.py")} - {"_boot.py"}
    assert not set(targets) & ours  # no main.py, no shoe package, no board data
    assert len(targets) == len(set(targets))  # nothing frozen twice


def test_the_picos_boot_leaves_the_log_partition_its_board_data_names(tmp_path):
    """The Pico image's _boot.py mounts littlefs over the port's flash storage up to the log's
    raw partition, which board.py puts at the storage's end (hw.log_device opens it)."""
    import re

    board = {}
    exec((ROOT / "boards" / "rpi_pico" / "board.py").read_text(), board)
    boot = (ROOT / "boards" / "rpi_pico" / "_boot.py").read_text()
    fs = re.search(r"rp2\.Flash\(start=0, len=(\d+) \* 1024\)", boot)
    assert fs and int(fs.group(1)) * 1024 == board["LOG_START"]
    assert board["LOG_START"] + board["LOG_BYTES"] == board["STORAGE_BYTES"]
    assert board["LOG_START"] % 4096 == 0 and board["LOG_BYTES"] % 4096 == 0
    # a whole 8-deck shoe's log (store.py CARD_BYTES a card) in each of the partition's halves
    assert board["LOG_BYTES"] // 2 >= 8 * 52 * 100
    assert "mkfs" in boot and 'vfs.mount(fs, "/")' in boot


def test_the_esp32_images_partition_table_holds_the_log_partition():
    table = [[f.strip() for f in line.split(",")] for line in
             (ROOT / "boards" / "esp32" / "partitions-sabot-4MiB.csv").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    board = {}
    exec((ROOT / "boards" / "esp32" / "board.py").read_text(), board)
    parts = {p[0]: (p[1], int(p[3], 0), int(p[4], 0)) for p in table}
    kind, offset, size = parts[board["LOG_PARTITION"]]
    assert kind == "data" and offset % 4096 == 0 and size // 2 >= 8 * 52 * 100
    assert {"nvs", "phy_init", "factory", "vfs"} <= set(parts)  # what the port's _boot.py needs
    spans = sorted((o, o + n) for _, o, n in parts.values())
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))  # no overlap
    assert spans[-1][1] <= board["FLASH_BYTES"]


@pytest.mark.parametrize("board", BOARDS)
def test_a_board_manifest_without_its_ports_manifest_is_caught(board, tmp_path):
    """What the test above guards against: a manifest without an include of the port's own (or,
    on the Pico, without its own _boot.py), which freezes no _boot.py."""
    text = (ROOT / "boards" / board / "manifest.py").read_text()
    line = ('module("_boot.py")\n' if board == "rpi_pico"
            else f'include("$(PORT_DIR)/{PORT_MANIFEST[board]}")\n')
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

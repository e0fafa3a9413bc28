"""An emulated Pico or ESP32 on the unix port: micropython launch.py --code DIR --flash DIR
--listen HOST:PORT --element unix:PATH|tcp:HOST:PORT [--chunk N] [--partitions CSV]

Runs the board's own boot entry (firmware/main.py, as built into DIR by `sabot firmware --board
B`) and so its board.py and shoe/drivers/hw.py, over the emulated `machine`
(emulated_machine.py, which says what it wires). The board's filesystem is as on the chip: DIR is
"/" (the code tree main.py's integrity check reads, MANIFEST and all) and the flash directory is
mounted at the board's FLASH_DIR ("/data"); the shoe log's raw partition is a NOR chip in a file
there (`chip.img`: rp2.py, esp32.py, the ESP32's with its image's partition table CSV). What a
real shoe's lamps cannot say, its display does: the shoe's state at every change, as the virtual
board's `I ...` and `A ...` lines.
Exit status: 0 power off (the dealer channel closed), 5 a blank shoe (its REPL), 4 reset
(machine.reset(): after an update, the board boots its new tree)."""

import sys

import emulated_machine

sys.modules["machine"] = emulated_machine  # before anything imports the unix port's own

import os  # noqa: E402

# emulated (boards/emulated/usb, rp2.py, esp32.py), imported while their directory is on the path
import esp32  # noqa: E402
import rp2  # noqa: E402
import usb.device  # noqa: E402
import usb.device.cdc  # noqa: E402, F401
import vfs  # noqa: E402

_BLANK_EXIT = 5


def arg(name, default=None):
    if name in sys.argv:
        return sys.argv[sys.argv.index(name) + 1]
    return default


sys.modules["os"] = emulated_machine.emulated_os()  # os as on a board (dupterm)


class Display:
    """The shoe's display beside its lamps: the state the firmware shows, a line per change (what
    the host harness's simulated dealer reads), then the board's own lamp driver."""

    def __init__(self, lamps):
        self.lamps = lamps
        self.last = None
        self.taken = False  # a button the loop took this pass: `K` once its effect is shown

    def show(self, phase, due, position, shoe_no, round_no, alarm, reveal):
        state = (phase, due, position, shoe_no, round_no, alarm, reveal)
        if state != self.last:
            self.last = state
            sys.stdout.write("I %d %d %d %d %d %d %d\n" % state)
        self.lamps.show(phase, due, position, shoe_no, round_no, alarm, reveal)

    def announce(self, player_total, banker_total, winner, announcements):
        sys.stdout.write("A %d %d %d %d\n" % (player_total, banker_total, winner, announcements))
        self.lamps.announce(player_total, banker_total, winner, announcements)

    def placed(self, rnd):  # blackjack: each card's hand, for the dealer's confirm
        sys.stdout.write("H %s\n" % "".join(
            "%x" % (15 if rnd.hand_of[i] == 0xFE else rnd.hand_of[i]) for i in range(rnd.cards)))
        self.lamps.placed(rnd)

    def tick(self, now):
        self.lamps.tick(now)
        if self.taken:
            self.taken = False
            sys.stdout.write("K\n")

    @property
    def blackjack(self):  # the app marks a blackjack table's lamps (drivers/controls.py)
        return self.lamps.blackjack

    @blackjack.setter
    def blackjack(self, value):
        self.lamps.blackjack = value


def raw_log(board):
    """The board's flash chip beyond its filesystem, where its log partition lies: a file in
    the flash directory (nor.py). A shoe provisioned on the host (its log a file in that
    directory) has that log moved onto the partition first, as one provisioned on the board
    writes it there."""
    chip = board.FLASH_DIR + "/chip.img"
    rp2.CHIP = esp32.CHIP = chip
    erase_ms = os.getenv("SABOT_NOR_ERASE_MS")  # a real chip's timing, when asked for
    if erase_ms:
        rp2.ERASE_MS = esp32.ERASE_MS = int(erase_ms)
        rp2.PROG_US = esp32.PROG_US = 400
    # the image's boot mounts littlefs up to the Pico's log partition (boards/rpi_pico/_boot.py)
    emulated_machine.ROOT_FS_BYTES = getattr(board, "LOG_START", 0)
    try:
        os.stat(chip)
        return
    except OSError:
        pass
    from shoe.blocklog import BlockLog
    from shoe.drivers import hw
    from shoe.store import Flash, RecordLog

    device = hw.log_device(board)
    if device is None:
        return
    log = RecordLog(Flash(board.FLASH_DIR))
    records = list(log.records())
    if records:
        BlockLog(*device).replace(records)
        os.remove(board.FLASH_DIR + "/log")


def boot():
    code, flash = arg("--code"), arg("--flash")
    if not code or not flash:
        sys.stderr.write("launch: --code DIR and --flash DIR are required\n")
        sys.exit(2)
    partitions = arg("--partitions")  # the ESP32 image's partition table (read before the
    if partitions:  # mount below makes "/" the code tree)
        with open(partitions) as f:
            esp32.TABLE = f.read()
    vfs.mount(vfs.VfsPosix(code), "/")  # the board's filesystem: its code tree at the top
    os.chdir("/")
    sys.path[:] = ["", ".frozen", "/lib"]  # a board's path; the emulation stays imported
    import board

    vfs.mount(vfs.VfsPosix(flash), board.FLASH_DIR)
    raw_log(board)
    emulated_machine.wire(board, arg("--element"), arg("--listen", "127.0.0.1:7000"),
                          int(arg("--chunk", "0")))
    from shoe.drivers import hw

    build = hw.build

    def build_with_display(b):
        io = build(b)
        io.lamps = display = Display(io.lamps)
        pressed = io.pressed

        def pressed_and_shown(now):
            bits = pressed(now)
            display.taken = display.taken or bool(bits)
            return bits

        io.pressed = pressed_and_shown
        return io

    hw.build = build_with_display
    import main  # noqa: F401  (the board's boot entry: it runs the shoe; a blank one returns)

    sys.exit(_BLANK_EXIT)  # its port would be the REPL's, as boards/virtual/main.py says


boot()

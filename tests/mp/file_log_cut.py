# Runs on the unix-port MicroPython: a shoe on the file log (no raw log partition, as the Pico and
# ESP32 builds run it), each card's whole path with the heap locked, its link bytes to LINKFILE.
# usage: micropython file_log_cut.py SHOEFILE FLASHDIR ELEMENT_SPEC LINKFILE FS FROM [CUT]
#   FS dir: the log a file in FLASHDIR; FS lfs: in littlefs (vfs.VfsLfs2) on FLASHDIR/lfs.img
#   FROM: the first card of SHOEFILE to deal (where the shoe stands after its boot)
#   CUT: the power goes right after card CUT's record (lamps lit, its frames not finished);
#        none: the shoe is dealt to its end
# Prints "position P cards N alloc_failures F errors E ended D done S seq Q sent T" (P: after the
# boot; F: MemoryErrors, E: other exceptions, in the cards' paths).
import gc
import sys
import time

import board
import micropython
from nulls import Null

from shoe import element  # noqa: F401  (loaded before the app's buffers, as a board's main does)
from shoe.app import ShoeApp
from shoe.dealing import PH_ENDED
from shoe.sensor import encode
from shoe.store import Flash

SECTOR = 4096


class FileDevice:
    """A block device in a file, allocation-free (a board's flash driver is C), for littlefs."""

    def __init__(self, path, blocks):
        self.blocks = blocks
        try:
            self.f = open(path, "r+b")
        except OSError:
            self.f = open(path, "w+b")
            self.f.write(b"\xff" * SECTOR * blocks)
            self.f.flush()

    def readblocks(self, block, buf, off=0):
        self.f.seek(block * SECTOR + off)
        self.f.readinto(buf)

    def writeblocks(self, block, buf, off=0):
        self.f.seek(block * SECTOR + off)
        self.f.write(buf)
        self.f.flush()

    def ioctl(self, op, arg):
        if op == 4:
            return self.blocks
        if op == 5:
            return SECTOR
        return 0


class FileLink:
    def __init__(self, path):
        self.f = open(path, "wb")

    def write(self, buf, n=-1):
        self.f.write(buf, n) if n >= 0 else self.f.write(buf)
        self.f.flush()


def flash(root, fs):
    if fs == "dir":
        return Flash(root)
    import vfs

    dev = FileDevice(root + "/lfs.img", 256)
    try:
        lfs = vfs.VfsLfs2(dev, progsize=256)
    except OSError:  # the first power-on: formatted, the factory's identity copied in
        vfs.VfsLfs2.mkfs(dev, progsize=256)
        lfs = vfs.VfsLfs2(dev, progsize=256)
        vfs.mount(lfs, "/lfs")
        for name in ("identity", "variant"):
            try:
                with open(root + "/" + name, "rb") as src, open("/lfs/" + name, "wb") as dst:
                    dst.write(src.read())
            except OSError:
                pass
        return Flash("/lfs")
    vfs.mount(lfs, "/lfs")
    return Flash("/lfs")


def card_bytes(t):
    if t == "CUT":
        return encode(ord("C"))
    return encode(ord("R"), bytes((ord(t[0]), ord(t[1]))))


def serviced(app):
    t = time.ticks_ms()
    while app.busy():
        app.service(0)
        if time.ticks_diff(time.ticks_ms(), t) > 5000:
            raise RuntimeError("frames never finished")


def main():
    cut = int(sys.argv[7]) if len(sys.argv) > 7 else -1
    app = ShoeApp(flash(sys.argv[2], sys.argv[5]), FileLink(sys.argv[4]), Null(),
                  board.element(sys.argv[3]))
    app.start()
    serviced(app)
    position = app.shoe.position
    tokens = [t for line in open(sys.argv[1]) for t in line.split()]
    failures = errors = cards = 0
    for i in range(int(sys.argv[6]), len(tokens)):
        if app.shoe.phase == PH_ENDED:
            break
        f = card_bytes(tokens[i])
        gc.collect()
        micropython.heap_lock()
        try:
            for k in range(len(f)):  # (an iterator would allocate)
                app.sensor_byte(f[k])
            app.commit_card(app.card_path())
            if i != cut:
                serviced(app)
        except MemoryError:
            failures += 1
        except Exception:
            errors += 1
        micropython.heap_unlock()
        cards += 1
        if i == cut:
            break  # the power goes: nothing after the card's record reaches the flash
    o = app.outbox
    print("position %d cards %d alloc_failures %d errors %d ended %d done %d seq %d sent %d"
          % (position, cards, failures, errors, app.shoe.phase == PH_ENDED, o.done, o.seq,
             app.sent))


main()

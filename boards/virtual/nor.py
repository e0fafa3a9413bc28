"""The virtual board's NOR flash: a file standing in for a Pico's QSPI chip, with its timing.

A 4 KB sector erase sets it to 0xFF and takes `erase_ms` (45 ms: a W25Q16's typical sector
erase); a program only clears bits (what is there AND the data, as on NOR) and takes `prog_us`
a 256-byte page (400 µs). Block device with MicroPython's extended interface (readblocks and
writeblocks with an offset, ioctl 6 erase), so littlefs (vfs.VfsLfs2) mounts on it as on a
Pico. Each erase prints `E <erases so far>` on stdout for the harness.

`mount(flash_dir, erase_ms, prog_us, log)`: littlefs on the first blocks, mounted at /nor, with
the factory's files (identity, variant) copied in when it is first formatted; with log "raw" the
rest of the chip is the shoe's log partition (shoe/store.py BlockLog), with "littlefs" the log is
a littlefs file as on a Pico today."""

import sys
import time

SECTOR = 4096
PAGE = 256
BLOCKS = 256  # 1 MB
FS_BLOCKS = 32  # littlefs's part when the log has its own (128 KB)
_FF = b"\xff" * SECTOR


class NorFlash:
    def __init__(self, path, blocks=BLOCKS, erase_ms=45, prog_us=400, say=True):
        self.blocks = blocks
        self.say = say
        self.erase_ms = erase_ms
        self.prog_us = prog_us
        self.erases = 0
        try:
            self.f = open(path, "r+b")
        except OSError:
            self.f = open(path, "w+b")
            for _ in range(blocks):
                self.f.write(_FF)
            self.f.flush()
        self._old = bytearray(PAGE)

    def readblocks(self, block, buf, off=0):
        self.f.seek(block * SECTOR + off)
        self.f.readinto(buf)

    def writeblocks(self, block, buf, off=None):
        if off is None:  # the simple interface: whole blocks, erased first
            for i in range(len(buf) // SECTOR):
                self.ioctl(6, block + i)
            off = 0
        at = block * SECTOR + off
        old = self._old
        mv = memoryview(buf)
        for p in range(0, len(buf), PAGE):
            n = min(PAGE, len(buf) - p)
            self.f.seek(at + p)
            self.f.readinto(old)
            for i in range(n):
                old[i] &= mv[p + i]
            self.f.seek(at + p)
            self.f.write(old if n == PAGE else bytes(old[:n]))
            if self.prog_us:
                time.sleep_us(self.prog_us)
        self.f.flush()

    def ioctl(self, op, arg):
        if op == 4:
            return self.blocks
        if op == 5:
            return SECTOR
        if op == 6:
            self.f.seek(arg * SECTOR)
            self.f.write(_FF)
            self.f.flush()
            if self.erase_ms:
                time.sleep_ms(self.erase_ms)
            self.erases += 1
            if self.say:
                sys.stdout.write("E %d\n" % self.erases)
        return 0


class Part:
    """Blocks first .. first + count of a device, as a device of its own (littlefs's part)."""

    def __init__(self, dev, first, count):
        self.dev = dev
        self.first = first
        self.count = count

    def readblocks(self, block, buf, off=0):
        self.dev.readblocks(self.first + block, buf, off)

    def writeblocks(self, block, buf, off=None):
        self.dev.writeblocks(self.first + block, buf, off)

    def ioctl(self, op, arg):
        if op == 4:
            return self.count
        if op == 6:
            return self.dev.ioctl(6, self.first + arg)
        return self.dev.ioctl(op, arg)


def mount(flash_dir, erase_ms, prog_us=400, log="raw"):
    """The board's Flash on a NOR chip in flash_dir/nor.img (see the module's docstring)."""
    import vfs

    from shoe.store import Flash

    dev = NorFlash(flash_dir.rstrip("/") + "/nor.img", BLOCKS, erase_ms, prog_us)
    fs_blocks = FS_BLOCKS if log == "raw" else BLOCKS
    part = Part(dev, 0, fs_blocks)
    try:
        fs = vfs.VfsLfs2(part, progsize=PAGE)  # a Pico's littlefs settings (rp2 _boot.py)
        fresh = False
    except OSError:
        vfs.VfsLfs2.mkfs(part, progsize=PAGE)
        fs = vfs.VfsLfs2(part, progsize=PAGE)
        fresh = True
    vfs.mount(fs, "/nor")
    if fresh:  # the factory's files, written by provisioning into the directory
        for name in ("identity", "variant"):
            try:
                with open(flash_dir + "/" + name, "rb") as src:
                    data = src.read()
            except OSError:
                continue
            with open("/nor/" + name, "wb") as dst:
                dst.write(data)
    flash = Flash("/nor", (dev, fs_blocks, BLOCKS - fs_blocks) if log == "raw" else None)
    flash.device = dev
    return flash

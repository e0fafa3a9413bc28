"""The esp32 port's `esp32` module, as much of it as the ESP32's own code uses, for the emulated
ESP32: Partition.find over the partition table of the board's image
(boards/esp32/partitions-sabot-4MiB.csv). Only the shoe log's raw partition is a chip here
(boards/virtual/nor.py: a file, its erases and programs timed as ERASE_MS and PROG_US say: none
by default), the chip file CHIP (launch.py sets it: a file in the emulation's flash directory,
where a board's chip lies outside its filesystem); the littlefs ("vfs") partition is the
emulation's directory (launch.py)."""

import nor

CHIP = None  # the chip file (launch.py)
ERASE_MS = PROG_US = 0  # the chip's timing (launch.py: $SABOT_NOR_ERASE_MS)
TABLE = None  # the partition table's text (launch.py reads the board's CSV)
_chip = None


def _table():
    """(name, type, subtype, offset, size) of each partition of TABLE."""
    out = []
    for line in TABLE.split("\n"):
        line = line.split("#")[0].strip()
        if line:
            f = [x.strip() for x in line.split(",")]
            out.append((f[0], f[1], f[2], int(f[3], 0), int(f[4], 0)))
    return out


class Partition:
    TYPE_APP = 0
    TYPE_DATA = 1

    @staticmethod
    def find(type=TYPE_APP, subtype=0xFF, label=None):  # (the port's names)
        global _chip
        out = []
        for name, kind, _, offset, size in _table():
            if (kind == "data") == (type == Partition.TYPE_DATA) and label in (None, name):
                if _chip is None:
                    _chip = nor.NorFlash(CHIP, 4 * 1024 * 1024 // nor.SECTOR, ERASE_MS,
                                         PROG_US, say=False)
                out.append(nor.Part(_chip, offset // nor.SECTOR, size // nor.SECTOR))
        return out

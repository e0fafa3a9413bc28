"""The rp2 port's `rp2` module, as much of it as the Pico's own code uses, for the emulated Pico:
Flash(start=, len=) over the port's flash storage (MicroPython's RPI_PICO: 1408 KB). Only the
shoe log's raw partition is a chip here (boards/virtual/nor.py: a file, its erases and programs
timed as ERASE_MS and PROG_US say: none by default, the layout and the erase-ahead are what the
emulated boards test; a real chip's timing is the virtual board's --nor-erase-ms), the chip file
CHIP (launch.py sets it: a file in the emulation's
flash directory, where a board's chip lies outside its filesystem); the littlefs part is the
emulation's directory (launch.py)."""

import nor

STORAGE_BYTES = 1408 * 1024  # MICROPY_HW_FLASH_STORAGE_BYTES of the RPI_PICO board
CHIP = None  # the chip file (launch.py)
ERASE_MS = PROG_US = 0  # the chip's timing (launch.py: $SABOT_NOR_ERASE_MS)
_chip = None


def Flash(start=-1, len=-1):  # (the port's keyword names and class name)
    """A block device over storage[start : start + len] (the port's own checks: the region
    within the storage, a multiple of the 4 KB sector)."""
    global _chip
    if start == -1 and len == -1:
        raise ValueError("the whole storage is the emulation's directory: give start and len")
    start = 0 if start == -1 else start
    len = STORAGE_BYTES - start if len == -1 else len
    if not (0 <= start < STORAGE_BYTES and start % nor.SECTOR == 0 and len > 0
            and start + len <= STORAGE_BYTES and len % nor.SECTOR == 0):
        raise ValueError()
    if _chip is None:
        _chip = nor.NorFlash(CHIP, STORAGE_BYTES // nor.SECTOR, ERASE_MS, PROG_US, say=False)
    return nor.Part(_chip, start // nor.SECTOR, len // nor.SECTOR)

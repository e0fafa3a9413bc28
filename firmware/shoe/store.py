"""Power-loss-safe storage in flash: an append-only record log with a CRC on every record.

Record: type(1) length(2, big-endian) payload CRC32(4) over type, length and payload. A power cut
can only tear the last record; at boot the log is read up to the first bad record and cut there.
Small values that change rarely (the boot counter, the key) are whole files replaced by write-then-
rename, which littlefs and POSIX both make atomic."""

import os
import struct
from binascii import crc32

try:
    from micropython import const
except ImportError:  # CPython (tests): const is only a compiler hint
    def const(x):  # type: ignore[misc]
        return x

KEY_FILE = "key"  # key_id(2) shoe_id(4) key(32), written by `sabot provision`
_BOOT_FILE = "boot"
_KEY_LEN = const(38)

R_INPUT = const(0x49)  # 'I': one input and the frames it produced, all or nothing
R_ACK = const(0x41)  # 'A': host acknowledged up to seq; the host command counter
R_CHECKPOINT = const(0x50)  # 'P': state carried over a compaction
R_FRAME = const(0x4D)  # 'M': an unacknowledged frame carried over a compaction


def record(rtype, payload):
    head = struct.pack(">BH", rtype, len(payload))
    crc = crc32(payload, crc32(head)) & 0xFFFFFFFF
    return head + payload + struct.pack(">I", crc)


class Flash:
    """A directory of the shoe's flash: the board's littlefs, a real directory on the virtual
    board."""

    def __init__(self, root):
        self.root = root.rstrip("/")

    def path(self, name):
        return self.root + "/" + name

    def read(self, name):
        try:
            with open(self.path(name), "rb") as f:
                return f.read()
        except OSError:
            return None

    def write_atomic(self, name, data):
        tmp = self.path(name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(data)
        os.rename(tmp, self.path(name))


class RecordLog:
    def __init__(self, flash, name="log"):
        self.flash = flash
        self.name = name
        self._f = None
        self.size = 0

    def records(self):
        """Yield the intact records (type, payload) one at a time, so a long log never sits in RAM;
        a torn tail found on the way is cut off the file when the iteration ends."""
        try:
            f = open(self.flash.path(self.name), "rb")
        except OSError:
            self.size = 0
            return
        good = 0
        torn = False
        with f:
            while True:
                head = f.read(3)
                if not head:
                    break
                if len(head) < 3:
                    torn = True
                    break
                rtype, n = struct.unpack(">BH", head)
                body = f.read(n + 4)
                if len(body) < n + 4:
                    torn = True
                    break
                if crc32(body[:n], crc32(head)) & 0xFFFFFFFF != struct.unpack(">I", body[n:])[0]:
                    torn = True
                    break
                good += 7 + n
                yield rtype, body[:n]
        self.size = good
        if torn:
            self._cut(good)

    def _cut(self, keep):
        tmp = self.flash.path(self.name + ".tmp")
        with open(self.flash.path(self.name), "rb") as src, open(tmp, "wb") as dst:
            left = keep
            while left:
                chunk = src.read(min(512, left))
                if not chunk:
                    break
                dst.write(chunk)
                left -= len(chunk)
        os.rename(tmp, self.flash.path(self.name))

    def append(self, rtype, payload):
        if self._f is None:
            self._f = open(self.flash.path(self.name), "ab")
        rec = record(rtype, payload)
        self._f.write(rec)
        self._f.flush()
        self.size += len(rec)

    def replace(self, records):
        """Atomically replace the whole log (compaction); `records` may be a generator reading the
        old log."""
        if self._f is not None:
            self._f.close()
            self._f = None
        tmp = self.flash.path(self.name + ".new")
        size = 0
        with open(tmp, "wb") as f:
            for t, p in records:
                rec = record(t, p)
                f.write(rec)
                size += len(rec)
        os.rename(tmp, self.flash.path(self.name))
        self.size = size


def frames_in(rtype, payload):
    """The frames a log record holds: an input's (length-prefixed after its 3 input bytes), or one
    carried over a compaction."""
    if rtype == R_FRAME:
        yield payload
    elif rtype == R_INPUT:
        i = 3
        while i < len(payload):
            n = payload[i]
            yield payload[i + 1 : i + 1 + n]
            i += 1 + n


def load_identity(flash):
    """(key_id, shoe_id, key) from flash, or None when the shoe has not been provisioned."""
    raw = flash.read(KEY_FILE)
    if raw is None or len(raw) != _KEY_LEN:
        return None
    key_id, shoe_id = struct.unpack(">HI", raw[:6])
    return key_id, shoe_id, raw[6:]


def next_boot(flash):
    """Count this power-on in flash and return its number (frames carry it)."""
    raw = flash.read(_BOOT_FILE)
    boot = (int(raw) if raw else 0) + 1
    flash.write_atomic(_BOOT_FILE, str(boot).encode())
    return boot

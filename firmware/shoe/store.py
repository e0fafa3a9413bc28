"""Power-loss-safe storage in flash: an append-only record log with a CRC on every record.

Record: type(1) length(2, big-endian) payload CRC32(4) over type, length and payload. A power cut can
only tear the last record; at boot the log is read up to the first bad record and cut there. Small
values that change rarely (the boot counter, the key) are whole files replaced by write-then-rename,
which littlefs and POSIX both make atomic."""

import os
import struct
from binascii import crc32

KEY_FILE = "key"  # key_id(2) shoe_id(4) key(32), written by `sabot provision`

R_INPUT = 0x49  # 'I': one hardware/supervisor input and the frames it produced, all or nothing
R_ACK = 0x41  # 'A': host acknowledged up to seq; the host command counter
R_CHECKPOINT = 0x50  # 'P': state carried over a compaction
R_FRAME = 0x4D  # 'M': an unacknowledged frame carried over a compaction


def record(rtype, payload):
    head = struct.pack(">BH", rtype, len(payload))
    crc = crc32(payload, crc32(head)) & 0xFFFFFFFF
    return head + payload + struct.pack(">I", crc)


def _exists(path):
    try:
        os.stat(path)
        return True
    except OSError:
        return False


class Flash:
    """A directory of the shoe's flash: the board's littlefs, or a real directory on the virtual board."""

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

    def exists(self, name):
        return _exists(self.path(name))


class RecordLog:
    def __init__(self, flash, name="log"):
        self.flash = flash
        self.name = name
        self._f = None
        self.size = 0

    def load(self):
        """All intact records [(type, payload)]; a torn tail is cut off the file."""
        data = self.flash.read(self.name) or b""
        records = []
        i = 0
        while i + 7 <= len(data):
            rtype, n = struct.unpack(">BH", data[i : i + 3])
            end = i + 3 + n
            if end + 4 > len(data):
                break
            (crc,) = struct.unpack(">I", data[end : end + 4])
            if crc32(data[i + 3 : end], crc32(data[i : i + 3])) & 0xFFFFFFFF != crc:
                break
            records.append((rtype, data[i + 3 : end]))
            i = end + 4
        if i != len(data):
            self.flash.write_atomic(self.name, data[:i])
        self.size = i
        return records

    def append(self, rtype, payload):
        if self._f is None:
            self._f = open(self.flash.path(self.name), "ab")
        rec = record(rtype, payload)
        self._f.write(rec)
        self._f.flush()
        self.size += len(rec)

    def replace(self, records):
        """Atomically replace the whole log (compaction)."""
        if self._f is not None:
            self._f.close()
            self._f = None
        data = b"".join(record(t, p) for t, p in records)
        self.flash.write_atomic(self.name, data)
        self.size = len(data)


def load_identity(flash):
    """(key_id, shoe_id, key) from flash, or None when the shoe has not been provisioned."""
    raw = flash.read(KEY_FILE)
    if raw is None or len(raw) != 38:
        return None
    key_id, shoe_id = struct.unpack(">HI", raw[:6])
    return key_id, shoe_id, raw[6:]

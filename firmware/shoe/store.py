"""Power-loss-safe storage in flash: an append-only record log with a CRC on every record.

Record: type(1) length(2, big-endian) payload CRC32(4). The CRC (zlib's CRC-32, stored big-endian)
covers type, length and payload followed by zero bytes up to a multiple of 64 (the zeros are not
stored). The writer computes it in two 16-bit halves (`crc_into`): on a 32-bit port a small int
has 31 bits, and binascii.crc32 returns a long int, allocated on the heap, for three values in
four. The reader uses binascii.crc32 once per record over the record with its CRC's bytes
reversed, which gives CRC-32's residue, a small constant, for every intact record. A power cut
can only tear the last record; at boot the log is read up to the first bad record and cut there.
Small values that change rarely (the boot counter, the identity) are whole files replaced by
write-then-rename, which littlefs and POSIX both make atomic.

Records: 'I' input: kind(1) arg(1) arg2(1), then each frame body it produced: length(1) body
(chain still zero; chain, boot and key_id are filled in when the frame is finished; kind 0 is no
input: a command_rejected frame of the shoe's own);
'F' final: digest(32) and the whole finished frame, as sent;
'A' ack: acked seq(4);
'P' checkpoint (a compaction's first record): shoe(2) seq(4) digest(32) acked(4) hold_from(4)."""

import os
import struct
import sys
from array import array
from binascii import crc32

try:
    from micropython import const
except ImportError:  # CPython (tests): const is only a compiler hint
    def const(x):  # type: ignore[misc]
        return x

IDENTITY_FILE = "identity"  # shoe_id(4) key_version(2), written by host provisioning; not secret
_BOOT_FILE = "boot"
# shoe_no(2) of the last rekey (0: provisioning), until a round is dealt in a later shoe
# (rekey_due); none: open
REKEY_FILE = "rekeyed"
_IDENTITY_LEN = const(6)
BOOT_MAX = const(0xFFFF)  # frames carry the boot counter in 2 bytes

R_INPUT = const(0x49)  # 'I': one input and the frame bodies it produced, all or nothing
R_FINAL = const(0x46)  # 'F': a finished frame (digest, frame), logged before it is sent
R_ACK = const(0x41)  # 'A': the host acknowledged up to seq
R_CHECKPOINT = const(0x50)  # 'P': state carried over a compaction
CHECKPOINT = ">HI32sII"  # shoe, seq, digest, acked, hold_from (squeeze: 0 none)
R_TREE = const(0x54)  # 'T': the log's right edge carried over a compaction (shoe/tree.py)

# One whole shoe's log, per card of its decks: 8 decks measured 88 bytes a card without an ack
# (355 cards, 147 frames: I and F records, 31 KB); 100 leaves room for the acks' records.
CARD_BYTES = const(100)
KEPT_FRAME = const(209)  # an F record a compaction carries over: 7 + 32 + MAX_CHAINED
RECOVERY_BYTES = const(8192)  # beside a shoe: a compaction's copy, the boot counter, a journal
# and the frames a host caused (refusals, maintenance records): HOST_FRAMES in a log between two
# compactions, each an I and an F record of at most 3 + 7 + MAX_CHAINED and 7 + 32 + MAX_CHAINED
HOST_FRAMES = const(16)
DECKS_MAX = const(8)


def reserve(decks, unacked):
    """The one reserve every path that writes flash leaves free: a whole shoe of `decks` decks
    beside the `unacked` frames a compaction carries over, and room to recover."""
    return unacked * KEPT_FRAME + decks * 52 * CARD_BYTES + RECOVERY_BYTES


MAX_RECORD = const(768)  # an input with every frame it can make: 3 + 3 + 7 * (1 + 106) + 4
PAD = const(64)
_MP = sys.implementation.name == "micropython"


_RESIDUE = const(0x2144DF1C)  # CRC-32 of any message followed by its own CRC, little-endian


def _padded(n):
    return (n + PAD - 1) // PAD * PAD


def _crc_tables():
    """CRC-32's table (reflected polynomial 0xEDB88320) for one nibble at a time, as two tables of
    16-bit halves: 64 bytes of RAM where a byte table takes 1 KB."""
    hi_t = array("H", range(16))
    lo_t = array("H", range(16))
    for i in range(16):
        hi, lo = 0, i
        for _ in range(4):
            carry = lo & 1
            lo = (lo >> 1) | (hi & 1) << 15
            hi >>= 1
            if carry:
                hi ^= 0xEDB8
                lo ^= 0x8320
        hi_t[i] = hi
        lo_t[i] = lo
    return hi_t, lo_t


_CRC_HI, _CRC_LO = _crc_tables()


def crc_into(buf, n, out, at):
    """CRC-32 of buf[:n] into out[at:at + 4], big-endian. Every value stays below 2**16, so it
    allocates nothing on any port."""
    hi = lo = 0xFFFF
    th = _CRC_HI
    tl = _CRC_LO
    for i in range(n):
        b = buf[i]
        k = (lo ^ b) & 0xF
        lo = ((lo >> 4) | (hi & 0xF) << 12) ^ tl[k]
        hi = (hi >> 4) ^ th[k]
        k = (lo ^ b >> 4) & 0xF
        lo = ((lo >> 4) | (hi & 0xF) << 12) ^ tl[k]
        hi = (hi >> 4) ^ th[k]
    hi ^= 0xFFFF
    lo ^= 0xFFFF
    out[at] = hi >> 8
    out[at + 1] = hi & 0xFF
    out[at + 2] = lo >> 8
    out[at + 3] = lo & 0xFF


def intact(head, payload, crc):
    """True when the stored CRC bytes (big-endian) match head + payload + padding (reading: may
    allocate; the one crc32 value of an intact record is the small residue)."""
    pad = bytes(_padded(3 + len(payload)) - 3 - len(payload))
    return crc32(head + payload + pad + bytes((crc[3], crc[2], crc[1], crc[0]))) == _RESIDUE


def record(rtype, payload):
    """A whole record as bytes (compaction, tests: the paths that may allocate)."""
    n = len(payload)
    rec = bytearray(_padded(3 + n) + 4)
    struct.pack_into(">BH", rec, 0, rtype, n)
    rec[3 : 3 + n] = payload
    crc_into(rec, _padded(3 + n), rec, 3 + n)
    return bytes(rec[: 7 + n])


class Flash:
    """A directory of the shoe's flash: the board's littlefs, a real directory on the virtual
    board."""

    def __init__(self, root, log_device=None):
        self.root = root.rstrip("/")
        self.log_device = log_device  # (block device, first, count): raw sectors for the log
        self.capacity = 0  # the log file's most bytes, when the board knows it (0: the free space)

    def path(self, name):
        return self.root + "/" + name

    def log_capacity(self, log_size):
        """The bytes a log file may grow to: `capacity` when the board knows it (the virtual
        board's cap), else what the filesystem has free beside the log."""
        if self.capacity:
            return self.capacity
        try:
            st = os.statvfs(self.root)
            return min(st[4], (1 << 29) // st[0]) * st[0] + log_size  # small ints only
        except (OSError, AttributeError):
            return 1 << 29  # no way to tell: never refuse a shoe for it

    def read(self, name):
        try:
            with open(self.path(name), "rb") as f:
                return f.read()
        except OSError:
            return None

    def remove(self, name):
        try:
            os.remove(self.path(name))
        except OSError:
            pass  # not there

    def write_atomic(self, name, data):
        tmp = self.path(name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(data)
        os.rename(tmp, self.path(name))


class RecordLog:
    def __init__(self, flash, name="log"):
        self.flash = flash
        self.name = name
        self._f = None  # open for appending from prepare() on
        self.size = 0
        self.cut_due = False  # a failed write's tail is still to cut off (prepare() does it)
        # The record being written: payload at rec[3:], zero padding for the CRC after it.
        self.rec = bytearray(MAX_RECORD + PAD)

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
                if not intact(head, body[:n], body[n:]):
                    torn = True
                    break
                good += 7 + n
                yield rtype, body[:n]
        self.size = good
        if torn:
            self._close()  # never left appending to the file the cut replaces
            try:
                self._cut(good)
                self.cut_due = False
            except OSError:  # a full flash: read all the same, cut before the next append
                self.cut_due = True
                self.flash.remove(self.name + ".tmp")

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

    def capacity(self):
        return self.flash.log_capacity(self.size)

    def prepare(self):
        """Off the card path (boot, service()): the file opened for appending, after cutting off
        what a failed write left, so that commit allocates nothing (opening allocates)."""
        self._ready()

    def _ready(self):
        if self.cut_due:
            self._close()
            self._cut(self.size)
            self.cut_due = False
        f = self._f
        if f is None:
            f = self._f = open(self.flash.path(self.name), "ab")
        return f

    def append(self, rtype, payload):
        """A record from bytes (the rarer records; the card path fills `rec` and calls commit)."""
        n = len(payload)
        self.rec[3 : 3 + n] = payload
        self.commit(rtype, n)

    def commit(self, rtype, n):
        """Append the record whose n payload bytes are at rec[3:]: CRC, write, flush. Allocates
        nothing on MicroPython once prepare() has opened the file (a log never prepared opens it
        here). A write that fails leaves the log as it was before it: what it wrote is cut off
        again at once or, when even that fails, by the next prepare(), and until then the log
        refuses every record; so the caller may try again."""
        seal(self.rec, rtype, n)
        end = 3 + n
        f = self._f
        if f is None or self.cut_due:
            f = self._ready()  # raises before anything is written when it cannot be done
        try:
            if _MP:
                f.write(self.rec, end + 4)  # a stream write takes a length: no slice
            else:
                f.write(bytes(self.rec[: end + 4]))
            f.flush()
        except BaseException:  # OSError from the flash, MemoryError: undone before raising
            self._undo()
            raise
        self.size += end + 4

    def _close(self):
        f, self._f = self._f, None
        if f is not None:
            f.close()

    def _undo(self):
        """The log back to `size` bytes and reopened; on any exception on the way (MemoryError
        with the heap locked, a failing flash) prepare() finishes it."""
        self.cut_due = True
        try:
            self.prepare()
        except Exception:
            pass

    def replace(self, records):
        """Atomically replace the whole log (compaction); `records` may be a generator reading the
        old log."""
        self._close()
        tmp = self.flash.path(self.name + ".new")
        size = 0
        with open(tmp, "wb") as f:
            for t, p in records:
                rec = record(t, p)
                f.write(rec)
                size += len(rec)
        os.rename(tmp, self.flash.path(self.name))
        self.size = size
        self.cut_due = False
        self.prepare()  # reopened here, off the card path


def open_log(flash):
    """The shoe's log: on raw NOR sectors when the board gives it some (flash.log_device: block
    device, first block, blocks; shoe/blocklog.py, loaded only then), else a file in the flash
    directory."""
    if flash.log_device:
        from shoe.blocklog import BlockLog

        dev, first, count = flash.log_device
        return BlockLog(dev, first, count)
    return RecordLog(flash)


def seal(rec, rtype, n):
    """The head and CRC of the record whose n payload bytes are at rec[3:] (rec has room for the
    padding). Allocation-free."""
    struct.pack_into(">BH", rec, 0, rtype, n)
    end = 3 + n
    padded = _padded(end)
    for i in range(end, padded):
        rec[i] = 0
    crc_into(rec, padded, rec, end)


def frames_in(rtype, payload):
    """The frame bodies an input record holds (length-prefixed after its 3 input bytes)."""
    if rtype == R_INPUT:
        i = 3
        while i < len(payload):
            n = payload[i]
            yield payload[i + 1 : i + 1 + n]
            i += 1 + n


def result_slot(key_version):
    """The element slot of a result key version: version v in slot v - 1, the ATECC608's 36-byte
    private-key slots 0-7 (docs/ELEMENT.md)."""
    return key_version - 1


def load_identity(flash):
    """(key_version, shoe_id) from flash, or None when the shoe has not been provisioned."""
    raw = flash.read(IDENTITY_FILE)
    if raw is None or len(raw) != _IDENTITY_LEN:
        return None
    shoe_id, key_version = struct.unpack(">IH", raw)
    return key_version, shoe_id


def write_identity(flash, shoe_id, key_version):
    flash.write_atomic(IDENTITY_FILE, struct.pack(">IH", shoe_id, key_version))


def rekey_due(flash, shoe_no, rounds):
    """A rekey may be taken: a round dealt (`rounds` of shoe `shoe_no`) in a later shoe than the
    last rekey's (provisioning counts as one in shoe 0; a shoe provisioned before it did has its
    first rekey open). A new shoe is a command, a round is cards through the sensor: the command
    key alone cannot use up the result key slots."""
    raw = flash.read(REKEY_FILE)
    return raw is None or (shoe_no > int.from_bytes(raw[:2], "big") and rounds > 0)


def next_boot(flash):
    """Count this power-on in flash and return its number (frames carry it). It stops at
    BOOT_MAX, in flash too: a wrapped counter would make every later frame look older than the
    host's last (boot_backwards). The dealing shoe refuses that boot (the shoe tilts)."""
    raw = flash.read(_BOOT_FILE)
    last = int(raw) if raw else 0
    if last >= BOOT_MAX:
        return BOOT_MAX
    flash.write_atomic(_BOOT_FILE, str(last + 1).encode())
    return last + 1


def copy_into(dst, d, src, s, n):
    """dst[d:d + n] = src[s:s + n] without the slice (a new object on the heap)."""
    for i in range(n):
        dst[d + i] = src[s + i]

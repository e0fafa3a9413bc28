"""The record log on raw NOR sectors (a board's log partition), so that appending only programs.

littlefs copies a file's last block to a freshly erased one at every append and flush: a ~45 ms
sector erase a card, which the decision lamps would wait for. Here `prepare()`, called from
service() right after each card, keeps the sector after the head erased, so a record that does
not fit where the head is goes there at a page program's cost (docs/FLASH.md)."""

import struct

from shoe.store import MAX_RECORD, PAD, copy_into, intact, seal

try:
    from micropython import const
except ImportError:  # CPython (tests): const is only a compiler hint
    def const(x):  # type: ignore[misc]
        return x

R_SECTOR = const(0x53)  # 'S': a raw log sector's first record: the log's epoch(4)
R_DONE = const(0x4B)  # 'K': a compaction into a raw log's other half is complete
_PAGE = const(256)  # a NOR page: the unit a program takes
_ERASED = b"\xff" * _PAGE


class BlockLog:
    """The log partition is two halves used in turn. A half's sectors are filled in order, each
    starting with a sector record (its epoch); records never cross a sector, and an unreadable
    record (torn by a power cut) ends its sector: the log goes on in the next sector of the same
    epoch. A compaction (`replace`) writes the new log into the other half under the next epoch
    and ends it with a done record; until that is on flash, boot keeps reading the old half. Same
    records and CRC as RecordLog."""

    def __init__(self, dev, first, count):
        self.dev = dev
        self.sector = dev.ioctl(5, 0)
        self.first = first
        self.half = count // 2
        self.rec = bytearray(MAX_RECORD + PAD)
        self._head = bytearray(PAD + 4)  # a sector record being written
        self._page = bytearray(_PAGE)
        self.size = 0
        self.top = 0  # the highest epoch on flash
        self.found = False  # the flash has been read (boot)
        self.read_base = -1  # the half records() reads, and its epoch (-1: no log yet)
        self.read_epoch = 0
        self.base = -1  # the half written to, its epoch, the head (sector, offset)
        self.epoch = 0
        self.block = 0
        self.off = 0
        self.ready = -1  # the sector after the head, once erased this power-on

    def capacity(self):
        """A log lives in one half (a compaction writes the other)."""
        return self.half * self.sector

    # ---- reading (boot, and frames that left RAM: may allocate) --------------------------------
    def _read(self, block, off):
        if off + 7 > self.sector:
            return None
        head = bytearray(3)
        self.dev.readblocks(block, head, off)
        n = head[1] << 8 | head[2]
        if head[0] == 0xFF or off + 7 + n > self.sector:
            return None
        body = bytearray(n + 4)
        self.dev.readblocks(block, body, off + 3)
        if not intact(bytes(head), bytes(body[:n]), body[n:]):
            return None
        return head[0], bytes(body[:n])

    def _epoch_at(self, base):
        r = self._read(base, 0)
        return struct.unpack(">I", r[1])[0] if r and r[0] == R_SECTOR and len(r[1]) == 4 else 0

    def _scan(self, base, epoch):
        """(type, payload, sector, end offset) of every intact record of the half's epoch."""
        for i in range(self.half):
            off = 0
            while True:
                r = self._read(base + i, off)
                if r is None:
                    break
                if off == 0 and (r[0] != R_SECTOR or r[1] != struct.pack(">I", epoch)):
                    return
                off += 7 + len(r[1])
                yield r[0], r[1], i, off
            if off == 0:
                return

    def _find(self):
        """Boot: the newest complete half, and where its head is."""
        self.found = True
        halves = [(self._epoch_at(b), b) for b in (self.first, self.first + self.half)]
        self.top = max(halves)[0]
        for epoch, base in sorted(halves, reverse=True):
            if not epoch:
                continue
            done = False
            end = (0, 0)
            for rtype, _, i, off in self._scan(base, epoch):
                done = done or rtype == R_DONE
                end = (i, off)
            if done:
                self.read_base = self.base = base
                self.read_epoch = self.epoch = epoch
                self.block, self.off = end
                if not self._blank(base + self.block, self.off):
                    self.off = self.sector  # a torn program: the next record takes a new sector
                return

    def _blank(self, block, off):
        rest = bytearray(self.sector - off)
        self.dev.readblocks(block, rest, off)
        return rest == b"\xff" * len(rest)

    def records(self):
        if not self.found:
            self._find()
        if self.read_base < 0:
            return
        for rtype, payload, _, _ in self._scan(self.read_base, self.read_epoch):
            if rtype != R_SECTOR and rtype != R_DONE:
                yield rtype, payload

    # ---- writing: the card path programs only --------------------------------------------------
    def append(self, rtype, payload):
        n = len(payload)
        self.rec[3 : 3 + n] = payload
        self.commit(rtype, n)

    def commit(self, rtype, n):
        """Append the record whose n payload bytes are at rec[3:]. Allocation-free; no erase
        when prepare() ran since the head last moved to a new sector."""
        if self.base < 0:
            self.replace(())  # a blank partition: an empty log first (rec is left alone)
        seal(self.rec, rtype, n)
        self._room(7 + n)
        self._program(self.rec, 7 + n)
        self.size += 7 + n

    def prepare(self):
        """Off the card path: erase the sector after the head, if that is still to do (at most
        one erase a call)."""
        nxt = self.block + 1
        if self.base >= 0 and self.ready != nxt and nxt < self.half:
            self.dev.ioctl(6, self.base + nxt)
            self.ready = nxt

    def _room(self, total):
        if self.off + total <= self.sector:
            return
        nxt = self.block + 1
        if nxt >= self.half:
            raise OSError(28)  # the half is full: a full flash
        if self.ready != nxt:
            self.dev.ioctl(6, self.base + nxt)  # not prepared: the erase happens here
        self.block = nxt
        self.off = 0
        self.ready = -1
        self._sector_record()

    def _sector_record(self):
        h = self._head
        struct.pack_into(">I", h, 3, self.epoch)
        seal(h, R_SECTOR, 4)
        self._program(h, 11)

    def _done(self):
        self._room(7)
        seal(self._head, R_DONE, 0)
        self._program(self._head, 7)

    def _program(self, buf, n):
        """buf[:n] at the head, a page at a time; bytes outside it are programmed as 0xFF, which
        leaves them as they are. A failed program leaves the rest of the sector unusable."""
        page = self._page
        at = self.off
        done = 0
        try:
            while done < n:
                start = at - at % _PAGE
                k = min(_PAGE - (at - start), n - done)
                page[0:_PAGE] = _ERASED
                copy_into(page, at - start, buf, done, k)
                self.dev.writeblocks(self.base + self.block, page, start)
                at += k
                done += k
        except BaseException:
            self.off = self.sector
            raise
        self.off = at

    def replace(self, records):
        """Compaction: the records, then a done record, into the other half under the next
        epoch; the old half stays the log until the done record is on flash."""
        if not self.found:
            self._find()
        other = self.first + self.half if self.read_base == self.first else self.first
        self.top += 1
        self.base, self.epoch, self.block, self.off = other, self.top, 0, 0
        self.dev.ioctl(6, other)
        self.ready = -1
        self._sector_record()
        self.size = 0
        for t, p in records:
            self.append(t, p)
        self._done()
        self.read_base, self.read_epoch = other, self.epoch

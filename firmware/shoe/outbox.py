"""The shoe's outbox: its chained frames from the moment the card path builds them until the host
acknowledges them.

A frame is made in two steps. At card time its body is built in place in a RAM ring slot (the
chain field still zero) and logged with its input; nothing waits for the secure element. Later,
outside the card path, `service()` finishes the frames strictly in seq order, one step per call:
it fills in the header (chain = the previous frame's digest), queues the element's SHA of the
body (one command a call: start, updates, end, which also leaves the digest in TempKey), then
for the signed types a Sign, polled on later calls; a finished frame is logged whole (record
'F': digest, frame) before anyone may send it. Then, when no frame waits, the same service() makes
each finished frame a leaf of the shoe's log and signs its checkpoints (shoe/tree.py), one
element command a call too. The ring keeps the newest frames; older finished
ones are read back from the log's F records, so a host away for a whole shoe costs no memory. At
boot the app replays the log into `restore_body` / `restore_final`."""


from shoe import frames
from shoe.element import ElementError
from shoe.store import R_FINAL, R_INPUT, copy_into
from shoe.tree import Tree

try:
    from micropython import const
except ImportError:  # CPython (tests): const is only a compiler hint
    def const(x):  # type: ignore[misc]
        return x

_DIGEST = const(32)
_SLOT = const(232)  # one ring slot: digest(32), then the frame (frames.MAX_CHAINED)
_ELEMENT_RETRIES = const(3)  # failed element steps in a row while a card waits for a slot


class Outbox:
    def __init__(self, log, element=None, slots=8):
        self.log = log
        self.element = element
        self.slot = 0  # the element slot of the result key
        self.key_id = 0
        self.shoe = bytes(4)  # the shoe id's 4 bytes, as frames carry it (frames.shoe_bytes)
        self.boot = 0
        self.seq = 0  # the newest chained frame built
        self.done = 0  # the newest finished: digested, signed where due, logged whole
        self.digest = bytearray(_DIGEST)  # frame `done`'s digest: the next frame's chain
        self.acked = 0  # the host holds every frame up to this seq
        self.digesting = False  # the element digests frame done + 1 (a queued SHA)
        self.signing = False  # a Sign of frame done + 1 is queued in the element
        self._next = bytearray(_DIGEST)  # the digest of the frame being finished
        self._slots = slots
        # one block per slot, not one large block: small holes in a fragmented heap will do
        self._ring = [bytearray(_SLOT) for _ in range(slots)]
        self.building = self._ring[1 % slots]  # where begin() put the newest body
        self._len = bytearray(slots)  # the frame's length in its slot (its body's until finished)
        self._seq_in = [0] * slots  # the seq each slot holds (0: none)
        self.other = None  # ends another's job in the element (the command port's check)
        self.tree = Tree()  # the shoe's log: its right edge, its checkpoints
        # squeeze: the digest of frame `mark` (the last before a hold), kept as it is finished,
        # for what the shoe says while the frames after it are withheld (app._newest)
        self.mark = 0
        self.mark_digest = bytearray(_DIGEST)

    # ---- where a frame lives ------------------------------------------------------------------
    def buf(self, seq):
        """The ring slot that holds frame `seq` (when in_ram): digest(32), then the frame."""
        return self._ring[seq % self._slots]

    def at(self, seq):
        """The frame's offset in its slot (its digest, once finished, is the 32 bytes before)."""
        return _DIGEST

    def length(self, seq):
        return self._len[seq % self._slots]

    def in_ram(self, seq):
        return self._seq_in[seq % self._slots] == seq

    # ---- card time: bodies ----------------------------------------------------------------------
    def begin(self, ftype):
        """A new chained frame's header in the next slot (`building`); its payload goes at the
        offset returned, then `end(payload length)`. Allocation-free."""
        seq = self.seq + 1
        old = self._seq_in[seq % self._slots]
        tree = self.tree
        failures = 0
        while old > self.done or (old > tree.size and not tree.lost):
            # Every slot holds a frame not finished, or not yet a leaf of the log: the element
            # has fallen far behind (or is failing). Finish the oldest now rather than lose it
            # (never starting a checkpoint meanwhile: its Sign would keep the card waiting).
            try:
                self._waited(False)
                failures = 0
            except ElementError:
                # a step the element failed (its answer lost to its watchdog while the MCU was
                # held up, bus noise) starts again, as on a service pass; only an element that
                # keeps failing ends in the reset
                failures += 1
                if failures == _ELEMENT_RETRIES:
                    raise
        buf = self.building = self._ring[seq % self._slots]
        frames.head_into(buf, _DIGEST, ftype, self.key_id, self.shoe, self.boot, seq)
        return _DIGEST + frames.HEADER_LEN

    def end(self, n):
        seq = self.seq + 1
        i = seq % self._slots
        self._len[i] = frames.HEADER_LEN + n
        self._seq_in[i] = seq
        self.seq = seq
        return seq

    def commit(self, kind, arg, arg2, first):
        """One log record: an input (kind, arg, arg2; kind 0: none, a frame of the shoe's own) and
        the bodies of the frames it produced, seq `first` to the newest. Allocation-free."""
        log = self.log
        rec = log.rec
        rec[3] = kind
        rec[4] = arg
        rec[5] = arg2
        p = 6
        for seq in range(first, self.seq + 1):
            n = self.length(seq)
            rec[p] = n
            copy_into(rec, p + 1, self.buf(seq), self.at(seq), n)
            p += 1 + n
        log.commit(R_INPUT, p - 3)

    # ---- outside the card path: finishing -------------------------------------------------------
    def service(self, sign=True):
        """One step of finishing the oldest unfinished frame (or of the log's work): at most one
        element command sent or answered, never a wait. Returns the seq finished by this step,
        or 0. `sign` False: no checkpoint is started (begin(), where a card waits)."""
        el = self.element
        seq = self.done + 1
        try:
            if self.signing:
                if not el.sign_ready(self.buf(seq), _DIGEST + self.length(seq)):
                    return 0
                self.signing = False
                return self._final(seq, frames.SIG_LEN)
            if self.digesting:
                if not el.sha_ready():
                    return 0
                self.digesting = False
                if not frames.signed(frames.type_of(self.buf(seq), _DIGEST)):
                    return self._final(seq, 0)  # initial_cards: sealed by the next frame
                el.sign_start(self.slot)  # signs TempKey, where the SHA end left the digest
                self.signing = True
                return 0
            tree = self.tree
            if tree.busy():
                tree.step(el, self.slot, self.key_id, self.boot)
                return 0
        except Exception:  # ElementError: this frame (or leaf) starts again on a later pass
            self.signing = self.digesting = False
            self.tree.abandon()
            raise
        # A checkpoint due is signed before the next frame is finished (at most one every
        # ROUNDS_PER_CHECKPOINT rounds, on the host's request or at shoe end: its Sign delays
        # frames by ~50 ms, never a card). Leaves take a pass with no frame to finish, or go
        # first once they lag half the ring: a card's begin() then never waits for a slot the
        # log still needs (only for the element itself, as before the log).
        signing = sign and tree.checkpoint_due()
        leaf = not tree.lost and tree.size < self.done and (
            seq > self.seq or self.done - tree.size >= self._slots // 2)
        if seq > self.seq and not leaf and not signing:
            return 0
        if self.other is not None and el.pending():
            self.other()  # a wait for the element (begin, finish_all): its job gives way
        if signing:
            tree.start_checkpoint(el, self.shoe)
            return 0
        if leaf:
            at = tree.size + 1
            tree.take(el, self.buf(at), _DIGEST, self.length(at))
            return 0
        ring = self.buf(seq)
        # The header is filled in now: the chain, and this boot's number and key (a body left
        # unfinished by a power cut is finished, and first sent, in a later boot).
        frames.head_into(ring, _DIGEST, frames.type_of(ring, _DIGEST), self.key_id,
                         self.shoe, self.boot, seq, self.digest)
        el.sha_queue(ring, _DIGEST, self.length(seq), self._next)
        self.digesting = True
        return 0

    def _final(self, seq, sig_len):
        i = seq % self._slots
        n = self._len[i] + sig_len
        ring = self._ring[i]
        ring[0:_DIGEST] = self._next
        log = self.log
        copy_into(log.rec, 3, ring, 0, _DIGEST + n)
        log.commit(R_FINAL, _DIGEST + n)  # logged whole before it counts as finished (and sent)
        # Only now does the slot hold a finished frame: a commit that raised left it a body, so
        # the next service() digests and signs that same body again.
        self._len[i] = n
        self.digest[0:_DIGEST] = self._next
        self.done = seq
        if seq == self.mark:
            self.mark_digest[0:_DIGEST] = self._next
        return seq

    def finish_all(self):
        """Finish every frame built so far, make each a leaf and sign a checkpoint due, waiting
        for the element (not for the card path)."""
        while self.done < self.seq or self.tree.due(self.done) or self.tree.busy():
            self._waited()

    def settle(self):
        """Wait for the frame (or leaf) the element is working on, so it is free for another
        job."""
        while self.signing or self.digesting or self.tree.busy():
            self._waited()

    def _waited(self, sign=True):
        """One step of service(), then, when it finished nothing, a nap until the element may
        answer: a loop that has to wait for the element sleeps instead of spinning the core."""
        if not self.service(sign) and self.element is not None:
            self.element.nap()

    def work(self):
        """The element has frames to finish or log work to do."""
        return self.done < self.seq or self.tree.due(self.done) or self.tree.busy()

    # ---- boot: the log replayed -----------------------------------------------------------------
    def restore_body(self, body):
        """An unfinished body from an input record."""
        seq = frames.seq_of(body)
        i = seq % self._slots
        n = len(body)
        self._ring[i][_DIGEST : _DIGEST + n] = body
        self._len[i] = n
        self._seq_in[i] = seq
        self.seq = seq

    def restore_final(self, record):
        """A finished frame from an F record (digest, frame)."""
        seq = frames.seq_of(record, _DIGEST)
        i = seq % self._slots
        n = len(record)
        self._ring[i][0:n] = record
        self._len[i] = n - _DIGEST
        self._seq_in[i] = seq
        self.digest[0:_DIGEST] = record[:_DIGEST]
        if seq == self.mark:
            self.mark_digest[0:_DIGEST] = self.digest
        self.done = seq
        if seq > self.seq:
            self.seq = seq
        self.tree.follow(memoryview(record)[_DIGEST:])

    def checkpoint(self, seq, digest):
        self.seq = self.done = seq
        self.digest[0:_DIGEST] = digest

    # ---- the host -------------------------------------------------------------------------------
    def ack(self, seq):
        """The host holds every frame up to `seq` durably (it can hold no unfinished one). True
        when that moves the acknowledgement forward."""
        seq = min(seq, self.done)
        if seq > self.acked:
            self.acked = seq
            return True
        return False

    def pending(self):
        return self.done > self.acked

    def unacknowledged(self, from_seq=0, to_seq=0):
        """Every finished, unacknowledged frame from `from_seq` (to `to_seq`), oldest first, as
        (buffer, offset, length): from the log's F records, then from RAM. The digest is the 32
        bytes before the offset."""
        start = max(self.acked + 1, from_seq)
        last = min(to_seq, self.done) if to_seq else self.done
        low = start
        while low <= last and not self.in_ram(low):
            low += 1
        if start < low:
            for rtype, payload in self.log.records():
                if rtype == R_FINAL:
                    seq = frames.seq_of(payload, _DIGEST)
                    if start <= seq < low:
                        start = seq + 1
                        yield payload, _DIGEST, len(payload) - _DIGEST
        for seq in range(low, last + 1):
            yield self.buf(seq), _DIGEST, self.length(seq)

    def frames(self, from_seq=0):
        """The same as bytes (tests)."""
        return [bytes(b[at : at + n]) for b, at, n in self.unacknowledged(from_seq)]


def resend(shoe, from_seq=0, to_seq=0):
    """Send again the finished, unacknowledged frames from `from_seq` (to `to_seq`), oldest
    first, up to a squeeze's hold (`shoe`: the dealing or the tilted shoe, with `outbox`,
    `hold_from`, `sent` and `send_frame`); `shoe.sent` follows. When every one is in the RAM ring
    (a host that keeps up) it allocates nothing: a hello's service() pass."""
    o = shoe.outbox
    seq = start = max(o.acked + 1, from_seq)
    last = min(to_seq, o.done) if to_seq else o.done
    while seq <= last and o.in_ram(seq):
        seq += 1
    if seq > last:
        seq = start
        while seq <= last and not (shoe.hold_from and seq >= shoe.hold_from):
            shoe.send_frame(o.buf(seq), _DIGEST, o.length(seq))
            if seq > shoe.sent:
                shoe.sent = seq
            seq += 1
    else:
        for buf, at, n in o.unacknowledged(from_seq, to_seq):
            seq = frames.seq_of(buf, at)
            if shoe.hold_from and seq >= shoe.hold_from:
                break
            shoe.send_frame(buf, at, n)
            if seq > shoe.sent:
                shoe.sent = seq
    if to_seq and shoe.sent < to_seq:
        shoe.sent = to_seq  # acknowledged meanwhile

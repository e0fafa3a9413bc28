"""The shoe's outbox: the chained frames it has sent and the host has not yet acknowledged.

It numbers and chains each new frame (seq, chain), keeps the newest in a fixed RAM ring and reads
older ones back from the flash log, so a host away for a whole shoe costs no memory. The flash log,
not RAM, is what makes a frame survive a power cut: at boot the app replays the log into
`remember`."""

import gc

from shoe import frames
from shoe.store import frames_in

try:
    from micropython import const
except ImportError:  # CPython (tests): const is only a compiler hint
    def const(x):  # type: ignore[misc]
        return x

_SLOT = const(114)  # frames.MAX_CHAINED: one ring slot


class Outbox:
    def __init__(self, log, signer=None, slots=8):
        self.log = log
        self.signer = signer
        self.seq = 0  # the newest chained frame's
        self.chain = bytes(frames.CHAIN_LEN)  # what the next chained frame carries
        self.acked = 0  # the host holds every frame up to this seq
        self._slots = slots
        gc.collect()  # the ring is the one large block: find it room before the heap fragments
        self._ring = bytearray(slots * _SLOT)
        self._len = bytearray(slots)
        self._seq_in = [0] * slots  # the seq each slot holds (0: none)
        self._low = 0  # the first seq kept in RAM since boot

    def chained(self, ftype, payload):
        """A new chained frame: the next seq, chained to the newest; held until acknowledged."""
        f = self.signer.frame(self.seq + 1, self.chain, ftype, payload)
        self.remember(f)
        return f

    def remember(self, frame):
        """A chained frame made earlier, read back from the flash log at boot (or just made)."""
        seq = frames.seq_of(frame)
        self.seq = seq
        self.chain = frames.link_of(frame)
        i = seq % self._slots
        at = i * _SLOT
        n = len(frame)
        self._ring[at : at + n] = frame
        self._len[i] = n
        self._seq_in[i] = seq
        if not self._low:
            self._low = seq

    def ack(self, seq):
        """The host holds every frame up to `seq` durably."""
        if seq > self.acked:
            self.acked = seq

    def pending(self):
        return self.seq > self.acked

    def _first_in_ram(self):
        return max(self.seq - self._slots + 1, self._low or self.seq + 1)

    def _from_ram(self, seq):
        i = seq % self._slots
        at = i * _SLOT
        return bytes(self._ring[at : at + self._len[i]])

    def unacknowledged(self, from_seq=0):
        """Every unacknowledged frame from `from_seq` on, oldest first: from the log, then RAM."""
        start = max(self.acked + 1, from_seq)
        in_ram = self._first_in_ram()
        if start < in_ram:
            for rtype, payload in self.log.records():
                for f in frames_in(rtype, payload):
                    seq = frames.seq_of(f)
                    if frames.is_chained(f) and start <= seq < in_ram:
                        start = seq + 1
                        yield f
        for seq in range(max(start, in_ram), self.seq + 1):
            yield self._from_ram(seq)

"""The shoe's own transparency log: every chained frame the shoe finishes is a leaf —
its exact bytes as sent — of one RFC 6962 Merkle tree for the shoe's whole life, leaf i being the
frame of seq i + 1. The shoe keeps only the tree's right edge: the roots of its perfect
subtrees, largest first, one per set bit of the size (at most 30: seq stays below 2**30).

The element signs C2SP checkpoints of that tree (`tlog-checkpoint`: origin, size, root) as
signed notes of type 0x02: ECDSA P-256 over SHA-256 of the note text

    sabot.shoe/<shoe id, 8 hex digits>\\n<size>\\n<base64 of the root>\\n

with the shoe's result key. The text begins with 's' (0x73) where every frame body begins with
its version byte (0x02), so no frame's digest is a checkpoint's and no checkpoint's is a frame's
(short of a SHA-256 collision): a frame signature cannot pass for a checkpoint signature, nor
the reverse. A checkpoint frame (T_CHECKPOINT, not chained) carries the size in its seq, a zero
chain (the signature does not cover the header: nothing unsigned is carried), the root as its
payload and that signature.

Hashes come from the element, one SHA at a time from the outbox's service(), output only (TempKey,
where a frame's digest waits for its Sign, is left alone), so the card path stays
allocation-free; at boot and at a compaction, where allocating is allowed, from hashlib. The edge
survives power loss without a record of its own: it is the compaction's R_TREE records plus every
finished frame logged after them (R_FINAL), replayed at boot."""

import hashlib

from shoe import frames
from shoe.store import copy_into

try:
    from micropython import const
except ImportError:  # CPython (tests): const is only a compiler hint
    def const(x):  # type: ignore[misc]
        return x

MAX_EDGE = const(30)
EDGE_PER_RECORD = const(16)  # an R_TREE record: size(4) first(1) then up to 16 hashes
ROUNDS_PER_CHECKPOINT = const(10)  # the shoe signs a checkpoint every 10 results, and at shoe end
CHECKPOINT_LEN = const(142)  # header(46) root(32) signature(64)
_H = const(32)
_B64 = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_HEX = b"0123456789abcdef"
_ORIGIN = b"sabot.shoe/"
# element steps
_IDLE = const(0)
_LEAF = const(1)  # a leaf's hash, then its merges with the edge, queued one at a time
_FOLD = const(2)  # the root: the edge folded from the right, one node hash at a time
_TEXT = const(3)  # the note text's SHA (into TempKey)
_SIGN = const(4)  # its Sign


def _trailing_ones(n):
    k = 0
    while n & 1:
        n >>= 1
        k += 1
    return k


def note_text_into(buf, shoe, size, root):
    """A checkpoint's note text (origin from `shoe`, the shoe id's 4 bytes; `size`; `root`) at
    buf[0:] (96 bytes hold any); its length. Allocation-free (digits and base64 by hand)."""
    i = 0
    for b in _ORIGIN:
        buf[i] = b
        i += 1
    for k in range(4):
        b = shoe[k]
        buf[i] = _HEX[b >> 4]
        buf[i + 1] = _HEX[b & 15]
        i += 2
    buf[i] = 10
    i += 1
    n = size
    digits = 1
    m = n
    while m >= 10:  # (10 ** 10 would be a long int on a 32-bit port)
        m //= 10
        digits += 1
    for k in range(digits - 1, -1, -1):
        buf[i + k] = 48 + n % 10
        n //= 10
    i += digits
    buf[i] = 10
    i += 1
    for k in range(0, 30, 3):  # 32 bytes: ten groups of three, then two and '='
        v = root[k] << 16 | root[k + 1] << 8 | root[k + 2]
        buf[i] = _B64[v >> 18]
        buf[i + 1] = _B64[v >> 12 & 63]
        buf[i + 2] = _B64[v >> 6 & 63]
        buf[i + 3] = _B64[v & 63]
        i += 4
    v = root[30] << 8 | root[31]
    buf[i] = _B64[v >> 10]
    buf[i + 1] = _B64[v >> 4 & 63]
    buf[i + 2] = _B64[v << 2 & 63]
    buf[i + 3] = 61  # '='
    buf[i + 4] = 10
    return i + 5


class Tree:
    def __init__(self):
        self.shoe = bytes(4)  # the shoe id's 4 bytes (frames.shoe_bytes), for the origin
        self.size = 0
        self.count = 0  # hashes in the edge
        self.edge = bytearray(MAX_EDGE * _H)
        self.lost = False  # a log older than the tree (see follow): no checkpoints are signed
        self.want = False  # a checkpoint is due once the tree holds every finished frame
        self.results = 0  # results since the last checkpoint
        # the checkpoint frame last signed (its size, 0 none) and whether it waits to be sent
        self.frame = bytearray(CHECKPOINT_LEN)
        self.signed_size = 0
        self.unsent = False
        self._leaf = bytearray(1 + frames.MAX_CHAINED)  # 0x00 || frame
        self._node = bytearray(1 + 2 * _H)  # 0x01 || left || right
        self._cur = bytearray(_H)
        self._text = bytearray(96)
        self._digest = bytearray(_H)
        self._step = _IDLE
        self._merges = 0
        self._merged = 0
        self._at = 0  # _FOLD: the edge hash folded next
        self._ftype = 0  # _LEAF: the type of the frame being made a leaf
        self._n = 0  # _TEXT, _SIGN: the text's length

    # ---- the element's steps (outbox.service) -------------------------------------------------
    def busy(self):
        """An element command of the tree's is under way."""
        return self._step != _IDLE

    def due(self, done):
        """Work for the element: frames finished but not yet leaves, or a checkpoint wanted."""
        return (self.size < done and not self.lost) or self.checkpoint_due()

    def checkpoint_due(self):
        """A checkpoint is wanted and the tree has grown since the last one signed."""
        return self.want and not self.lost and self.size > 0 and self.signed_size != self.size

    def take(self, el, buf, at, n):
        """Start frame `size + 1` (its exact bytes buf[at:at + n]) as the next leaf."""
        self._ftype = buf[at + 1]  # counted once the leaf is in (a step that failed: again)
        leaf = self._leaf
        leaf[0] = 0
        copy_into(leaf, 1, buf, at, n)
        self._merges = _trailing_ones(self.size)
        self._merged = 0
        el.sha_queue(leaf, 0, n + 1, self._cur, False)
        self._step = _LEAF

    def start_checkpoint(self, el, shoe):
        """Fold the edge into the root (the tree holds every finished frame; `shoe`: the shoe
        id's 4 bytes)."""
        self.shoe = shoe
        self.want = False
        self.results = 0
        if self.count == 0:
            return  # nothing dealt yet: no log to sign
        if self.count == 1:
            copy_into(self._cur, 0, self.edge, 0, _H)
            self._text_queue(el)
            return
        copy_into(self._cur, 0, self.edge, (self.count - 1) * _H, _H)
        self._at = self.count - 2
        self._node_queue(el, self._at)
        self._step = _FOLD

    def step(self, el, slot, key_id, boot):
        """One step of the command under way. True when a leaf was added."""
        st = self._step
        if st == _SIGN:
            if el.sign_ready(self.frame, frames.HEADER_LEN + _H):
                self._step = _IDLE
                frames.head_into(self.frame, 0, frames.T_CHECKPOINT, key_id, self.shoe, boot,
                                 self.size)
                self.frame[frames.HEADER_LEN : frames.HEADER_LEN + _H] = self._cur
                self.signed_size = self.size
                self.unsent = True
            return False
        if not el.sha_ready():
            return False
        if st == _TEXT:
            el.sign_start(slot)  # at once: nothing else may take TempKey between
            self._step = _SIGN
            return False
        if st == _FOLD:
            self._at -= 1
            if self._at >= 0:
                self._node_queue(el, self._at)
            else:
                self._text_queue(el)
            return False
        # _LEAF: the leaf's or a merge's hash is in _cur
        if self._merged < self._merges:
            self._merged += 1
            self._node_queue(el, self.count - self._merged)
            return False
        self._step = _IDLE
        self._push()
        if self._ftype == frames.T_RESULT:
            self.results += 1
            if self.results >= ROUNDS_PER_CHECKPOINT:
                self.want = True
        elif self._ftype == frames.T_SHOE_END:
            self.want = True
        return True

    def abandon(self):
        """An element step failed (ElementError): the step starts again (the leaf from its
        frame, the checkpoint from its fold) on a later pass."""
        if self._step >= _FOLD:
            self.want = True
        self._step = _IDLE

    def _node_queue(self, el, i):
        """H(0x01 || edge[i] || _cur) into _cur."""
        node = self._node
        node[0] = 1
        copy_into(node, 1, self.edge, i * _H, _H)
        copy_into(node, 1 + _H, self._cur, 0, _H)
        el.sha_queue(node, 0, 1 + 2 * _H, self._cur, False)

    def _push(self):
        """_cur (the new leaf merged with the edge's last `_merges` hashes) becomes the edge's
        last hash."""
        self.count = self.count - self._merges + 1
        copy_into(self.edge, (self.count - 1) * _H, self._cur, 0, _H)
        self.size += 1

    def _text_queue(self, el):
        self._n = self.text_into(self._text, self._cur)
        el.sha_queue(self._text, 0, self._n, self._digest, True)
        self._step = _TEXT

    def text_into(self, buf, root):
        """The checkpoint's note text for this size and `root` at buf[0:]; its length."""
        return note_text_into(buf, self.shoe, self.size, root)

    # ---- boot and compaction: hashlib ---------------------------------------------------------
    def follow(self, frame):
        """A finished frame (its exact bytes) replayed from the log: the next leaf if it is one
        the tree lacks. A log that skips leaves is older than the tree (a shoe updated from
        firmware without one): no checkpoint is signed then, rather than a wrong one."""
        seq = frames.seq_of(frame)
        if self.lost or seq <= self.size:
            return
        if seq != self.size + 1:
            self.lost = True
            return
        self._cur[0:_H] = hashlib.sha256(b"\x00" + bytes(frame)).digest()
        self._merges = _trailing_ones(self.size)
        for m in range(1, self._merges + 1):
            i = (self.count - m) * _H
            self._cur[0:_H] = hashlib.sha256(b"\x01" + bytes(self.edge[i : i + _H])
                                             + bytes(self._cur)).digest()
        self._push()

    def load(self, payload):
        """An R_TREE record: size(4), the index of its first hash, then hashes."""
        size = frames.seq_at(payload, 0)
        first = payload[4]
        n = (len(payload) - 5) // _H
        self.size = size
        self.count = first + n
        self.edge[first * _H : (first + n) * _H] = payload[5 : 5 + n * _H]

    def records(self):
        """The edge as R_TREE payloads (a compaction carries them over)."""
        first = 0
        size = self.size.to_bytes(4, "big")
        while True:
            n = min(EDGE_PER_RECORD, self.count - first)
            yield size + bytes((first,)) + bytes(self.edge[first * _H : (first + n) * _H])
            first += n
            if first >= self.count:
                return

"""A shoe's transparency log: the Merkle tree of RFC 6962 (section 2.1; RFC 9162 section 2.1
for the proofs' verification) over the shoe's frames, and its C2SP tlog-checkpoint.

No maintained Python library implements these; they are small, and this one is cross-checked
against Go's golang.org/x/mod/sumdb/tlog (tests/test_tlog.py) and the RFC's own tree shapes.

- A leaf is a frame's exact bytes; its hash SHA-256(0x00 || leaf), an inner node's
  SHA-256(0x01 || left || right).
- `RightEdge` is what a log's writer keeps to append and compute the root without the leaves:
  the roots of the perfect subtrees the tree is made of, largest first (at most log2(n) + 1
  hashes), as the shoe keeps it in its flash.
- Proofs are made here from the leaf hashes (the host has them all: the audit store), and
  checked with nothing but the proof, the sizes and the roots.
- A checkpoint is the note text "<origin>\\n<size>\\n<base64 root>\\n" (extension lines after);
  signing it is sabot/note.py's."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence

from sabot.errors import SabotError

HASH_SIZE = 32
EMPTY_ROOT = hashlib.sha256(b"").digest()  # RFC 6962: the root of the empty tree
MAX_PROOF = 63  # hashes in any proof of a tree of up to 2^63 leaves (tlog-witness's limit)


def leaf_hash(leaf: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + leaf).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two smaller than n (n > 1): where RFC 6962 splits a tree of n."""
    return 1 << ((n - 1).bit_length() - 1)


def root(hashes: Sequence[bytes]) -> bytes:
    """The tree head of the leaves whose hashes these are (RFC 6962 MTH)."""
    if not hashes:
        return EMPTY_ROOT
    edge = RightEdge()
    for h in hashes:
        edge.append_hash(h)
    return edge.root()


def _subtree(hashes: Sequence[bytes], lo: int, hi: int) -> bytes:
    n = hi - lo
    if n == 1:
        return hashes[lo]
    k = _split(n)
    return node_hash(_subtree(hashes, lo, lo + k), _subtree(hashes, lo + k, hi))


class RightEdge:
    """The roots of the perfect subtrees a tree of `size` leaves is made of, largest first:
    enough to append a leaf and give the root, O(log n) hashes kept."""

    def __init__(self, size: int = 0, hashes: Sequence[bytes] = ()) -> None:
        if len(hashes) != bin(size).count("1"):
            raise SabotError(f"a right edge of {size} leaves holds {bin(size).count('1')} "
                             f"hashes, not {len(hashes)}")
        self.size = size
        self.hashes = list(hashes)

    def append(self, leaf: bytes) -> None:
        self.append_hash(leaf_hash(leaf))

    def append_hash(self, h: bytes) -> None:
        # each trailing 1 bit of the old size is a perfect subtree the new leaf completes
        size = self.size
        while size & 1:
            h = node_hash(self.hashes.pop(), h)
            size >>= 1
        self.hashes.append(h)
        self.size += 1

    def root(self) -> bytes:
        if not self.hashes:
            return EMPTY_ROOT
        h = self.hashes[-1]
        for left in reversed(self.hashes[:-1]):
            h = node_hash(left, h)
        return h


class Prefix:
    """A log's leaves as a verifier holds them, from leaf 0 on for as long as none is missing
    (a shoe's chained frames from seq 1: leaf i is seq i + 1): the root at any size within them,
    the newest in O(log n)."""

    def __init__(self) -> None:
        self.hashes: list[bytes] = []
        self.edge = RightEdge()

    def add(self, index: int, leaf: bytes) -> None:
        """Leaf `index`'s bytes: taken when it is the next one (a leaf after a missing one never
        is: the prefix ends there)."""
        if index == len(self.hashes):
            h = leaf_hash(leaf)
            self.hashes.append(h)
            self.edge.append_hash(h)

    def root_at(self, size: int) -> bytes | None:
        """The root of the tree of the first `size` leaves; None when they are not all held."""
        if size < 1 or size > len(self.hashes):
            return None
        return self.edge.root() if size == len(self.hashes) else root(self.hashes[:size])

    def cut(self, size: int) -> None:
        """Forget every leaf from `size` on (a batch that was not stored)."""
        if size < len(self.hashes):
            del self.hashes[size:]
            self.edge = RightEdge()
            for h in self.hashes:
                self.edge.append_hash(h)


# ---- proofs ------------------------------------------------------------------------------------
def inclusion_proof(hashes: Sequence[bytes], index: int, size: int | None = None) -> list[bytes]:
    """The audit path of leaf `index` in the tree of the first `size` leaves (RFC 6962 PATH)."""
    size = len(hashes) if size is None else size
    if not 0 <= index < size <= len(hashes):
        raise SabotError(f"no leaf {index} in a tree of {size}")
    return _path(hashes, index, 0, size)


def _path(hashes: Sequence[bytes], m: int, lo: int, hi: int) -> list[bytes]:
    n = hi - lo
    if n == 1:
        return []
    k = _split(n)
    if m < k:
        return _path(hashes, m, lo, lo + k) + [_subtree(hashes, lo + k, hi)]
    return _path(hashes, m - k, lo + k, hi) + [_subtree(hashes, lo, lo + k)]


def consistency_proof(hashes: Sequence[bytes], old: int, size: int | None = None) -> list[bytes]:
    """The proof that the tree of `old` leaves is a prefix of the tree of `size` (RFC 6962
    PROOF); empty when old is 0 or old == size."""
    size = len(hashes) if size is None else size
    if not 0 <= old <= size <= len(hashes):
        raise SabotError(f"no consistency proof from {old} to {size} leaves")
    if old in (0, size):
        return []
    return _subproof(hashes, old, 0, size, True)


def _subproof(hashes: Sequence[bytes], m: int, lo: int, hi: int, whole: bool) -> list[bytes]:
    n = hi - lo
    if m == n:
        return [] if whole else [_subtree(hashes, lo, hi)]
    k = _split(n)
    if m <= k:
        return _subproof(hashes, m, lo, lo + k, whole) + [_subtree(hashes, lo + k, hi)]
    return _subproof(hashes, m - k, lo + k, hi, False) + [_subtree(hashes, lo, lo + k)]


def verify_inclusion(leaf_h: bytes, index: int, size: int, proof: Sequence[bytes],
                     root_h: bytes) -> bool:
    """RFC 9162 2.1.3.2: whether the leaf with hash `leaf_h` is leaf `index` of the tree of
    `size` leaves whose root is `root_h`."""
    if not 0 <= index < size or len(proof) > MAX_PROOF:
        return False
    fn, sn, r = index, size - 1, leaf_h
    for p in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root_h


def verify_consistency(old: int, old_root: bytes, size: int, new_root: bytes,
                       proof: Sequence[bytes]) -> bool:
    """RFC 9162 2.1.4.2: whether the tree of `old` leaves with `old_root` is a prefix of the
    tree of `size` leaves with `new_root`."""
    if not 0 <= old <= size or len(proof) > MAX_PROOF:
        return False
    if old == size:  # first: a tree of 0 leaves has one root, EMPTY_ROOT
        return not proof and old_root == new_root
    if old == 0:
        return not proof  # every tree extends the empty one
    if not proof:
        return False
    path = list(proof)
    if old & (old - 1) == 0:  # a power of two: the old root is the path's first node
        path.insert(0, old_root)
    fn, sn = old - 1, size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return sn == 0 and fr == old_root and sr == new_root


# ---- checkpoints (C2SP tlog-checkpoint) --------------------------------------------------------
class Checkpoint:
    """A log's signed tree head, as note text: origin, size, root (and extension lines)."""

    def __init__(self, origin: str, size: int, root_h: bytes,
                 extensions: Sequence[str] = ()) -> None:
        self.origin, self.size, self.root, self.extensions = origin, size, root_h, list(extensions)

    def text(self) -> str:
        return "".join(f"{line}\n" for line in (self.origin, str(self.size),
                                                base64.b64encode(self.root).decode(),
                                                *self.extensions))

    @classmethod
    def parse(cls, text: str) -> Checkpoint:
        """A checkpoint's note text (signatures already split off): a SabotError naming what is
        wrong with one that is not."""
        if not text.endswith("\n"):
            raise SabotError("a checkpoint ends with a newline")
        lines = text[:-1].split("\n")
        if len(lines) < 3:
            raise SabotError("a checkpoint has an origin, a size and a root hash line")
        origin, size, root_b64, *ext = lines
        if not origin or any(not line for line in ext):
            raise SabotError("a checkpoint's origin and extension lines are not empty")
        # C2SP: a uint64 (its length checked first: int() of over 4300 digits raises)
        if not size.isdigit() or (size != "0" and size.startswith("0")) or not size.isascii() \
                or len(size) > 20 or int(size) >= 2**64:
            raise SabotError(f"a checkpoint's size is a decimal number, not {size!r}")
        try:
            h = base64.b64decode(root_b64, validate=True)
        except ValueError:
            h = b""
        if len(h) != HASH_SIZE or base64.b64encode(h).decode() != root_b64:
            raise SabotError("a checkpoint's root hash is 32 bytes of standard base64")
        return cls(origin, int(size), h, ext)


# ---- tiles (C2SP tlog-tiles) ---------------------------------------------------------------
TILE_WIDTH = 256  # hashes (or entries) in a full tile: tiles are 8 levels of the tree high


def tile_path(level: int, index: int, width: int = TILE_WIDTH, entries: bool = False) -> str:
    """tile/<L>/<N>[.p/<W>] (entries: tile/entries/<N>[.p/<W>]); N as 3-digit elements, all
    but the last prefixed with x (1234067: x001/x234/067)."""
    digits = f"{index:03d}"
    digits = "0" * (-len(digits) % 3) + digits
    parts = [digits[i:i + 3] for i in range(0, len(digits), 3)]
    n = "/".join([*(f"x{p}" for p in parts[:-1]), parts[-1]])
    head = "tile/entries" if entries else f"tile/{level}"
    return f"{head}/{n}" + (f".p/{width}" if width != TILE_WIDTH else "")


def parse_tile_path(path: str) -> tuple[int | None, int, int] | None:
    """(level, or None for an entry bundle; index; width) of a tile path; None for what is not
    one (C2SP: no leading zeros beyond the 3 digits, widths 1-255 only as .p/<W>)."""
    parts = path.split("/")
    if len(parts) < 3 or parts[0] != "tile":
        return None
    level: int | None
    if parts[1] == "entries":
        level = None
    elif parts[1].isdigit() and parts[1].isascii() and (parts[1] == "0" or parts[1][0] != "0") \
            and int(parts[1]) <= 63:
        level = int(parts[1])
    else:
        return None
    rest = parts[2:]
    width = TILE_WIDTH
    if len(rest) >= 2 and rest[-2].endswith(".p"):
        w = rest[-1]
        if not (w.isdigit() and w.isascii() and w[0] != "0" and 1 <= int(w) < TILE_WIDTH):
            return None
        width = int(w)
        rest = [*rest[:-2], rest[-2][:-2]]
    if not rest or len(rest) > 8:
        return None
    *prefix, last = rest
    if not all(len(p) == 4 and p[0] == "x" and p[1:].isdigit() for p in prefix) or not (
            len(last) == 3 and last.isdigit()) or (prefix and prefix[0] == "x000"):
        return None
    return level, int("".join(p[1:] for p in prefix) + last), width


def tile(hashes: Sequence[bytes], size: int, level: int, index: int, width: int) -> bytes | None:
    """The level-`level` tile `index`, `width` hashes wide, of the tree of the first `size`
    leaves: the hashes of its subtrees of 256**level leaves, numbers 256*index on; None when
    the tree does not hold that many of them yet."""
    span = TILE_WIDTH ** level
    first = index * TILE_WIDTH
    if (first + width) * span > size:
        return None
    return b"".join(_subtree(hashes, k * span, (k + 1) * span)
                    for k in range(first, first + width))


def entry_bundle(entries: Sequence[bytes], size: int, index: int, width: int) -> bytes | None:
    """Entries 256*index on, `width` of them, each a big-endian uint16 length then its bytes."""
    first = index * TILE_WIDTH
    if first + width > min(size, len(entries)):
        return None
    return b"".join(len(e).to_bytes(2, "big") + e for e in entries[first:first + width])


def add_checkpoint_body(old: int, proof: Sequence[bytes], signed: str) -> bytes:
    """A tlog-witness add-checkpoint request: "old N", the consistency proof's hashes, an empty
    line, the signed checkpoint."""
    return ("".join([f"old {old}\n", *(base64.b64encode(h).decode() + "\n" for h in proof),
                     "\n", signed])).encode()


def origin(shoe_id: int) -> str:
    """The origin line of a shoe's log: it names the shoe (a schema-less name, as C2SP asks)."""
    return f"sabot.shoe/{shoe_id:08x}"

"""Firmware integrity: a digest of the shoe's code tree, checked at boot against the MANIFEST
written at build time, and a seeded HMAC of the same tree for a regulator's challenge (`sabot
verify-firmware`).

MANIFEST is four lines: the tree digest (hex), the firmware version (decimal), the board it is
built for (rpi_pico, esp32, virtual), then the release key's ECDSA P-256 signature (r||s, 128 hex
digits) over SHA-256("sabot-manifest" version(4, big-endian) len(board)(1) board digest(32)).
The boot check wants all: the digest must match the tree and the secure element must find the
signature good under the release key built into the tree (shoe/release.py; Verify external). A
tree anyone could rebuild with its own MANIFEST is then no certified code.

The version is the anti-rollback: an old build, genuinely signed, may hold what a later one took
out (the maintenance command that once handed the port to the REPL). The shoe keeps the highest
version it has run in its element's monotonic counter 1 (`keep_floor`: raised at boot, never
lowered, not even by a reflash) and takes no update older than that (shoe/update.py); a MANIFEST
without a version, as every build before the update channel had, is malformed. The board is the
other half: a build for another board would not boot, and a provisioned shoe has no REPL to
recover it, so the shoe takes no update built for another board than the one it runs.

The tree is every file under the code root except the data directory, MANIFEST itself and the
build's UPDATE (the release key's signature over the head of the update stream, which holds
MANIFEST: data, never imported); nothing else is left out (a planted .py beside a .mpy would
shadow it). Canonical form, in byte order of the paths: path, a zero byte, the length (4 bytes,
big-endian), the content."""

import hashlib
import os
import struct
from binascii import unhexlify

from shoe.hmac256 import HmacKey

MANIFEST = "MANIFEST"
UPDATE = "UPDATE"  # the build's signed update head (shoe/update.py): in no digest, never streamed


def code_files(root, skip=()):
    out = []
    base = root.rstrip("/")

    def walk(rel):
        for entry in os.ilistdir(base + "/" + rel if rel else base or "/"):
            name, kind = entry[0], entry[1]
            path = rel + "/" + name if rel else name
            if path in skip or path == MANIFEST or path == UPDATE or name.endswith(".tmp"):
                continue
            if kind == 0x4000:
                walk(path)
            else:
                out.append(path)

    walk("")
    out.sort()
    return out


def _feed(h, root, skip):
    buf = bytearray(512)
    base = root.rstrip("/")
    for path in code_files(root, skip):
        size = os.stat(base + "/" + path)[6]
        h.update(path.encode() + b"\x00" + struct.pack(">I", size))
        with open(base + "/" + path, "rb") as f:
            while True:
                n = f.readinto(buf)
                if not n:
                    break
                h.update(memoryview(buf)[:n])


def digest(root, skip=()):
    h = hashlib.sha256()
    _feed(h, root, skip)
    return h.digest()


def seeded(seed, root, skip=()):
    """HMAC-SHA256(seed, code tree): a fresh seed makes a recorded answer useless."""
    h = HmacKey(seed).stream()
    _feed(h, root, skip)
    return h.digest()


_FLOOR_COUNTER = 1  # the element's monotonic counter that holds the highest version run


def manifest(root):
    """(tree digest hex, version, board, signature hex) from root's MANIFEST; None when there is
    none or it is malformed."""
    try:
        with open(root.rstrip("/") + "/" + MANIFEST) as f:
            lines = f.read().split()
    except OSError:
        return None
    if len(lines) != 4 or len(lines[0]) != 64 or len(lines[3]) != 128 or not lines[1].isdigit():
        return None
    version = int(lines[1])
    if not 1 <= version < 1 << 21 or not 1 <= len(lines[2]) <= 32:  # the counter's range
        return None
    return lines[0].lower(), version, lines[2], lines[3]


def signed_digest(version, board, tree_digest):
    """What the release key signs: SHA-256("sabot-manifest" version(4) len(board)(1) board
    tree digest(32))."""
    b = board.encode()
    return hashlib.sha256(b"sabot-manifest" + struct.pack(">IB", version, len(b)) + b
                          + tree_digest).digest()


def update_digest(version, board, length, head):
    """What the release key signs for an update's stream (the build's `UPDATE`):
    SHA-256("sabot-update" version(4) len(board)(1) board length(4) chain head(32))."""
    b = bytes(board)
    return hashlib.sha256(b"sabot-update" + struct.pack(">IB", version, len(b)) + b
                          + struct.pack(">I", length) + bytes(head)).digest()


def check(root, skip=(), element=None):
    """None when the code matches its MANIFEST and the MANIFEST carries the release key's
    signature, else the reason for the tilt."""
    m = manifest(root)
    if m is None:
        try:
            open(root.rstrip("/") + "/" + MANIFEST).close()
        except OSError:
            return "no MANIFEST"
        return "MANIFEST malformed"
    got = digest(root, skip)
    if "".join("%02x" % b for b in got) != m[0]:
        return "code differs from MANIFEST"
    from shoe import release

    if release.PUBLIC_KEY is None:
        return "no release key in the tree"
    if element is None:
        return "no secure element to check the MANIFEST signature"
    try:
        ok = element.verify_external(signed_digest(m[1], m[2], got), unhexlify(m[3]),
                                     release.PUBLIC_KEY)
    except Exception:
        return "secure element error checking the MANIFEST"
    return None if ok else "MANIFEST signature invalid"


def floor(element):
    """The highest firmware version this shoe has run (0: none recorded yet)."""
    return element.counter(_FLOOR_COUNTER)


def keep_floor(root, element):
    """At boot, once check() passed: None, the element's floor raised to this tree's version;
    else the reason for the tilt (the tree is older than what the shoe has run)."""
    version = manifest(root)[1]
    have = element.counter(_FLOOR_COUNTER)
    if version < have:
        return "firmware version %d is older than version %d this shoe has run" % (version, have)
    while have < version:
        have = element.counter_increment(_FLOOR_COUNTER)
    return None

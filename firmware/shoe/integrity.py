"""Firmware integrity: a digest of the shoe's code tree, checked at boot against the MANIFEST
written at build time, and a seeded HMAC of the same tree for a regulator's challenge (`sabot
verify-firmware`).

The tree is every file under the code root except the data directory and MANIFEST itself (a planted
.py beside a .mpy would shadow it, so nothing is left out). Canonical form, in byte order of the
paths: path, a zero byte, the length (4 bytes, big-endian), the content."""

import hashlib
import os
import struct

from shoe.hmac256 import HmacKey

MANIFEST = "MANIFEST"


def code_files(root, skip=()):
    out = []
    base = root.rstrip("/")

    def walk(rel):
        for entry in os.ilistdir(base + "/" + rel if rel else base or "/"):
            name, kind = entry[0], entry[1]
            path = rel + "/" + name if rel else name
            if path in skip or path == MANIFEST or name.endswith(".tmp"):
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


def check(root, skip=()):
    """None when the code matches its MANIFEST, else the reason for the tilt."""
    try:
        with open(root.rstrip("/") + "/" + MANIFEST) as f:
            want = f.read().strip()
    except OSError:
        return "no MANIFEST"
    got = "".join("%02x" % b for b in digest(root, skip))
    return None if got == want else "code differs from MANIFEST"

"""Firmware integrity: a digest of the shoe's code tree, checked at boot against the MANIFEST
written at build time, and a seeded HMAC of the same tree for a regulator's challenge (`sabot
verify-firmware`).

MANIFEST is two lines: the tree digest (hex), then the release key's ECDSA P-256 signature (r||s,
128 hex digits) over that digest used directly as the message digest. The boot check wants both:
the digest must match the tree and the secure element must find the signature good under the
release key built into the tree (shoe/release.py; Verify external). A tree anyone could rebuild
with its own MANIFEST is then no certified code.

The tree is every file under the code root except the data directory and MANIFEST itself (a planted
.py beside a .mpy would shadow it, so nothing is left out). Canonical form, in byte order of the
paths: path, a zero byte, the length (4 bytes, big-endian), the content."""

import hashlib
import os
import struct
from binascii import unhexlify

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


def check(root, skip=(), element=None):
    """None when the code matches its MANIFEST and the MANIFEST carries the release key's
    signature, else the reason for the tilt."""
    try:
        with open(root.rstrip("/") + "/" + MANIFEST) as f:
            lines = f.read().split()
    except OSError:
        return "no MANIFEST"
    if len(lines) != 2 or len(lines[0]) != 64 or len(lines[1]) != 128:
        return "MANIFEST malformed"
    got = digest(root, skip)
    if "".join("%02x" % b for b in got) != lines[0].lower():
        return "code differs from MANIFEST"
    from shoe import release

    if release.PUBLIC_KEY is None:
        return "no release key in the tree"
    if element is None:
        return "no secure element to check the MANIFEST signature"
    try:
        ok = element.verify_external(got, unhexlify(lines[1]), release.PUBLIC_KEY)
    except Exception:
        return "secure element error checking the MANIFEST"
    return None if ok else "MANIFEST signature invalid"

"""C2SP signed notes (signed-note), verifier keys (vkeys) and witness cosignatures
(tlog-cosignature), on pyca/cryptography.

A note is text ending in a newline, a blank line, then signature lines "— <name>
base64(key ID || signature)". Three signature types are used here:
- 0x01 Ed25519 over the text (a plain note; what Go's sumdb/note verifies);
- 0x02 ECDSA P-256 over SHA-256 of the text, DER-encoded (a shoe's checkpoint, signed by its
  element), key ID the first four bytes of SHA-256 of the key's DER SubjectPublicKeyInfo;
- 0x04 a witness's timestamped Ed25519 cosignature: the 8-byte big-endian time, then an Ed25519
  signature over "cosignature/v1\\ntime <T>\\n" followed by the checkpoint's text.
Other key IDs are SHA-256(name || 0x0A || type || public key)[:4]. A vkey is
"<name>+<hex key ID>+<base64(type || public key)>"."""

from __future__ import annotations

import base64
import hashlib
import struct
import time
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from sabot.errors import SabotError

ED25519, ECDSA, COSIGNATURE = 0x01, 0x02, 0x04
DASH = "\u2014"
MAX_SIGNATURES = 32  # a note with more is refused (C2SP: accept at least 16)


def _raw(pub: ed25519.Ed25519PublicKey) -> bytes:
    return pub.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _spki(pub: ec.EllipticCurvePublicKey) -> bytes:
    return pub.public_bytes(serialization.Encoding.DER,
                            serialization.PublicFormat.SubjectPublicKeyInfo)


def key_id(name: str, kind: int, public: bytes) -> int:
    if kind == ECDSA:  # signed-note: the hash of the DER SubjectPublicKeyInfo alone
        return int.from_bytes(hashlib.sha256(public).digest()[:4], "big")
    return int.from_bytes(hashlib.sha256(name.encode() + b"\n" + bytes([kind]) + public)
                          .digest()[:4], "big")


def check_name(name: str) -> str:
    if not name or any(c.isspace() or c == "+" for c in name) or not name.isprintable():
        raise SabotError(f"a key name is not empty and holds no space or '+': {name!r}")
    return name


@dataclass
class Verifier:
    """One key a verifier trusts: its name, signature type and public key."""

    name: str
    kind: int
    public: bytes

    @property
    def id(self) -> int:
        return key_id(self.name, self.kind, self.public)

    def vkey(self) -> str:
        return (f"{self.name}+{self.id:08x}+"
                f"{base64.b64encode(bytes([self.kind]) + self.public).decode()}")

    @classmethod
    def parse(cls, vkey: str) -> Verifier:
        """A vkey; a SabotError in one line for anything that is not one."""
        name, sep, rest = vkey.strip().partition("+")
        hexid, sep2, b64 = rest.partition("+")
        try:
            check_name(name)
            blob = base64.b64decode(b64, validate=True)
            if len(hexid) != 8 or any(c not in "0123456789abcdefABCDEF" for c in hexid):
                raise ValueError(hexid)  # int() would take "0x1f", "+1f" or "1_f"
            want = int(hexid, 16)
        except (ValueError, SabotError):
            blob, want = b"", -1
        if not (sep and sep2 and blob and len(hexid) == 8) or blob[0] not in (ED25519, ECDSA,
                                                                              COSIGNATURE):
            raise SabotError(f"not a verifier key (NAME+KEYID+BASE64, signed-note): {vkey!r}")
        v = cls(name, blob[0], blob[1:])
        try:
            v._key()
        except ValueError:
            raise SabotError(f"verifier key {name}: its public key does not parse") from None
        if v.id != want:
            raise SabotError(f"verifier key {name}: its key ID {hexid} is not its key's")
        return v

    def _key(self) -> Any:
        if self.kind == ECDSA:
            key = serialization.load_der_public_key(self.public)
            if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name != "secp256r1":
                raise ValueError("not P-256")
            return key
        return ed25519.Ed25519PublicKey.from_public_bytes(self.public)

    def verify(self, text: str, sig: bytes) -> int | None:
        """Whether `sig` (the bytes after the key ID) signs `text`; for a cosignature its
        timestamp (seconds), otherwise 0; None when it does not."""
        try:
            key = self._key()
            if self.kind == ECDSA:
                key.verify(sig, text.encode(), ec.ECDSA(hashes.SHA256()))
                return 0
            if self.kind == COSIGNATURE:
                if len(sig) != 8 + 64:
                    return None
                (t,) = struct.unpack(">Q", sig[:8])
                key.verify(sig[8:], cosigned_message(text, t))
                return t
            key.verify(sig, text.encode())
            return 0
        except (InvalidSignature, ValueError):
            return None


def cosigned_message(text: str, timestamp: int) -> bytes:
    return f"cosignature/v1\ntime {timestamp}\n{text}".encode()


class Ed25519Signer:
    """An Ed25519 key signing notes: plain (0x01) or as a witness's cosignature (0x04)."""

    def __init__(self, name: str, key: ed25519.Ed25519PrivateKey, kind: int = ED25519) -> None:
        self.name, self.key, self.kind = check_name(name), key, kind
        self.verifier = Verifier(name, kind, _raw(key.public_key()))

    def sign(self, text: str, timestamp: int | None = None) -> str:
        if self.kind == COSIGNATURE:
            t = int(time.time()) if timestamp is None else timestamp
            sig = struct.pack(">Q", t) + self.key.sign(cosigned_message(text, t))
        else:
            sig = self.key.sign(text.encode())
        return signature_line(self.name, self.verifier.id, sig)


def ecdsa_verifier(name: str, pub: ec.EllipticCurvePublicKey) -> Verifier:
    """A shoe's checkpoint key (its element's, type 0x02) as a note verifier."""
    return Verifier(check_name(name), ECDSA, _spki(pub))


def signature_line(name: str, kid: int, sig: bytes) -> str:
    return f"{DASH} {name} {base64.b64encode(struct.pack('>I', kid) + sig).decode()}\n"


@dataclass
class Signature:
    name: str
    id: int
    sig: bytes
    line: str


def split(note: str) -> tuple[str, list[Signature]]:
    """A signed note's text and its signature lines; a SabotError for what is not one."""
    if not note.endswith("\n") or any(ord(c) < 0x20 and c != "\n" for c in note):
        raise SabotError("a signed note ends with a newline and holds no control character")
    at = note.rfind("\n\n")
    if at < 0:
        raise SabotError("a signed note has a blank line before its signatures")
    text, block = note[: at + 1], note[at + 2:]
    sigs = []
    for line in block[:-1].split("\n"):
        dash, _, rest = line.partition(" ")
        name, _, b64 = rest.partition(" ")
        try:
            raw = base64.b64decode(b64, validate=True)
        except ValueError:
            raw = b""
        if dash != DASH or not name or len(raw) < 5 or " " in b64:
            raise SabotError(f"not a note signature line: {line[:80]!r}")
        sigs.append(Signature(name, struct.unpack(">I", raw[:4])[0], raw[4:], line + "\n"))
    if not sigs or len(sigs) > MAX_SIGNATURES:
        raise SabotError(f"a signed note holds 1 to {MAX_SIGNATURES} signatures")
    return text, sigs


def open_note(note: str, verifiers: list[Verifier]) -> tuple[str, dict[str, int]]:
    """The text of a note and, by name, each trusted key whose signature verifies (with its
    cosignature's time, 0 for other types). Signatures of unknown keys are ignored; a known
    key's signature that fails, or no known key's at all, is a SabotError."""
    text, good = verified(note, verifiers)
    return text, {v.name: t for v, t in good}


def verified(note: str, verifiers: list[Verifier]) -> tuple[str, list[tuple[Verifier, int]]]:
    """open_note, with the very keys that verified (several of one name may be trusted)."""
    text, sigs = split(note)
    known = {(v.name, v.id): v for v in verifiers}
    good: list[tuple[Verifier, int]] = []
    for s in sigs:
        v = known.get((s.name, s.id))
        if v is None:
            continue
        t = v.verify(text, s.sig)
        if t is None:
            raise SabotError(f"the note's signature by {s.name} does not verify")
        good.append((v, t))
    if not good:
        raise SabotError("no signature on the note is by a key trusted here")
    return text, good

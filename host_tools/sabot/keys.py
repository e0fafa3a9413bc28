"""The host command key (docs/PROTOCOL.md "Keys"): a P-256 private key in a PEM file, the `--key
FILE` of the command line. It signs host commands (ack, resolve, new_shoe, update, rekey); its
public half sits in the shoe's secure element (slot 9), which checks every command's signature
itself.

It cannot sign results and verifies nothing: verifiers hold the shoes' public keys only (the shoe
registry). Created with mode 0600 and refused when others can read it. A version-1 shared key
file (38 bytes of HMAC key) is refused with a one-line message."""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from sabot.errors import SabotError

if TYPE_CHECKING:
    from _typeshed import StrPath

V1_KEY_LEN = 38  # key_id(2) shoe_id(4) HMAC key(32): protocol version 1's shared key file


class CommandKey:
    """The host command key: signs commands; `public_pem()` is what a shoe's element holds."""

    def __init__(self, private_key: ec.EllipticCurvePrivateKey, path: str = "") -> None:
        self.private_key = private_key
        self.path = path

    def public_pem(self) -> str:
        return public_pem(self.private_key.public_key())

    def public_key(self) -> ec.EllipticCurvePublicKey:
        return self.private_key.public_key()


def public_pem(key: ec.EllipticCurvePublicKey) -> str:
    return key.public_bytes(serialization.Encoding.PEM,
                            serialization.PublicFormat.SubjectPublicKeyInfo).decode()


def xy(key: ec.EllipticCurvePublicKey) -> bytes:
    """A P-256 public key as the element holds it: X||Y, 64 bytes."""
    n = key.public_numbers()
    return n.x.to_bytes(32, "big") + n.y.to_bytes(32, "big")


def private_pem(key: ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def write_private(path: StrPath, key: ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey
                  ) -> None:
    """A private key file, mode 0600, never over an existing file."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise SabotError(f"{path} exists: a key file is never overwritten") from None
    except OSError as e:
        raise SabotError(f"cannot create key file {path}: {e.strerror}") from None
    with os.fdopen(fd, "wb") as f:
        f.write(private_pem(key))


def create(path: StrPath) -> CommandKey:
    """A new command key in a new file (mode 0600)."""
    write_private(path, ec.generate_private_key(ec.SECP256R1()))
    return load(path)


def load_private(path: StrPath, what: str = "key file") -> ec.EllipticCurvePrivateKey:
    """A P-256 private key from a PEM file that only its owner can read."""
    key = _owners_key(path, what)
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != "secp256r1":
        raise SabotError(f"{path} is not a P-256 (secp256r1) private key")
    return key


def witness_key(path: StrPath) -> ed25519.Ed25519PrivateKey:
    """A witness's Ed25519 key (its cosignatures'), created in a new 0600 file when missing."""
    if not os.path.exists(path):
        write_private(path, ed25519.Ed25519PrivateKey.generate())
    key = _owners_key(path, "witness key file")
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise SabotError(f"{path} is not an Ed25519 private key (a witness's key is)")
    return key


def _owners_key(path: StrPath, what: str) -> object:
    """The private key of a PEM file that only its owner can read."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise SabotError(f"cannot read {what} {path}: {e.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise SabotError(f"{what} {path} is a directory, not a key file")
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise SabotError(
            f"{what} {path} is readable by others (mode {stat.S_IMODE(st.st_mode):o}); "
            f"run: chmod 600 {path}"
        )
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) == V1_KEY_LEN and not raw.startswith(b"-----"):
        raise SabotError(f"{path} is a version-1 shared key file; make a command key with "
                         "`sabot provision --key NEWFILE` (it creates the file) and provision "
                         "the shoe for it")
    try:
        key = serialization.load_pem_private_key(raw, password=None)
    except (ValueError, TypeError):
        raise SabotError(f"{path} is not a sabot {what} (no unencrypted PEM private key in it)"
                         ) from None
    return key


def load(path: StrPath) -> CommandKey:
    return CommandKey(load_private(path), str(path))


def load_or_create(path: StrPath) -> CommandKey:
    return load(path) if os.path.exists(path) else create(path)

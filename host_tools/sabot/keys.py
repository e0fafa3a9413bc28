"""Shoe key files: key_id(2) shoe_id(4) key(32), the same 38 bytes the shoe keeps in flash.

Created with mode 0600 and refused when others can read them. The key never travels on the link."""

from __future__ import annotations

import os
import stat
import struct
from typing import TYPE_CHECKING, NamedTuple

from .errors import SabotError

if TYPE_CHECKING:
    from _typeshed import StrPath


class ShoeKey(NamedTuple):
    key_id: int
    shoe_id: int
    key: bytes


KEY_LEN = 38


def create(path: StrPath, key_id: int = 1, shoe_id: int | None = None) -> ShoeKey:
    if shoe_id is None:
        shoe_id = struct.unpack(">I", os.urandom(4))[0] & 0x7FFFFFFF
    raw = struct.pack(">HI", key_id, shoe_id) + os.urandom(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(raw)
    return load(path)


def load(path: StrPath) -> ShoeKey:
    try:
        st = os.stat(path)
    except OSError as e:
        raise SabotError(f"cannot read key file {path}: {e.strerror}") from None
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise SabotError(
            f"key file {path} is readable by others (mode {stat.S_IMODE(st.st_mode):o}); "
            f"run: chmod 600 {path}"
        )
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) != KEY_LEN:
        raise SabotError(f"{path} is not a sabot key file ({len(raw)} bytes, expected {KEY_LEN})")
    key_id, shoe_id = struct.unpack(">HI", raw[:6])
    return ShoeKey(key_id, shoe_id, raw[6:])


def load_or_create(path: StrPath) -> ShoeKey:
    return load(path) if os.path.exists(path) else create(path)


def raw_bytes(k: ShoeKey) -> bytes:
    return struct.pack(">HI", k.key_id, k.shoe_id) + k.key

"""A virtual shoe's factory provisioning and table configuration: what its flash and secure
element hold before the board first powers on (the flash files `identity` and `variant`)."""

from __future__ import annotations

import os
import shutil
import struct
from typing import NamedTuple

from sabot import keys, registry
from sabot.protocol import variant_byte
from sabot.virtual import factory
from sabot.virtual.element import element_store


def set_variant(flash_dir: str, variant: int, decks: int = 8, rules: bytes = b"") -> None:
    """The table configuration a virtual shoe deals (its flash `variant`: variant byte, decks,
    then a 21 Baccarat table's rule bytes), as provisioning writes it
    (firmware/shoe/provision.py)."""
    with open(os.path.join(flash_dir, "variant"), "wb") as f:
        f.write(bytes([variant, decks]) + rules)


IDENTITY = struct.Struct(">IH")  # the flash file `identity`: shoe_id, result key version


def read_identity(flash_dir: str | os.PathLike[str]) -> tuple[int, int] | None:
    """(shoe_id, key version) from the board's flash, or None when it has none."""
    try:
        with open(os.path.join(flash_dir, "identity"), "rb") as f:
            raw = f.read()
    except OSError:
        return None
    if len(raw) != IDENTITY.size:
        return None
    shoe_id, version = IDENTITY.unpack(raw)
    return shoe_id, version


def kept(flash_dir: str | os.PathLike[str], command_key: keys.CommandKey,
         shoe_id: int | None = None, store: str | None = None) -> bool:
    """Whether provision() keeps the virtual shoe in `flash_dir` as it is: provisioned for this
    command key (and shoe id, if given)."""
    flash_dir = os.fspath(flash_dir)
    store = store or element_store(flash_dir)
    have = read_identity(flash_dir)
    return (have is not None and (shoe_id is None or have[0] == shoe_id)
            and os.path.isdir(store)
            and factory.command_key_xy(store) == keys.xy(command_key.public_key()))


class Provisioned(NamedTuple):
    shoe_id: int
    version: int  # the current result key version
    public_pem: str  # its public half
    serial: str  # the element's serial number, hex
    # the log's first checkpoint, signed at provisioning ("" for a shoe kept as it was)
    first_checkpoint: str = ""


def provision(flash_dir: str | os.PathLike[str], command_key: keys.CommandKey,
              shoe_id: int | None = None, store: str | None = None,
              variant: int | None = None, rules: bytes = b"") -> Provisioned:
    """Factory provisioning of a virtual shoe through the chip's own commands
    (sabot.virtual.factory, the shoe's provisioning code): the element (emulator store at
    `<flash_dir>.element`, or `store`) gets sabot's configuration, makes result key 1 inside,
    takes the command key's public half, and both its zones are locked; the flash gets `identity`
    (shoe_id, key version; no key: the key never leaves the element). A shoe already provisioned
    for this command key (and shoe_id, if given) is kept as it is; any other starts anew with a
    factory-fresh element, flash wiped."""
    flash_dir = os.fspath(flash_dir)
    store = store or element_store(flash_dir)
    have = read_identity(flash_dir)
    command_xy = keys.xy(command_key.public_key())
    if have is not None and kept(flash_dir, command_key, shoe_id, store):
        pem = keys.public_pem(registry.public_from_xy(factory.result_public_xy(store, have[1])))
        return Provisioned(have[0], have[1], pem, factory.element(store).serial().hex())
    if shoe_id is None:
        shoe_id = struct.unpack(">I", os.urandom(4))[0] & 0x7FFFFFFF
    os.makedirs(flash_dir, exist_ok=True)
    for name in os.listdir(flash_dir):
        p = os.path.join(flash_dir, name)
        shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
    shutil.rmtree(store, ignore_errors=True)
    made = factory.provision(store, flash_dir, shoe_id,
                             variant_byte() if variant is None else variant, command_xy,
                             rules=rules)
    serial, xy, proof = made[:3]
    key = registry.check_provisioning(serial, shoe_id, xy, command_xy, proof)
    return Provisioned(shoe_id, 1, keys.public_pem(key), serial.hex(),
                       registry.first_checkpoint(shoe_id, made[5], key))

"""The virtual shoe's factory: its element emulator driven through the shoe's own driver and
provisioning code (firmware/shoe/element.py, firmware/shoe/provision.py) in this process, by the
same chip commands a shoe sends over I2C — Write, Lock, GenKey, Read — never by writing the
emulator's files. What a real ATECC608 would refuse, provisioning here is refused too."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

from sabot import paths
from sabot.errors import SabotError
from sabot.virtual.element_chip import Chip
from sabot.virtual.element_store import KeyStore


class ChipBus:
    """machine.I2C's two calls straight into an emulated chip (no socket, no process)."""

    def __init__(self, chip: Chip) -> None:
        self.chip = chip

    def writeto(self, addr: int, buf: bytes, stop: bool = True) -> int:
        if not self.chip.write(addr, bytes(buf)):
            raise OSError(19)
        return 1

    def readfrom_into(self, addr: int, buf: bytearray, stop: bool = True) -> None:
        data = self.chip.read(addr, len(buf))
        if data is None:
            raise OSError(19)
        buf[:] = data


def firmware(module: str) -> Any:
    """A firmware module (`shoe.provision`, `shoe.element`, ...) imported from the checkout's
    firmware/ tree: the shoe's code, run by the factory."""
    where = str(paths.FIRMWARE)
    if not (paths.FIRMWARE / "shoe").is_dir():
        raise SabotError(f"no firmware tree at {where}: the virtual board needs the checkout")
    if where not in sys.path:
        sys.path.insert(0, where)
    return importlib.import_module(module)


def element(store: str | os.PathLike[str]) -> Any:
    """The shoe's element driver on the chip whose memory is `store` (a factory-fresh chip when
    the directory is empty or missing), commands answered at once."""
    try:
        chip = Chip(KeyStore(store), sign_ms=0, ecc_ms=0, cmd_ms=0)
    except (OSError, ValueError) as e:
        raise SabotError(f"the element store {store} cannot be used: {e}") from None
    return firmware("shoe.element").Element(ChipBus(chip))


def state(store: str | os.PathLike[str]) -> str:
    """blank | configured | provisioned | foreign (shoe/provision.py's state of the chip)."""
    return str(firmware("shoe.provision").state(element(store)))


def command_key_xy(store: str | os.PathLike[str]) -> bytes | None:
    """The command public key a provisioned chip holds (its slot is readable), X||Y."""
    el = element(store)
    provision = firmware("shoe.provision")
    if provision.state(el) != "provisioned":
        return None
    raw = bytearray()
    block = bytearray(32)
    for b in range(3):
        at = provision.data_address(provision.COMMAND_KEY_SLOT, b)
        provision.read(el, provision.ZONE_DATA, at, block)
        raw += block
    return bytes(raw[4:36] + raw[40:72])


def result_public_xy(store: str | os.PathLike[str], version: int) -> bytes:
    """Result key `version`'s public half, asked of the chip (GenKey's public mode)."""
    xy = bytearray(64)
    element(store).public_key(firmware("shoe.store").result_slot(version), xy)
    return bytes(xy)


def provision(store: str | os.PathLike[str], flash_dir: str | os.PathLike[str], shoe_id: int,
              variant: int, command_xy: bytes, decks: int = 8, rules: bytes = b""
              ) -> tuple[bytes, bytes, bytes, bytes, bytes, bytes]:
    """Provision the chip and the flash as a shoe provisions itself, for `decks` decks of the
    game `variant` names: (serial, result key 1 X||Y, proof, attestation key X||Y, its
    certificate of key 1, key 1's signature of the log's first checkpoint). SabotError with the
    shoe's reason when the chip refuses."""
    factory = firmware("shoe.provision")
    os.makedirs(flash_dir, exist_ok=True)
    flash = firmware("shoe.store").Flash(os.fspath(flash_dir))
    try:
        made = factory.provision(element(store), flash, shoe_id, variant, command_xy, decks,
                                 rules)
    except factory.Refused as e:
        raise SabotError(f"provisioning refused: {e}") from None
    return tuple(bytes(b) for b in made)  # type: ignore[return-value]


def rekey(store: str | os.PathLike[str], flash_dir: str | os.PathLike[str]
          ) -> tuple[int, bytes, bytes, bytes]:
    """The shoe's rekey (firmware/shoe/rekey.py) on the chip and the flash: the next result key
    made in its slot, locked and certified by the attestation key, and made current: (version,
    X||Y, nonce, certificate)."""
    flash = firmware("shoe.store").Flash(os.fspath(flash_dir))
    version, xy, nonce, certificate = firmware("shoe.rekey").rekey(element(store), flash)
    return int(version), bytes(xy), bytes(nonce), bytes(certificate)


def certify(store: str | os.PathLike[str], shoe_id: int, version: int) -> tuple[bytes, bytes]:
    """The attestation key's certificate of result key `version`, made now by the chip (GenKey
    digest, Sign internal): (the key's X||Y, certificate r||s)."""
    xy, _, certificate = firmware("shoe.rekey").certify(element(store), shoe_id, version)
    return bytes(xy), bytes(certificate)


def attestation_xy(store: str | os.PathLike[str]) -> bytes:
    """The attestation key's public half, asked of the chip (GenKey's public mode)."""
    xy = bytearray(64)
    element(store).public_key(firmware("shoe.provision").ATTESTATION_SLOT, xy)
    return bytes(xy)


def attested(store: str | os.PathLike[str], shoe_id: int, version: int) -> tuple[str, str]:
    """A virtual shoe's attestation key (PEM) and its certificate (hex) of result key `version`,
    made now by its element: what the registry needs to hold the shoe's later versions."""
    from sabot import keys
    from sabot.registry import public_from_xy

    _, certificate = certify(store, shoe_id, version)
    return keys.public_pem(public_from_xy(attestation_xy(store))), certificate.hex()

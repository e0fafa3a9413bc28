"""The emulated ATECC608's non-volatile memory: its zones as the data sheet lays them out, and
the store directory that keeps them (0700, files 0600, outside any board flash): config.bin,
data.bin, otp.bin and counters.json, each replaced atomically before the chip answers (its
EEPROM). An empty directory is a factory-fresh chip."""

from __future__ import annotations

import json
import os
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric import ec

from sabot.virtual.element_formats import public_key_from_xy

REVISION = bytes((0x00, 0x00, 0x60, 0x03))  # what Info answers: an ATECC608B

ZONE_CONFIG, ZONE_OTP, ZONE_DATA = 0, 1, 2
SLOT_SIZES = (36,) * 8 + (416,) + (72,) * 7
SLOT_AT = tuple(sum(SLOT_SIZES[:i]) for i in range(16))
DATA_SIZE = sum(SLOT_SIZES)  # 1208
OTP_SIZE = 64
UNLOCKED = 0x55  # LockValue / LockConfig of an unlocked zone
# configuration zone offsets (data sheet, "Configuration zone")
LOCK_VALUE, LOCK_CONFIG, SLOT_LOCKED = 86, 87, 88
SLOT_CONFIG_AT, KEY_CONFIG_AT = 20, 96
KEY_TYPE_P256 = 4
# P-256's order, for the scalar a slot must hold to be a key
P256_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551


def _private_mode(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically, readable by the owner only."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)



def factory_config() -> bytes:
    """A blank chip's configuration zone: a new serial number, both zones unlocked (0x55), every
    slot unlocked, SlotConfig and KeyConfig zero (a factory part's defaults vary by ordering
    code; whatever they are, provisioning writes its own before the lock)."""
    sn = b"\x01\x23" + os.urandom(2) + REVISION + os.urandom(4) + b"\xee"
    head = sn + bytes((0x01, 0x01, 0x00))  # AES_Enable, I2C_Enable, reserved
    rest = bytearray(128 - len(head))
    rest[0] = 0xC0  # byte 16, I2C_Address (the 8-bit form of 0x60)
    for at in (52, 60):  # Counter[0], Counter[1]: the data sheet's encoding of zero
        rest[at - 16:at - 12] = b"\xff\xff\xff\xff"
    rest[LOCK_VALUE - 16] = rest[LOCK_CONFIG - 16] = UNLOCKED
    rest[SLOT_LOCKED - 16] = rest[SLOT_LOCKED - 15] = 0xFF
    return head + bytes(rest)


class KeyStore:
    """The chip's non-volatile memory, one file per zone in a 0700 directory. An empty directory
    is a factory-fresh chip."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.dir, 0o700)
        if not (self.dir / "config.bin").exists():
            _private_mode(self.dir / "data.bin", bytes(DATA_SIZE))
            _private_mode(self.dir / "otp.bin", bytes(OTP_SIZE))
            _private_mode(self.dir / "counters.json", b"[0, 0]")
            _private_mode(self.dir / "config.bin", factory_config())  # last: the chip exists
        self.config = bytearray((self.dir / "config.bin").read_bytes())
        self.data = bytearray((self.dir / "data.bin").read_bytes())
        self.otp = bytearray((self.dir / "otp.bin").read_bytes())
        self.counters: list[int] = json.loads((self.dir / "counters.json").read_text())
        if len(self.config) != 128 or len(self.data) != DATA_SIZE or len(self.otp) != OTP_SIZE:
            raise ValueError(f"{self.dir}: not an element store")

    def save(self, zone: str) -> None:
        if zone == "counters":
            _private_mode(self.dir / "counters.json", json.dumps(self.counters).encode())
        else:
            _private_mode(self.dir / f"{zone}.bin", bytes(getattr(self, zone)))

    # -- what the configuration says ----------------------------------------------------------

    def config_locked(self) -> bool:
        return self.config[LOCK_CONFIG] != UNLOCKED

    def data_locked(self) -> bool:
        return self.config[LOCK_VALUE] != UNLOCKED

    def slot_config(self, slot: int) -> int:
        at = SLOT_CONFIG_AT + 2 * slot
        return self.config[at] | self.config[at + 1] << 8

    def key_config(self, slot: int) -> int:
        at = KEY_CONFIG_AT + 2 * slot
        return self.config[at] | self.config[at + 1] << 8

    def slot_locked(self, slot: int) -> bool:
        bits = self.config[SLOT_LOCKED] | self.config[SLOT_LOCKED + 1] << 8
        return not bits >> slot & 1

    def is_private(self, slot: int) -> bool:
        """KeyConfig.Private set and KeyType P-256: the slot holds an ECC private key."""
        k = self.key_config(slot)
        return bool(k & 1) and (k >> 2) & 7 == KEY_TYPE_P256

    def is_public(self, slot: int) -> bool:
        k = self.key_config(slot)
        return not k & 1 and (k >> 2) & 7 == KEY_TYPE_P256

    def slot_bytes(self, slot: int) -> bytearray:
        return self.data[SLOT_AT[slot]:SLOT_AT[slot] + SLOT_SIZES[slot]]

    def private_key(self, slot: int) -> ec.EllipticCurvePrivateKey | None:
        """The key in a private-key slot (the scalar after 4 pad bytes), None if none is there."""
        at = SLOT_AT[slot]
        scalar = int.from_bytes(self.data[at + 4:at + 36], "big")
        if not 0 < scalar < P256_ORDER:
            return None
        return ec.derive_private_key(scalar, ec.SECP256R1())

    def set_private_key(self, slot: int, key: ec.EllipticCurvePrivateKey) -> None:
        at = SLOT_AT[slot]
        self.data[at:at + 36] = bytes(4) + key.private_numbers().private_value.to_bytes(32, "big")
        self.save("data")

    def stored_public_key(self, slot: int) -> ec.EllipticCurvePublicKey | None:
        """A public key in a 72-byte slot, as CryptoAuthLib writes it: 4 pad bytes, X, 4 pad
        bytes, Y."""
        raw = self.slot_bytes(slot)
        if len(raw) < 72:
            return None
        try:
            return public_key_from_xy(bytes(raw[4:36] + raw[40:72]))
        except ValueError:
            return None


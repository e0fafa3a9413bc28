"""The virtual board's secure element: an ATECC608B emulated in its own process.

The firmware's driver (firmware/shoe/element.py) talks to it through a virtual I2C bus
(boards/virtual/i2c_socket.py) with the chip's real command protocol, so the same driver runs on a
real board. The chip's memory is modelled as the data sheet lays it out (docs/ELEMENT.md):

  configuration zone  128 bytes: serial number, revision, SlotConfig, KeyConfig, counters,
                      LockValue (byte 86), LockConfig (byte 87), SlotLocked (88-89)
  data zone           16 slots: 0-7 of 36 bytes, 8 of 416, 9-15 of 72
  OTP zone            64 bytes

and refuses what a real chip refuses, by the configuration it holds and the zones' lock state:
an empty store is a chip as it leaves the factory (both zones unlocked, no key anywhere). Sabot's
own configuration is written by the shoe at provisioning (firmware/shoe/provision.py), through
Write and Lock, never into the store's files.

The store directory (0700, files 0600, outside any board flash) holds config.bin, data.bin,
otp.bin and counters.json, each replaced atomically before the chip answers (its EEPROM). A
private key is the 32-byte scalar in its slot, made by GenKey; nothing the chip sends carries one.

Bus framing over the socket (one request, one reply; a reply never carries key material):

  b"W" addr(1) len(2, big-endian) data   ->  b"K" (ack) | b"N" (nack)
  b"R" addr(1) len(2, big-endian)        ->  b"K" data(len) | b"N"

A write to bus address 0x00 is the wake pulse (NACKed: nobody lives there). While a command
executes (Sign: --sign-ms, 50 ms by default) the chip NACKs its address, as the real one does.

  python -m sabot.virtual.element_emulator --store DIR --listen unix:PATH | tcp:127.0.0.1:PORT"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import select
import socket
import sys
import time
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import (
    Prehashed,
    decode_dss_signature,
    encode_dss_signature,
)

ADDRESS = 0x60
COUNTER_MAX = 2_097_151  # the ATECC608's counter limit

INFO, RANDOM, GENKEY, NONCE, SIGN, VERIFY, COUNTER, SHA, READ, WRITE, LOCK = (
    0x30, 0x1B, 0x40, 0x16, 0x41, 0x45, 0x24, 0x47, 0x02, 0x12, 0x17)
OK, MISCOMPARE, PARSE_ERROR, EXECUTION_ERROR, AFTER_WAKE, CRC_ERROR = (
    0x00, 0x01, 0x03, 0x0F, 0x11, 0xFF)
REVISION = bytes((0x00, 0x00, 0x60, 0x03))  # what Info answers: an ATECC608B
WATCHDOG_MS = 1300

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
# Random before the configuration zone is locked: the data sheet's fixed test pattern
RANDOM_BEFORE_LOCK = bytes((0xFF, 0xFF, 0x00, 0x00)) * 8
# SHA-256 is SHA; P-256's order, for the scalar a slot must hold to be a key
P256_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
# GenKey modes (param1): a new private key, and/or the public key's digest into TempKey
GENKEY_PRIVATE, GENKEY_DIGEST = 0x04, 0x08
# Sign modes: external (TempKey is the digest), include the full serial number in an internal one
SIGN_EXTERNAL, SIGN_INCLUDE_SN = 0x80, 0x40
# SlotConfig.ReadKey of an ECC private key: bit 0 external signatures, bit 1 internal ones
READKEY_EXTERNAL, READKEY_INTERNAL = 0x01, 0x02
# TempKeyFlags, as the chip keeps them beside TempKey (b0-3 KeyID, b4 SourceFlag, b5 GenDigData,
# b6 GenKeyData, b7 NoMacFlag: the byte Sign internal puts in its message)
SOURCE_FLAG, GEN_DIG_DATA, GEN_KEY_DATA = 0x10, 0x20, 0x40


def crc16(data: bytes) -> bytes:
    """CryptoAuthLib's atCRC (polynomial 0x8005, LSB of each byte first), little-endian."""
    crc = 0
    for byte in data:
        for bit in range(8):
            data_bit = (byte >> bit) & 1
            crc_bit = crc >> 15
            crc = (crc << 1) & 0xFFFF
            if data_bit != crc_bit:
                crc ^= 0x8005
    return bytes((crc & 0xFF, crc >> 8))


def response(data: bytes) -> bytes:
    head = bytes((len(data) + 3,)) + data
    return head + crc16(head)


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


def _xy(key: ec.EllipticCurvePublicKey) -> bytes:
    return key.public_numbers().x.to_bytes(32, "big") + key.public_numbers().y.to_bytes(32, "big")


def public_key_from_xy(xy: bytes) -> ec.EllipticCurvePublicKey:
    """A P-256 public key from the chip's 64-byte X||Y form."""
    return ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), b"\x04" + xy)


def signature_to_der(rs: bytes) -> bytes:
    """The chip's 64-byte r||s as the DER form cryptography verifies."""
    return encode_dss_signature(int.from_bytes(rs[:32], "big"), int.from_bytes(rs[32:], "big"))


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


def genkey_message(tempkey: bytes, mode: int, key_id: int, serial: bytes, xy: bytes) -> bytes:
    """The 128 bytes GenKey's digest mode hashes into TempKey: TempKey(32), opcode 0x40, mode,
    KeyID(2, LE), SN[8], SN[0:1], 25 zeros, the public key X||Y(64). Byte for byte as
    MicrochipTech/cryptoauthlib lib/host/atca_host.c atcah_gen_key_msg() rebuilds it (the mode
    0x08/0x0C branch) and the ATECC608B data sheet's "Public Key Digest Generation" lays it out."""
    return (bytes(tempkey) + bytes((GENKEY, mode, key_id & 0xFF, key_id >> 8, serial[8]))
            + bytes(serial[0:2]) + bytes(25) + bytes(xy))


def sign_internal_message(tempkey: bytes, mode: int, key_id: int, slot_config: int,
                          key_config: int, flags: int, serial: bytes, locked: bool) -> bytes:
    """The 55 bytes Sign internal signs the SHA-256 of, as MicrochipTech/cryptoauthlib
    lib/host/atca_host.c atcah_sign_internal_msg() builds them for an ATECC608 (with
    atcah_config_to_sign_internal() for the configuration fields): TempKey(32), opcode 0x41,
    mode, KeyID(2, LE), SlotConfig and KeyConfig of TempKeyFlags.KeyID (2 + 2, LE), TempKeyFlags,
    2 zeros (UseFlag/UpdateCount: ATECC108A only), SN[8], SN[4:7] (zeros without the
    include-SN mode bit 0x40), SN[0:1], SN[2:3] (zeros without it), SlotLocked:TempKeyFlags.KeyID
    (0x00 locked, 0x01 not), PubKey-valid 0x00 (not a validated public key), 0x00."""
    with_sn = mode & SIGN_INCLUDE_SN
    return (bytes(tempkey)
            + bytes((SIGN, mode, key_id & 0xFF, key_id >> 8, slot_config & 0xFF, slot_config >> 8,
                     key_config & 0xFF, key_config >> 8, flags, 0, 0, serial[8]))
            + (bytes(serial[4:8]) if with_sn else bytes(4)) + bytes(serial[0:2])
            + (bytes(serial[2:4]) if with_sn else bytes(2))
            + bytes((0x00 if locked else 0x01, 0x00, 0x00)))


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


class Chip:
    """The chip's behaviour at the bus: power states, I/O buffer, busy time, commands."""

    def __init__(self, store: KeyStore, *, sign_ms: float = 50.0, ecc_ms: float = 60.0,
                 cmd_ms: float = 1.0, watchdog_ms: float = WATCHDOG_MS,
                 address: int = ADDRESS) -> None:
        self.store = store
        self.address = address
        self.times = {SIGN: sign_ms, GENKEY: ecc_ms, VERIFY: ecc_ms}
        self.cmd_ms = cmd_ms
        self.watchdog_ms = watchdog_ms
        self.state = "sleep"  # sleep | idle | awake
        self.woke = 0.0
        self.busy_until = 0.0
        self.out = b""  # the I/O buffer the host reads
        self.read_at = 0
        self.tempkey: bytes | None = None
        self.tempkey_flags = 0  # meaningful while tempkey is not None
        self.sha: Any = None
        self.commands = 0

    # -- the bus ------------------------------------------------------------------------------

    def _tick(self, now: float) -> None:
        if (self.state == "awake" and self.watchdog_ms
                and (now - self.woke) * 1000 > self.watchdog_ms and now >= self.busy_until):
            self._sleep()

    def _sleep(self) -> None:
        self.state = "sleep"
        self.tempkey = None
        self.sha = None
        self.out = b""

    def write(self, addr: int, data: bytes, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        self._tick(now)
        if addr == 0x00:  # the wake pulse: SDA low long enough
            if self.state != "awake":
                self.state = "awake"
                self.woke = now
                self.out, self.read_at = response(bytes((AFTER_WAKE,))), 0
            return False
        if addr != self.address or self.state != "awake" or now < self.busy_until or not data:
            return False
        word = data[0]
        if word == 0x00:  # reset the I/O buffer's address
            self.read_at = 0
        elif word == 0x01:
            self._sleep()
        elif word == 0x02:  # idle: TempKey kept
            self.state = "idle"
            self.out = b""
        elif word == 0x03:
            self._command(data[1:], now)
        else:
            return False
        return True

    def read(self, addr: int, n: int, now: float | None = None) -> bytes | None:
        now = time.monotonic() if now is None else now
        self._tick(now)
        if addr != self.address or self.state != "awake" or now < self.busy_until:
            return None
        chunk = self.out[self.read_at:self.read_at + n]
        self.read_at += n
        return chunk + b"\xff" * (n - len(chunk))

    def _command(self, packet: bytes, now: float) -> None:
        self.read_at = 0
        if len(packet) < 7 or packet[0] != len(packet):
            self.out = response(bytes((PARSE_ERROR,)))
            return
        if crc16(packet[:-2]) != packet[-2:]:
            self.out = response(bytes((CRC_ERROR,)))
            return
        opcode, p1 = packet[1], packet[2]
        p2 = packet[3] | packet[4] << 8
        data = packet[5:-2]
        self.commands += 1
        if opcode != SHA:
            self.sha = None  # the other commands use the SHA engine and lose its context
        result = self.execute(opcode, p1, p2, data)
        self.out = response(result if isinstance(result, bytes) else bytes((result,)))
        self.busy_until = now + self.times.get(opcode, self.cmd_ms) / 1000

    # -- the commands -------------------------------------------------------------------------

    def execute(self, opcode: int, p1: int, p2: int, data: bytes) -> bytes | int:
        """The response data of one command, or a status byte."""
        handler = {INFO: self._info, RANDOM: self._random, GENKEY: self._genkey,
                   NONCE: self._nonce, SIGN: self._sign, VERIFY: self._verify,
                   COUNTER: self._counter, SHA: self._sha, READ: self._read,
                   WRITE: self._write, LOCK: self._lock}.get(opcode)
        if handler is None:
            return PARSE_ERROR
        return handler(p1, p2, data)

    def _info(self, p1: int, p2: int, data: bytes) -> bytes | int:
        if p1 != 0x00 or data:
            return PARSE_ERROR
        return REVISION

    def _random(self, p1: int, p2: int, data: bytes) -> bytes | int:
        if data and len(data) != 20:
            return PARSE_ERROR
        if not self.store.config_locked():
            return RANDOM_BEFORE_LOCK  # the data sheet: a fixed pattern until the config lock
        return os.urandom(32)

    def _genkey(self, p1: int, p2: int, data: bytes) -> bytes | int:
        slot, st = p2, self.store
        # 0x10 (the digest of a stored public key, with OtherData) is not emulated
        if data or slot > 15 or p1 & ~(GENKEY_PRIVATE | GENKEY_DIGEST):
            return PARSE_ERROR
        # GenKey needs a locked configuration and a slot configured as a P-256 private key
        if not st.config_locked() or not st.is_private(slot):
            return EXECUTION_ERROR
        # the digest mode hashes TempKey in: "prior to running this command, TempKey must be a
        # valid value" (a Nonce), so a lost or used-up TempKey refuses it
        if p1 & GENKEY_DIGEST and self.tempkey is None:
            return EXECUTION_ERROR
        if p1 & GENKEY_PRIVATE:
            xy = self.genkey(slot)
            if isinstance(xy, int):
                return xy
        else:
            key = st.private_key(slot)
            # the public key of a private key: only where KeyConfig.PubInfo allows it
            if key is None or not st.key_config(slot) & 0x02:
                return EXECUTION_ERROR
            xy = _xy(key.public_key())
        if p1 & GENKEY_DIGEST:
            assert self.tempkey is not None
            self.tempkey = hashlib.sha256(
                genkey_message(self.tempkey, p1, slot, self.serial(), xy)).digest()
            # KeyID, GenKeyData set, GenDigData clear; SourceFlag and NoMacFlag kept from the
            # Nonce (CryptoAuthLib's atcah_gen_key_msg updates the same three)
            self.tempkey_flags = (self.tempkey_flags & (SOURCE_FLAG | 0x80)) | GEN_KEY_DATA | slot
        return xy

    def serial(self) -> bytes:
        """The 9-byte serial number: configuration bytes 0-3 and 8-12."""
        c = self.store.config
        return bytes(c[0:4] + c[8:13])

    def genkey(self, slot: int) -> bytes | int:
        """A new private key made in `slot`; its public X||Y. Before the data zone is locked any
        private-key slot takes one; after it, only a slot whose SlotConfig.WriteConfig allows
        GenKey (bit 13) and that is not locked on its own (SlotLocked)."""
        st = self.store
        if st.data_locked() and (not st.slot_config(slot) & 0x2000 or st.slot_locked(slot)):
            return EXECUTION_ERROR
        key = ec.generate_private_key(ec.SECP256R1())
        st.set_private_key(slot, key)
        return _xy(key.public_key())

    def _nonce(self, p1: int, p2: int, data: bytes) -> bytes | int:
        if p1 != 0x03 or p2 != 0 or len(data) != 32:
            return PARSE_ERROR  # only pass-through of 32 bytes into TempKey is emulated
        # pass-through: TempKey valid, SourceFlag 1 (not random), KeyID 0, GenDigData,
        # GenKeyData and NoMacFlag 0 (the data sheet's TempKey flags; atcah_nonce)
        self.tempkey, self.tempkey_flags = bytes(data), SOURCE_FLAG
        return OK

    def _sign(self, p1: int, p2: int, data: bytes) -> bytes | int:
        # external (0x80) or internal, with or without the serial number (0x00, 0x40); the
        # internal modes' other bits (Verify invalidate, 0x20) are not emulated
        if p1 not in (SIGN_EXTERNAL, 0x00, SIGN_INCLUDE_SN) or data or p2 > 15:
            return PARSE_ERROR
        st = self.store
        # a private key signs only once the data zone is locked, in a slot whose
        # SlotConfig.ReadKey enables that kind of signature: bit 0 external messages, bit 1
        # messages the chip built itself
        external = p1 == SIGN_EXTERNAL
        allowed = READKEY_EXTERNAL if external else READKEY_INTERNAL
        if not st.data_locked() or not st.is_private(p2) or not st.slot_config(p2) & allowed:
            return EXECUTION_ERROR
        key = st.private_key(p2)
        if key is None or self.tempkey is None:
            return EXECUTION_ERROR
        if external:
            digest = self.tempkey
        else:
            # "the value in TempKey must be generated using either the GenDig or the GenKey
            # command": a Nonce or SHA value (bytes the host chose) is refused
            if not self.tempkey_flags & (GEN_DIG_DATA | GEN_KEY_DATA):
                return EXECUTION_ERROR
            digest = hashlib.sha256(self.sign_internal_message(p1, p2)).digest()
        der = key.sign(digest, ec.ECDSA(Prehashed(hashes.SHA256())))
        self.tempkey = None  # one digest, one signature
        r, s = decode_dss_signature(der)
        return r.to_bytes(32, "big") + s.to_bytes(32, "big")

    def sign_internal_message(self, mode: int, key_id: int) -> bytes:
        """The 55 bytes Sign internal signs (their SHA-256), from TempKey, its flags and the
        configuration of the slot TempKey came from."""
        assert self.tempkey is not None
        st, source = self.store, self.tempkey_flags & 0x0F
        return sign_internal_message(self.tempkey, mode, key_id, st.slot_config(source),
                                     st.key_config(source), self.tempkey_flags, self.serial(),
                                     st.slot_locked(source))

    def _verify(self, p1: int, p2: int, data: bytes) -> bytes | int:
        st = self.store
        if not st.config_locked():
            return EXECUTION_ERROR
        if p1 == 0x02:
            if p2 != 0x0004 or len(data) != 128:
                return PARSE_ERROR
            try:
                key = public_key_from_xy(data[64:])
            except ValueError:
                return EXECUTION_ERROR  # not a point on the curve
        elif p1 == 0x00:
            if p2 > 15 or len(data) != 64:
                return PARSE_ERROR
            # a stored public key: a P-256 public-key slot of a locked data zone, one that needs
            # no validation (KeyConfig.PubInfo 0; validated keys are not emulated)
            if not st.data_locked() or not st.is_public(p2) or st.key_config(p2) & 0x02:
                return EXECUTION_ERROR
            stored = st.stored_public_key(p2)
            if stored is None:
                return EXECUTION_ERROR
            key = stored
        else:
            return PARSE_ERROR
        if self.tempkey is None:
            return EXECUTION_ERROR
        try:
            key.verify(signature_to_der(data[:64]), self.tempkey,
                       ec.ECDSA(Prehashed(hashes.SHA256())))
        except InvalidSignature:
            return MISCOMPARE
        return OK

    def _counter(self, p1: int, p2: int, data: bytes) -> bytes | int:
        if p1 not in (0, 1) or p2 not in (0, 1) or data:
            return PARSE_ERROR
        st = self.store
        if not st.config_locked():
            return EXECUTION_ERROR
        value = st.counters[p2]
        if p1 == 1:
            if value >= COUNTER_MAX:
                return EXECUTION_ERROR
            value += 1
            st.counters[p2] = value
            st.save("counters")  # durable before the answer, as the chip's EEPROM
        return value.to_bytes(4, "little")

    def _sha(self, p1: int, p2: int, data: bytes) -> bytes | int:
        mode, target = p1 & 0x07, p1 & 0xC0
        if mode == 0x00:
            self.sha = hashlib.sha256()
            return OK
        if self.sha is None:
            return EXECUTION_ERROR
        if mode == 0x01:
            if p2 != 64 or len(data) != 64:
                return PARSE_ERROR
            self.sha.update(data)
            return OK
        if mode == 0x02:
            if p2 != len(data) or p2 > 63 or target not in (0x00, 0xC0):
                return PARSE_ERROR
            self.sha.update(data)
            digest: bytes = self.sha.digest()
            self.sha = None
            if target == 0x00:
                # the emulator's reading: a digest of bytes the host sent, as good as a Nonce
                # pass-through (SourceFlag 1, no GenKey/GenDig data): never signed internally
                self.tempkey, self.tempkey_flags = digest, SOURCE_FLAG
            return digest
        return PARSE_ERROR

    # -- Read, Write, Lock ------------------------------------------------------------------

    def _where(self, p1: int, p2: int) -> tuple[int, int, int, int] | int:
        """(zone, slot, byte offset in the zone or slot, length) of a Read/Write address, or a
        status. Config and OTP: param2 = block << 3 | word; data: block << 8 | slot << 3 | word.
        A 32-byte access starts at a block (word 0)."""
        zone, n = p1 & 0x03, 32 if p1 & 0x80 else 4
        if p1 & 0x7C or zone == 3:
            return PARSE_ERROR  # encrypted access (bit 6) is not emulated
        word = p2 & 0x07
        if n == 32 and word:
            return PARSE_ERROR
        if zone == ZONE_DATA:
            slot, block = (p2 >> 3) & 0x0F, p2 >> 8
            at = block * 32 + word * 4
            if at >= SLOT_SIZES[slot] or p2 & 0x80:
                return PARSE_ERROR
            return zone, slot, at, n
        block = (p2 >> 3) & 0x1F
        at = block * 32 + word * 4
        if p2 >> 8 or at + n > (128 if zone == ZONE_CONFIG else OTP_SIZE):
            return PARSE_ERROR
        return zone, 0, at, n

    def _read(self, p1: int, p2: int, data: bytes) -> bytes | int:
        if data:
            return PARSE_ERROR
        where = self._where(p1, p2)
        if isinstance(where, int):
            return where
        zone, slot, at, n = where
        st = self.store
        if zone == ZONE_CONFIG:
            return bytes(st.config[at:at + n])  # always readable
        # the data and OTP zones are readable only once locked; a slot with SlotConfig.IsSecret
        # (bit 7) never in the clear (encrypted reads are not emulated), an ECC private key
        # (KeyConfig.Private) never at all, whatever its SlotConfig says
        if not st.data_locked():
            return EXECUTION_ERROR
        if zone == ZONE_OTP:
            return bytes(st.otp[at:at + n])
        if st.slot_config(slot) & 0x80 or st.key_config(slot) & 0x01:
            return EXECUTION_ERROR
        raw = bytes(st.slot_bytes(slot)[at:at + n])
        return raw + bytes(n - len(raw))  # past a 72-byte slot's end: undefined, zeros here

    def _write(self, p1: int, p2: int, data: bytes) -> bytes | int:
        where = self._where(p1, p2)
        if isinstance(where, int):
            return where
        zone, slot, at, n = where
        if len(data) != n:
            return PARSE_ERROR
        st = self.store
        if zone == ZONE_CONFIG:
            # bytes 0-15 (serial number, revision, I2C_Enable) are the factory's; 84-87
            # (UserExtra, UserExtraAdd, LockValue, LockConfig) change by UpdateExtra and Lock
            if st.config_locked() or at < 16 or (at < 88 and at + n > 84):
                return EXECUTION_ERROR
            st.config[at:at + n] = data
            st.save("config")
            return OK
        # the data and OTP zones take writes only after the configuration is locked
        if not st.config_locked():
            return EXECUTION_ERROR
        if zone == ZONE_OTP:
            if st.data_locked():
                return EXECUTION_ERROR  # OTP is read-only once the data zone is locked
            st.otp[at:at + n] = data
            st.save("otp")
            return OK
        if at + n > SLOT_SIZES[slot] or st.is_private(slot):
            return EXECUTION_ERROR  # past the slot, or a private key (PrivWrite only)
        if st.data_locked():
            # SlotConfig.WriteConfig (bits 12-15) 0000: Always; every other mode is Never,
            # PubInvalid or an encrypted write, none of which a clear Write may do
            if st.slot_config(slot) >> 12 or st.slot_locked(slot):
                return EXECUTION_ERROR
        base = SLOT_AT[slot] + at
        st.data[base:base + n] = data
        st.save("data")
        return OK

    def _lock(self, p1: int, p2: int, data: bytes) -> bytes | int:
        mode, check = p1 & 0x03, not p1 & 0x80
        if data or p1 & 0x40 or mode == 3 or (mode != 2 and p1 & 0x3C):
            return PARSE_ERROR
        st = self.store
        if mode == 0:  # the configuration zone, with the CRC of all its 128 bytes
            if st.config_locked():
                return EXECUTION_ERROR
            if check and crc16(bytes(st.config)) != p2.to_bytes(2, "little"):
                return EXECUTION_ERROR  # the summary does not match: nothing locked
            st.config[LOCK_CONFIG] = 0x00
            st.save("config")
            return OK
        if mode == 1:  # the data and OTP zones, with the CRC of their contents, slot by slot
            if not st.config_locked() or st.data_locked():
                return EXECUTION_ERROR
            if check and crc16(bytes(st.data) + bytes(st.otp)) != p2.to_bytes(2, "little"):
                return EXECUTION_ERROR
            st.config[LOCK_VALUE] = 0x00
            st.save("config")
            return OK
        slot = (p1 >> 2) & 0x0F  # one slot: data zone locked, KeyConfig.Lockable (bit 5)
        if not st.data_locked() or not st.key_config(slot) & 0x20 or st.slot_locked(slot):
            return EXECUTION_ERROR
        bits = (st.config[SLOT_LOCKED] | st.config[SLOT_LOCKED + 1] << 8) & ~(1 << slot)
        st.config[SLOT_LOCKED], st.config[SLOT_LOCKED + 1] = bits & 0xFF, bits >> 8
        st.save("config")
        return OK


# -- the socket -----------------------------------------------------------------------------------


def _recv_exact(conn: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        part = conn.recv(n - len(buf))
        if not part:
            return None
        buf += part
    return bytes(buf)


def serve_request(chip: Chip, conn: socket.socket) -> bool:
    """One bus request from a virtual board and its reply; False when the board hung up."""
    head = _recv_exact(conn, 4)
    if head is None:
        return False
    op, addr, n = head[0], head[1], head[2] << 8 | head[3]
    if op == ord("W"):
        data = _recv_exact(conn, n)
        if data is None:
            return False
        conn.sendall(b"K" if chip.write(addr, data) else b"N")
        return True
    if op == ord("R"):
        got = chip.read(addr, n)
        conn.sendall(b"N" if got is None else b"K" + got)
        return True
    return False  # not our framing: drop the connection


def serve(chip: Chip, server: socket.socket) -> None:
    """For ever. A bus has one master: a new connection (the board restarted) replaces the old
    one; the chip's state carries over, as a real chip keeps power across an MCU reset."""
    conn: socket.socket | None = None
    while True:
        ready, _, _ = select.select([server] if conn is None else [server, conn], [], [])
        if server in ready:
            if conn is not None:
                conn.close()
            conn, _ = server.accept()
            if conn.family == socket.AF_INET:
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            continue
        assert conn is not None
        try:
            alive = serve_request(chip, conn)
        except OSError:
            alive = False
        if not alive:
            conn.close()
            conn = None


def listen(spec: str) -> tuple[socket.socket, str]:
    """A listening socket for `unix:PATH` or `tcp:HOST:PORT` (PORT 0: any), and its address."""
    kind, _, rest = spec.partition(":")
    if kind == "unix":
        if os.path.exists(rest):
            os.unlink(rest)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(rest)
        os.chmod(rest, 0o600)
        s.listen(1)
        return s, f"unix:{rest}"
    if kind == "tcp":
        host, _, port = rest.rpartition(":")
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, int(port)))
        s.listen(1)
        return s, f"tcp:{host}:{s.getsockname()[1]}"
    raise ValueError(f"--listen takes unix:PATH or tcp:HOST:PORT, not {spec!r}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sabot.virtual.element_emulator",
                                 description="The virtual board's secure element (ATECC608).")
    ap.add_argument("--store", required=True, help="key store directory (made 0700)")
    ap.add_argument("--listen", required=True, help="unix:PATH or tcp:127.0.0.1:PORT")
    ap.add_argument("--sign-ms", type=float, default=50.0, help="Sign's execution time")
    ap.add_argument("--ecc-ms", type=float, default=60.0, help="GenKey's and Verify's")
    ap.add_argument("--cmd-ms", type=float, default=1.0, help="every other command's")
    ap.add_argument("--watchdog-ms", type=float, default=WATCHDOG_MS,
                    help="awake time before the chip sleeps by itself (0: never)")
    ap.add_argument("--address", type=lambda s: int(s, 0), default=ADDRESS)
    args = ap.parse_args(argv)
    chip = Chip(KeyStore(args.store), sign_ms=args.sign_ms, ecc_ms=args.ecc_ms,
                cmd_ms=args.cmd_ms, watchdog_ms=args.watchdog_ms, address=args.address)
    server, where = listen(args.listen)
    print(f"element emulator listening on {where}", file=sys.stderr, flush=True)
    try:
        serve(chip, server)
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

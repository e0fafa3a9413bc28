"""The emulated ATECC608 at its bus: power states (sleep, idle, awake, the watchdog), the I/O
buffer, each command's busy time, and the commands that use TempKey, the SHA engine or the keys:
Info, Random, GenKey, Nonce, Sign, Verify, Counter and SHA (Read, Write and Lock are
element_zones.py's). What it refuses, it refuses by the configuration its KeyStore holds."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed, decode_dss_signature

from sabot.virtual import element_zones as zones
from sabot.virtual.element_formats import (
    AFTER_WAKE,
    COUNTER,
    CRC_ERROR,
    EXECUTION_ERROR,
    GENKEY,
    INFO,
    LOCK,
    MISCOMPARE,
    NONCE,
    OK,
    PARSE_ERROR,
    RANDOM,
    READ,
    SHA,
    SIGN,
    SIGN_EXTERNAL,
    SIGN_INCLUDE_SN,
    VERIFY,
    WRITE,
    crc16,
    genkey_message,
    public_key_from_xy,
    public_xy,
    response,
    sign_internal_message,
    signature_to_der,
)
from sabot.virtual.element_store import REVISION, KeyStore

ADDRESS = 0x60
COUNTER_MAX = 2_097_151  # the ATECC608's counter limit
WATCHDOG_MS = 1300
# Random before the configuration zone is locked: the data sheet's fixed test pattern
RANDOM_BEFORE_LOCK = bytes((0xFF, 0xFF, 0x00, 0x00)) * 8
# GenKey modes (param1): a new private key, and/or the public key's digest into TempKey
GENKEY_PRIVATE, GENKEY_DIGEST = 0x04, 0x08
# SlotConfig.ReadKey of an ECC private key: bit 0 external signatures, bit 1 internal ones
READKEY_EXTERNAL, READKEY_INTERNAL = 0x01, 0x02
# TempKeyFlags, as the chip keeps them beside TempKey (b0-3 KeyID, b4 SourceFlag, b5 GenDigData,
# b6 GenKeyData, b7 NoMacFlag: the byte Sign internal puts in its message)
SOURCE_FLAG, GEN_DIG_DATA, GEN_KEY_DATA = 0x10, 0x20, 0x40


class Chip:
    """The chip's behaviour at the bus: power states, I/O buffer, busy time, commands."""

    def __init__(self, store: KeyStore, *, sign_ms: float = 50.0, ecc_ms: float = 60.0,
                 cmd_ms: float = 1.0, watchdog_ms: float = WATCHDOG_MS,
                 address: int = ADDRESS, clock: Callable[[], float] = time.monotonic) -> None:
        """`clock`: the chip's time in seconds, which its watchdog runs on (a command's busy
        time runs on the wall clock: a chip finishes in real time however late its emulator
        process is scheduled to answer)."""
        self.store = store
        self.clock = clock
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

    def _tick(self, now: float, wall: float) -> None:
        if (self.state == "awake" and self.watchdog_ms
                and (now - self.woke) * 1000 > self.watchdog_ms and wall >= self.busy_until):
            self._sleep()

    def _sleep(self) -> None:
        self.state = "sleep"
        self.tempkey = None
        self.sha = None
        self.out = b""

    def write(self, addr: int, data: bytes, now: float | None = None) -> bool:
        wall = time.monotonic() if now is None else now
        now = self.clock() if now is None else now
        self._tick(now, wall)
        if addr == 0x00:  # the wake pulse: SDA low long enough
            if self.state != "awake":
                self.state = "awake"
                self.woke = now
                self.out, self.read_at = response(bytes((AFTER_WAKE,))), 0
            return False
        if addr != self.address or self.state != "awake" or wall < self.busy_until or not data:
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
            self._command(data[1:], wall)
        else:
            return False
        return True

    def read(self, addr: int, n: int, now: float | None = None) -> bytes | None:
        wall = time.monotonic() if now is None else now
        now = self.clock() if now is None else now
        self._tick(now, wall)
        if addr != self.address or self.state != "awake" or wall < self.busy_until:
            return None
        chunk = self.out[self.read_at:self.read_at + n]
        self.read_at += n
        return chunk + b"\xff" * (n - len(chunk))

    def _command(self, packet: bytes, wall: float) -> None:
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
        self.busy_until = wall + self.times.get(opcode, self.cmd_ms) / 1000

    # -- the commands -------------------------------------------------------------------------

    def execute(self, opcode: int, p1: int, p2: int, data: bytes) -> bytes | int:
        """The response data of one command, or a status byte."""
        handlers: dict[int, Callable[[int, int, bytes], bytes | int]] = {
            INFO: self._info, RANDOM: self._random, GENKEY: self._genkey, NONCE: self._nonce,
            SIGN: self._sign, VERIFY: self._verify, COUNTER: self._counter, SHA: self._sha,
            READ: partial(zones.read, self.store), WRITE: partial(zones.write, self.store),
            LOCK: partial(zones.lock, self.store)}
        handler = handlers.get(opcode)
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
            xy = public_xy(key.public_key())
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
        return public_xy(key.public_key())

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

"""The emulated ATECC608's memory commands, Read, Write and Lock, on its KeyStore: what each
zone and slot lets through by the configuration the chip holds and the zones' lock state."""

from __future__ import annotations

from sabot.virtual.element_formats import EXECUTION_ERROR, OK, PARSE_ERROR, crc16
from sabot.virtual.element_store import (
    LOCK_CONFIG,
    LOCK_VALUE,
    OTP_SIZE,
    SLOT_AT,
    SLOT_LOCKED,
    SLOT_SIZES,
    ZONE_CONFIG,
    ZONE_DATA,
    ZONE_OTP,
    KeyStore,
)


def address(p1: int, p2: int) -> tuple[int, int, int, int] | int:
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


def read(st: KeyStore, p1: int, p2: int, data: bytes) -> bytes | int:
    if data:
        return PARSE_ERROR
    where = address(p1, p2)
    if isinstance(where, int):
        return where
    zone, slot, at, n = where
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


def write(st: KeyStore, p1: int, p2: int, data: bytes) -> bytes | int:
    where = address(p1, p2)
    if isinstance(where, int):
        return where
    zone, slot, at, n = where
    if len(data) != n:
        return PARSE_ERROR
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


def lock(st: KeyStore, p1: int, p2: int, data: bytes) -> bytes | int:
    mode, check = p1 & 0x03, not p1 & 0x80
    if data or p1 & 0x40 or mode == 3 or (mode != 2 and p1 & 0x3C):
        return PARSE_ERROR
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

"""The bytes an emulated ATECC608 exchanges and hashes: its opcodes and status codes, the CRC of
its command and response packets, its key and signature forms, and the messages GenKey's digest
mode and Sign internal hash (as CryptoAuthLib rebuilds them on a host)."""

from __future__ import annotations

from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

INFO, RANDOM, GENKEY, NONCE, SIGN, VERIFY, COUNTER, SHA, READ, WRITE, LOCK = (
    0x30, 0x1B, 0x40, 0x16, 0x41, 0x45, 0x24, 0x47, 0x02, 0x12, 0x17)
OK, MISCOMPARE, PARSE_ERROR, EXECUTION_ERROR, AFTER_WAKE, CRC_ERROR = (
    0x00, 0x01, 0x03, 0x0F, 0x11, 0xFF)
# Sign modes: external (TempKey is the digest), include the full serial number in an internal one
SIGN_EXTERNAL, SIGN_INCLUDE_SN = 0x80, 0x40


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


def public_xy(key: ec.EllipticCurvePublicKey) -> bytes:
    """A P-256 public key in the chip's 64-byte X||Y form."""
    return key.public_numbers().x.to_bytes(32, "big") + key.public_numbers().y.to_bytes(32, "big")


def public_key_from_xy(xy: bytes) -> ec.EllipticCurvePublicKey:
    """A P-256 public key from the chip's 64-byte X||Y form."""
    return ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), b"\x04" + xy)


def signature_to_der(rs: bytes) -> bytes:
    """The chip's 64-byte r||s as the DER form cryptography verifies."""
    return encode_dss_signature(int.from_bytes(rs[:32], "big"), int.from_bytes(rs[32:], "big"))


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


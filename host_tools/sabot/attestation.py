"""The host's check of a result key certificate (docs/ELEMENT.md "Attestation"), written from the
ATECC608B data sheet and CryptoAuthLib, not from the firmware: the certificate is the shoe's
attestation key's signature, by Sign in internal mode, of a message the element built itself, so
the host rebuilds every byte of it from what it knows — the attestation public key, the chip's
serial number, the shoe id, the key version, the new key's X||Y and sabot's configuration — and a
signature over anything else (bytes a host chose and had signed externally, another key, another
version, another shoe) verifies nothing.

  nonce      SHA-256("sabot-rekey" shoe_id(4, BE) version(2, BE))
  TempKey    SHA-256 of GenKey's 128-byte digest message (MicrochipTech/cryptoauthlib
             lib/host/atca_host.c atcah_gen_key_msg, mode 0x08): nonce, 0x40, 0x08, slot(2, LE),
             SN[8], SN[0:1], 25 zeros, X||Y
  message    Sign internal's 55 bytes (atcah_sign_internal_msg, mode 0x40, KeyID 7): TempKey,
             0x41, 0x40, 07 00, SlotConfig and KeyConfig of the result slot (LE), TempKeyFlags
             0x50 | slot (GenKeyData, SourceFlag from the Nonce pass-through), 00 00, SN[8],
             SN[4:7], SN[0:1], SN[2:3], 00 (the slot is locked), 00, 00
  signature  ECDSA P-256 over SHA-256(message), r||s"""

from __future__ import annotations

import hashlib

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, utils

from sabot.errors import SabotError

ATTESTATION_SLOT = 7
RESULT_VERSIONS = 7  # version v in slot v - 1
GENKEY, SIGN = 0x40, 0x41
GENKEY_DIGEST = 0x08  # GenKey: the public key of a stored private key, digested into TempKey
SIGN_INTERNAL_SN = 0x40  # Sign: internal message, the whole serial number included
# TempKeyFlags after a Nonce pass-through (SourceFlag, b4) and GenKey's digest (GenKeyData, b6)
TEMPKEY_FLAGS = 0x50
# sabot's configuration of the result key slots, as the chip holds it (little-endian words;
# firmware/shoe/provision.py writes them, tests/test_attestation.py checks the two agree):
# IsSecret, ReadKey 0001 (external signatures only); slot 0 WriteConfig 0 (never regenerated),
# slots 1-6 WriteConfig bit 13 (one GenKey, a rekey); KeyConfig Private, PubInfo, P-256, Lockable
RESULT_SLOT_CONFIG = (0x0081,) + (0x2081,) * (RESULT_VERSIONS - 1)
RESULT_KEY_CONFIG = 0x0033
# the attestation slot: IsSecret, ReadKey 0010 (internal signatures only), WriteConfig 0
ATTESTATION_SLOT_CONFIG = 0x0082
ATTESTATION_KEY_CONFIG = 0x0033


def rekey_nonce(shoe_id: int, version: int) -> bytes:
    """The nonce the shoe hashes into TempKey before GenKey's digest of version `version`."""
    return hashlib.sha256(b"sabot-rekey" + shoe_id.to_bytes(4, "big")
                          + version.to_bytes(2, "big")).digest()


def genkey_digest(tempkey: bytes, slot: int, serial: bytes, xy: bytes) -> bytes:
    """TempKey after GenKey mode 0x08 of `slot` holding public key `xy`."""
    msg = (tempkey + bytes((GENKEY, GENKEY_DIGEST, slot, 0, serial[8])) + serial[0:2]
           + bytes(25) + xy)
    assert len(msg) == 128
    return hashlib.sha256(msg).digest()


def sign_internal_message(tempkey: bytes, slot: int, serial: bytes) -> bytes:
    """The 55 bytes the attestation key signs for a GenKey digest of result slot `slot`."""
    slot_config, key_config = RESULT_SLOT_CONFIG[slot], RESULT_KEY_CONFIG
    msg = (tempkey
           + bytes((SIGN, SIGN_INTERNAL_SN, ATTESTATION_SLOT, 0,
                    slot_config & 0xFF, slot_config >> 8, key_config & 0xFF, key_config >> 8,
                    TEMPKEY_FLAGS | slot, 0, 0, serial[8]))
           + serial[4:8] + serial[0:2] + serial[2:4]
           + b"\x00\x00\x00")  # SlotLocked bit 0: locked; not a validated public key; zero
    assert len(msg) == 55
    return msg


def certificate_message(serial: bytes, shoe_id: int, version: int, xy: bytes) -> bytes:
    """What a shoe's attestation key signs (the SHA-256 of) to certify result key `version`."""
    if not 1 <= version <= RESULT_VERSIONS:
        raise SabotError(f"result key version {version} has no slot in the element (1 to "
                         f"{RESULT_VERSIONS})")
    if len(serial) != 9 or len(xy) != 64:
        raise SabotError("a certificate names a 9-byte serial number and a 64-byte X||Y")
    slot = version - 1
    tempkey = genkey_digest(rekey_nonce(shoe_id, version), slot, serial, xy)
    return sign_internal_message(tempkey, slot, serial)


def check_certificate(attestation: ec.EllipticCurvePublicKey, serial: bytes, shoe_id: int,
                      version: int, xy: bytes, certificate: bytes) -> None:
    """Return when `certificate` (r||s) is the attestation key's Sign-internal certificate of
    result key `version` = `xy` in the element `serial` of shoe `shoe_id`; SabotError if not."""
    message = certificate_message(serial, shoe_id, version, xy)
    if len(certificate) != 64:
        raise SabotError("a certificate is 64 bytes r||s")
    der = utils.encode_dss_signature(int.from_bytes(certificate[:32], "big"),
                                     int.from_bytes(certificate[32:], "big"))
    try:
        attestation.verify(der, message, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        raise SabotError(f"result key version {version} is not certified by the shoe's "
                         "attestation key") from None

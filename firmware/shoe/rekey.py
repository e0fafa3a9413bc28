"""A new result key version, and the certificate that makes the host believe it.

The certificate is made by the element over data it builds itself: the attestation key (slot 7,
made once at provisioning, internal signatures only) signs, with Sign in internal mode, a message
the chip assembles from TempKey, which GenKey's digest mode has just filled with the SHA-256 of
the new slot's public key, its slot number and the chip's serial number. The shoe chooses only
the nonce hashed in first, and that is fixed too: SHA-256 of "sabot-rekey" shoe_id(4)
version(2), so the host rebuilds every byte (sabot/attestation.py) and a certificate for one
shoe and version is good for no other. No bytes the host sends are ever signed: the attestation
slot refuses external Sign, and Sign internal refuses a TempKey a Nonce or SHA put there.

Runs only on a host command (rekey), never on the card path: import it when needed."""

import struct

from shoe.element import GENKEY, SIGN
from shoe.provision import ATTESTATION_SLOT, LOCK_SLOT, RESULT_VERSIONS, lock
from shoe.store import load_identity, result_slot, write_identity

_GENKEY_DIGEST = 0x08  # the public key of a stored private key, and its digest into TempKey
_SIGN_INTERNAL_SN = 0x40  # Sign internal, the whole serial number in the message


def nonce_message(shoe_id, version):
    """What the rekey nonce is the SHA-256 of (domain-separated from every other digest)."""
    return b"sabot-rekey" + struct.pack(">IH", shoe_id, version)


def certify(element, shoe_id, version):
    """The attestation key's certificate of result key `version` (the key in its slot):
    (X||Y(64) as GenKey digested it, nonce(32), certificate r||s(64))."""
    nonce = bytearray(32)
    element.sha256(nonce_message(shoe_id, version), nonce, False)  # the chip hashes, out only
    element.load_digest(nonce)  # Nonce pass-through: TempKey valid, SourceFlag 1
    xy = bytearray(64)
    # TempKey <- SHA-256(TempKey, GenKey, mode, slot, SN, X||Y): GenKeyData set, KeyID the slot
    element.command(GENKEY, _GENKEY_DIGEST, result_slot(version), 64, out=xy)
    certificate = bytearray(64)
    element.command(SIGN, _SIGN_INTERNAL_SN, ATTESTATION_SLOT, 64, out=certificate)
    return xy, nonce, certificate


def make(element, flash):
    """Make the next result key version inside the element and certify it, the identity in
    flash left as it is: (version, X||Y(64), nonce(32), certificate(64)). A slot a power cut left
    made (GenKey done and the slot locked, the identity never moved) is certified as it is: its
    key was made there, and a locked slot is never made again. Raises ValueError when the shoe
    has no identity or every result slot is used, ElementError when the chip refuses."""
    from shoe.element import ElementError

    identity = load_identity(flash)
    if identity is None:
        raise ValueError("shoe not provisioned: no identity in flash")
    version, shoe_id = identity
    new = version + 1
    if new > RESULT_VERSIONS:
        raise ValueError("every result key slot is used: the element holds no version %d" % new)
    slot = result_slot(new)
    xy = bytearray(64)
    made = True
    try:
        element.genkey(slot, xy)
        lock(element, LOCK_SLOT | slot << 2)  # that version can never be made again
    except ElementError:
        made = False  # made and locked before a power cut: certified below as the chip holds it
    certified, nonce, certificate = certify(element, shoe_id, new)
    if made and certified != xy:
        raise ValueError("the element certified another key than the one it made")
    return new, bytes(certified), bytes(nonce), bytes(certificate)


def commit(flash, version):
    """The new version becomes current (after its frames are logged): the flash last, so a
    power cut before it leaves the old version current."""
    _, shoe_id = load_identity(flash)
    write_identity(flash, shoe_id, version)


def rekey(element, flash):
    """make(), then commit(): the next version made and current."""
    made = make(element, flash)
    commit(flash, made[0])
    return made

"""REPL helpers for an authenticated maintenance session (the port reaches the REPL only after a
signed maintenance command). `sabot deploy --rekey` runs `mpremote exec "import maint;
maint.rekey()"` and parses the line it prints, so keep the formats exactly:

  maint.public()  ->  KEY <version> <hex X||Y>     the current result key's public half
  maint.rekey()   ->  REKEY <version> <hex X||Y> <hex r||s>   a new key made inside the element
                      (GenKey in the next result slot), now the current one, and its certificate:
                      the previous key's signature of "sabot-rekey" shoe_id(4) version(2) X||Y
  maint.check()   ->  INTEGRITY None | <reason>     the boot check of the code tree, by hand (on
                      a blank element, which verifies nothing yet, the digest alone: its reason
                      is then "no secure element to check the MANIFEST signature")
  maint.state()   ->  STATE blank | configured | provisioned | foreign   the element's
  maint.provision(shoe_id, variant, "<hex X||Y>")   factory provisioning of a blank shoe for the
                  ->  PROVISIONED <shoe_id> <hex serial> <hex X||Y> <hex r||s>    command key
                  |   REFUSED <reason>                (shoe/provision.py)

Nothing here ever sees a private key: the element makes and keeps it. The flash file `identity`
(shoe_id, key_version) is rewritten atomically after the element holds the new key; a power cut
in between leaves the old version current and the new slot made (a second rekey then fails on the
locked slot: provision again at the factory)."""

import struct
from binascii import unhexlify

import board

from shoe.provision import LOCK_SLOT, RESULT_VERSIONS, lock
from shoe.store import Flash, load_identity, result_slot, write_identity


def _element():
    make = getattr(board, "element", None)  # the virtual board: the emulator's socket
    if make is not None:
        return make()
    from shoe.drivers import hw

    return hw.element(board)


def _identity(flash):
    identity = load_identity(flash)
    if identity is None:
        raise ValueError("shoe not provisioned: no identity in flash")
    return identity


def _hex(b):
    return "".join("%02x" % x for x in b)


def public():
    flash = Flash(board.FLASH_DIR)
    version, _ = _identity(flash)
    xy = bytearray(64)
    _element().public_key(result_slot(version), xy)
    print("KEY %d %s" % (version, _hex(xy)))


def rekey_message(shoe_id, version, xy):
    """What the previous key signs to vouch for a new one (the host checks it: registry.py)."""
    return b"sabot-rekey" + struct.pack(">IH", shoe_id, version) + bytes(xy)


def rekey():
    flash = Flash(board.FLASH_DIR)
    version, shoe_id = _identity(flash)
    new = version + 1
    if new > RESULT_VERSIONS:
        raise ValueError("every result key slot is used: the element holds no version %d" % new)
    xy = bytearray(64)
    element = _element()
    element.genkey(result_slot(new), xy)
    lock(element, LOCK_SLOT | result_slot(new) << 2)  # that version can never be made again
    # The certificate: the previous key, inside the element, signs the new one, so a verifier
    # trusts version N+1 only through version N (and so back to the key registered at the
    # factory), never because a registry file lists it.
    digest = bytearray(32)
    element.sha256(rekey_message(shoe_id, new, xy), digest)
    certificate = bytearray(64)
    element.sign(result_slot(version), certificate)
    write_identity(flash, shoe_id, new)
    print("REKEY %d %s %s" % (new, _hex(xy), _hex(certificate)))


def provision(shoe_id, variant, command_hex):
    """`sabot provision --port`: only a blank shoe has a REPL to run this in."""
    import os

    from shoe import provision as factory

    try:
        os.mkdir(board.FLASH_DIR)  # a blank shoe's filesystem may not have it yet
    except OSError:
        pass
    try:
        command_xy = unhexlify(command_hex)
        serial, xy, proof = factory.provision(_element(), Flash(board.FLASH_DIR), shoe_id,
                                              variant, command_xy)
    except (factory.Refused, ValueError) as e:
        print("REFUSED", e)
        return
    print("PROVISIONED %d %s %s %s" % (shoe_id, _hex(serial), _hex(xy), _hex(proof)))


def state():
    """`STATE blank | configured | provisioned | foreign`: the element's provisioning state."""
    from shoe import provision as factory

    print("STATE", factory.state(_element()))


def check():
    """The boot check, run by hand: `INTEGRITY None` when the code tree is the signed build (what
    `sabot deploy` asks after copying), else `INTEGRITY <reason>`."""
    import os

    from shoe import integrity
    from shoe import provision as factory

    element = _element()
    if factory.state(element) == "blank":
        element = None  # no Verify before the configuration lock: the tree's digest alone
    reason = integrity.check(os.getcwd(), (board.FLASH_DIR.strip("/"),), element)
    print("INTEGRITY", reason)

"""REPL helpers for an authenticated maintenance session (the port reaches the REPL only after a
signed maintenance command). `sabot deploy --rekey` runs `mpremote exec "import maint;
maint.rekey()"` and parses the line it prints, so keep the formats exactly:

  maint.public()  ->  KEY <version> <hex X||Y>     the current result key's public half
  maint.rekey()   ->  REKEY <version> <hex X||Y>   a new key made inside the element (GenKey in
                                                   the next result slot), now the current one
  maint.check()   ->  INTEGRITY None | <reason>     the boot check of the code tree, by hand

Nothing here ever sees a private key: the element makes and keeps it. The flash file `identity`
(shoe_id, key_version) is rewritten atomically after the element holds the new key; a power cut
in between leaves the old version current and the new slot made (a second rekey then fails on the
locked slot: provision again at the factory)."""

import board

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


def rekey():
    flash = Flash(board.FLASH_DIR)
    version, shoe_id = _identity(flash)
    new = version + 1
    xy = bytearray(64)
    _element().genkey(result_slot(new), xy)
    write_identity(flash, shoe_id, new)
    print("REKEY %d %s" % (new, _hex(xy)))


def check():
    """The boot check, run by hand: `INTEGRITY None` when the code tree is the signed build (what
    `sabot deploy` asks after copying), else `INTEGRITY <reason>`."""
    import os

    from shoe import integrity

    reason = integrity.check(os.getcwd(), (board.FLASH_DIR.strip("/"),), _element())
    print("INTEGRITY", reason)

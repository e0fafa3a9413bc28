"""REPL helpers of a blank shoe (its element never provisioned: the only state with a REPL).
`sabot deploy` and `sabot provision --port` run them with mpremote and parse the lines they
print, so keep the formats exactly:

  maint.check()   ->  INTEGRITY None | <reason>     the boot check of the code tree, by hand (on
                      a blank element, which verifies nothing yet, the digest alone: its reason
                      is then "no secure element to check the MANIFEST signature")
  maint.state()   ->  STATE blank | configured | provisioned | foreign   the element's
  maint.provision(shoe_id, variant, "<hex X||Y>", decks)   factory provisioning of a blank shoe
                  ->  PROVISIONED <shoe_id> <hex serial> <hex X||Y> <hex r||s> <hex attestation
                      X||Y> <hex certificate> <hex r||s of the log's first checkpoint>   for the
                      command key, dealing `decks` decks (at most, and by default, the board's
                  |   REFUSED <reason>            DECKS)

Nothing here ever sees a private key: the element makes and keeps it. Once provisioned the shoe
offers no REPL: updates and rekeys are commands of the sabot protocol (shoe/maintain.py)."""

from binascii import unhexlify

import board

from shoe.store import Flash


def _element():
    make = getattr(board, "element", None)  # the virtual board: the emulator's socket
    if make is not None:
        return make()
    from shoe.drivers import hw

    return hw.element(board)


def _flash():
    """The shoe's flash as firmware/main.py opens it: its log on the board's raw partition."""
    log_device = None
    if getattr(board, "element", None) is None:  # a board's own hardware (not the virtual one)
        from shoe.drivers import hw

        log_device = hw.log_device(board)
    return Flash(board.FLASH_DIR, log_device)


def _hex(b):
    return "".join("%02x" % x for x in b)


def provision(shoe_id, variant, command_hex, decks=None, rules=""):
    """`sabot provision --port`: only a blank shoe has a REPL to run this in. `rules`: 21
    Baccarat's two rule bytes, in hex."""
    import os

    from shoe import provision as factory

    if decks is None:
        decks = board.DECKS
    if not 1 <= decks <= board.DECKS:  # the board's data: what its shoe holds
        print("REFUSED this board's shoe holds 1 to %d decks, not %d" % (board.DECKS, decks))
        return
    try:
        os.mkdir(board.FLASH_DIR)  # a blank shoe's filesystem may not have it yet
    except OSError:
        pass
    try:
        command_xy = unhexlify(command_hex)
        serial, xy, proof, attestation, certificate, first = factory.provision(
            _element(), _flash(), shoe_id, variant, command_xy, decks, unhexlify(rules))
    except (factory.Refused, ValueError) as e:
        print("REFUSED", e)
        return
    print("PROVISIONED %d %s %s %s %s %s %s" % (shoe_id, _hex(serial), _hex(xy), _hex(proof),
                                                _hex(attestation), _hex(certificate),
                                                _hex(first)))


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

"""Genuine shoe traffic at host speed: the shoe firmware's own modules (pure Python, so they run on
CPython too) dealing shuffled shoes, for benchmarks of the validator. Tests use the real MicroPython."""

import os
import sys

from . import keys
from .cards import CUT, RANKS, SUITS, shuffled_shoe
from .paths import FIRMWARE
from .virtual import provision_flash


class _Collect:
    def __init__(self):
        self.data = bytearray()

    def write(self, b):
        self.data += b

    def show(self, *state):
        pass

    def announce(self, *result):
        pass


def generate(workdir, shoes, seed=0):
    """(key, capture bytes, rounds) for `shoes` shoes dealt by the firmware code with a host acking."""
    if "micropython" not in sys.modules:  # the firmware's one MicroPython-only import, for CPython
        import types

        sys.modules["micropython"] = types.SimpleNamespace(const=lambda x: x)
    sys.path.insert(0, str(FIRMWARE))
    from shoe.app import IN_NEW_SHOE, ShoeApp
    from shoe.dealing import PH_ENDED
    from shoe.store import Flash

    key = keys.create(os.path.join(workdir, "shoe.key"))
    provision_flash(os.path.join(workdir, "flash"), key)
    out = _Collect()
    app = ShoeApp(Flash(os.path.join(workdir, "flash")), out, out)
    app.start()
    rounds = 0
    for n in range(shoes):
        if n:
            app._input(IN_NEW_SHOE)
        for t in shuffled_shoe(8, seed + n):
            if app.shoe.phase == PH_ENDED:
                break
            card = 52 if t == CUT else RANKS.index(t[0]) * 4 + SUITS.index(t[1])
            app.shoe.card_out(card)
            rounds += app.shoe.events >> 3 & 1
            app._commit(1, card, 0)
            app._acked(app.seq, 0)
    return key, bytes(out.data), rounds

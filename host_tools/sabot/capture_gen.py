"""Genuine shoe traffic at host speed: the shoe firmware's own modules (pure Python: they import
under CPython too) dealing shuffled shoes through their public seams — sensor bytes, exit edges,
and a host's authentic commands — for benchmarks of the validator. Tests use the real
MicroPython."""

from __future__ import annotations

import os
import struct
import sys

from . import keys
from .cards import CUT, shuffled_shoe
from .paths import FIRMWARE
from .virtual import provision_flash


class _Collect:
    """The shoe's host link and lamps: keeps what it sends, counts the results it announces."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.results = 0

    def write(self, b: bytes) -> None:
        self.data += b

    def show(self, *state: int) -> None:
        pass

    def announce(self, *result: int) -> None:
        self.results += 1


def generate(workdir: str, shoes: int, seed: int = 0) -> tuple[keys.ShoeKey, bytes, int]:
    """(key, capture bytes, rounds): `shoes` shoes dealt by the firmware code, a host acking."""
    if str(FIRMWARE) not in sys.path:
        sys.path.insert(0, str(FIRMWARE))
    from shoe import cobs, frames
    from shoe.app import ShoeApp
    from shoe.dealing import PH_ENDED
    from shoe.hmac256 import HmacKey
    from shoe.sensor import encode
    from shoe.store import Flash

    key = keys.create(os.path.join(workdir, "shoe.key"))
    provision_flash(os.path.join(workdir, "flash"), key)
    out = _Collect()
    app = ShoeApp(Flash(os.path.join(workdir, "flash")), out, out)
    app.start()
    host = frames.Signer(HmacKey(key.key), key.key_id, key.shoe_id, 0)
    counter = 0

    def command(ftype: int, payload: bytes = b"") -> None:
        nonlocal counter
        counter += 1
        app.host_bytes(cobs.encode(host.frame(counter, bytes(8), ftype, payload)))

    for n in range(shoes):
        if n:
            command(frames.C_NEW_SHOE)
        for t in shuffled_shoe(8, seed + n):
            if app.shoe.phase == PH_ENDED:
                break
            read = encode(ord("C")) if t == CUT else encode(ord("R"), t.encode())
            for b in read:
                app.sensor_byte(b)
            app.exit_edge()
            command(frames.C_ACK, struct.pack(">I", app.outbox.seq))
    return key, bytes(out.data), out.results

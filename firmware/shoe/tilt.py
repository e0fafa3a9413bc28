"""Tilt: the boot-time integrity check failed, so the shoe must not run its dealing code (which may be
what was altered). This minimal shoe, built only from the modules the check itself needs, deals nothing,
keeps the alarm on, and still answers the host: status (integrity: tilt) and the seeded HMAC challenge,
so a regulator sees exactly what is on the board. Boards call `boot()` before importing shoe.app."""

import struct

from shoe import cobs, frames, integrity
from shoe.hmac256 import HmacKey, equal
from shoe.store import load_identity

INTEGRITY_TILT = 2
ALARM_TILT = 15
PH_TILT = 5


def boot(code_root, code_skip=()):
    """None when the code matches its MANIFEST (or there is no code root: a development run)."""
    if code_root is None:
        return None
    return integrity.check(code_root, code_skip)


class TiltShoe:
    def __init__(self, flash, link, indicators, code_root, code_skip=()):
        self.flash = flash
        self.link = link
        self.indicators = indicators
        self.code_root = code_root
        self.code_skip = code_skip
        self.identity = load_identity(flash)
        self.rx = bytearray()
        self.maintenance = False

    def start(self):
        raw = self.flash.read("boot")
        self.boot = (int(raw) if raw else 0) + 1
        self.flash.write_atomic("boot", str(self.boot).encode())
        self.show()

    def show(self):
        self.indicators.show(PH_TILT, 0, 0, 0, 0, ALARM_TILT, 0)

    # every hardware input is refused: the alarm stays on
    def sensor_byte(self, b):
        pass

    def exit_edge(self):
        self.show()

    confirm_button = empty_sensor = reveal_button = exit_edge

    def supervisor(self, code):
        self.show()

    def host_bytes(self, data):
        for b in data:
            if b == 0:
                f = cobs.decode(bytes(self.rx)) if self.rx else None
                self.rx = bytearray()
                if f is not None:
                    self._command(f)
            elif len(self.rx) < 256:
                self.rx.append(b)
            else:
                self.rx = bytearray()

    def _command(self, frame):
        p = frames.parse(frame)
        if p is None or self.identity is None:
            return
        key_id, shoe_id, key = self.identity
        k = HmacKey(key)
        if p[1] != key_id or p[2] != shoe_id or not equal(k.mac(frame[:-32]), p[7]):
            return
        if p[0] == frames.C_INTEGRITY and 1 <= len(p[6]) <= 64:
            answer = bytes((INTEGRITY_TILT,)) + integrity.seeded(bytes(p[6]), self.code_root, self.code_skip)
            self._send(k, key_id, shoe_id, frames.T_INTEGRITY, answer)
        elif p[0] == frames.C_HELLO:
            status = struct.pack(">BHHHBIIIIB", PH_TILT, 0, 0, 0, 0, 0, 0, 0, 0, INTEGRITY_TILT)
            self._send(k, key_id, shoe_id, frames.T_STATUS, status)

    def _send(self, k, key_id, shoe_id, ftype, payload):
        try:
            self.link.write(cobs.encode(frames.build(k, key_id, shoe_id, self.boot, 0, bytes(8), ftype, payload)))
        except OSError:
            pass

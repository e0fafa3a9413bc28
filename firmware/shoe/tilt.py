"""Tilt: the boot-time integrity check failed, so the shoe must not run its dealing code (which may
be what was altered). This minimal shoe, built only from the modules the check itself needs, deals
nothing, keeps the alarm on, and still answers the host through the same command port: status
(integrity: tilt) and the seeded HMAC challenge, so a regulator sees exactly what is on the board.
Boards call `boot()` before importing shoe.app."""

from shoe import cobs, frames, integrity
from shoe.port import CommandPort
from shoe.store import load_identity, next_boot

try:
    from micropython import const
except ImportError:  # CPython (tests): const is only a compiler hint
    def const(x):  # type: ignore[misc]
        return x

ALARM_TILT = const(15)
PH_TILT = const(5)
_MAX_SEED = const(64)


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
        identity = load_identity(flash)
        self.identity = identity
        self.port = CommandPort(identity)
        self.signer = None
        self.maintenance = False

    def start(self):
        try:
            boot = next_boot(self.flash)
        except OSError:
            boot = 0  # a full or damaged flash: the tilted shoe still answers, unnumbered
        if self.identity:
            self.signer = frames.Signer(self.port.key, self.identity[0], self.identity[1], boot)
        self.show()

    def show(self):
        self.indicators.show(PH_TILT, 0, 0, 0, 0, ALARM_TILT, 0)

    # every hardware input is refused: the alarm stays on
    def sensor_byte(self, b):
        pass

    def card_path(self):
        return 0

    def commit_card(self, done):
        self.show()

    def exit_edge(self):
        self.show()

    confirm_button = empty_sensor = reveal_button = exit_edge

    def supervisor(self, code):
        self.show()

    def host_bytes(self, data, n=-1):
        self.port.feed(data, len(data) if n < 0 else n, self)

    def command(self, ftype, counter, payload):
        if ftype == frames.C_INTEGRITY and 1 <= len(payload) <= _MAX_SEED:
            digest = integrity.seeded(bytes(payload), self.code_root, self.code_skip)
            self._send(frames.T_INTEGRITY, frames.integrity_answer(frames.INTEGRITY_TILT, digest))
        elif ftype == frames.C_HELLO:
            status = frames.status(PH_TILT, 0, 0, 0, 0, 0, 0, 0, 0, frames.INTEGRITY_TILT,
                                   self.port.refused)
            self._send(frames.T_STATUS, status)

    def _send(self, ftype, payload):
        if self.signer is None:
            return  # unprovisioned: nothing to sign with (the port obeys nothing then anyway)
        try:
            frame = self.signer.frame(0, bytes(frames.CHAIN_LEN), ftype, payload)
            self.link.write(cobs.encode(frame))
        except OSError:
            pass

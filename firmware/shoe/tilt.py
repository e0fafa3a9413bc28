"""Tilt: the boot-time integrity check failed, so the shoe must not run its dealing code (which may
be what was altered). This minimal shoe, built only from the modules the check itself needs, deals
nothing, keeps the alarm on, and still answers the host through the same command port: status
(integrity: tilt) and the seeded HMAC challenge, both signed by the secure element, so a regulator
sees exactly what is on the board. Boards call `boot()` before importing shoe.app."""

from shoe import cobs, frames, integrity
from shoe.port import CommandPort, sign_into
from shoe.store import load_identity, next_boot, result_slot

try:
    from micropython import const
except ImportError:  # CPython (tests): const is only a compiler hint
    def const(x):  # type: ignore[misc]
        return x

ALARM_TILT = const(15)
PH_TILT = const(5)
_MAX_SEED = const(64)


def boot(code_root, code_skip=(), element=None):
    """None when the code matches its signed MANIFEST (or there is no code root: a development
    run), else the reason for the tilt."""
    if code_root is None:
        return None
    return integrity.check(code_root, code_skip, element)


class TiltShoe:
    def __init__(self, flash, link, indicators, code_root, code_skip=(), element=None):
        self.flash = flash
        self.link = link
        self.indicators = indicators
        self.code_root = code_root
        self.code_skip = code_skip
        self.element = element
        identity = load_identity(flash)
        self.identity = identity
        self.port = CommandPort(identity, element)
        self.boot = 0
        self.maintenance = False
        self._buf = bytearray(frames.MAX_FRAME)
        self._tx = bytearray(frames.MAX_ENCODED)

    def start(self):
        try:
            self.boot = next_boot(self.flash)
        except OSError:
            self.boot = 0  # a full or damaged flash: the tilted shoe still answers, unnumbered
        try:
            self.port.start()
        except Exception:
            pass  # no element: the shoe answers nothing, the alarm stays on
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

    def service(self, now=0):
        self.port.service(self)  # a hello owed from a burst

    def busy(self):
        return self.port.owed > 0

    def settle(self):
        pass  # nothing is ever queued in the element here

    def host_bytes(self, data, n=-1):
        self.port.feed(data, len(data) if n < 0 else n, self)

    def command(self, ftype, counter, payload):
        buf = self._buf
        at = frames.HEADER_LEN
        if ftype == frames.C_INTEGRITY and 1 <= len(payload) <= _MAX_SEED:
            digest = integrity.seeded(bytes(payload), self.code_root, self.code_skip)
            self._send(frames.T_INTEGRITY,
                       frames.integrity_into(buf, at, frames.INTEGRITY_TILT, digest))
        elif ftype == frames.C_HELLO:
            n = frames.status_into(buf, at, PH_TILT, 0, 0, 0, 0, self.port.counter, 0, 0, 0,
                                   frames.INTEGRITY_TILT, self.port.refused)
            self._send(frames.T_STATUS, n)

    def _send(self, ftype, n):
        if self.identity is None or self.element is None:
            return  # unprovisioned: nothing to sign with (the port obeys nothing then anyway)
        key_version, shoe_id = self.identity
        buf = self._buf
        # payload already at HEADER_LEN: the header goes in front (seq 0, zero chain: the tilted
        # shoe replays no log)
        frames.head_into(buf, 0, ftype, key_version, frames.shoe_bytes(shoe_id), self.boot, 0)
        try:
            m = sign_into(self.element, result_slot(key_version), buf, frames.HEADER_LEN + n)
            self.link.write(self._tx, cobs.encode_into(buf, m, self._tx))
        except Exception:
            pass  # no host or no element: nothing to answer with

"""The command port: host commands in. Bytes from the host link collect in a preallocated buffer up
to each 0x00 delimiter; each frame is COBS-decoded and checked — this shoe's key id and shoe id,
its MAC, and for every command that changes anything a counter above the last one accepted (so a
recorded command cannot be played again). Used by the dealing shoe and the tilted shoe alike."""

from shoe import cobs, frames
from shoe.hmac256 import HmacKey, equal

try:
    from micropython import const
except ImportError:  # CPython (tests): const is only a compiler hint
    def const(x):  # type: ignore[misc]
        return x

# Why an authentic command was refused (the command_rejected frame's reason)
REJ_NOT_NOW = const(4)
REJ_UNKNOWN = const(5)


def uncounted(ftype):
    """Commands that change nothing: any authentic copy, even a replayed one, may be answered."""
    return ftype == frames.C_HELLO or ftype == frames.C_INTEGRITY


class CommandPort:
    def __init__(self, identity):
        """identity: (key_id, shoe_id, key) from flash, or None when the shoe is not provisioned
        (then it obeys nothing)."""
        self.identity = identity
        self.key = HmacKey(identity[2]) if identity else None
        self.counter = 0  # the last counted command accepted
        self.refused = 0  # frames refused since boot: not a command, not ours, bad MAC, replayed
        self._rx = bytearray(frames.MAX_ENCODED)
        self._n = 0
        self._frame = bytearray(frames.MAX_FRAME)

    def feed(self, data, n, shoe):
        """n bytes of `data` from the host link: shoe.command(type, counter, payload) for each
        complete frame that is an authentic, fresh command."""
        rx = self._rx
        for i in range(n):
            b = data[i]
            if b == 0:
                if self._n:
                    self._check(shoe)
                self._n = 0
            elif self._n < frames.MAX_ENCODED:
                rx[self._n] = b
                self._n += 1
            else:
                self._n = 0  # longer than any frame: line noise; resynchronise at the next zero

    def _check(self, shoe):
        n = cobs.decode_into(self._rx, self._n, self._frame)
        if n < 0 or self.key is None or self.identity is None:
            self.refused += 1
            return
        frame = bytes(self._frame[:n])
        p = frames.parse(frame)
        if p is None:
            self.refused += 1
            return
        ftype, key_id, shoe_id, _, counter, _, payload, mac = p
        my_key_id, my_shoe_id, _ = self.identity
        if (not frames.is_command(frame) or key_id != my_key_id or shoe_id != my_shoe_id
                or not equal(self.key.mac(frames.signed_part(frame)), mac)
                or (not uncounted(ftype) and counter <= self.counter)):
            self.refused += 1
            return
        if not uncounted(ftype):
            self.counter = counter
        shoe.command(ftype, counter, payload)

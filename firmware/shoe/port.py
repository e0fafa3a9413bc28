"""The command port: host commands in. Bytes from the host link collect in a preallocated buffer up
to each 0x00 delimiter; each frame is COBS-decoded and checked: a command (the direction bit), this
shoe's id, key_id 0, and — but for hello and verify, which change nothing and are only rate-limited
— the host command key's signature, checked inside the secure element (SHA of the body, then
Verify stored against slot 9). A counted command must carry the element's command counter + 1; once
accepted the shoe increments that monotonic counter in the element, so a recorded command can
never be played again, not even after a reflash. A refused frame costs nothing but a count: no
flash write, no sequence number. Used by the dealing shoe and the tilted shoe alike.

Verifying a command needs the element free: a queued Sign of a shoe frame is waited for first
(shoe.settle()). That delay is acceptable for a command, never for a card."""

from shoe import cobs, frames
from shoe.element import ElementError, ticks_diff, ticks_ms  # (CPython's clock in tests)

try:
    from micropython import const
except ImportError:  # CPython (tests): const is only a compiler hint
    def const(x):  # type: ignore[misc]
        return x

# Why an authentic command was refused (the command_rejected frame's reason)
REJ_NOT_NOW = const(4)
REJ_UNKNOWN = const(5)

COMMAND_KEY_SLOT = const(9)  # the host command key's public half: a 72-byte slot of the element
_COUNTER = const(0)  # the element's monotonic counter that numbers counted commands
_HELLOS_PER_S = const(5)
_VERIFIES_PER_S = const(1)
_OWED_MAX = const(4)  # hellos over the rate kept to answer later: a waiting host gets its status
_ANY = bytes(4)  # the shoe id of a hello to whichever shoe is on the port


def uncounted(ftype):
    """Commands that change nothing: any copy, even a replayed one, may be answered."""
    return ftype == frames.C_HELLO or ftype == frames.C_INTEGRITY


class CommandPort:
    def __init__(self, identity, element):
        """identity: (key_version, shoe_id) from flash, or None when the shoe is not provisioned
        (then it obeys nothing)."""
        self.identity = identity
        self._shoe = frames.shoe_bytes(identity[1]) if identity else _ANY
        self.element = element
        self.counter = 0  # the element's command counter: the last counted command accepted
        self.refused = 0  # frames refused since boot: not a command, not ours, bad signature,
        # a stale counter, a hello or verify over the rate limit
        self._rx = bytearray(frames.MAX_ENCODED)
        self._n = 0
        self._frame = bytearray(frames.MAX_FRAME)
        self._digest = bytearray(frames.DIGEST_LEN)
        self._window = ticks_ms()
        self._hellos = 0
        self._verifies = 0
        self.owed = 0  # hellos over the rate, answered when the rate allows

    def start(self):
        """Read the command counter out of the element once; the port tracks it from then on."""
        if self.element is not None:
            self.counter = self.element.counter(_COUNTER)

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

    def consume(self, shoe):
        """Use up the next command counter without a command (a supervisor's resolution at the
        shoe). Not in the card path."""
        shoe.settle()  # the element does one thing at a time
        try:
            self.counter = self.element.counter_increment(_COUNTER)
        except ElementError:
            pass  # bus noise: the withheld command stays possible until the next one moves it

    def service(self, shoe):
        """Answer a hello owed from a burst once the rate allows. Allocation-free."""
        if self.owed and not self._over_rate(frames.C_HELLO):
            self.owed -= 1
            shoe.command(frames.C_HELLO, 0, b"")

    def _over_rate(self, ftype):
        now = ticks_ms()
        if ticks_diff(now, self._window) >= 1000:
            self._window = now
            self._hellos = self._verifies = 0
        if ftype == frames.C_HELLO:
            self._hellos += 1
            return self._hellos > _HELLOS_PER_S
        self._verifies += 1
        return self._verifies > _VERIFIES_PER_S

    def _check(self, shoe):
        n = cobs.decode_into(self._rx, self._n, self._frame)
        if n < 0 or self.identity is None or self.element is None:
            self.refused += 1
            return
        frame = bytes(self._frame[:n])
        p = frames.parse(frame)
        if p is None:
            self.refused += 1
            return
        ftype, key_id, _, _, counter, _, payload, sig = p
        # 0: any shoe (the id is compared by byte: see frames.shoe_bytes)
        mine = frames.same_shoe(frame, self._shoe) or (frames.same_shoe(frame, _ANY)
                                                      and uncounted(ftype))
        if not frames.is_command(frame) or key_id != 0 or not mine:
            self.refused += 1
            return
        if ftype == frames.C_UPDATE_DATA:
            # no Verify: the hash chain of the update session authenticates it (shoe/update.py),
            # and one that is not the session's next chunk costs one SHA-256 in software
            if frames.same_shoe(frame, self._shoe):
                shoe.command(ftype, counter, payload)
            else:
                self.refused += 1
            return
        if uncounted(ftype):
            if not self._over_rate(ftype):
                shoe.command(ftype, counter, payload)
            elif ftype == frames.C_HELLO and self.owed < _OWED_MAX:
                self.owed += 1  # a burst: answered later, at the allowed rate
            else:
                self.refused += 1
            return
        counted = ftype != frames.C_ACK  # an ack only moves forward: a replayed one does nothing
        if counted and counter != self.counter + 1:
            self.refused += 1  # stale or from the future: refused before the costly check
            return
        if not self._authentic(shoe, frame, sig):
            self.refused += 1
            return
        if counted:
            try:
                self.counter = self.element.counter_increment(_COUNTER)
            except ElementError:  # not counted in the element: not obeyed (the host sends again)
                self.refused += 1
                return
        shoe.command(ftype, counter, payload)

    def _authentic(self, shoe, frame, sig):
        el = self.element
        shoe.settle()  # a queued Sign first: the element does one thing at a time
        try:
            el.sha_from(frame, 0, len(frame) - frames.SIG_LEN, self._digest, False)
            return el.verify_stored(COMMAND_KEY_SLOT, self._digest, sig)
        except ElementError:  # noise on the bus: refused, the host sends again
            return False


def sign_into(element, slot, buf, n):
    """Sign the body buf[:n] with the element (SHA, then Sign of TempKey; blocking, ~50 ms on a
    real chip): the signature goes at buf[n:]; the frame's length is returned. For the frames
    made outside the card path on request: status and integrity."""
    digest = bytearray(frames.DIGEST_LEN)
    sig = bytearray(frames.SIG_LEN)
    element.sha_from(buf, 0, n, digest)
    element.sign(slot, sig)
    buf[n : n + frames.SIG_LEN] = sig
    return n + frames.SIG_LEN

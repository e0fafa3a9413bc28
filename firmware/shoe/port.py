"""The command port: host commands in. Bytes from the host link collect in a preallocated buffer up
to each 0x00 delimiter; each frame is COBS-decoded and checked: a command (the direction bit), this
shoe's id, key_id 0, and — but for hello and verify, which change nothing and are only rate-limited
— the host command key's signature, checked inside the secure element (SHA of the body, then
Verify stored against slot 9). A counted command must carry the element's command counter + 1; once
accepted the shoe increments that monotonic counter in the element, so a recorded command can
never be played again, not even after a reflash. A refused frame costs nothing but a count: no
flash write, no sequence number. Used by the dealing shoe and the tilted shoe alike.

Anyone on the cable can forge a frame that passes the cheap checks (the shoe id and the counter
+ 1 are in every status), and each would cost the element a Verify (~60 ms). So a signed command
is only *taken* here, into one preallocated slot, at most _SIGNED_PER_S a second; `service()`
checks it one element step a call (SHA of the body, then Verify), between the outbox's frames,
never waiting. What arrives while the slot is taken or over the rate is refused and counted: the
board loop, and with it the next card's lamps, never waits for a forger."""

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
REJ_FLASH_LOW = const(6)  # a new shoe the flash could not hold (app.flash_low)

COMMAND_KEY_SLOT = const(9)  # the host command key's public half: a 72-byte slot of the element
_COUNTER = const(0)  # the element's monotonic counter that numbers counted commands
_HELLOS_PER_S = const(5)
_VERIFIES_PER_S = const(1)
_SIGNED_PER_S = const(4)  # signed commands taken for the element's check: <= 1/4 of its time
_OWED_MAX = const(4)  # hellos over the rate kept to answer later: a waiting host gets its status
_ANY = bytes(4)  # the shoe id of a hello to whichever shoe is on the port
# the slot's signed command: none, taken (waiting for the element), its body digested, verified
_FREE = const(0)
_TAKEN = const(1)
_DIGESTING = const(2)
_VERIFYING = const(3)
# checked while the outbox needed the element, its verdict kept in the job (1 authentic, 2 not):
# obeyed at the next service()
_DECIDED = const(4)


def uncounted(ftype):
    """Commands that change nothing: any copy, even a replayed one, may be answered."""
    return (ftype == frames.C_HELLO or ftype == frames.C_INTEGRITY
            or ftype == frames.C_CHECKPOINT)


class CommandPort:
    def __init__(self, identity, element):
        """identity: (key_version, shoe_id) from flash, or None when the shoe is not provisioned
        (then it obeys nothing)."""
        self.identity = identity
        self._shoe = frames.shoe_bytes(identity[1]) if identity else _ANY
        self.element = element
        self.counter = 0  # the element's command counter: the last counted command accepted
        self.refused = 0  # frames refused since boot: not a command, not ours, bad signature,
        # a stale counter, a command or hello or verify over the rate limit or while the slot
        # is taken
        self.bad_key = 0  # of them, commands whose signature the element found not the command
        # key's: the one refusal that says the host holds the wrong key (the others: again later)
        self._rx = bytearray(frames.MAX_ENCODED)
        self._n = 0
        self._frame = bytearray(frames.MAX_FRAME)
        self._digest = bytearray(frames.DIGEST_LEN)
        self._window = ticks_ms()
        self._hellos = 0
        self._verifies = 0
        self._signed = 0
        self.owed = 0  # hellos over the rate, answered when the rate allows
        # the slot: a signed command's frame (swapped with _frame, never copied) and its fields
        self._held = bytearray(frames.MAX_FRAME)
        self._held_body = 0  # its body's length: the signature follows
        self._held_type = 0
        self._held_counter = 0
        self._held_payload = b""
        self._job = _FREE

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
        self.finish(shoe)  # a command taken before the resolution goes first
        shoe.settle()  # the element does one thing at a time
        try:
            self.counter = self.element.counter_increment(_COUNTER)
        except ElementError:
            pass  # bus noise: the withheld command stays possible until the next one moves it

    def service(self, shoe):
        """One step of the taken command's check, never a wait; else answer a hello owed once the
        rate allows. Allocation-free for an ack, a checkpoint and a refused command
        (tests/test_card_path.py); a hello's status, a new shoe after the last and an update or
        rekey allocate."""
        if self._job:
            self._step(shoe)
        elif self.owed and not self._over_rate(frames.C_HELLO):
            self.owed -= 1
            shoe.command(frames.C_HELLO, 0, b"")

    def busy(self):
        """A command is being checked or a hello is owed: come back soon."""
        return self._job != _FREE or self.owed > 0

    def finish(self, shoe):
        """The taken command's check to its end, waiting for the element (for a supervisor's
        resolution or a regulator's challenge, which need the element next; never a card)."""
        while self._job:
            if self._job == _TAKEN and self.element.pending():
                shoe.settle()  # the frame the element is finishing
            self._step(shoe)

    def abandon(self):
        """The outbox needs the element at once (every RAM slot holds an unfinished frame): the
        check under way is taken to its verdict now (at most a SHA end and a Verify), and the
        command obeyed at the next service(), never from inside the outbox (a host's ack lost
        to a busy shoe would have it resend everything it holds)."""
        el = self.element
        while _TAKEN < self._job < _DECIDED:
            try:
                if self._job == _DIGESTING:
                    if el.sha_ready():
                        el.verify_start(COMMAND_KEY_SLOT, self._held, self._held_body)
                        self._job = _VERIFYING
                else:
                    verdict = el.verify_ready()
                    if verdict:
                        self._job = _DECIDED + verdict - 1
            except ElementError:
                self._job = _DECIDED + 2

    def _step(self, shoe):
        el = self.element
        verdict = 0  # 1 authentic, 2 not, 3 the element failed (the host sends again)
        try:
            if self._job >= _DECIDED:
                verdict = self._job - _DECIDED + 1
            elif self._job == _TAKEN:
                if el.pending():
                    return  # the outbox's frame first: the element does one thing at a time
                el.sha_queue(self._held, 0, self._held_body, self._digest)  # into TempKey
                self._job = _DIGESTING
            elif self._job == _DIGESTING:
                if el.sha_ready():  # the Verify at once: nothing else may take TempKey between
                    el.verify_start(COMMAND_KEY_SLOT, self._held, self._held_body)
                    self._job = _VERIFYING
            else:
                verdict = el.verify_ready()
        except ElementError:
            verdict = 3
        if verdict:
            self._job = _FREE
            if verdict == 1:
                self._obey(shoe)
            else:
                self.refused += 1
                if verdict == 2:
                    self.bad_key += 1  # signed by another key than the command key

    def _obey(self, shoe):
        ftype, counter = self._held_type, self._held_counter
        if ftype != frames.C_ACK:
            if counter != self.counter + 1:
                self.refused += 1  # the counter moved meanwhile (a supervisor's resolution)
                return
            try:
                self.counter = self.element.counter_increment(_COUNTER)
            except ElementError:  # not counted in the element: not obeyed (the host sends again)
                self.refused += 1
                return
        shoe.command(ftype, counter, self._held_payload)

    def _over_rate(self, ftype):
        now = ticks_ms()
        if ticks_diff(now, self._window) >= 1000:
            self._window = now
            self._hellos = self._verifies = self._signed = 0
        if ftype == frames.C_HELLO or ftype == frames.C_CHECKPOINT:  # each a signed answer
            self._hellos += 1
            return self._hellos > _HELLOS_PER_S
        if ftype == frames.C_INTEGRITY:
            self._verifies += 1
            return self._verifies > _VERIFIES_PER_S
        self._signed += 1
        return self._signed > _SIGNED_PER_S

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
        ftype, key_id, _, _, counter, _, payload, _ = p
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
            if ftype == frames.C_INTEGRITY and self._job:
                self.finish(shoe)  # its answer is signed: the element must be free
            if not self._job and not self._over_rate(ftype):
                shoe.command(ftype, counter, payload)
            elif ftype == frames.C_HELLO and self.owed < _OWED_MAX:
                self.owed += 1  # a burst, or a command in the element: answered later
            else:
                self.refused += 1
            return
        # an ack only moves forward: a replayed one does nothing, its counter is not checked
        if ftype != frames.C_ACK and counter != self.counter + 1:
            self.refused += 1  # stale or from the future: refused before the costly check
            return
        if self._job or self._over_rate(ftype):
            self.refused += 1  # the slot is taken, or a flood: the element is not theirs
            return
        # taken: the slot's buffer and the receive buffer swap (the payload is parse's copy)
        self._held, self._frame = self._frame, self._held
        self._held_body = n - frames.SIG_LEN
        self._held_type = ftype
        self._held_counter = counter
        self._held_payload = payload
        self._job = _TAKEN


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

"""Driver for an ATECC608-class secure element on an injected I2C bus (the machine.I2C API).

The chip holds the shoe's result-signing key: the private key is made inside it (GenKey) and never
leaves it, so a copied flash image cannot sign. The wire protocol is Microchip's CryptoAuth one:

  command  I2C write: word address 0x03, then count(1) opcode(1) param1(1) param2(2, LE) data(n)
           CRC-16(2); count covers itself through the CRC (7 + n)
  response I2C read: count(1) data(count - 3) CRC-16(2); a 4-byte response carries one status byte
  control  word address 0x00 reset the I/O buffer, 0x01 sleep (TempKey lost), 0x02 idle (kept)
  wake     SDA held low >= 60 us: a write to bus address 0x00 at 100 kHz does it on most ports,
           or the board passes `wake`; the chip then answers 04 11 33 43

Its CRC and the low-S form of its signatures: shoe/element_wire.py.

The card path (load a digest, sign it) allocates nothing: one command buffer, one response buffer,
and memoryviews of them made once per length (a slice of a memoryview is a new object on
MicroPython). `sign_start`/`sign_ready` split a Sign so the shoe loop keeps running for the ~50 ms
the chip computes; the chip NACKs its address while busy, which is how readiness is polled."""

try:
    from micropython import const
except ImportError:  # CPython (tests): const is only a compiler hint
    def const(x):  # type: ignore[misc]
        return x

import time

from shoe.element_wire import crc16, low_s


def _monotonic_ms():  # CPython (tests): MicroPython's ticks_ms on CPython's monotonic clock,
    # wrapping as it does (a small int)
    return int(time.monotonic() * 1000) & 0x3FFFFFFF  # type: ignore[attr-defined]


def _diff(a, b):
    return ((a - b + 0x20000000) & 0x3FFFFFFF) - 0x20000000


def _sleep(ms):
    time.sleep(ms / 1000)


# MicroPython's own where it has them (the board stubs type-check this file), else CPython's
ticks_ms = getattr(time, "ticks_ms", None) or _monotonic_ms
ticks_diff = getattr(time, "ticks_diff", None) or _diff
sleep_ms = getattr(time, "sleep_ms", None) or _sleep


ADDRESS = const(0x60)  # 7-bit; Microchip's data sheets write it 0xC0

# opcodes
INFO = const(0x30)
RANDOM = const(0x1B)
GENKEY = const(0x40)
NONCE = const(0x16)
SIGN = const(0x41)
VERIFY = const(0x45)
COUNTER = const(0x24)
SHA = const(0x47)
READ = const(0x02)
WRITE = const(0x12)
LOCK = const(0x17)

# status bytes the chip answers in a 4-byte response
OK = const(0x00)
MISCOMPARE = const(0x01)  # Verify / CheckMac: the signature or MAC does not match
PARSE_ERROR = const(0x03)  # bad length, opcode or parameter
ECC_FAULT = const(0x05)
SELF_TEST_ERROR = const(0x07)
HEALTH_TEST_ERROR = const(0x08)
EXECUTION_ERROR = const(0x0F)  # well-formed but not allowed now (slot config, no TempKey, ...)
AFTER_WAKE = const(0x11)
WATCHDOG_SOON = const(0xEE)
CRC_ERROR = const(0xFF)  # the chip received a command with a bad CRC
# the driver's own failures (above a byte, so never confused with a chip status)
RX_CRC = const(0x100)  # the response's CRC is wrong: noise on the bus, nothing is trusted
RX_LENGTH = const(0x101)  # a response of an impossible or unexpected length
NO_RESPONSE = const(0x102)  # no answer within the command's maximum execution time
WAKE_FAILED = const(0x103)  # no 04 11 33 43 after a wake pulse
BUSY = const(0x104)  # a queued Sign is still outstanding
NOT_QUEUED = const(0x105)  # sign_ready without sign_start

_WA_RESET = const(0x00)
_WA_SLEEP = const(0x01)
_WA_IDLE = const(0x02)
_WA_COMMAND = const(0x03)

_MODE_GENKEY_PRIVATE = const(0x04)
_MODE_GENKEY_PUBLIC = const(0x00)
_MODE_NONCE_PASSTHROUGH = const(0x03)
_MODE_SIGN_EXTERNAL = const(0x80)
_MODE_VERIFY_STORED = const(0x00)
_MODE_VERIFY_EXTERNAL = const(0x02)
_KEYTYPE_P256 = const(0x0004)
_MODE_SHA_START = const(0x00)
_MODE_SHA_UPDATE = const(0x01)
_MODE_SHA_END = const(0x02)
_SHA_TARGET_OUT_ONLY = const(0xC0)  # ATECC608: digest to the output only; 0x00 also into TempKey
_READ_32 = const(0x80)

_TX_MAX = const(1 + 7 + 128)  # word address + Verify external (signature + public key)
_RX_MAX = const(3 + 64)
# ATECC608 maximum execution times at the default clock divider (CryptoAuthLib's 608-M0 table),
# in ms; a blocking call polls until then, plus slack for the bus and the host.
_EXEC_MS = {INFO: 5, RANDOM: 23, GENKEY: 115, NONCE: 20, SIGN: 115, VERIFY: 105, COUNTER: 25,
            SHA: 36, READ: 5, WRITE: 45, LOCK: 35}
_BUSY_MAX_MS = const(115)  # the longest of them (GenKey, Sign)
# The chip's watchdog puts it to sleep 1.3 s after a wake, losing TempKey; idle + wake before
# that restarts it and keeps TempKey. 700 ms leaves room for a Sign and a late poll.
_REWAKE_MS = const(700)
_WAKE_RESPONSE = b"\x04\x11\x33\x43"
_WAKE_PULSE = b"\x00"


def build(buf, opcode, param1, param2, data=None, n=0):
    """Word address 0x03 and a command packet with n data bytes into buf; returns its length.
    The data is copied from `data`, or, when that is None, already sits at buf[6:6 + n]."""
    count = 7 + n
    buf[0] = _WA_COMMAND
    buf[1] = count
    buf[2] = opcode
    buf[3] = param1
    buf[4] = param2 & 0xFF
    buf[5] = param2 >> 8
    if data is not None:
        buf[6 : 6 + n] = data
    c = crc16(buf, 1, count - 1)
    buf[count - 1] = c & 0xFF
    buf[count] = c >> 8
    return count + 1


def _copy(dst, d, src, s, n):
    # a byte loop: a slice of src would be a new object on the heap
    for i in range(n):
        dst[d + i] = src[s + i]


class ElementError(Exception):
    """A chip status (0x01-0xFF) or one of the driver's own failures (0x100 up)."""

    def __init__(self, status):
        super().__init__(status)
        self.status = status


class Element:
    """One secure element. `bus`: machine.I2C-like (writeto, readfrom_into; a NACK raises
    OSError). `wake`: a callable holding SDA low for the wake pulse, when the board can; without
    one the driver writes to bus address 0x00, which does it at 100 kHz and below.

    `patient`: never address a busy chip — the first poll for a response waits for the command's
    maximum execution time. A busy chip NACKs, and machine.I2C reports a NACK by raising OSError,
    which allocates: a patient driver polls nothing that can fail, so the queued commands
    (sign_start/sign_ready, sha_queue/sha_ready) allocate nothing on a real chip either, at the
    cost of latency. Impatient (the default) polls at once: right for an emulator that answers
    at once."""

    def __init__(self, bus, addr=ADDRESS, wake=None, slack_ms=50, patient=False):
        self._bus = bus
        self._patient = patient
        self._addr = addr
        self._wake_fn = wake
        self._slack = slack_ms
        self._tx = bytearray(_TX_MAX)
        self._rx = bytearray(_RX_MAX)
        self._txm = memoryview(self._tx)
        self._rxm = memoryview(self._rx)
        # the views kept, by length (1-72): a list made once, which never grows on a heap the
        # firmware's loading has cut up (a dict's growing needs ever larger blocks)
        self._txv: list = [None] * 73
        self._rxv = {}
        # The card path's lengths, made now so signing never makes one: idle/sleep, Sign, Nonce,
        # SHA update and Verify stored; the count byte, the wake answer, a status, a digest, a
        # signature. `prepare` adds the SHA end lengths of the bodies a caller digests.
        for n in (1, 8, 40, 72):
            self._tx_view(n, True)
        for n in (1, 4):
            self._rx_view(0, n)
        for n in (3, 6, 34, 66):
            self._rx_view(1, n)
        self._awake = False
        self._woke = 0
        self._pending = 0  # the opcode of a queued command (SIGN, SHA, VERIFY), 0 none
        self._sent = 0
        self._sent_op = INFO
        # a queued SHA: the data buf[at:end], the digest's destination, the step (0 start sent,
        # 1 an update sent, 2 the end sent)
        self._sha_buf = self._tx
        self._sha_at = 0
        self._sha_end = 0
        self._sha_out = self._rx
        self._sha_tempkey = True
        self._sha_step = 0

    # -- views made once per length ----------------------------------------------------------

    def _tx_view(self, n, keep=False):
        v = self._txv[n] if n < 73 else None
        if v is None:
            v = self._txm[:n]  # a length nobody prepared: made for this command only
            if keep and n < 73:
                self._txv[n] = v
        return v

    def prepare(self, tails):
        """Make the views for SHA end commands with these tail lengths (0-63) now, so digesting
        bodies of those lengths (sha_from) allocates nothing later."""
        for n in tails:
            self._tx_view(8 + n, True)

    def _rx_view(self, at, n):
        key = at << 8 | n
        v = self._rxv.get(key)
        if v is None:
            v = self._rxv[key] = self._rxm[at : at + n]
        return v

    # -- power states ------------------------------------------------------------------------

    def wake(self):
        """Wake the chip and check its 04 11 33 43. A chip found awake already (the MCU reset,
        the chip kept power) ignores the pulse and still holds its last response: it is put to
        sleep, which also clears a TempKey this driver did not load, and woken again. One still
        executing a command the MCU sent before it reset answers nothing until that command
        ends: the wake is tried again for the longest execution time."""
        began = ticks_ms()
        while True:
            try:
                awake = self._wake_once()
                break
            except ElementError:
                if ticks_diff(ticks_ms(), began) > _BUSY_MAX_MS + self._slack:
                    raise
                sleep_ms(5)
        if not awake:
            self._control(_WA_SLEEP)
            if not self._wake_once():
                raise ElementError(WAKE_FAILED)
        self._awake = True
        self._woke = ticks_ms()

    def _wake_once(self):
        if self._wake_fn is not None:
            self._wake_fn()
        else:
            try:
                self._bus.writeto(0x00, _WAKE_PULSE)
            except OSError:  # nobody answers at address 0; the low SDA was the point
                pass
        sleep_ms(2)  # tWHI: 1.5 ms before the chip listens
        try:
            self._bus.readfrom_into(self._addr, self._rx_view(0, 4))
        except OSError:
            raise ElementError(NO_RESPONSE) from None
        rx = self._rx
        w = _WAKE_RESPONSE
        return rx[0] == w[0] and rx[1] == w[1] and rx[2] == w[2] and rx[3] == w[3]

    def _control(self, word_address):
        self._tx[0] = word_address
        try:
            self._bus.writeto(self._addr, self._tx_view(1))
        except OSError:
            pass  # asleep already: either way it is not awake now
        self._awake = False

    def idle(self):
        """Low power, TempKey kept; the next command wakes the chip first."""
        self._control(_WA_IDLE)

    def sleep(self):
        """Lowest power; TempKey and the SHA context are lost."""
        self._control(_WA_SLEEP)

    def _ensure_awake(self):
        if not self._awake:
            self.wake()
        elif ticks_diff(ticks_ms(), self._woke) > _REWAKE_MS:
            self.idle()
            self.wake()

    # -- one command -------------------------------------------------------------------------

    def _send(self, opcode, param1, param2, data=None, n=0):
        if self._pending:
            raise ElementError(BUSY)
        self._ensure_awake()
        length = build(self._tx, opcode, param1, param2, data, n)
        try:
            self._bus.writeto(self._addr, self._tx_view(length))
        except OSError:
            self._awake = False  # it did not take the command: asleep (watchdog) or gone
            raise ElementError(NO_RESPONSE) from None
        self._sent = ticks_ms()
        self._sent_op = opcode

    def _due(self):
        """Whether a response may be asked for now (a patient driver waits for the maximum
        execution time of the command in flight)."""
        return not self._patient or ticks_diff(ticks_ms(), self._sent) >= _EXEC_MS[self._sent_op]

    def _poll(self):
        """The response's count once the chip answers, -1 while it NACKs (busy)."""
        if not self._due():
            return -1
        try:
            self._bus.readfrom_into(self._addr, self._rx_view(0, 1))
        except OSError:
            return -1
        count = self._rx[0]
        if count < 4 or count > _RX_MAX:
            raise ElementError(RX_LENGTH)
        try:
            self._bus.readfrom_into(self._addr, self._rx_view(1, count - 1))
        except OSError:
            raise ElementError(NO_RESPONSE) from None
        return count

    def _check(self, count, expect):
        """Raise unless rx holds a good response of `expect` data bytes; a status when 1."""
        rx = self._rx
        c = crc16(rx, 0, count - 2)
        if rx[count - 2] != c & 0xFF or rx[count - 1] != c >> 8:
            raise ElementError(RX_CRC)
        if count == 4:
            status = rx[1]
            if expect == 1 and (status == OK or status == MISCOMPARE):
                return status
            if status != OK:
                raise ElementError(status)
        if count - 3 != expect:
            raise ElementError(RX_LENGTH)
        return OK

    def _wait(self, opcode):
        limit = _EXEC_MS[opcode] + self._slack
        while True:
            # the time before the poll: a NACK to a poll asked within the limit is no timeout,
            # however late it is read (an MCU held up after it, a slow host's virtual board)
            waited = ticks_diff(ticks_ms(), self._sent)
            count = self._poll()
            if count >= 0:
                return count
            if waited > limit:
                raise ElementError(NO_RESPONSE)
            if self._patient and waited < _EXEC_MS[opcode]:
                sleep_ms(_EXEC_MS[opcode] - waited)
            else:
                sleep_ms(1)

    def _run(self, opcode, param1, param2, expect, data=None, n=0, out=None):
        self._send(opcode, param1, param2, data, n)
        status = self._check(self._wait(opcode), expect)
        if out is not None:
            self._copy_out(out, expect)
        return status

    def _copy_out(self, out, n, at=0):
        rx = self._rx
        for i in range(n):
            out[at + i] = rx[1 + i]

    # -- commands ----------------------------------------------------------------------------

    def info(self):
        """The revision word (4 bytes, e.g. 00 00 60 03 for an ATECC608B)."""
        out = bytearray(4)
        self._run(INFO, 0x00, 0x0000, 4, out=out)
        return bytes(out)

    def random(self, out32):
        """32 random bytes from the chip's DRBG into out32."""
        self._run(RANDOM, 0x00, 0x0000, 32, out=out32)
        return out32

    def genkey(self, slot, out64):
        """A new P-256 private key made inside `slot`; its public key X||Y into out64."""
        self._run(GENKEY, _MODE_GENKEY_PRIVATE, slot, 64, out=out64)
        return out64

    def public_key(self, slot, out64):
        """The public key X||Y of the private key in `slot`."""
        self._run(GENKEY, _MODE_GENKEY_PUBLIC, slot, 64, out=out64)
        return out64

    def load_digest(self, digest32):
        """Nonce pass-through: the 32-byte digest into TempKey, for Sign or Verify."""
        self._run(NONCE, _MODE_NONCE_PASSTHROUGH, 0x0000, 1, digest32, 32)

    def sign(self, slot, out64):
        """Sign TempKey (a digest put there by load_digest or sha_end) with `slot`: r||s."""
        self._run(SIGN, _MODE_SIGN_EXTERNAL, slot, 64, out=out64)
        low_s(out64, 0)
        return out64

    def sign_digest(self, slot, digest32, out64):
        self.load_digest(digest32)
        return self.sign(slot, out64)

    def sign_start(self, slot):
        """Queue a Sign of TempKey with `slot` and return at once; poll sign_ready."""
        self._send(SIGN, _MODE_SIGN_EXTERNAL, slot)
        self._pending = SIGN

    def sign_ready(self, out64, at=0):
        """False while the chip computes; True once r||s is in out64[at:at + 64]. Raises
        ElementError on a chip error or when the chip has not answered within Sign's maximum
        time."""
        if self._pending != SIGN:
            raise ElementError(NOT_QUEUED)
        count = self._poll_pending()
        if count < 0:
            return False
        self._pending = 0
        self._check(count, 64)
        self._copy_out(out64, 64, at)
        low_s(out64, at)
        return True

    def sha_queue(self, buf, at, n, out32, tempkey=True):
        """Queue SHA-256 of buf[at:at + n] by the chip and return at once: sha_ready() then
        moves it on by at most one command per call (start, each 64-byte update, the end) and
        is True once the digest is in out32 (and in TempKey unless tempkey is False).
        Allocation-free; buf must stay unchanged meanwhile."""
        self._sha_buf = buf
        self._sha_at = at
        self._sha_end = at + n
        self._sha_out = out32
        self._sha_tempkey = tempkey
        self._sha_step = 0
        self._send(SHA, _MODE_SHA_START, 0x0000)
        self._pending = SHA

    def sha_ready(self):
        if self._pending != SHA:
            raise ElementError(NOT_QUEUED)
        count = self._poll_pending()
        if count < 0:
            return False
        self._pending = 0
        if self._sha_step == 2:
            self._check(count, 32)
            self._copy_out(self._sha_out, 32)
            return True
        self._check(count, 1)
        at = self._sha_at
        left = self._sha_end - at
        if left >= 64:
            _copy(self._tx, 6, self._sha_buf, at, 64)
            self._send(SHA, _MODE_SHA_UPDATE, 64, None, 64)
            self._sha_at = at + 64
            self._sha_step = 1
        else:
            _copy(self._tx, 6, self._sha_buf, at, left)
            mode = _MODE_SHA_END if self._sha_tempkey else _MODE_SHA_END | _SHA_TARGET_OUT_ONLY
            self._send(SHA, mode, left, None, left)
            self._sha_step = 2
        self._pending = SHA
        return False

    def _poll_pending(self):
        late = ticks_diff(ticks_ms(), self._sent) > _EXEC_MS[self._sent_op] + self._slack
        try:
            count = self._poll()
        except ElementError:
            self._pending = 0
            raise
        if count < 0 and late:  # (judged before the poll, as in _wait)
            self._pending = 0
            raise ElementError(NO_RESPONSE)
        return count

    def verify_start(self, slot, buf, at):
        """Queue a Verify of the signature buf[at:at + 64] over TempKey (where sha_queue left a
        digest) with the public key stored in `slot`; poll verify_ready. Allocation-free."""
        _copy(self._tx, 6, buf, at, 64)
        self._send(VERIFY, _MODE_VERIFY_STORED, slot, None, 64)
        self._pending = VERIFY

    def verify_ready(self):
        """0 while the chip computes; then 1 when the signature holds, 2 when it does not."""
        if self._pending != VERIFY:
            raise ElementError(NOT_QUEUED)
        count = self._poll_pending()
        if count < 0:
            return 0
        self._pending = 0
        return 1 if self._check(count, 1) == OK else 2

    def pending(self):
        """Whether a queued command (Sign, SHA or Verify) is outstanding."""
        return self._pending != 0

    def nap(self):
        """For a caller that must wait for the queued command: sleep until a patient driver
        may ask for its response (its maximum execution time), rather than poll a chip that
        cannot answer yet; at once when impatient or nothing is queued. Allocation-free."""
        if self._pending and self._patient:
            left = _EXEC_MS[self._sent_op] - ticks_diff(ticks_ms(), self._sent)
            if left > 0:
                sleep_ms(left)

    def verify_external(self, digest32, sig64, pubkey64):
        """True when sig64 (r||s) signs digest32 under the P-256 public key X||Y pubkey64."""
        self.load_digest(digest32)
        tx = self._tx
        # data: signature then public key, assembled in place after the header
        tx[6:70] = sig64
        tx[70:134] = pubkey64
        return self._run_in_place(VERIFY, _MODE_VERIFY_EXTERNAL, _KEYTYPE_P256, 128) == OK

    def verify_stored(self, slot, digest32, sig64):
        """True when sig64 signs digest32 under the public key stored in `slot`."""
        self.load_digest(digest32)
        self._tx[6:70] = sig64
        return self._run_in_place(VERIFY, _MODE_VERIFY_STORED, slot, 64) == OK

    def _run_in_place(self, opcode, param1, param2, n):
        # the data already sits at tx[6:6 + n], put there by the caller
        self._send(opcode, param1, param2, None, n)
        return self._check(self._wait(opcode), 1)

    def counter(self, which):
        """Monotonic counter 0 or 1: its value."""
        return self._counter(which, 0)

    def counter_increment(self, which):
        """Add one to counter 0 or 1 (it can never go back); its new value."""
        return self._counter(which, 1)

    def _counter(self, which, mode):
        self._run(COUNTER, mode, which, 4)
        rx = self._rx
        return rx[1] | rx[2] << 8 | rx[3] << 16 | rx[4] << 24

    def sha_start(self):
        self._run(SHA, _MODE_SHA_START, 0x0000, 1)

    def sha_update(self, block64):
        self._run(SHA, _MODE_SHA_UPDATE, 64, 1, block64, 64)

    def sha_end(self, tail, out32, tempkey=True):
        """The digest of everything since sha_start plus `tail` (0-63 bytes) into out32; also
        into TempKey (ready for sign_start) unless tempkey is False."""
        n = len(tail)
        mode = _MODE_SHA_END if tempkey else _MODE_SHA_END | _SHA_TARGET_OUT_ONLY
        self._run(SHA, mode, n, 32, tail, n, out32)
        return out32

    def sha_update_from(self, buf, at):
        """sha_update of buf[at:at + 64], copied into the command buffer: no slice made."""
        _copy(self._tx, 6, buf, at, 64)
        self._run(SHA, _MODE_SHA_UPDATE, 64, 1, None, 64)

    def sha_end_from(self, buf, at, n, out32, tempkey=True):
        """sha_end of buf[at:at + n] (0-63 bytes), allocation-free."""
        _copy(self._tx, 6, buf, at, n)
        mode = _MODE_SHA_END if tempkey else _MODE_SHA_END | _SHA_TARGET_OUT_ONLY
        self._run(SHA, mode, n, 32, None, n, out32)
        return out32

    def sha_from(self, buf, at, n, out32, tempkey=True):
        """SHA-256 of buf[at:at + n] by the chip, into out32 (and TempKey); allocation-free."""
        self.sha_start()
        end = at + n - n % 64
        while at < end:
            self.sha_update_from(buf, at)
            at += 64
        return self.sha_end_from(buf, at, n % 64, out32, tempkey)

    def sha256(self, data, out32, tempkey=True):
        """SHA-256 of `data` computed by the chip, 64-byte blocks then the tail."""
        self.sha_start()
        full = len(data) - len(data) % 64
        mv = memoryview(data)
        for at in range(0, full, 64):
            self.sha_update(mv[at : at + 64])
        return self.sha_end(mv[full:], out32, tempkey)

    def read_config(self, block, out32):
        """32 bytes of the configuration zone (block 0: serial number, revision)."""
        self._run(READ, _READ_32, block << 3, 32, out=out32)
        return out32

    def command(self, opcode, param1, param2, expect, data=None, n=0, out=None):
        """Any one command: its status, `expect` response bytes copied into out (provisioning's
        Read, Write and Lock are built on it in shoe/provision.py, off the card path)."""
        return self._run(opcode, param1, param2, expect, data, n, out)

    def serial(self):
        """The chip's 9-byte serial number (config bytes 0-3 and 8-12)."""
        c = bytearray(32)
        self.read_config(0, c)
        return bytes(c[0:4]) + bytes(c[8:13])


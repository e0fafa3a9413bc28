"""The host end of the shoe link: a pyserial port (any URL: /dev/ttyACM0, socket://127.0.0.1:7000),
the validator behind it, and the acknowledgements and hellos that make delivery exactly-once."""

import time

import serial

from . import frames as fr
from .errors import SabotError


TIMEOUT = 0.05


class HostLink:
    HELLO_EVERY = 2.0  # seconds of silence before asking the shoe to resend what it holds
    TIMEOUT = TIMEOUT

    def __init__(self, url, validator, capture=None, connect_timeout=10, tap=None, hello_every=None):
        self.tap = tap  # fault injection (sabot soak): bytes in -> list of byte chunks out
        if hello_every:
            self.HELLO_EVERY = hello_every
        self.validator = validator
        self.slow_writes = 0  # fault injection (sabot soak): the next N commands trickle out
        self.capture = capture
        self.url = url
        self.ser = None
        self.counter = 0
        self.last_rx = 0.0
        self.acked = 0
        self._open(connect_timeout)

    def _open(self, timeout):
        end = time.monotonic() + timeout
        while True:
            try:
                self.ser = serial.serial_for_url(self.url, timeout=self.TIMEOUT)
                break
            except (serial.SerialException, OSError, ValueError) as e:
                if time.monotonic() > end:
                    raise SabotError(f"cannot open {self.url}: {e}") from None
                time.sleep(0.1)
        self.hello()

    def reconnect(self, timeout=10):
        self.close()
        self._open(timeout)

    def write(self, data):
        try:
            if self.slow_writes > 0:
                self.slow_writes -= 1
                for i in range(0, len(data), 2):  # two bytes at a time, a millisecond apart
                    self.ser.write(data[i : i + 2])
                    self.ser.flush()
                    time.sleep(0.001)
            else:
                self.ser.write(data)
        except (serial.SerialException, OSError) as e:
            raise ConnectionError(str(e)) from None

    def _command(self, ftype, payload=b"", counted=True):
        k = self.validator.key
        if counted:
            self.counter = max(self.counter, self.validator.state["host_counter"]) + 1
            self.validator.state["host_counter"] = self.counter
        self.write(fr.command(k.key, k.key_id, k.shoe_id, self.counter if counted else 0, ftype, payload))

    def hello(self):
        """Pyserial drops what arrived before the port opened: ask the shoe where it stands and to resend."""
        self._command(fr.C_HELLO, counted=False)
        self.last_rx = time.monotonic()

    def resolve(self, code):
        self._command(fr.C_RESOLVE, bytes([code]))

    def new_shoe(self):
        self._command(fr.C_NEW_SHOE)

    def pump(self, wait=TIMEOUT):
        """Read what has arrived (waiting up to `wait` seconds for a first byte), validate it, acknowledge
        it. Returns the per-frame verdicts."""
        if self.ser is None:
            raise ConnectionError("link closed")
        try:
            self.ser.timeout = wait
            data = self.ser.read(1)
            if data:
                # then take all that is there at once (socket:// reports in_waiting only as 0 or 1)
                self.ser.timeout = 0
                data += self.ser.read(65536)
        except (serial.SerialException, OSError) as e:
            raise ConnectionError(str(e)) from None
        now = time.monotonic()
        if not data:
            if now - self.last_rx > self.HELLO_EVERY:
                self.hello()
            return []
        self.last_rx = now
        if self.capture:
            self.capture.write(data)
            self.capture.flush()
        if self.tap:
            results = [x for chunk in self.tap(data) for x in self.validator.receive(chunk)]
        else:
            results = self.validator.receive(data)
        if any(v == "rejected" and r == "sequence_gap" for _, v, r in results):
            self.hello()  # something was lost on the line: the shoe resends from the oldest unacked
        last = self.validator.state["last_seq"]
        resent = any(v == "resent" for _, v, _ in results)
        if self.validator.status is not None and (last > self.acked or resent):
            self._command(fr.C_ACK, last.to_bytes(4, "big"))
            self.acked = last
        return results

    def close(self):
        if self.ser is not None:
            try:
                self.ser.close()
            except Exception:  # noqa: BLE001 - closing a dead socket must not mask the real error
                pass
            self.ser = None

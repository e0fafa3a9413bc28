# Stand-ins for the host link and the lamps in MicroPython test scripts (they take what the shoe
# sends), and a host's authentic commands, sent in through the shoe's command port as a host would.
import struct

from shoe import cobs, frames
from shoe.hmac256 import HmacKey


class Null:
    def __init__(self):
        self.writes = 0
        self.results = 0

    def write(self, data):
        self.writes += 1

    def show(self, *state):
        pass

    def announce(self, *result):
        self.results += 1

    def tick(self, now):
        pass


class Host:
    """Builds and sends authentic host commands with the shoe's key (as read from its flash)."""

    def __init__(self, app):
        key_id, shoe_id, key = app.identity
        self.app = app
        self.sign = frames.Signer(HmacKey(key), key_id, shoe_id, 0)
        self.counter = app.port.counter

    def command(self, ftype, payload=b""):
        self.counter += 1
        f = self.sign.frame(self.counter, bytes(8), ftype, payload)
        self.app.host_bytes(cobs.encode(f))

    def ack_all(self):
        self.command(frames.C_ACK, struct.pack(">I", self.app.outbox.seq))

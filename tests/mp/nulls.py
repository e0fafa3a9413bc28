# Stand-ins for the host link and the lamps in MicroPython test scripts (they take what the shoe
# sends), and a host acknowledging through the shoe's command port. MicroPython has no P-256
# signer, so the host's signed ack frames are made beforehand on CPython (tests/fwkit.py,
# `write_acks`): raw frames of ACK_LEN bytes, the one acknowledging seq s at (s - 1) * ACK_LEN.
from shoe import cobs

ACK_LEN = 114  # header 46, seq 4, signature 64


class Null:
    def __init__(self):
        self.writes = 0
        self.bytes = 0
        self.results = 0

    # explicit parameters: *args would allocate a tuple in the card path
    def write(self, buf, n=-1):
        self.writes += 1
        self.bytes += n

    def show(self, phase, due, position, shoe_no, round_no, alarm, reveal):
        pass

    def announce(self, player_total, banker_total, winner, announcements):
        self.results += 1

    def placed(self, rnd):
        self.results += 1  # blackjack: the dealer's hand is complete

    def tick(self, now):
        pass


class Host:
    """Acknowledges what the shoe sent, with the precomputed signed acks in `path`."""

    def __init__(self, app, path):
        self.app = app
        self.f = open(path, "rb")
        self.raw = bytearray(ACK_LEN)
        self.out = bytearray(ACK_LEN + 4)

    def ack(self, seq):
        if seq < 1:
            return
        self.f.seek((seq - 1) * ACK_LEN)
        if self.f.readinto(self.raw) != ACK_LEN:
            return
        n = cobs.encode_into(self.raw, ACK_LEN, self.out)
        self.app.host_bytes(self.out, n)

    def ack_all(self):
        """An ack of everything sent, checked to its end. The whole shoe runs in well under a
        second here, where a host sends a signed command every 0.3 s and the shoe takes at most
        4 a second: the rate window is stepped as that much time would have passed."""
        import time

        port = self.app.port
        port._window = time.ticks_add(time.ticks_ms(), -1000)
        self.ack(self.app.sent)
        port.finish(self.app)

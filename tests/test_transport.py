"""The one transport to a shoe (sabot.transport.ShoePort), against a loopback socket server started
here: opening fails fast with one line, frames come out of a noisy fragmented stream, commands go
out signed, and a dropped connection is a ConnectionError."""

import io
import socket
import threading
import time

import pytest

from sabot import keys
from sabot import protocol as pr
from sabot.errors import SabotError
from sabot.link.transport import ShoePort

from kit import free_port_for_tests


class LoopbackShoe:
    """A TCP server standing in for a shoe's port: sends what it is given, keeps what it gets."""

    def __init__(self):
        self.srv = socket.create_server(("127.0.0.1", 0))
        self.url = f"socket://127.0.0.1:{self.srv.getsockname()[1]}"
        self.conn = None
        self.received = bytearray()
        self.accepted = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.srv.accept()
            except OSError:
                return  # closed
            self.conn = conn
            self.accepted.set()
            while data := conn.recv(4096):
                self.received += data

    def send(self, data):
        assert self.accepted.wait(5)
        self.conn.sendall(data)

    def hang_up(self):
        assert self.accepted.wait(5)
        self.accepted.clear()
        self.conn.shutdown(socket.SHUT_RDWR)

    def close(self):
        self.srv.close()


@pytest.fixture
def shoe():
    s = LoopbackShoe()
    yield s
    s.close()


@pytest.fixture
def key(tmp_path):
    return keys.create(str(tmp_path / "command.pem"))


SHOE_ID = 0x5AB0_0007


def signed(key, seq, ftype=pr.T_BURN, payload=b"\x00\x01\x00\x00\x04\x05"):
    return pr.build(key.private_key, 1, SHOE_ID, 1, seq, bytes(32), ftype, payload)


def test_opening_a_port_nobody_listens_on_fails_fast_with_one_line():
    url = f"socket://127.0.0.1:{free_port_for_tests()}"
    t0 = time.monotonic()
    with pytest.raises(SabotError) as e:
        ShoePort(url, open_timeout=0.3)
    assert time.monotonic() - t0 < 2
    assert str(e.value) == f"cannot open {url}: Connection refused"  # the OS's words, once


def test_a_url_pyserial_does_not_know_is_one_line_too():
    with pytest.raises(SabotError, match="cannot open nosuch://x"):
        ShoePort("nosuch://x", open_timeout=0)


def test_frames_come_out_of_a_noisy_fragmented_stream(shoe, key):
    capture = io.BytesIO()
    port = ShoePort(shoe.url, open_timeout=5, capture=capture)
    try:
        first, second = signed(key, 1), signed(key, 2)
        stream = (b"\x03\x13\x37\x00" + pr.encode_frame(first) + b"\x05\x01\x00"
                  + pr.encode_frame(b"\x01" + first[1:]) + pr.encode_frame(second))
        shoe.send(stream[:20])  # a frame split across reads
        got = []
        deadline = time.monotonic() + 5
        while len(got) < 5 and time.monotonic() < deadline:
            got += port.frames(0.2)
            if capture.getvalue() == stream[:20]:
                shoe.send(stream[20:])
        assert [type(f).__name__ for _, f in got] == ["FrameError", "Frame", "FrameError",
                                                      "FrameError", "Frame"]
        assert [f.reason for _, f in got if isinstance(f, pr.FrameError)] == [
            "too_short", "bad_framing", "bad_version"]
        assert got[1] == (first, pr.parse(first)) and got[4][1].seq == 2
        assert capture.getvalue() == stream  # every byte received, as received
    finally:
        port.close()


def test_send_command_puts_a_signed_command_on_the_line(shoe, key):
    port = ShoePort(shoe.url, open_timeout=5)
    try:
        port.send_command(key, SHOE_ID, pr.C_RESOLVE, bytes([pr.VOID_ROUND]), counter=5)
        assert shoe.accepted.wait(5)
        deadline = time.monotonic() + 5
        while not shoe.received.endswith(b"\x00") and time.monotonic() < deadline:
            time.sleep(0.005)
        f = pr.parse(pr.decode_frame(bytes(shoe.received[:-1])))
        assert pr.verify(key.public_key(), f)
        assert (f.type, f.shoe_id, f.seq, f.payload) == (pr.C_RESOLVE, SHOE_ID, 5, b"\x03")
    finally:
        port.close()


def test_a_dropped_connection_is_a_connection_error_and_reopen_recovers(shoe):
    port = ShoePort(shoe.url, open_timeout=5)
    try:
        assert port.read_chunks(0.01) == []
        shoe.hang_up()
        with pytest.raises(ConnectionError):
            port.read(1.0)
        port.close()
        assert port.closed
        with pytest.raises(ConnectionError, match="link closed"):
            port.write(b"\x00")
        port.reopen(5)
        shoe.send(b"\x00again")
        assert port.read(5) == b"\x00again"
    finally:
        port.close()


def test_the_link_acks_what_it_stored_signed_and_counts_commands_from_the_status(shoe, key,
                                                                               tmp_path):
    """HostLink over a loopback 'shoe' sending v2 frames: hello goes unsigned, the ack is signed
    by the command key and uncounted, names the highest stored seq (a pending initial_cards is
    not acked), and a counted command carries the status's host_counter + 1."""
    from sabot.audit.validator import Validator
    from sabot.link.host import HostLink
    from sabot.virtual import capture_gen

    from kit import signing_shoe

    s, entry = signing_shoe(SHOE_ID)
    v = Validator(entry, str(tmp_path / "a.db"))
    link = HostLink(ShoePort(shoe.url, open_timeout=5), v, key)
    try:
        def sent():
            deadline = time.monotonic() + 5
            while not shoe.received.endswith(b"\x00") and time.monotonic() < deadline:
                time.sleep(0.005)
            out = [pr.parse(pr.decode_frame(p)) for p in bytes(shoe.received).split(b"\x00")[:-1]]
            shoe.received.clear()
            return out

        (hello,) = sent()
        assert hello.type == pr.C_HELLO and not hello.signed and hello.shoe_id == SHOE_ID
        frames = [s.chained(pr.T_SHOE_START, b"\x00\x01\x08\x02"),
                  s.chained(pr.T_INITIAL_CARDS, b"\x00\x01\x00\x01\x20\x1c\x30\x23")]
        status = s.status(capture_gen.status_payload(host_counter=41, unacked_from=1,
                                                     unacked_to=2))
        shoe.send(pr.encode_frame(status))  # the answer to the hello: the link anchors there
        assert link.pump_until(lambda: v.status is not None, 5) and sent() == []  # nothing new
        shoe.send(pr.encode_frame(frames[0]) + pr.encode_frame(frames[1]))
        assert link.pump_until(lambda: v.state["last_seq"] == 1 and v.pending is not None, 5)
        (ack,) = sent()  # the shoe_start, not the initial cards waiting for their seal
        assert ack.type == pr.C_ACK and pr.verify(key.public_key(), ack)
        assert (ack.seq, ack.key_id, ack.boot, ack.payload) == (0, 0, 0, (1).to_bytes(4, "big"))
        shoe.send(pr.encode_frame(status))  # the next status seals them
        assert link.pump_until(lambda: v.state["last_seq"] == 2, 5)
        # 0.3 s after the last signed command at the soonest (the shoe checks one at a time)
        assert link.pump_until(lambda: not link.ack_owed, 2)
        (ack,) = sent()
        assert ack.payload == (2).to_bytes(4, "big") and pr.verify(key.public_key(), ack)
        link.new_shoe()
        (cmd,) = sent()
        assert cmd.type == pr.C_NEW_SHOE and cmd.seq == 42 and pr.verify(key.public_key(), cmd)
    finally:
        link.close()
        v.store.close()

"""Firmware test kit: a provisioned shoe (flash `identity` + an emulated secure element), the host
command key that signs commands, and frame checks with `cryptography` — no host validator needed.

The element runs in-process for CPython tests (the real driver over a bus that calls the
emulator's Chip directly) or as its own process on a unix socket for MicroPython tests."""

import os
import queue
import struct
import subprocess
import sys
import threading
from pathlib import Path

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import (
    decode_dss_signature,
    encode_dss_signature,
)

from sabot import keys
from sabot import protocol as pr
from sabot.virtual import factory
from sabot.virtual.element_formats import public_key_from_xy
from sabot.virtual.factory import ChipBus  # noqa: F401  (tests build their own chips on it)

from kit.base import FIRMWARE, ROOT

sys.path.insert(0, str(FIRMWARE))

from shoe import cobs, frames

SHOE_ID = 9


class ProvisionedShoe:
    """A provisioned shoe: flash directory, element store, command key."""

    def __init__(self, tmp, shoe_id=SHOE_ID, version=1, variant=None, decks=8):
        tmp = Path(tmp)
        self.flash = tmp / "flash"
        self.flash.mkdir(parents=True, exist_ok=True)
        self.store = tmp / "element"
        self.command_key = ec.generate_private_key(ec.SECP256R1())
        command_xy = keys.xy(self.command_key.public_key())
        factory.provision(self.store, self.flash, shoe_id,
                          frames.V_DEFAULT if variant is None else variant, command_xy, decks)
        for _ in range(1, version):
            factory.rekey(self.store, self.flash)
        self.shoe_id = shoe_id
        self.version = version
        (self.flash / "identity").write_bytes(struct.pack(">IH", shoe_id, version))
        self.counter = 0

    def element(self):
        """The real driver on the emulated chip, in this process (signatures take no time)."""
        return factory.element(self.store)

    def public_key(self, version=None):
        return public_key_from_xy(factory.result_public_xy(self.store, version or self.version))

    def command(self, ftype, payload=b"", counter=None, shoe_id=None, key=None):
        """A COBS-encoded host command, signed by the command key unless hello/verify; counted
        commands take the next counter unless one is given."""
        if counter is None:
            counter = 0
            if ftype not in (frames.C_HELLO, frames.C_INTEGRITY, frames.C_ACK):
                self.counter += 1
                counter = self.counter
        body = frames.build(0, self.shoe_id if shoe_id is None else shoe_id, 0, counter,
                            frames.ZERO_CHAIN, ftype, payload)
        if frames.signed(ftype):
            body += sign_raw(key or self.command_key, body)
        return cobs.encode(body)

    def ack(self, seq):
        return self.command(frames.C_ACK, struct.pack(">I", seq))


def sign_raw(private_key, body):
    r, s = decode_dss_signature(private_key.sign(body, ec.ECDSA(hashes.SHA256())))
    return r.to_bytes(32, "big") + s.to_bytes(32, "big")


def verify(public_key, frame):
    """The frame's signature checks under `public_key` (raises InvalidSignature otherwise): over
    its body, or a checkpoint's over its note text (firmware/shoe/tree.py)."""
    n = frames.body_len(frame)
    sig = frame[n:]
    signed = frame[:n]
    if frame[1] == frames.T_CHECKPOINT:
        f = pr.parse(bytes(frame))
        signed = pr.checkpoint_text(f.shoe_id, f.seq, f.payload).encode()
    public_key.verify(encode_dss_signature(int.from_bytes(sig[:32], "big"),
                                           int.from_bytes(sig[32:], "big")),
                      signed, ec.ECDSA(hashes.SHA256()))


def payload_of(into, *args):
    """A payload as bytes, from its in-place builder (frames.*_into)."""
    buf = bytearray(frames.MAX_FRAME)
    return bytes(buf[: into(buf, 0, *args)])


def split(stream):
    """The frames in a link byte stream."""
    return [cobs.decode(p) for p in bytes(stream).split(b"\x00")[:-1]]


class EmulatorProcess:
    """`python -m sabot.virtual.element_emulator` on a unix socket, for MicroPython tests."""

    def __init__(self, store, sock, *args):
        self.spec = f"unix:{sock}"
        env = dict(os.environ, PYTHONPATH=str(ROOT / "host_tools"))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sabot.virtual.element_emulator", "--store", str(store),
             "--listen", self.spec, *map(str, args)],
            stderr=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True, env=env)
        lines = queue.Queue()
        self.err = []

        def read():
            for line in self.proc.stderr:
                self.err.append(line)
                lines.put(line)

        threading.Thread(target=read, daemon=True).start()
        line = lines.get(timeout=30)
        assert "listening on" in line, line

    def stop(self):
        """Stop it; everything it printed (it must never print a private key)."""
        self.proc.terminate()
        out, _ = self.proc.communicate(timeout=10)
        return out + "".join(self.err)


class Link:
    """The shoe's host link and indicators in one object, collecting what the shoe sends."""

    def __init__(self):
        self.data = bytearray()

    def write(self, b, n=-1):
        self.data += bytes(b[:n] if n >= 0 else b)

    def show(self, *state):
        self.state = state

    def announce(self, *result):
        pass


def write_acks(shoe, path, n=600):
    """Signed ack frames for seq 1..n, raw, one every ACK_LEN bytes (tests/mp/nulls.py Host)."""
    with open(path, "wb") as f:
        for seq in range(1, n + 1):
            body = frames.build(0, shoe.shoe_id, 0, 0, frames.ZERO_CHAIN, frames.C_ACK,
                                struct.pack(">I", seq))
            frame = body + sign_raw(shoe.command_key, body)
            assert len(frame) == 114
            f.write(frame)

"""The virtual board's secure element: an ATECC608-class chip emulated in its own process.

The firmware's driver (firmware/shoe/element.py) talks to it through a virtual I2C bus
(boards/virtual/i2c_socket.py) with the chip's real command protocol, so the same driver runs on a
real board. The emulator keeps its key store in a directory of its own (0600 files), outside any
board flash: the firmware can ask for signatures, never for a key, as with the real chip.

Slot layout (what a factory programmer leaves in the chip):

  slot 0     result-signing key, version 1: P-256 private key made inside (GenKey), locked
  slot 1     the command key's PUBLIC key (P-256), for Verify stored of host commands
  slot 2     result-signing key, version 2 (`rekey`); slots 3-7 the versions after that
  counter 0  command counter (monotonic; a command carries the next value)
  counter 1  spare

Bus framing over the socket (one request, one reply; a reply never carries key material):

  b"W" addr(1) len(2, big-endian) data   ->  b"K" (ack) | b"N" (nack)
  b"R" addr(1) len(2, big-endian)        ->  b"K" data(len) | b"N"

A write to bus address 0x00 is the wake pulse (NACKed: nobody lives there). While a command
executes (Sign: --sign-ms, 50 ms by default) the chip NACKs its address, as the real one does.

  python -m sabot.virtual.element_emulator --store DIR --listen unix:PATH | tcp:127.0.0.1:PORT"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import select
import socket
import sys
import time
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import (
    Prehashed,
    decode_dss_signature,
    encode_dss_signature,
)

ADDRESS = 0x60
RESULT_SLOTS = (0, 2, 3, 4, 5, 6, 7)  # result key versions 1, 2, 3, ...
COMMAND_KEY_SLOT = 1
COMMAND_COUNTER = 0
COUNTER_MAX = 2_097_151  # the ATECC608's counter limit

INFO, RANDOM, GENKEY, NONCE, SIGN, VERIFY, COUNTER, SHA, READ = (
    0x30, 0x1B, 0x40, 0x16, 0x41, 0x45, 0x24, 0x47, 0x02)
OK, MISCOMPARE, PARSE_ERROR, EXECUTION_ERROR, AFTER_WAKE, CRC_ERROR = (
    0x00, 0x01, 0x03, 0x0F, 0x11, 0xFF)
REVISION = bytes((0x00, 0x00, 0x60, 0x02))  # what Info answers: an ATECC608A
WATCHDOG_MS = 1300


def crc16(data: bytes) -> bytes:
    """CryptoAuthLib's atCRC (polynomial 0x8005, LSB of each byte first), little-endian."""
    crc = 0
    for byte in data:
        for bit in range(8):
            data_bit = (byte >> bit) & 1
            crc_bit = crc >> 15
            crc = (crc << 1) & 0xFFFF
            if data_bit != crc_bit:
                crc ^= 0x8005
    return bytes((crc & 0xFF, crc >> 8))


def response(data: bytes) -> bytes:
    head = bytes((len(data) + 3,)) + data
    return head + crc16(head)


def _private_mode(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically, readable by the owner only."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _xy(key: ec.EllipticCurvePublicKey) -> bytes:
    raw = key.public_bytes(serialization.Encoding.X962,
                           serialization.PublicFormat.UncompressedPoint)
    return raw[1:]


def _pem(key: ec.EllipticCurvePublicKey) -> str:
    return key.public_bytes(serialization.Encoding.PEM,
                            serialization.PublicFormat.SubjectPublicKeyInfo).decode()


def public_key_from_xy(xy: bytes) -> ec.EllipticCurvePublicKey:
    """A P-256 public key from the chip's 64-byte X||Y form."""
    return ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), b"\x04" + xy)


def signature_to_der(rs: bytes) -> bytes:
    """The chip's 64-byte r||s as the DER form cryptography verifies."""
    return encode_dss_signature(int.from_bytes(rs[:32], "big"), int.from_bytes(rs[32:], "big"))


class KeyStore:
    """The chip's non-volatile state, one file per item in a 0700 directory."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.dir, 0o700)

    def _meta_path(self) -> Path:
        return self.dir / "meta.json"

    def meta(self) -> dict[str, Any]:
        p = self._meta_path()
        if p.exists():
            loaded: dict[str, Any] = json.loads(p.read_text())
            return loaded
        return {"locked": [], "counters": [0, 0]}

    def save_meta(self, meta: dict[str, Any]) -> None:
        _private_mode(self._meta_path(), json.dumps(meta, sort_keys=True).encode())

    def config(self) -> bytes:
        """128 bytes of configuration zone; the serial number is made once, at first use."""
        p = self.dir / "config.bin"
        if not p.exists():
            sn = b"\x01\x23" + os.urandom(2) + REVISION + os.urandom(4) + b"\xee"
            _private_mode(p, sn + bytes(128 - len(sn)))
        return p.read_bytes()

    def private_key(self, slot: int) -> ec.EllipticCurvePrivateKey | None:
        p = self.dir / f"slot{slot}.pem"
        if not p.exists():
            return None
        key = serialization.load_pem_private_key(p.read_bytes(), password=None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        return key

    def set_private_key(self, slot: int, key: ec.EllipticCurvePrivateKey) -> None:
        pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
        _private_mode(self.dir / f"slot{slot}.pem", pem)

    def stored_public_key(self, slot: int) -> ec.EllipticCurvePublicKey | None:
        p = self.dir / f"slot{slot}.pub.pem"
        if not p.exists():
            return None
        key = serialization.load_pem_public_key(p.read_bytes())
        assert isinstance(key, ec.EllipticCurvePublicKey)
        return key

    def set_stored_public_key(self, slot: int, key: ec.EllipticCurvePublicKey) -> None:
        _private_mode(self.dir / f"slot{slot}.pub.pem", _pem(key).encode())


class Chip:
    """The chip's behaviour at the bus: power states, I/O buffer, busy time, commands."""

    def __init__(self, store: KeyStore, *, sign_ms: float = 50.0, ecc_ms: float = 60.0,
                 cmd_ms: float = 1.0, watchdog_ms: float = WATCHDOG_MS,
                 address: int = ADDRESS) -> None:
        self.store = store
        self.address = address
        self.times = {SIGN: sign_ms, GENKEY: ecc_ms, VERIFY: ecc_ms}
        self.cmd_ms = cmd_ms
        self.watchdog_ms = watchdog_ms
        self.state = "sleep"  # sleep | idle | awake
        self.woke = 0.0
        self.busy_until = 0.0
        self.out = b""  # the I/O buffer the host reads
        self.read_at = 0
        self.tempkey: bytes | None = None
        self.sha: Any = None
        self.commands = 0

    # -- the bus ------------------------------------------------------------------------------

    def _tick(self, now: float) -> None:
        if (self.state == "awake" and self.watchdog_ms
                and (now - self.woke) * 1000 > self.watchdog_ms and now >= self.busy_until):
            self._sleep()

    def _sleep(self) -> None:
        self.state = "sleep"
        self.tempkey = None
        self.sha = None
        self.out = b""

    def write(self, addr: int, data: bytes, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        self._tick(now)
        if addr == 0x00:  # the wake pulse: SDA low long enough
            if self.state != "awake":
                self.state = "awake"
                self.woke = now
                self.out, self.read_at = response(bytes((AFTER_WAKE,))), 0
            return False
        if addr != self.address or self.state != "awake" or now < self.busy_until or not data:
            return False
        word = data[0]
        if word == 0x00:  # reset the I/O buffer's address
            self.read_at = 0
        elif word == 0x01:
            self._sleep()
        elif word == 0x02:  # idle: TempKey kept
            self.state = "idle"
            self.out = b""
        elif word == 0x03:
            self._command(data[1:], now)
        else:
            return False
        return True

    def read(self, addr: int, n: int, now: float | None = None) -> bytes | None:
        now = time.monotonic() if now is None else now
        self._tick(now)
        if addr != self.address or self.state != "awake" or now < self.busy_until:
            return None
        chunk = self.out[self.read_at:self.read_at + n]
        self.read_at += n
        return chunk + b"\xff" * (n - len(chunk))

    def _command(self, packet: bytes, now: float) -> None:
        self.read_at = 0
        if len(packet) < 7 or packet[0] != len(packet):
            self.out = response(bytes((PARSE_ERROR,)))
            return
        if crc16(packet[:-2]) != packet[-2:]:
            self.out = response(bytes((CRC_ERROR,)))
            return
        opcode, p1 = packet[1], packet[2]
        p2 = packet[3] | packet[4] << 8
        data = packet[5:-2]
        self.commands += 1
        if opcode != SHA:
            self.sha = None  # the other commands use the SHA engine and lose its context
        result = self.execute(opcode, p1, p2, data)
        self.out = response(result if isinstance(result, bytes) else bytes((result,)))
        self.busy_until = now + self.times.get(opcode, self.cmd_ms) / 1000

    # -- the commands -------------------------------------------------------------------------

    def execute(self, opcode: int, p1: int, p2: int, data: bytes) -> bytes | int:
        """The response data of one command, or a status byte."""
        handler = {INFO: self._info, RANDOM: self._random, GENKEY: self._genkey,
                   NONCE: self._nonce, SIGN: self._sign, VERIFY: self._verify,
                   COUNTER: self._counter, SHA: self._sha, READ: self._read}.get(opcode)
        if handler is None:
            return PARSE_ERROR
        return handler(p1, p2, data)

    def _info(self, p1: int, p2: int, data: bytes) -> bytes | int:
        if p1 != 0x00 or data:
            return PARSE_ERROR
        return REVISION

    def _random(self, p1: int, p2: int, data: bytes) -> bytes | int:
        if data and len(data) != 20:
            return PARSE_ERROR
        return os.urandom(32)

    def _genkey(self, p1: int, p2: int, data: bytes) -> bytes | int:
        slot = p2
        if data or slot > 15:
            return PARSE_ERROR
        if p1 == 0x04:
            return self.genkey(slot)
        if p1 == 0x00:
            key = self.store.private_key(slot)
            return EXECUTION_ERROR if key is None else _xy(key.public_key())
        return PARSE_ERROR

    def genkey(self, slot: int) -> bytes | int:
        """A new private key made in `slot` (a result slot not locked); its public X||Y."""
        if slot not in RESULT_SLOTS or slot in self.store.meta()["locked"]:
            return EXECUTION_ERROR
        key = ec.generate_private_key(ec.SECP256R1())
        self.store.set_private_key(slot, key)
        return _xy(key.public_key())

    def _nonce(self, p1: int, p2: int, data: bytes) -> bytes | int:
        if p1 != 0x03 or p2 != 0 or len(data) != 32:
            return PARSE_ERROR  # only pass-through of 32 bytes is emulated
        self.tempkey = bytes(data)
        return OK

    def _sign(self, p1: int, p2: int, data: bytes) -> bytes | int:
        if p1 != 0x80 or data or p2 > 15:
            return PARSE_ERROR
        key = self.store.private_key(p2)
        if key is None or self.tempkey is None:
            return EXECUTION_ERROR
        der = key.sign(self.tempkey, ec.ECDSA(Prehashed(hashes.SHA256())))
        self.tempkey = None  # one digest, one signature
        r, s = decode_dss_signature(der)
        return r.to_bytes(32, "big") + s.to_bytes(32, "big")

    def _verify(self, p1: int, p2: int, data: bytes) -> bytes | int:
        if p1 == 0x02:
            if p2 != 0x0004 or len(data) != 128:
                return PARSE_ERROR
            try:
                key = public_key_from_xy(data[64:])
            except ValueError:
                return EXECUTION_ERROR  # not a point on the curve
        elif p1 == 0x00:
            if p2 > 15 or len(data) != 64:
                return PARSE_ERROR
            stored = self.store.stored_public_key(p2)
            if stored is None:
                return EXECUTION_ERROR
            key = stored
        else:
            return PARSE_ERROR
        if self.tempkey is None:
            return EXECUTION_ERROR
        try:
            key.verify(signature_to_der(data[:64]), self.tempkey,
                       ec.ECDSA(Prehashed(hashes.SHA256())))
        except InvalidSignature:
            return MISCOMPARE
        return OK

    def _counter(self, p1: int, p2: int, data: bytes) -> bytes | int:
        if p1 not in (0, 1) or p2 not in (0, 1) or data:
            return PARSE_ERROR
        meta = self.store.meta()
        value = meta["counters"][p2]
        if p1 == 1:
            if value >= COUNTER_MAX:
                return EXECUTION_ERROR
            value += 1
            meta["counters"][p2] = value
            self.store.save_meta(meta)  # durable before the answer, as the chip's EEPROM
        return value.to_bytes(4, "little")

    def _sha(self, p1: int, p2: int, data: bytes) -> bytes | int:
        mode, target = p1 & 0x07, p1 & 0xC0
        if mode == 0x00:
            self.sha = hashlib.sha256()
            return OK
        if self.sha is None:
            return EXECUTION_ERROR
        if mode == 0x01:
            if p2 != 64 or len(data) != 64:
                return PARSE_ERROR
            self.sha.update(data)
            return OK
        if mode == 0x02:
            if p2 != len(data) or p2 > 63 or target not in (0x00, 0xC0):
                return PARSE_ERROR
            self.sha.update(data)
            digest: bytes = self.sha.digest()
            self.sha = None
            if target == 0x00:
                self.tempkey = digest
            return digest
        return PARSE_ERROR

    def _read(self, p1: int, p2: int, data: bytes) -> bytes | int:
        if data or p1 & 0x03 != 0x00:  # only the configuration zone is readable
            return EXECUTION_ERROR if not data else PARSE_ERROR
        config = self.store.config()
        block, word = (p2 >> 3) & 0x03, p2 & 0x07
        at = block * 32 + word * 4
        n = 32 if p1 & 0x80 else 4
        if at + n > len(config):
            return PARSE_ERROR
        return config[at:at + n]


# -- factory provisioning (host side, as a programmer does before the shoe leaves) -------------


def provision(store_dir: str | os.PathLike[str],
              command_public_key_pem: str | bytes | None) -> dict[str, Any]:
    """A fresh chip: slot 0 made inside and locked, the command key's public key in slot 1,
    counters at zero. Returns slot 0's public key (PEM) and the chip's serial number."""
    store = KeyStore(store_dir)
    for p in store.dir.glob("slot*"):
        p.unlink()
    store.save_meta({"locked": [], "counters": [0, 0]})
    chip = Chip(store)
    xy = chip.genkey(0)
    assert isinstance(xy, bytes)
    locked = [0]
    if command_public_key_pem is not None:
        pem = command_public_key_pem
        key = serialization.load_pem_public_key(pem.encode() if isinstance(pem, str) else pem)
        if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name != "secp256r1":
            raise ValueError("the command key must be a P-256 public key")
        store.set_stored_public_key(COMMAND_KEY_SLOT, key)
        locked.append(COMMAND_KEY_SLOT)
    store.save_meta({"locked": locked, "counters": [0, 0]})
    config = store.config()
    return {"slot": 0, "public_key": _pem(public_key_from_xy(xy)),
            "serial": (config[0:4] + config[8:13]).hex()}


def result_slot(store_dir: str | os.PathLike[str]) -> int:
    """The newest result key's slot (its version is its index in RESULT_SLOTS + 1)."""
    store = KeyStore(store_dir)
    present = [s for s in RESULT_SLOTS if (store.dir / f"slot{s}.pem").exists()]
    if not present:
        raise ValueError(f"{store_dir}: not provisioned")
    return present[-1]


def rekey(store_dir: str | os.PathLike[str]) -> str:
    """The next result key version: GenKey inside the next result slot (slot 2 after slot 0),
    locked. Returns its public key (PEM)."""
    store = KeyStore(store_dir)
    current = RESULT_SLOTS.index(result_slot(store_dir))
    if current + 1 >= len(RESULT_SLOTS):
        raise ValueError("every result slot is used")
    slot = RESULT_SLOTS[current + 1]
    xy = Chip(store).genkey(slot)
    if not isinstance(xy, bytes):
        raise ValueError(f"slot {slot} is locked")
    meta = store.meta()
    meta["locked"] = sorted(set(meta["locked"]) | {slot})
    store.save_meta(meta)
    return _pem(public_key_from_xy(xy))


def public_key(store_dir: str | os.PathLike[str], slot: int) -> str:
    """The public key (PEM) of a result slot's private key, or the one stored in slot 1."""
    store = KeyStore(store_dir)
    private = store.private_key(slot)
    if private is not None:
        return _pem(private.public_key())
    stored = store.stored_public_key(slot)
    if stored is None:
        raise ValueError(f"slot {slot} holds no key")
    return _pem(stored)


# -- the socket -----------------------------------------------------------------------------------


def _recv_exact(conn: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        part = conn.recv(n - len(buf))
        if not part:
            return None
        buf += part
    return bytes(buf)


def serve_request(chip: Chip, conn: socket.socket) -> bool:
    """One bus request from a virtual board and its reply; False when the board hung up."""
    head = _recv_exact(conn, 4)
    if head is None:
        return False
    op, addr, n = head[0], head[1], head[2] << 8 | head[3]
    if op == ord("W"):
        data = _recv_exact(conn, n)
        if data is None:
            return False
        conn.sendall(b"K" if chip.write(addr, data) else b"N")
        return True
    if op == ord("R"):
        got = chip.read(addr, n)
        conn.sendall(b"N" if got is None else b"K" + got)
        return True
    return False  # not our framing: drop the connection


def serve(chip: Chip, server: socket.socket) -> None:
    """For ever. A bus has one master: a new connection (the board restarted) replaces the old
    one; the chip's state carries over, as a real chip keeps power across an MCU reset."""
    conn: socket.socket | None = None
    while True:
        ready, _, _ = select.select([server] if conn is None else [server, conn], [], [])
        if server in ready:
            if conn is not None:
                conn.close()
            conn, _ = server.accept()
            if conn.family == socket.AF_INET:
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            continue
        assert conn is not None
        try:
            alive = serve_request(chip, conn)
        except OSError:
            alive = False
        if not alive:
            conn.close()
            conn = None


def listen(spec: str) -> tuple[socket.socket, str]:
    """A listening socket for `unix:PATH` or `tcp:HOST:PORT` (PORT 0: any), and its address."""
    kind, _, rest = spec.partition(":")
    if kind == "unix":
        if os.path.exists(rest):
            os.unlink(rest)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(rest)
        os.chmod(rest, 0o600)
        s.listen(1)
        return s, f"unix:{rest}"
    if kind == "tcp":
        host, _, port = rest.rpartition(":")
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, int(port)))
        s.listen(1)
        return s, f"tcp:{host}:{s.getsockname()[1]}"
    raise ValueError(f"--listen takes unix:PATH or tcp:HOST:PORT, not {spec!r}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sabot.virtual.element_emulator",
                                 description="The virtual board's secure element (ATECC608).")
    ap.add_argument("--store", required=True, help="key store directory (made 0700)")
    ap.add_argument("--listen", required=True, help="unix:PATH or tcp:127.0.0.1:PORT")
    ap.add_argument("--sign-ms", type=float, default=50.0, help="Sign's execution time")
    ap.add_argument("--ecc-ms", type=float, default=60.0, help="GenKey's and Verify's")
    ap.add_argument("--cmd-ms", type=float, default=1.0, help="every other command's")
    ap.add_argument("--watchdog-ms", type=float, default=WATCHDOG_MS,
                    help="awake time before the chip sleeps by itself (0: never)")
    ap.add_argument("--address", type=lambda s: int(s, 0), default=ADDRESS)
    args = ap.parse_args(argv)
    chip = Chip(KeyStore(args.store), sign_ms=args.sign_ms, ecc_ms=args.ecc_ms,
                cmd_ms=args.cmd_ms, watchdog_ms=args.watchdog_ms, address=args.address)
    server, where = listen(args.listen)
    print(f"element emulator listening on {where}", file=sys.stderr, flush=True)
    try:
        serve(chip, server)
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

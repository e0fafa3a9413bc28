"""The secure-element driver (firmware/shoe/element.py) against golden packets, an independent CRC,
and the emulator (sabot.virtual.element_emulator) through a real socket, on CPython and
MicroPython."""

import hashlib
import os
import stat
import sys
import time

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed

from sabot import keys
from sabot.virtual import factory
from sabot.virtual.element_formats import crc16, public_key_from_xy, signature_to_der

from kit import FIRMWARE, ROOT
from kit.fw import EmulatorProcess

sys.path.insert(0, str(FIRMWARE))
sys.path.insert(0, str(ROOT / "boards" / "virtual"))

from i2c_socket import SocketI2C

from shoe import element
from shoe.element import Element, ElementError

PREHASHED = ec.ECDSA(Prehashed(hashes.SHA256()))
COMMAND_KEY = ec.generate_private_key(ec.SECP256R1())  # the emulated chips are provisioned for it


def crc_by_division(data):
    """atCRC from its definition: the message's bits (each byte least significant bit first)
    times x^16, reduced modulo x^16 + x^15 + x^2 + 1 (0x18005) over GF(2); remainder low byte
    first."""
    bits = [(b >> i) & 1 for b in data for i in range(8)] + [0] * 16
    poly = [1, 1] + [0] * 12 + [1, 0, 1]  # x^16 + x^15 + x^2 + 1, highest power first
    for i in range(len(bits) - 16):
        if bits[i]:
            for j, p in enumerate(poly):
                bits[i + j] ^= p
    rem = int("".join(map(str, bits[-16:])), 2)
    return bytes((rem & 0xFF, rem >> 8))


def packet(opcode, p1, p2, data=b""):
    buf = bytearray(200)
    n = element.build(buf, opcode, p1, p2, data, len(data))
    return bytes(buf[:n])


# -- CRC and golden packets ----------------------------------------------------------------------


def test_crc_matches_the_polynomial_definition():
    rng = __import__("random").Random(5)
    for n in [0, 1, 2, 5, 7, 31, 64, 135]:
        for _ in range(20):
            data = bytes(rng.randrange(256) for _ in range(n))
            c = element.crc16(data, 0, len(data))
            assert bytes((c & 0xFF, c >> 8)) == crc_by_division(data) == crc16(data)


def test_crc_published_values():
    # Microchip's CRC application note example (Info) and the wake answer every chip gives
    assert crc_by_division(bytes((0x07, 0x30, 0x00, 0x00, 0x00))) == b"\x03\x5d"
    assert crc_by_division(b"\x04\x11") == b"\x33\x43"


@pytest.mark.parametrize("args, golden", [
    ((element.INFO, 0x00, 0x0000), "03 07 30 00 00 00 03 5d"),
    ((element.RANDOM, 0x00, 0x0000), "03 07 1b 00 00 00 24 cd"),
    ((element.GENKEY, 0x04, 0x0000), "03 07 40 04 00 00 83 87"),
    ((element.SIGN, 0x80, 0x0000), "03 07 41 80 00 00 28 05"),
    ((element.COUNTER, 0x01, 0x0001), "03 07 24 01 01 00 06 f7"),
    ((element.SHA, 0x00, 0x0000), "03 07 47 00 00 00 2e 85"),
])
def test_golden_packets(args, golden):
    p = packet(*args)
    assert p == bytes.fromhex(golden)
    assert p[1] == len(p) - 1 and crc_by_division(p[1:-2]) == p[-2:]


def test_golden_packets_with_data():
    digest = bytes(range(32))
    p = packet(element.NONCE, 0x03, 0x0000, digest)
    assert p[:6] == bytes.fromhex("03 27 16 03 00 00") and p[6:38] == digest
    assert p[38:] == crc_by_division(p[1:38])
    p = packet(element.VERIFY, 0x02, 0x0004, bytes(128))
    assert p[:6] == bytes.fromhex("03 87 45 02 04 00") and len(p) == 1 + 135
    assert p[-2:] == crc_by_division(p[1:-2])


# -- the emulator through a socket ---------------------------------------------------------------


@pytest.fixture
def emulator(tmp_path):
    started = []

    def start(*args, store=None, provision=True):
        store = store or tmp_path / "store"
        if provision and not (store / "config.bin").exists():
            factory.provision(store, tmp_path / "flash", 1, 2, keys.xy(COMMAND_KEY.public_key()))
        e = EmulatorProcess(store, tmp_path / f"el{len(started)}.sock", *args)
        started.append(e)
        return e

    yield start
    for e in started:
        if e.proc.poll() is None:
            e.stop()


FAST = ("--sign-ms", 0, "--ecc-ms", 0, "--cmd-ms", 0)


@pytest.fixture
def chip(emulator):
    e = emulator(*FAST)
    bus = SocketI2C(e.spec)
    yield Element(bus)
    bus.close()


def pub_of(xy):
    return public_key_from_xy(bytes(xy))


@pytest.mark.board
def test_info_random_serial(chip):
    assert chip.info() == bytes.fromhex("00006003")
    a, b = bytearray(32), bytearray(32)
    chip.random(a)
    chip.random(b)
    assert a != b and any(a)
    sn = chip.serial()
    assert len(sn) == 9 and sn[:2] == b"\x01\x23" and sn[8] == 0xEE


@pytest.mark.board
def test_genkey_sign_verifies_with_cryptography(chip):
    xy = bytearray(64)
    chip.genkey(3, xy)
    again = bytearray(64)
    assert chip.public_key(3, again) == xy
    for i in range(5):
        digest = hashlib.sha256(b"round %d" % i).digest()
        sig = chip.sign_digest(3, digest, bytearray(64))
        pub_of(xy).verify(signature_to_der(bytes(sig)), digest, PREHASHED)


@pytest.mark.board
def test_sign_of_a_sha_computed_by_the_chip(chip):
    data = bytes(range(256)) * 3 + b"tail"
    out = bytearray(32)
    assert chip.sha256(data, out) == hashlib.sha256(data).digest()
    sig = chip.sign(0, bytearray(64))  # the digest went into TempKey
    pk = bytearray(64)
    chip.public_key(0, pk)
    pub_of(pk).verify(signature_to_der(bytes(sig)), hashlib.sha256(data).digest(), PREHASHED)
    chip.sha256(b"x" * 64, out, tempkey=False)  # output only: TempKey stays empty
    with pytest.raises(ElementError) as e:
        chip.sign(0, bytearray(64))
    assert e.value.status == element.EXECUTION_ERROR


@pytest.mark.board
def test_sha_from_a_buffer_offset_and_a_queued_sign_into_one(chip):
    """The allocation-free forms the shoe's outbox uses: the data stays in the caller's buffer
    at an offset; the signature lands at an offset of another."""
    buf = bytearray(os.urandom(300))
    pk = bytearray(64)
    chip.public_key(0, pk)
    chip.prepare(range(64))
    for at, n in ((0, 0), (5, 63), (7, 64), (32, 106), (1, 129), (50, 250)):
        out = bytearray(32)
        assert chip.sha_from(buf, at, n, out) == hashlib.sha256(buf[at : at + n]).digest()
    sig = bytearray(100)
    chip.sign_start(0)
    while not chip.sign_ready(sig, 20):
        pass
    pub_of(pk).verify(signature_to_der(bytes(sig[20:84])),
                      hashlib.sha256(buf[50:300]).digest(), PREHASHED)
    assert sig[:20] == bytes(20) and sig[84:] == bytes(16)


@pytest.mark.board
def test_queued_sha_moves_one_command_a_call(chip):
    buf = bytearray(os.urandom(200))
    for at, n in ((0, 0), (3, 63), (10, 64), (1, 170)):
        out = bytearray(32)
        chip.sha_queue(buf, at, n, out)
        calls = 1
        while not chip.sha_ready():
            calls += 1
        assert out == hashlib.sha256(buf[at : at + n]).digest()
        assert calls >= 2 + n // 64  # start, each update, the end: each its own call
    with pytest.raises(ElementError) as e:
        chip.sha_ready()
    assert e.value.status == element.NOT_QUEUED


@pytest.mark.board
def test_a_patient_driver_never_polls_a_busy_chip(emulator):
    e = emulator("--sign-ms", 50, "--cmd-ms", 1)
    bus = SocketI2C(e.spec)
    reads = []
    real = bus.readfrom_into

    def counted(addr, buf, stop=True):
        reads.append(len(buf))
        return real(addr, buf)

    bus.readfrom_into = counted
    chip = Element(bus, patient=True)
    pk = bytearray(64)
    chip.public_key(0, pk)
    digest = hashlib.sha256(b"patience").digest()
    chip.load_digest(digest)
    reads.clear()
    chip.sign_start(0)
    t0 = time.monotonic()
    sig = bytearray(64)
    while not chip.sign_ready(sig):
        assert reads == []  # not addressed before Sign's maximum time
    assert time.monotonic() - t0 >= 0.110  # 115 ms, counted in whole milliseconds
    pub_of(pk).verify(signature_to_der(bytes(sig)), digest, PREHASHED)
    bus.close()


@pytest.mark.board
def test_a_patient_driver_naps_until_the_chip_may_answer_an_impatient_one_never(emulator):
    """The outbox's wait for the element (a full ring, settle, finish_all) sleeps in nap() rather
    than spin: a patient driver until the command's maximum time, then one poll answers."""
    e = emulator("--sign-ms", 50, "--cmd-ms", 1)
    for patient, least, most in ((True, 0.110, 0.5), (False, 0.0, 0.02)):
        bus = SocketI2C(e.spec)
        chip = Element(bus, patient=patient)
        chip.nap()  # nothing queued: at once
        chip.load_digest(hashlib.sha256(b"nap").digest())
        chip.sign_start(0)
        t0 = time.monotonic()
        chip.nap()
        assert least <= time.monotonic() - t0 < most, patient
        if patient:
            assert chip.sign_ready(bytearray(64))  # due now, and the chip is done
        else:
            while not chip.sign_ready(bytearray(64)):
                pass
        bus.close()


@pytest.mark.board
def test_verify_external_and_stored(tmp_path, emulator):
    cmd_key = COMMAND_KEY
    chip = Element(SocketI2C(emulator(*FAST).spec))
    digest = hashlib.sha256(b"command").digest()
    r, s = __import__(
        "cryptography.hazmat.primitives.asymmetric.utils", fromlist=["x"]
    ).decode_dss_signature(cmd_key.sign(digest, PREHASHED))
    sig = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    xy = cmd_key.public_key().public_bytes(serialization.Encoding.X962,
                                           serialization.PublicFormat.UncompressedPoint)[1:]
    assert chip.verify_external(digest, sig, xy) is True
    assert chip.verify_stored(9, digest, sig) is True
    bad = bytearray(sig)
    bad[40] ^= 0x01
    assert chip.verify_external(digest, bad, xy) is False
    assert chip.verify_stored(9, digest, bad) is False
    assert chip.verify_stored(9, hashlib.sha256(b"other").digest(), sig) is False


def raw(bus, pkt, wait=0.0):
    """One command straight on the bus; the chip's whole response."""
    bus.writeto(0x60, pkt)
    time.sleep(wait)
    head = bytearray(1)
    bus.readfrom_into(0x60, head)
    rest = bytearray(head[0] - 1)
    bus.readfrom_into(0x60, rest)
    return bytes(head + rest)


@pytest.mark.board
def test_verify_miscompare_is_status_01_on_the_wire(chip):
    digest = hashlib.sha256(b"m").digest()
    xy = bytearray(64)
    chip.public_key(0, xy)
    sig = chip.sign_digest(0, digest, bytearray(64))
    chip.load_digest(digest)
    bad = bytearray(sig)
    bad[0] ^= 0x80
    resp = raw(chip._bus, packet(element.VERIFY, 0x02, 0x0004, bytes(bad) + bytes(xy)))
    assert resp == bytes((0x04, 0x01)) + crc_by_division(b"\x04\x01")


@pytest.mark.board
def test_status_errors(chip):
    bus = chip._bus
    chip.info()  # awake
    resp = raw(bus, packet(0x7E, 0, 0))  # no such opcode
    assert resp[:2] == b"\x04\x03"
    p = bytearray(packet(element.INFO, 0, 0))
    p[-1] ^= 0x40  # the chip sees a bad CRC
    assert raw(bus, bytes(p))[:2] == b"\x04\xff"
    with pytest.raises(ElementError) as e:
        chip.sign(0, bytearray(64))  # Sign consumed no TempKey: none loaded
    assert e.value.status == element.EXECUTION_ERROR
    with pytest.raises(ElementError) as e:
        chip.genkey(0, bytearray(64))  # result key 1: no GenKey once the data zone is locked
    assert e.value.status == element.EXECUTION_ERROR
    with pytest.raises(ElementError) as e:
        chip.genkey(9, bytearray(64))  # the command key's slot holds a public key
    assert e.value.status == element.EXECUTION_ERROR
    with pytest.raises(ElementError) as e:
        chip.verify_stored(5, bytes(32), bytes(64))  # a private-key slot: no public key there
    assert e.value.status == element.EXECUTION_ERROR
    with pytest.raises(ElementError) as e:
        chip.sign_ready(bytearray(64))
    assert e.value.status == element.NOT_QUEUED


class FlipCRC:
    """A bus that corrupts the last byte of every response (noise between chip and MCU)."""

    def __init__(self, bus):
        self.bus = bus
        self.flip = False

    def writeto(self, addr, buf):
        return self.bus.writeto(addr, buf)

    def readfrom_into(self, addr, buf):
        self.bus.readfrom_into(addr, buf)
        if self.flip and len(buf) > 1:
            buf[len(buf) - 1] ^= 0x01


class HeldUp:
    """A bus whose MCU is held up (an interrupt, a slow host's virtual board) right after the
    chip NACKs a poll for its response, past the command's longest execution time."""

    def __init__(self, bus, ms):
        self.bus = bus
        self.ms = ms

    def writeto(self, addr, buf):
        return self.bus.writeto(addr, buf)

    def readfrom_into(self, addr, buf):
        try:
            self.bus.readfrom_into(addr, buf)
        except OSError:
            if len(buf) == 1:
                time.sleep(self.ms / 1000)
            raise


@pytest.mark.board
def test_a_poll_nacked_in_time_and_read_late_is_asked_again(emulator):
    chip = Element(HeldUp(SocketI2C(emulator("--sign-ms", 50).spec), 200))
    digest = hashlib.sha256(b"late").digest()
    pub = chip.public_key(0, bytearray(64))
    sig = chip.sign_digest(0, digest, bytearray(64))  # blocking: NACKed, then read late
    pub_of(pub).verify(signature_to_der(sig), digest, PREHASHED)
    chip.load_digest(digest)
    chip.sign_start(0)
    out = bytearray(64)
    while not chip.sign_ready(out):  # queued: the same
        pass
    pub_of(pub).verify(signature_to_der(out), digest, PREHASHED)


@pytest.mark.board
def test_a_response_with_a_bad_crc_is_refused(emulator):
    bus = FlipCRC(SocketI2C(emulator(*FAST).spec))
    chip = Element(bus)
    chip.info()
    bus.flip = True
    for call in (chip.info, lambda: chip.random(bytearray(32)),
                 lambda: chip.sign_digest(0, bytes(32), bytearray(64))):
        with pytest.raises(ElementError) as e:
            call()
        assert e.value.status == element.RX_CRC


@pytest.mark.board
def test_sleep_loses_tempkey_idle_keeps_it(chip):
    d = hashlib.sha256(b"t").digest()
    chip.load_digest(d)
    chip.idle()
    chip.sign(0, bytearray(64))  # woken again: TempKey was kept
    chip.load_digest(d)
    chip.sleep()
    with pytest.raises(ElementError) as e:
        chip.sign(0, bytearray(64))
    assert e.value.status == element.EXECUTION_ERROR


@pytest.mark.board
def test_counters_are_monotonic_across_restarts(tmp_path, emulator):
    e = emulator(*FAST)
    chip = Element(SocketI2C(e.spec))
    assert chip.counter(0) == 0 and chip.counter(1) == 0
    assert [chip.counter_increment(0) for _ in range(3)] == [1, 2, 3]
    assert chip.counter_increment(1) == 1
    e.stop()
    chip = Element(SocketI2C(emulator(*FAST).spec))
    assert chip.counter(0) == 3 and chip.counter(1) == 1
    assert chip.counter_increment(0) == 4


@pytest.mark.board
def test_queued_sign_is_nacked_while_busy(emulator):
    # 300 ms: long beside a busy machine's scheduling delays (the first poll must find it busy)
    chip = Element(SocketI2C(emulator("--sign-ms", 300).spec), slack_ms=400)
    d = hashlib.sha256(b"q").digest()
    xy = bytearray(64)
    chip.public_key(0, xy)
    chip.load_digest(d)
    sig = bytearray(64)
    t = time.monotonic()
    chip.sign_start(0)
    assert chip.sign_ready(sig) is False
    with pytest.raises(ElementError) as e:
        chip.info()  # one command at a time
    assert e.value.status == element.BUSY
    polls = 0
    while not chip.sign_ready(sig):
        polls += 1
        time.sleep(0.002)
    assert time.monotonic() - t >= 0.3 and polls > 5
    pub_of(xy).verify(signature_to_der(bytes(sig)), d, PREHASHED)


@pytest.mark.board
def test_provision_rekey_and_the_store(tmp_path, emulator):
    store = tmp_path / "store"
    serial, first, *_ = factory.provision(store, tmp_path / "flash", 7, 2,
                                          keys.xy(COMMAND_KEY.public_key()))
    assert factory.result_public_xy(store, 1) == first
    version, new, _, _ = factory.rekey(store, tmp_path / "flash")
    assert version == 2
    assert factory.result_public_xy(store, 2) == new != first
    assert stat.S_IMODE(store.stat().st_mode) == 0o700
    for f in store.iterdir():
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
    e = emulator(*FAST)
    chip = Element(SocketI2C(e.spec))
    assert chip.serial() == serial
    assert factory.firmware("shoe.provision").locked(chip) == (True, True)
    for slot, want in ((0, first), (1, new)):
        xy = bytearray(64)
        chip.public_key(slot, xy)
        assert bytes(xy) == want
    for slot in (0, 1):  # version 1 by its configuration, version 2 locked by the rekey
        with pytest.raises(ElementError):
            chip.genkey(slot, bytearray(64))
    out = e.stop()
    assert "PRIVATE" not in out and "listening" in out


# -- MicroPython ------------------------------------------------------------------------------


@pytest.mark.board
def test_driver_on_micropython_golden_and_heap_locked_signing(mpy, emulator, tmp_path):
    probe = tmp_path / "golden.py"
    probe.write_text("from shoe import element\nb = bytearray(16)\n"
                     "n = element.build(b, 0x30, 0, 0)\n"
                     "print(''.join('%02x' % x for x in b[:n]))\n")
    r = mpy(probe)
    assert r.stdout.decode().strip() == "030730000000035d", r.stderr
    e = emulator("--sign-ms", 2, "--ecc-ms", 0, "--cmd-ms", 0)
    r = mpy(ROOT / "tests" / "mp" / "element_sign.py", e.spec, 100,
            path=[ROOT / "boards" / "virtual"], timeout=120)
    lines = r.stdout.decode().splitlines()
    assert r.returncode == 0, r.stderr.decode()
    pub = pub_of(bytes.fromhex(lines[0].split()[1]))
    summary = lines[1].split()
    assert summary[:4] == ["signed", "100", "alloc_failures", "0"], lines[1]
    assert int(summary[5]) > 0  # the chip was polled while busy
    assert summary[8:] == ["probe_caught", "1"], lines[1]  # the lock does catch an allocation
    sigs = [ln.split() for ln in lines[2:]]
    assert len(sigs) == 100
    for _, digest, sig in sigs:
        pub.verify(signature_to_der(bytes.fromhex(sig)), bytes.fromhex(digest), PREHASHED)


@pytest.mark.board
def test_driver_rewakes_before_the_watchdog_and_recovers_after_it(emulator):
    chip = Element(SocketI2C(emulator(*FAST).spec))  # the chip's 1.3 s watchdog
    d = hashlib.sha256(b"w").digest()
    chip.load_digest(d)
    time.sleep(0.8)  # past the driver's 700 ms: it idles and wakes again, TempKey kept
    chip.sign(0, bytearray(64))
    chip2 = Element(SocketI2C(emulator(*FAST, "--watchdog-ms", 200).spec))
    chip2.info()
    time.sleep(0.3)  # the chip fell asleep under the driver
    with pytest.raises(ElementError) as e:
        chip2.info()
    assert e.value.status == element.NO_RESPONSE
    assert chip2.info() == bytes.fromhex("00006003")  # woken again


@pytest.mark.board
def test_a_new_driver_finds_the_chip_awake(emulator):
    e = emulator(*FAST)
    first = Element(SocketI2C(e.spec))
    first.load_digest(bytes(32))
    first.random(bytearray(32))  # its response stays in the chip's buffer
    second = Element(SocketI2C(e.spec))  # the MCU rebooted; the chip kept power
    assert second.info() == bytes.fromhex("00006003")
    with pytest.raises(ElementError) as err:
        second.sign(0, bytearray(64))  # the resync slept the chip: no stale TempKey is signed
    assert err.value.status == element.EXECUTION_ERROR


@pytest.mark.board
def test_a_new_driver_waits_out_a_command_the_last_one_left_running(emulator):
    """The MCU reset mid-Sign (a power cut to it alone; the chip kept power): the chip answers
    nothing until that Sign ends, and the new driver's wake waits for it instead of failing
    the boot."""
    e = emulator("--sign-ms", 80, "--ecc-ms", 0, "--cmd-ms", 0)
    first = Element(SocketI2C(e.spec))
    first.load_digest(hashlib.sha256(b"cut").digest())
    began = time.monotonic()  # before the Sign is sent: it ends 80 ms after the chip has it
    first.sign_start(0)  # queued: the chip executes it for 80 ms
    second = Element(SocketI2C(e.spec))  # the MCU rebooted at once
    assert second.info() == bytes.fromhex("00006003")
    assert time.monotonic() - began >= 0.05, "the wake waited for the Sign to end"

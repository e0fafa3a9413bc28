"""The recognition module's CRC-8 (CRC-8/DVB-S2, docs/HARDWARE.md "The recognition module's
frames"): every 1- and 2-bit error of every card's frame is refused by the firmware's own decoder,
the CRC's structure proves it for every frame at every confidence, the host's frames equal the
firmware's, MicroPython's decoder gives exactly what CPython's does, and the 3-bit errors that
pass are counted exactly, as the document states them."""

import itertools
import math
import re
import subprocess
import sys

import pytest

from sabot.virtual.dealer_channel import crc8 as host_crc8
from sabot.virtual.dealer_channel import sensor_frame

from kit import FIRMWARE, ROOT

sys.path.insert(0, str(FIRMWARE))

from shoe import sensor
from shoe.cards import CUT, NO_CARD
from shoe.sensor import (
    READ_CARD,
    READ_CUT,
    READ_FOREIGN,
    READ_NONE,
    READ_UNREADABLE,
    SensorDecoder,
    encode,
)

HEX = b"0123456789ABCDEF"
RANKS = "A23456789TJQK"
SUITS = "SHDC"
# (TYPE, RANK SUIT, the read it gives, the card it names): 52 cards, the cut card, unreadable
KINDS = [("R", RANKS[n >> 2] + SUITS[n & 3], READ_CARD, n) for n in range(52)]
KINDS += [("C", "--", READ_CUT, CUT), ("U", "--", READ_UNREADABLE, NO_CARD)]
SENTINEL = encode(ord("R"), b"7D", 0x5A)


def crc8_poly(data, poly):
    """A plain bitwise CRC-8 (init 0, not reflected, xorout 0) with any polynomial."""
    c = 0
    for b in data:
        c ^= b
        for _ in range(8):
            c = ((c << 1) ^ poly) & 0xFF if c & 0x80 else (c << 1) & 0xFF
    return c


def flips(frame):
    """Every 1- and 2-bit error of frame."""
    n = len(frame) * 8
    for i in range(n):
        for j in range(i, n):
            bad = bytearray(frame)
            bad[i >> 3] ^= 1 << (i & 7)
            if j != i:
                bad[j >> 3] ^= 1 << (j & 7)
            yield bad


def test_the_crc_is_crc8_dvb_s2_in_firmware_and_host():
    # the catalogue's check value (reveng: CRC-8/DVB-S2 check=0xbc), docs/HARDWARE.md's example
    assert sensor.crc8(b"123456789", 9) == host_crc8(b"123456789") == 0xBC
    assert crc8_poly(b"123456789", 0xD5) == 0xBC
    assert encode(ord("R"), b"3S", 0xF0) == b"$R3SF0*CA\n"
    assert bytes(sensor._CRC) == bytes(crc8_poly(bytes([i]), 0xD5) for i in range(256))


def test_the_documented_frames_are_what_the_module_sends():
    doc = (ROOT / "docs" / "HARDWARE.md").read_text()
    examples = {"$R3SF0*CA\\n": ("R", "3S"), "$C--F0*24\\n": ("C", "--"),
                "$U--F0*D9\\n": ("U", "--")}
    for text, (kind, rank_suit) in examples.items():
        assert f"`{text}`" in doc
        assert sensor_frame(kind, rank_suit, 0xF0) == text.replace("\\n", "\n").encode()
    assert "24 52 33 53 46 30 2A 43 41 0A" in doc
    assert bytes.fromhex("24 52 33 53 46 30 2A 43 41 0A") == encode(ord("R"), b"3S", 0xF0)
    for param in ("poly 0xD5", "init 0x00", "refin false", "refout false", "xorout 0x00",
                  "check value 0xBC"):
        assert param in doc


def test_host_frames_equal_the_firmware_frames_for_every_card_and_confidence():
    for kind, rank_suit, _, _ in KINDS:
        for conf in range(256):
            assert sensor_frame(kind, rank_suit, conf) == encode(ord(kind), rank_suit.encode(),
                                                                 conf)


@pytest.mark.long
def test_every_1_and_2_bit_error_of_every_card_frame_is_refused_by_the_decoder():
    # Each kind at five confidences, rotating so that every confidence 0x00-0xFF is used: 270
    # frames, 874,800 corrupted ones, each refused by a fresh decoder; after every 8th, a genuine
    # frame that must come out (the decoder resynchronised and kept nothing of the bad one; the
    # MicroPython test resynchronises after every one of its own).
    confs = set()
    crc_digits = set()
    tried = 0
    for k, (kind, rank_suit, want, card) in enumerate(KINDS):
        for conf in ((5 * k + j) % 256 for j in range(5)):
            frame = encode(ord(kind), rank_suit.encode(), conf)
            d = SensorDecoder()
            assert [d.feed(b) for b in frame][-1] == want and d.card == card
            confs.add(conf)
            crc_digits.update(((0, frame[7]), (1, frame[8])))
            for n, bad in enumerate(flips(frame)):
                d = SensorDecoder()
                feed = d.feed  # (one lookup a frame: 874,800 of them)
                for b in bad:
                    if feed(b) != READ_NONE:
                        raise AssertionError(bytes(bad))
                if n % 8 == 0:
                    assert [d.feed(b) for b in SENTINEL][-1] == READ_CARD
                    assert (d.card, d.confidence) == (26, 0x5A)  # 7D
                tried += 1
    assert tried == 270 * (80 + 80 * 79 // 2)
    assert confs == set(range(256))
    assert crc_digits == {(p, h) for p in (0, 1) for h in HEX}  # every CRC digit, both places


def _escapes(poly):
    """The errors of one body bit plus one bit of a CRC digit that a CRC with poly lets through.

    For frames of one length the CRC is linear: crc(body ^ e) == crc(body) ^ crc(e). A one-bit flip
    turning one upper-case hex digit into another changes its value by `delta`; the frame then
    passes exactly when a body bit's syndrome crc(e) equals that change in its nibble."""
    syndromes = [crc8_poly(bytes((1 << (i & 7)) if n == i >> 3 else 0 for n in range(5)), poly)
                 for i in range(40)]
    deltas = {v ^ HEX.index(h ^ (1 << bit)) for v, h in enumerate(HEX) for bit in range(8)
              if h ^ (1 << bit) in HEX}
    return syndromes, {s for s in syndromes if s in {d << 4 for d in deltas} | deltas}


def test_the_crc_structure_refuses_every_2_bit_error_at_every_confidence():
    syndromes, escapes = _escapes(0xD5)
    # one or two body bits: a non-zero syndrome, and no two bits share one
    assert 0 not in syndromes and len(set(syndromes)) == 40
    # one body bit and one CRC-digit bit
    assert escapes == set()
    # (errors in the CRC digits alone change the value or make it no digit; errors in `$`, `*`
    # or `\n` are refused by the frame's shape: the decoder test above runs them all)
    # and the linearity the argument rests on, over every body the module can send
    for kind, rank_suit, _, _ in KINDS:
        for conf in range(256):
            body = (kind + rank_suit).encode() + b"%02X" % conf
            c = sensor.crc8(body, 5)
            for i in range(40):
                bad = bytearray(body)
                bad[i >> 3] ^= 1 << (i & 7)
                assert sensor.crc8(bad, 5) == c ^ syndromes[i]


def test_crc8_smbus_and_autosar_would_let_a_2_bit_error_through_hex_digits():
    # why not 0x07 or 0x2F: a body bit with syndrome 0x07 or 0x70 plus `B` <-> `C` (11 <-> 12,
    # 0b0111) in a CRC digit passes. The structural check above is not vacuous.
    assert _escapes(0x07)[1] and _escapes(0x2F)[1]
    # a concrete one under CRC-8/SMBUS: `3S` at 0xF0 with CRC ..B, then CONF's last bit (F0 -> F1,
    # syndrome 0x07) and the CRC's `B` -> `C`: another well-formed frame
    for conf in range(0, 256, 2):
        body = b"R3S%02X" % conf
        crc = crc8_poly(body, 0x07)
        if crc & 15 == 0xB:
            break
    frame = bytearray(b"$" + body + b"*%02X\n" % crc)
    frame[5] ^= 0x01
    frame[8] ^= 0x01
    assert crc8_poly(bytes(frame[1:6]), 0x07) == int(bytes(frame[7:9]), 16)
    assert frame[8:9] == b"C" and int(bytes(frame[4:6]), 16) == conf + 1
    # the same two bits of the CRC-8/DVB-S2 frame are refused
    good = encode(ord("R"), b"3S", conf)
    bad = bytearray(good)
    bad[5] ^= 0x01
    bad[8] ^= 0x01
    d = SensorDecoder()
    assert all(d.feed(b) == READ_NONE for b in bad) and d.errors == 1


@pytest.mark.long
@pytest.mark.board
def test_micropython_decoder_agrees_and_refuses_every_1_and_2_bit_error(mpy):
    script = ROOT / "tests" / "mp" / "sensor_errors.py"
    # a sample: the exhaustive run over every card and confidence is the CPython test's; here
    # every third card's frame (18), the cut card's and the unreadable one's, at one confidence
    confs = ("--step", "3", "F0")
    r = mpy(script, *confs)
    assert r.returncode == 0, r.stderr.decode()
    c = subprocess.run([sys.executable, str(script), *confs], capture_output=True, timeout=300,
                       env={"PYTHONPATH": str(FIRMWARE)})
    assert c.returncode == 0, c.stderr.decode()
    assert r.stdout == c.stdout  # the same refusals, error counts and CRC table
    frames, patterns, accepted, lost, errors, _ = map(int, re.findall(rb"\d+", r.stdout))
    assert (frames, patterns) == (20, 20 * 3240)
    assert accepted == lost == 0 and errors > 0


def _flip(data, bits):
    out = bytearray(data)
    for i in bits:
        out[i >> 3] ^= 1 << (i & 7)
    return bytes(out)


def _read(frame):
    """(what the decoder reads, its card) for `frame` fed alone to a fresh decoder."""
    d = SensorDecoder()
    r = READ_NONE
    for b in frame:
        r = d.feed(b)
    return r, d.card


def _three_bit_escapes(frame, by_syndrome):
    """What every 3-bit error of `frame` that the decoder accepts reads as: {(read, card): n}.

    Flips in `$`, `*` or `\\n` are refused by the frame's shape; errors in the body alone have odd
    weight, which 0xD5 (a multiple of x+1) always detects; errors in the CRC digits alone change
    its value. So an accepted error is one body bit and two CRC-digit bits, or two and one, and
    by linearity it passes exactly when the body error's syndrome equals the change the CRC
    digits' flips make to the CRC's value: those few candidates go through the decoder."""
    crc = sensor.crc8(frame[1:6], 5)
    found = {}
    for body_bits in (1, 2):
        for digit_bits in itertools.combinations(range(56, 72), 3 - body_bits):
            digits = _flip(frame, digit_bits)[7:9]
            if not all(h in HEX for h in digits):
                continue
            for bits in by_syndrome[body_bits].get(int(digits, 16) ^ crc, ()):
                got = _read(_flip(frame, (*bits, *digit_bits)))
                if got[0] != READ_NONE:
                    found[got] = found.get(got, 0) + 1
    return found


def test_three_bit_errors_that_name_another_card_are_counted_as_docs_hardware_states():
    # every body error of 1 or 2 bits (frame bits 8-47), by its syndrome
    by_syndrome = {1: {}, 2: {}}
    for w in (1, 2):
        for bits in itertools.combinations(range(8, 48), w):
            e = _flip(bytes(10), bits)[1:6]
            by_syndrome[w].setdefault(sensor.crc8(e, 5), []).append(bits)
    other = same = foreign = 0
    first_other = None
    for kind, rank_suit, _, card in KINDS[:52]:
        for conf in range(256):
            frame = encode(ord(kind), rank_suit.encode(), conf)
            for (read, got), n in _three_bit_escapes(frame, by_syndrome).items():
                assert read in (READ_CARD, READ_FOREIGN)  # never the cut card or unreadable
                if read == READ_FOREIGN:
                    foreign += n
                elif got == card:
                    same += n
                else:
                    other += n
                    first_other = first_other or frame
    # the counting checked against every 3-bit error, through the decoder, of one frame that
    # lets another card through and one that lets nothing through
    for frame in (first_other, encode(ord("R"), b"3S", 0xF0)):
        every = {}
        for bits in itertools.combinations(range(80), 3):
            got = _read(_flip(frame, bits))
            if got[0] != READ_NONE:
                every[got] = every.get(got, 0) + 1
        assert every == _three_bit_escapes(frame, by_syndrome)
    patterns = 52 * 256 * math.comb(80, 3)
    doc = " ".join((ROOT / "docs" / "HARDWARE.md").read_text().split())
    said = (f"of the {patterns:,} 3-bit errors of the {52 * 256:,} card frames (52 cards at 256 "
            f"confidences, {math.comb(80, 3):,} ways to flip 3 of 80 bits), {other:,} give "
            f"another card's frame, {same:,} the same card's (another confidence, or lower case) "
            f"and {foreign:,} a frame naming no card, which the shoe refuses as foreign")
    assert said in doc, said

"""Fuzzing the parsers that face the outside: the firmware's sensor decoder and command intake (on
real MicroPython, seeded random bytes) and the host's frame intake (hypothesis)."""

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sabot import protocol as pr
from sabot.audit.validator import Validator
from sabot.virtual import capture_gen

from kit import ROOT

MP = ROOT / "tests" / "mp"


@pytest.mark.board
def test_sensor_decoder_survives_10000_random_cases_and_resyncs(mpy):
    r = mpy(MP / "fuzz_sensor.py", 10000, 1)
    assert r.returncode == 0, r.stderr.decode()
    cases, resynced, phantom, flips, two_flips = map(int, re.findall(rb"\d+", r.stdout))
    assert cases == resynced == 10000
    assert phantom == 0 and flips == 0 and two_flips == 0


@pytest.mark.board
def test_command_intake_survives_random_bytes_and_obeys_none(mpy, shoe_flash, element):
    flash, _, _ = shoe_flash
    r = mpy(MP / "fuzz_commands.py", flash, element, 3000, 2)
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.split() == [b"cases", b"3000", b"accepted", b"0"]


_GENUINE = {}


def genuine(tmp_path_factory=None):
    if not _GENUINE:
        import tempfile

        tmp = tempfile.mkdtemp()
        key, cap, _ = capture_gen.generate(tmp, 1, seed=3)
        parts = [p + b"\x00" for p in cap.split(b"\x00")[:-1]]
        raws = {pr.decode_frame(p[:-1]) for p in parts}
        _GENUINE.update(key=key, parts=parts, raws=raws, tmp=tmp)
    return _GENUINE


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(noise=st.lists(st.binary(max_size=60), min_size=1, max_size=8), where=st.integers(0, 30),
       flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 7)), max_size=4))
@pytest.mark.long
def test_validator_never_accepts_what_was_not_sent_and_resyncs(noise, where, flips):
    g = genuine()
    parts = list(g["parts"][:40])
    stream = bytearray(b"".join(parts[:where]) + b"".join(noise) + b"\x00"
                       + b"".join(parts[where:]))
    for pos, bit in flips:
        stream[pos % len(stream)] ^= 1 << bit
    import os
    import tempfile

    fd, db = tempfile.mkstemp(dir=g["tmp"], suffix=".db")
    os.close(fd)
    v = Validator(g["key"], db)
    verdicts = v.receive(bytes(stream))
    v.store.close()
    for frame, verdict, _ in verdicts:
        if verdict == "accepted":
            assert frame.raw in g["raws"]  # only frames the shoe really sent
    if not flips and where == 0:
        # Noise before the first frame: the genuine stream after it verifies in full.
        assert sum(1 for _, v_, _ in verdicts if v_ == "accepted") == 40

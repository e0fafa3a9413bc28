"""No integer on the card path or the service path needs more than 30 bits: on a 32-bit
MicroPython port a small int has 31 bits (-2**30 .. 2**30 - 1) and anything larger is a long int
on the heap, which a locked heap refuses (MemoryError) and the 64-bit unix port's heap_lock test
(test_card_path.py) cannot see. Three checks: the log's CRC helper exhaustively over its
structure; every int the firmware's functions hold or return over a whole shoe, its acks and its
hellos, for a shoe whose id needs 32 bits; no literal in the firmware that needs more."""

import ast
import random
import sys
import zlib

import pytest

from shoe import frames, store
from shoe.app import ShoeApp
from shoe.dealing import PH_ENDED
from shoe.store import Flash, crc_into

from kit import FIRMWARE
from kit.fw import Link, ProvisionedShoe, split

SMALL = range(-(2**30), 2**30)
SHOE = FIRMWARE / "shoe"
HOST_HELPERS = {"build"}  # frames.py's helper for tests and hosts (takes the id as an int)


def test_crc_tables_hold_16_bit_halves_and_every_step_stays_below_2_16():
    assert len(store._CRC_HI) == len(store._CRC_LO) == 16
    for k in range(16):
        assert store._CRC_HI[k] < 2**16 and store._CRC_LO[k] < 2**16
        # each entry is CRC-32's register after one nibble k from zero, in halves
        reg = k
        for _ in range(4):
            reg = reg >> 1 ^ (0xEDB88320 if reg & 1 else 0)
        assert store._CRC_HI[k] << 16 | store._CRC_LO[k] == reg
    # crc_into's nibble step, for every low half, every nibble index, from the largest high half:
    # a 12-bit shift or-ed with a nibble shifted by 12, xor-ed with a table half
    tl, th = store._CRC_LO, store._CRC_HI
    worst = 0
    for lo in range(2**16):
        for k in range(16):
            worst = max(worst, ((lo >> 4) | (0xFFFF & 0xF) << 12) ^ tl[k], (0xFFFF >> 4) ^ th[k])
    assert worst < 2**16


def test_crc_into_is_zlibs_crc32_big_endian():
    rng = random.Random(4)
    msgs = [b"", bytes(range(256)), bytes(768)] + [bytes([b]) for b in range(256)]
    msgs += [rng.randbytes(rng.randrange(1, 900)) for _ in range(200)]
    for m in msgs:
        out = bytearray(4)
        crc_into(m, len(m), out, 0)
        assert bytes(out) == zlib.crc32(m).to_bytes(4, "big")


def test_the_one_crc32_a_reader_computes_for_an_intact_record_is_a_small_constant():
    assert store._RESIDUE in SMALL
    rng = random.Random(5)
    for n in (0, 1, 60, 61, 200, 700):
        rec = store.record(store.R_INPUT, rng.randbytes(n))
        assert store.intact(rec[:3], rec[3:-4], rec[-4:])
        assert not store.intact(rec[:3], rec[3:-4], bytes(4))


class Watch:
    """sys.settrace over the firmware's own functions: every int a local holds at each line, every
    int returned, and the ints (also in lists) of `self` when a method returns."""

    def __init__(self):
        self.worst = 0
        self.where = None
        self.calls = 0

    def see(self, v, frame, name):
        if type(v) is int and v not in SMALL and abs(v) > abs(self.worst):
            self.worst, self.where = v, f"{frame.f_code.co_name}:{frame.f_lineno} {name}"

    def local(self, frame, event, arg):
        for name, v in frame.f_locals.items():
            self.see(v, frame, name)
        if event == "return":
            self.see(arg, frame, "returned")
            me = frame.f_locals.get("self")
            for name, v in getattr(me, "__dict__", {}).items():
                for x in v if type(v) is list else (v,):
                    self.see(x, frame, "self." + name)
        return self.local

    def call(self, frame, event, arg):
        if not frame.f_code.co_filename.startswith(str(SHOE)):
            return None
        f = frame
        while f is not None and f.f_code.co_filename.startswith(str(SHOE)):
            if f.f_code.co_name in HOST_HELPERS:
                return None  # the test's host making its commands
            f = f.f_back
        self.calls += 1
        return self.local


def card(app, token):
    from shoe.sensor import encode

    for b in (encode(ord("C")) if token == "CUT" else encode(ord("R"), token.encode())):
        app.sensor_byte(b)
    app.exit_edge()
    while app.busy():
        app.service()


@pytest.mark.long
def test_a_whole_shoe_with_acks_and_hellos_holds_no_int_beyond_30_bits(tmp_path):
    """The shoe's id needs 32 bits (0xFFFFFFF7): the firmware carries it as bytes. The watched
    run is the dealing (card path, finishing frames with the element, sending), the host's acks
    and hellos, a command with a counter and an ack of a seq past 2**30 (refused), and the new
    shoe's compaction."""
    from sabot.game import cards

    shoe = ProvisionedShoe(tmp_path, shoe_id=0xFFFFFFF7)
    link = Link()
    app = ShoeApp(Flash(str(shoe.flash)), link, link, shoe.element())
    app.start()
    watch = Watch()
    sys.settrace(watch.call)
    try:
        # a third of an 8-deck shoe, then its cut card and shoe end: every path of a whole shoe
        # (burn, rounds, acks, hellos, the end, the compaction), traced line by line in a third
        # of the time
        for i, token in enumerate(cards.shuffled_shoe(8, seed=11, cut_from_end=280)):
            if app.shoe.phase == PH_ENDED:
                break
            card(app, token)
            if i % 7 == 0:
                app.port._window -= 1000  # a second later: not over the commands' rate
                app.host_bytes(shoe.ack(app.sent))
            if i % 50 == 0:
                app.host_bytes(shoe.command(frames.C_HELLO))
        for command in (shoe.command(frames.C_ACK, (2**31 + 5).to_bytes(4, "big")),
                        shoe.command(frames.C_RESOLVE, b"\x01", counter=2**31),
                        shoe.command(frames.C_NEW_SHOE)):
            app.host_bytes(command)
            while app.busy():  # checked by the element from service()
                app.service()
        while app.busy():
            app.service()
    finally:
        sys.settrace(None)
    sent = split(link.data)
    assert watch.calls > 20_000 and len(sent) > 60
    assert all(f[4:8] == b"\xff\xff\xff\xf7" for f in sent)  # the id went out whole
    assert app.shoe.shoe_no == 2 and app.outbox.acked < 2**30
    assert watch.worst == 0, f"{watch.worst:#x} at {watch.where}"


def test_the_watch_sees_a_long_int():
    """The watch above would catch the old CRC (crc32(view) & 0xFFFFFFFF) in a firmware frame."""
    watch = Watch()
    code = compile("def old(view):\n    crc = zlib.crc32(view) & 0xFFFFFFFF\n    return 0\n",
                   str(SHOE / "store.py"), "exec")
    ns = {"zlib": zlib}
    exec(code, ns)
    sys.settrace(watch.call)
    try:
        for i in range(64):  # three CRCs in four are 2**30 or more
            ns["old"](bytes([i]))
    finally:
        sys.settrace(None)
    assert watch.worst >= 2**30 and "crc" in watch.where


def test_no_firmware_literal_needs_more_than_30_bits():
    """A mask like 0xFFFFFFFF is itself a long int on a 32-bit port (and the value it makes)."""
    big = []
    for path in sorted(SHOE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and type(node.value) is int \
                    and node.value not in SMALL:
                big.append(f"{path.name}:{node.lineno} {node.value:#x}")
    assert big == []

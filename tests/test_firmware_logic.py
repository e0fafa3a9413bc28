"""The firmware's pure logic in-process under CPython (it imports there: `const` is shimmed):
the round state machine, the sensor decoder, COBS both ways, the record log, the outbox, the
command port and golden frame bytes. The secure element is the real driver on the emulator's chip
in this process (tests/kit/fw.py); signatures are checked with `cryptography`. Fast and exact; what
only real MicroPython proves (allocation, heap size, the board process) is tested on the unix port
elsewhere."""

import hashlib
import random
import struct
import sys

import pytest
from cobs import cobs as cobs_ref
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric import ec

from sabot import tlog
from sabot.game import cards, rules
from sabot.protocol import P256_ORDER

from kit import FIRMWARE
from kit.fw import Link, ProvisionedShoe, payload_of, split, verify

sys.path.insert(0, str(FIRMWARE))

from shoe import cobs, frames
from shoe.app import ShoeApp
from shoe.cards import CUT, NO_CARD
from shoe.dealing import PH_ENDED, PH_HELD, PH_ROUND, DealingState
from shoe.outbox import Outbox
from shoe.port import CommandPort
from shoe.sensor import READ_CARD, READ_CUT, READ_NONE, SensorDecoder, encode
from shoe.store import (
    R_CHECKPOINT,
    R_FINAL,
    R_INPUT,
    R_TREE,
    Flash,
    RecordLog,
    frames_in,
    load_identity,
    next_boot,
    record,
)


def number(token):
    return CUT if token == "CUT" else cards.card_index(token)


def code(n):
    return cards.card_code(n)


# ---- round state machine -------------------------------------------------------------------
def deal_with_state_machine(tokens):
    """The firmware's DealingState dealing a shoe file, collected as round records."""
    s = DealingState(8)
    s.new_shoe()
    rounds = []
    for t in tokens:
        if s.phase == PH_ENDED:
            break
        s.events = 0
        s.card_out(number(t))
        if s.phase == PH_HELD:  # the cut card in the burn: the supervisor lets the shoe go on
            assert s.ir_kind == 9 and s.resolve(1)
        if s.events & 8:  # EV_RESULT
            rounds.append(rules.round_record(1, s.round_no, [code(c) for c in s.player[: s.np]],
                                             [code(c) for c in s.banker[: s.nb]]))
    return rounds, s


@pytest.mark.parametrize("seed", range(20))
def test_state_machine_deals_every_shuffled_shoe_as_the_host_rules_do(seed):
    tokens = cards.shuffled_shoe(8, seed=seed)
    rounds, shoe = deal_with_state_machine(tokens)
    assert rounds == rules.deal_shoe(tokens)
    assert shoe.phase == PH_ENDED
    assert sum(shoe.inventory) == shoe.position - 1  # every card out is counted, the cut card not


def test_state_machine_cut_card_during_the_burn_and_between_rounds():
    for tokens in (["5S", "CUT", "2H", "3H", "4H", "5H", "6H"] + ["KS", "KH", "QS", "QH"] * 3,
                   ["AS", "2S", "9S", "8D", "KD", "9C", "CUT"] + ["KS", "KH", "QS", "QH"] * 3):
        assert deal_with_state_machine(tokens)[0] == rules.deal_shoe(tokens)


def test_state_machine_holds_a_card_not_due_and_voids_it():
    s = DealingState(8)
    s.new_shoe()
    for t in ("AS", "2S", "9S", "8D", "KD", "9C"):  # burn; a natural round
        s.card_out(number(t))
    s.confirm()
    assert s.phase == PH_ROUND
    s.card_out(NO_CARD)  # unreadable
    assert (s.phase, s.ir_kind, s.ir_position) == (PH_HELD, 2, 7)
    assert s.resolve(1) and s.phase == PH_ROUND


# ---- sensor decoder --------------------------------------------------------------------------
def test_sensor_decoder_reads_every_card_and_refuses_every_single_bit_flip():
    d = SensorDecoder()
    for n in range(52):
        frame = encode(ord("R"), code(n).encode())
        got = [d.feed(b) for b in frame]
        assert got[-1] == READ_CARD and d.card == n and got[:-1] == [READ_NONE] * 9
        for i in range(len(frame)):
            for bit in range(8):
                bad = bytearray(frame)
                bad[i] ^= 1 << bit
                d2 = SensorDecoder()
                assert all(d2.feed(b) == READ_NONE for b in bad) or (bad[0] != 36 and i == 0)
    assert [d.feed(b) for b in encode(ord("C"))][-1] == READ_CUT


def test_sensor_decoder_resynchronises_after_garbage():
    d = SensorDecoder()
    rng = random.Random(5)
    for _ in range(500):
        for b in bytes(rng.getrandbits(8) for _ in range(rng.randrange(30))):
            d.feed(b)
        results = [d.feed(b) for b in encode(ord("R"), b"QH")]
        assert results[-1] == READ_CARD and d.card == cards.card_index("QH")


# ---- COBS, both ways, against an independent codec ------------------------------------------
@pytest.mark.parametrize("data", [b"", b"\x00", b"\x00\x00", b"abc", bytes(range(256)),
                                  b"\x01" * 254, b"\x01" * 255, bytes(300),
                                  bytes(range(1, 256)) * 2])
def test_cobs_agrees_with_the_reference_codec_both_ways(data):
    enc = cobs.encode(data)
    assert enc == cobs_ref.encode(data) + b"\x00"
    assert cobs.decode(enc[:-1]) == data == cobs_ref.decode(enc[:-1])


def test_cobs_random_round_trips_and_malformed_input():
    rng = random.Random(1)
    for _ in range(300):
        data = bytes(rng.choice((0, rng.getrandbits(8))) for _ in range(rng.randrange(220)))
        assert cobs.decode(cobs_ref.encode(data)) == data
    assert cobs.decode(b"\x05ab") is None  # the code runs past the end
    assert cobs.decode(b"\x02a\x00") is None  # a zero inside a frame
    out = bytearray(3)
    assert cobs.decode_into(b"\x05abcd", 5, out) == -1  # longer than the buffer


# ---- record log --------------------------------------------------------------------------------
def test_record_log_survives_a_tear_at_every_byte(tmp_path):
    flash = Flash(str(tmp_path))
    log = RecordLog(flash)
    payloads = [bytes([i]) * (i + 1) for i in range(20)]
    for p in payloads:
        log.append(R_INPUT, p)
    whole = (tmp_path / "log").read_bytes()
    for cut in range(len(whole) + 1):
        (tmp_path / "log").write_bytes(whole[:cut])
        got = [p for _, p in RecordLog(flash).records()]
        assert got == payloads[: len(got)]
        assert len((tmp_path / "log").read_bytes()) <= cut  # the torn tail is cut off
    (tmp_path / "log").write_bytes(whole)
    log2 = RecordLog(flash)
    log2.replace(iter([(R_FINAL, b"x"), (R_FINAL, b"y")]))
    assert [p for _, p in log2.records()] == [b"x", b"y"]


def test_a_record_log_write_that_fails_with_any_exception_leaves_the_log_as_it_was(tmp_path):
    """A write torn by a MemoryError (an OSError made with the heap locked) is cut off and the
    file reopened; when the cut itself fails, the next prepare() does it, and the log refuses
    records until then, so nothing after the torn bytes is written."""
    flash = Flash(str(tmp_path))
    log = RecordLog(flash)
    log.prepare()
    log.append(R_INPUT, b"first")

    class Tearing:
        def __init__(self, f):
            self.f = f

        def write(self, data):
            self.f.write(data[:5])
            raise MemoryError

        def close(self):
            self.f.close()

    log._f = Tearing(log._f)
    with pytest.raises(MemoryError):
        log.append(R_INPUT, b"torn")
    log.append(R_INPUT, b"second")
    assert [p for _, p in RecordLog(flash).records()] == [b"first", b"second"]

    log._f = Tearing(log._f)
    cut = log._cut
    log._cut = lambda keep: (_ for _ in ()).throw(MemoryError)  # no cut now (heap locked)
    with pytest.raises(MemoryError):
        log.append(R_INPUT, b"torn")
    assert log.cut_due and log._f is None
    with pytest.raises(MemoryError):
        log.append(R_INPUT, b"refused")  # raised before writing: nothing after the torn bytes
    log._cut = cut
    log.prepare()  # service(), off the card path
    log.append(R_INPUT, b"third")
    assert [p for _, p in RecordLog(flash).records()] == [b"first", b"second", b"third"]


def test_record_golden_bytes_and_the_padded_crc():
    """type, length, payload, CRC32 over them and zeros up to a multiple of 64 (not stored)."""
    import binascii

    rec = record(R_INPUT, b"\x01\x02\x03")
    assert rec[:6] == bytes.fromhex("490003010203")
    assert rec[6:] == struct.pack(">I", binascii.crc32(rec[:6] + bytes(58)))
    assert len(rec) == 10


def test_identity_file_is_shoe_id_then_key_version(tmp_path):
    flash = Flash(str(tmp_path))
    assert load_identity(flash) is None
    (tmp_path / "identity").write_bytes(bytes.fromhex("000000090002"))
    assert load_identity(flash) == (2, 9)


def test_boot_counter_counts_up_in_flash(tmp_path):
    flash = Flash(str(tmp_path))
    assert [next_boot(flash) for _ in range(3)] == [1, 2, 3]


# ---- golden frame bytes ----------------------------------------------------------------------
def test_golden_result_frame(tmp_path):
    """A result frame, byte for byte but for its signature, which is checked instead: a change
    of layout must be a deliberate protocol change."""
    player, banker = bytearray((36, 0, 48)), bytearray((33, 8, 0))  # 10S AS KS / 9H 3S -
    payload = payload_of(frames.result_into, 1, 7, player, 3, banker, 2, 0, 0x0001, 0)
    chain = bytes(range(32))
    body = frames.build(1, 0x01020304, 5, 42, chain, frames.T_RESULT, payload)
    assert body == bytes.fromhex(
        "020400010102030400050000002a000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c"
        "1d1e1f0001000732002400302108000100")
    shoe = ProvisionedShoe(tmp_path)
    el = shoe.element()
    buf = bytearray(frames.MAX_FRAME)
    buf[: len(body)] = body
    from shoe.port import sign_into

    f = bytes(buf[: sign_into(el, 0, buf, len(body))])
    assert f[: len(body)] == body and len(f) == len(body) + 64
    verify(shoe.public_key(), f)
    assert frames.parse(f)[7] == f[-64:] and frames.parse(f)[6] == payload
    assert frames.seq_of(f) == 42 and frames.type_of(f) == frames.T_RESULT
    assert frames.names_cards(frames.type_of(f)) and frames.is_chained(f)
    bad = bytearray(f)
    bad[20] ^= 1
    with pytest.raises(InvalidSignature):
        verify(shoe.public_key(), bytes(bad))


def test_unsigned_frames_are_whole_bodies():
    body = frames.build(1, 9, 1, 3, bytes(32), frames.T_INITIAL, bytes(8))
    assert frames.parse(body)[7] == b"" and frames.body_len(body) == len(body) == 54
    assert not frames.signed(frames.T_INITIAL) and not frames.signed(frames.C_HELLO)
    assert frames.signed(frames.T_STATUS) and frames.signed(frames.C_ACK)


def test_golden_status_payload():
    p = payload_of(frames.status_into, 2, 3, 4, 5, 1, 6, 7, 8, 9, 1, 10)
    assert p == bytes.fromhex("020003000400050100000006000000070000000800000009010000000a00"
                              "000000000000000000") + bytes(21)
    p = payload_of(frames.status_into, 2, 3, 4, 5, 1, 6, 7, 8, 9, 1, 10, frames.S_FLASH_LOW,
                   11, 12, frames.TILT_BOOTS)
    assert p[29] == 1 and len(p) == 60 == frames.STATUS_LEN
    assert p[30:39] == bytes.fromhex("0000000b0000000c04") and p[39:] == bytes(21)


# ---- outbox ----------------------------------------------------------------------------------
def test_outbox_finishes_in_order_chains_digests_and_reads_older_back_from_the_log(tmp_path):
    shoe = ProvisionedShoe(tmp_path)
    log = RecordLog(Flash(str(shoe.flash)))
    box = Outbox(log, shoe.element(), slots=4)
    box.key_id, box.shoe, box.boot = 1, frames.shoe_bytes(9), 1
    types = [frames.T_BURN, frames.T_INITIAL, frames.T_RESULT] * 4
    for i, t in enumerate(types[:3]):
        at = box.begin(t)
        box.end(frames.burn_into(box.building, at, 1, 0, bytes([i]), 1))
    assert (box.seq, box.done) == (3, 0)  # built, nothing finished: the card path never waits
    box.finish_all()
    for i, t in enumerate(types[3:]):
        at = box.begin(t)
        box.end(frames.burn_into(box.building, at, 1, 0, bytes([i]), 1))  # the ring wraps
    while box.done < box.seq:
        box.service()
    made = box.frames()
    assert [frames.seq_of(f) for f in made] == list(range(1, 13))
    prev = bytes(32)
    for f in made:
        p = frames.parse(f)
        assert p[5] == prev  # chain: the digest of the previous body
        if frames.signed(p[0]):
            verify(shoe.public_key(), f)
        else:
            assert len(f) == frames.HEADER_LEN + 5
        prev = hashlib.sha256(f[: frames.body_len(f)]).digest()
    assert bytes(box.digest) == prev
    finals = [p for t, p in log.records() if t == R_FINAL]  # each logged whole, digest first
    assert [p[32:] for p in finals] == made
    assert [p[:32] for p in finals][-1] == prev
    box.ack(6)
    assert box.frames() == made[6:]
    assert box.frames(from_seq=3) == made[6:]
    box.ack(3)  # an older ack changes nothing
    assert box.acked == 6 and box.pending()
    assert box.ack(99) and box.acked == 12  # never beyond what is finished


# ---- command port ------------------------------------------------------------------------------
class Recorder:
    def __init__(self):
        self.calls = []

    def command(self, ftype, counter, payload):
        self.calls.append(("command", ftype, counter, payload))

    def refuse(self, reason, ftype, counter):
        self.calls.append(("refuse", reason, ftype, counter))

    def settle(self):
        pass


def port_for(tmp_path):
    shoe = ProvisionedShoe(tmp_path)
    port = CommandPort((1, shoe.shoe_id), shoe.element())
    port.start()
    return shoe, port


def feed(port, rec, stream, step=7):
    """The bytes in fragments, as a UART delivers them, then the board loop's service() passes
    that take the element's steps of the signed command the port took (the emulated chip answers
    at once: a pass a step)."""
    for i in range(0, len(stream), step):
        chunk = stream[i : i + step]
        port.feed(chunk, len(chunk), rec)
    for _ in range(10):
        port.service(rec)


def test_command_port_checks_shoe_signature_and_the_element_counter(tmp_path):
    shoe, port = port_for(tmp_path)
    rec = Recorder()
    other = ec.generate_private_key(ec.SECP256R1())
    # one at a time, as a host sends them: a signed command waits for its check in one slot
    for frame in (b"\x13noise\x00", shoe.ack(5),
                  shoe.command(frames.C_NEW_SHOE, counter=1),  # counted: element counter + 1
                  shoe.command(frames.C_NEW_SHOE, counter=1),  # the same again: replayed
                  shoe.command(frames.C_NEW_SHOE, counter=5),  # from the future
                  shoe.command(frames.C_NEW_SHOE, counter=2, key=other),  # another key
                  shoe.command(frames.C_NEW_SHOE, counter=2, shoe_id=8),  # another shoe
                  shoe.command(frames.C_HELLO), shoe.command(frames.C_HELLO)):  # unsigned
        feed(port, rec, frame)
    assert rec.calls == [("command", frames.C_ACK, 0, b"\x00\x00\x00\x05"),
                         ("command", frames.C_NEW_SHOE, 1, b""),
                         ("command", frames.C_HELLO, 0, b""), ("command", frames.C_HELLO, 0, b"")]
    assert port.counter == 1 == shoe.element().counter(0)  # incremented in the element itself
    assert port.refused == 5  # noise, replay, future, wrong key, other shoe: counted only
    again = CommandPort((1, shoe.shoe_id), shoe.element())
    again.start()  # a reboot (or a reflash) reads the counter back out of the element
    feed(again, rec, shoe.command(frames.C_NEW_SHOE, counter=1))
    assert again.refused == 1


def test_a_tampered_command_fails_in_the_element(tmp_path):
    shoe, port = port_for(tmp_path)
    rec = Recorder()
    raw = bytearray(cobs.decode(shoe.command(frames.C_RESOLVE, b"\x01")[:-1]))
    raw[frames.HEADER_LEN] = 3  # void_round instead of void_card, the signature unchanged
    feed(port, rec, cobs.encode(bytes(raw)))
    assert rec.calls == [] and port.refused == 1 and port.counter == 0


def test_a_command_signed_by_the_result_key_authorises_nothing(tmp_path):
    """The element checks commands against the command key's slot only: the shoe's own result
    key (say, a signature an implant got the element to make) cannot authorise one."""
    from sabot.virtual.element_store import KeyStore

    shoe, port = port_for(tmp_path)
    result_key = KeyStore(shoe.store).private_key(0)  # out of the chip's memory: a test's power
    rec = Recorder()
    feed(port, rec, shoe.command(frames.C_NEW_SHOE, counter=1, key=result_key))
    feed(port, rec, shoe.command(frames.C_ACK, b"\x00\x00\x00\x09", key=result_key))
    assert rec.calls == [] and port.refused == 2 and port.counter == 0
    feed(port, rec, shoe.command(frames.C_NEW_SHOE, counter=1))  # the command key's: obeyed
    assert [c[1] for c in rec.calls] == [frames.C_NEW_SHOE] and port.counter == 1


def test_hello_and_verify_are_rate_limited(tmp_path):
    shoe, port = port_for(tmp_path)
    rec = Recorder()
    feed(port, rec, shoe.command(frames.C_HELLO) * 8 + shoe.command(frames.C_INTEGRITY, b"s") * 3)
    assert [c[1] for c in rec.calls] == [frames.C_HELLO] * 5 + [frames.C_INTEGRITY]
    # three hellos over the rate are owed (a host waiting gets its status later), two verifies
    # over it are refused
    assert port.owed == 3 and port.refused == 2
    port._window -= 1000  # a second later
    for _ in range(5):
        port.service(rec)
    assert port.owed == 0 and [c[1] for c in rec.calls[6:]] == [frames.C_HELLO] * 3


def slow_port(tmp_path, verify_ms=60):
    """A port on an in-process chip whose Verify takes a real ATECC608's time."""
    from sabot.virtual.element_chip import Chip
    from sabot.virtual.element_store import KeyStore
    from sabot.virtual.factory import ChipBus
    from shoe.element import Element

    shoe = ProvisionedShoe(tmp_path)
    chip = Chip(KeyStore(shoe.store), sign_ms=0, ecc_ms=verify_ms, cmd_ms=0)
    port = CommandPort((1, shoe.shoe_id), Element(ChipBus(chip)))
    port.start()
    return shoe, port, chip


def test_a_flood_of_forged_commands_costs_one_check_and_never_a_wait(tmp_path):
    """Forged frames that pass every cheap check (this shoe, the counter + 1): the port takes
    one into its slot and refuses the rest at once, counted; the element's Verify runs from
    service(), which never waits for it (the emulated chip takes 60 ms, as a real one)."""
    import time

    shoe, port, _ = slow_port(tmp_path)
    rec = Recorder()
    forger = ec.generate_private_key(ec.SECP256R1())
    forged = shoe.command(frames.C_NEW_SHOE, counter=1, key=forger)
    t = time.monotonic()
    port.feed(forged * 50, len(forged) * 50, rec)
    slowest = time.monotonic() - t
    assert port.refused == 49 and port.busy()  # one taken, 49 refused before any element work
    steps = 0
    end = time.monotonic() + 10
    while port.busy():
        t = time.monotonic()
        port.service(rec)
        slowest = max(slowest, time.monotonic() - t)
        steps += 1
        assert t < end, "the check never ended"  # (a bound in time: a pass may take µs)
    assert slowest < 0.03  # no call waited for the 60 ms Verify
    assert steps > 2 and rec.calls == [] and port.refused == 50 and port.counter == 0
    # the genuine command, once the slot is free, is obeyed as before
    port.feed(shoe.command(frames.C_NEW_SHOE, counter=1), len(forged), rec)
    port.finish(rec)
    assert rec.calls == [("command", frames.C_NEW_SHOE, 1, b"")] and port.counter == 1


def test_signed_commands_are_rate_limited_and_a_hello_during_a_check_is_owed(tmp_path):
    shoe, port = port_for(tmp_path)
    rec = Recorder()
    for seq in range(1, 7):  # six acks in a second, each checked before the next arrives
        feed(port, rec, shoe.ack(seq))
    assert [c[3] for c in rec.calls] == [struct.pack(">I", s) for s in range(1, 5)]
    assert port.refused == 2  # over four a second: refused without a Verify
    port._window -= 1000  # a second later
    resolve = shoe.command(frames.C_RESOLVE, b"\x01")
    hello = shoe.command(frames.C_HELLO)
    port.feed(resolve + hello, len(resolve) + len(hello), rec)
    assert port.owed == 1 and len(rec.calls) == 4  # the hello waits for the check
    for _ in range(10):
        port.service(rec)
    assert [c[1] for c in rec.calls[4:]] == [frames.C_RESOLVE, frames.C_HELLO]
    assert port.owed == 0 and not port.busy()


def test_a_shoe_frame_echoed_back_is_no_command(tmp_path):
    """The direction bit lies under the signature: a shoe frame sent back changes nothing."""
    shoe, port = port_for(tmp_path)
    rec = Recorder()
    echoed = shoe.command(frames.T_RESULT, bytes(12), counter=1)
    feed(port, rec, echoed)
    assert rec.calls == [] and port.counter == 0 and port.refused == 1


def test_command_port_drops_an_overlong_run_and_resynchronises(tmp_path):
    shoe, port = port_for(tmp_path)
    rec = Recorder()
    data = b"\x07" * 1000 + b"\x00" + shoe.ack(1)
    feed(port, rec, data, len(data))
    assert [c[0] for c in rec.calls] == ["command"]


# ---- the dealing shoe through its public seams ------------------------------------------------
def deal(app, tokens):
    for t in tokens:
        for b in (encode(ord("C")) if t == "CUT" else encode(ord("R"), t.encode())):
            app.sensor_byte(b)
        app.exit_edge()
        while app.busy():
            app.service()


def check_stream(shoe, sent):
    """Every frame signed by the shoe's result key (initial_cards sealed by the next), chained by
    digests, in seq order; every checkpoint the root of the log of every chained frame before
    it (RFC 6962, computed here by sabot.tlog)."""
    prev = bytes(32)
    seq = 0
    leaves = []
    for f in sent:
        p = frames.parse(f)
        if frames.signed(p[0]):
            verify(shoe.public_key(), f)
            assert int.from_bytes(f[-32:], "big") <= P256_ORDER // 2  # low-S: one form only
        if frames.is_chained(f):
            assert p[4] == seq + 1 and p[5] == prev
            seq = p[4]
            prev = hashlib.sha256(f[: frames.body_len(f)]).digest()
            leaves.append(tlog.leaf_hash(f))
        elif p[0] == frames.T_CHECKPOINT:
            assert (p[4], p[5], p[6]) == (seq, bytes(32), tlog.root(leaves))
        else:
            assert (p[4], p[5]) == (seq, prev)  # status: the newest finished frame's
    return seq


def test_app_deals_a_shoe_signed_and_resumes_after_a_power_cut_at_every_record(tmp_path):
    shoe = ProvisionedShoe(tmp_path)
    tokens = cards.shuffled_shoe(8, seed=3)[:60]
    link = Link()
    app = ShoeApp(Flash(str(shoe.flash)), link, link, shoe.element())
    app.start()
    deal(app, tokens)
    sent = split(link.data)
    results = [f for f in sent if f[1] == frames.T_RESULT]
    assert len(results) == app.shoe.round_no > 5
    assert check_stream(shoe, sent) == app.outbox.seq == app.outbox.done
    # A power cut after any whole record: the shoe boots to exactly that record's state, with
    # finished frames byte for byte as sent and unfinished ones finished anew.
    log = (shoe.flash / "log").read_bytes()
    records = list(RecordLog(Flash(str(shoe.flash))).records())
    cut = 0
    for i, (_, payload) in enumerate(records[:40]):
        cut += 7 + len(payload)
        (shoe.flash / "log").write_bytes(log[:cut])
        again = ShoeApp(Flash(str(shoe.flash)), Link(), Link(), shoe.element())
        again.start()
        finals = [p[32:] for k, p in records[: i + 1] if k == R_FINAL]
        bodies = [f for k, p in records[: i + 1] for f in frames_in(k, p)]
        assert again.unacked() == finals == sent[: len(finals)]
        assert again.outbox.seq == (frames.seq_of(bodies[-1]) if bodies else 0)
        while again.busy():
            again.service()
        anew = split(again.link.data)  # the unfinished ones, never sent: finished in this boot
        assert [frames.parse(f)[4] for f in anew] == list(range(len(finals) + 1,
                                                                 again.outbox.seq + 1))
        assert [frames.parse(f)[6] for f in anew] == [
            frames.parse(f)[6] for f in sent[len(finals) : again.outbox.seq]]
        assert check_stream(shoe, finals + anew) == again.outbox.seq
        assert again.unacked()[: len(finals)] == finals


def test_the_shoes_log_goes_on_across_the_compaction_and_a_power_cut(tmp_path):
    """The log is the shoe's whole life. After a whole shoe, the next shoe's start
    compacts the flash log (the edge carried over in R_TREE records), a power cut reboots the
    shoe from that log, and the checkpoint the host then asks for is the root of every chained
    frame the shoe ever sent, from seq 1 — computed here by sabot.tlog from the frames alone."""
    shoe = ProvisionedShoe(tmp_path)
    link = Link()
    app = ShoeApp(Flash(str(shoe.flash)), link, link, shoe.element())
    app.start()
    for token in cards.shuffled_shoe(8, seed=4):
        deal(app, [token])
        if app.shoe.phase == PH_ENDED:
            break
    assert app.shoe.phase == PH_ENDED
    sent = split(link.data)
    app.host_bytes(shoe.ack(app.outbox.done) + b"\x00" + shoe.command(frames.C_NEW_SHOE)
                   + b"\x00")
    while app.busy():
        app.service()
    deal(app, cards.shuffled_shoe(8, seed=5)[:40])
    kinds = [k for k, _ in RecordLog(Flash(str(shoe.flash))).records()]
    assert kinds[:2] == [R_CHECKPOINT, R_TREE]  # the compaction carried the edge over
    sent += split(link.data)[len(sent):]
    again = ShoeApp(Flash(str(shoe.flash)), Link(), Link(), shoe.element())  # power cut
    again.start()
    again.host_bytes(shoe.command(frames.C_CHECKPOINT, counter=0) + b"\x00")
    while again.busy():
        again.service()
    chained = {frames.parse(f)[4]: f for f in sent + split(again.link.data)
               if frames.is_chained(f)}
    assert sorted(chained) == list(range(1, again.outbox.done + 1))
    checkpoint = [f for f in split(again.link.data) if f[1] == frames.T_CHECKPOINT][-1]
    p = frames.parse(checkpoint)
    verify(shoe.public_key(), checkpoint)
    assert p[4] == again.outbox.done > 150
    assert p[6] == tlog.root([tlog.leaf_hash(chained[s]) for s in sorted(chained)])

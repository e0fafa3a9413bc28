"""The firmware's pure logic in-process under CPython (it imports there: `const` is shimmed):
the round state machine, the sensor decoder, COBS both ways, the record log, the outbox, the
command port and golden frame bytes. Fast and exact; what only real MicroPython proves
(allocation, heap size, the board process) is tested on the unix port elsewhere."""

import hashlib
import hmac
import random
import struct
import sys

import pytest
from cobs import cobs as cobs_ref

from sabot import cards, rules

from conftest import FIRMWARE

sys.path.insert(0, str(FIRMWARE))

from shoe import cobs, frames
from shoe.app import ShoeApp
from shoe.cards import CUT, NO_CARD
from shoe.dealing import PH_ENDED, PH_HELD, PH_ROUND, Shoe
from shoe.hmac256 import HmacKey
from shoe.outbox import Outbox
from shoe.port import CommandPort
from shoe.sensor import READ_CARD, READ_CUT, READ_NONE, SensorDecoder, encode
from shoe.store import R_FRAME, R_INPUT, Flash, RecordLog, frames_in, next_boot

KEY = bytes(range(32))


def number(token):
    return CUT if token == "CUT" else cards.card_index(token)


def code(n):
    return cards.card_code(n)


# ---- round state machine -------------------------------------------------------------------
def deal_with_state_machine(tokens):
    """The firmware's Shoe dealing a shoe file, collected as round records."""
    s = Shoe(8)
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
    s = Shoe(8)
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
    log2.replace(iter([(R_FRAME, b"x"), (R_FRAME, b"y")]))
    assert [p for _, p in log2.records()] == [b"x", b"y"]


def test_boot_counter_counts_up_in_flash(tmp_path):
    flash = Flash(str(tmp_path))
    assert [next_boot(flash) for _ in range(3)] == [1, 2, 3]


# ---- golden frame bytes ----------------------------------------------------------------------
def test_golden_result_frame():
    """A result frame, byte for byte: a change of layout must be a deliberate protocol change."""
    player, banker = bytearray((36, 0, 48)), bytearray((33, 8, 0))  # 10S AS KS / 9H 3S -
    payload = frames.result(1, 7, player, 3, banker, 2, 0, 0x0001, 0)
    f = frames.build(HmacKey(KEY), 1, 0x01020304, 5, 42, b"chain!!!", frames.T_RESULT, payload)
    body = bytes.fromhex("010400010102030400050000002a636861696e2121210001000732002400302108"
                         "000100")
    assert f[:-32] == body
    assert f[-32:] == hmac.new(KEY, body, hashlib.sha256).digest()
    assert frames.seq_of(f) == 42 and frames.type_of(f) == frames.T_RESULT
    assert frames.link_of(f) == f[-32:-24] and frames.names_cards(f) and frames.is_chained(f)


def test_golden_status_payload():
    p = frames.status(2, 3, 4, 5, 1, 6, 7, 8, 9, 1, 10)
    assert p == bytes.fromhex("020003000400050100000006000000070000000800000009010000000a")


# ---- outbox --------------------------------------------------------------------------------
def test_outbox_keeps_the_newest_in_ram_and_reads_older_back_from_the_log(tmp_path):
    log = RecordLog(Flash(str(tmp_path)))
    box = Outbox(log, frames.Signer(HmacKey(KEY), 1, 9, 1), slots=4)
    made = []
    for i in range(10):
        f = box.chained(frames.T_BURN, frames.burn(1, 0, bytes([i]), 1))
        log.append(R_FRAME, f)
        made.append(f)
    assert [frames.seq_of(f) for f in made] == list(range(1, 11))
    chain = [frames.parse(f)[5] for f in made]
    assert all(chain[i + 1] == frames.link_of(made[i]) for i in range(9))
    assert list(box.unacknowledged()) == made
    box.ack(6)
    assert list(box.unacknowledged()) == made[6:]
    assert list(box.unacknowledged(from_seq=3)) == made[6:]
    box.ack(3)  # an older ack changes nothing
    assert box.acked == 6 and box.pending()


# ---- command port ------------------------------------------------------------------------------
class Recorder:
    def __init__(self):
        self.calls = []

    def command(self, ftype, counter, payload):
        self.calls.append(("command", ftype, counter, payload))

    def refuse(self, reason, ftype, counter):
        self.calls.append(("refuse", reason, ftype, counter))


def command(key, counter, ftype, payload=b"", key_id=1, shoe_id=9):
    f = frames.build(HmacKey(key), key_id, shoe_id, 0, counter, bytes(8), ftype, payload)
    return cobs.encode(f)


def test_command_port_checks_key_mac_and_counter():
    port = CommandPort((1, 9, KEY))
    rec = Recorder()
    stream = (b"\x13noise\x00" + command(KEY, 1, frames.C_ACK, b"\x00\x00\x00\x05")
              + command(KEY, 1, frames.C_ACK, b"\x00\x00\x00\x06")  # replayed counter
              + command(bytes(32), 2, frames.C_NEW_SHOE)  # wrong key
              + command(KEY, 3, frames.C_NEW_SHOE, shoe_id=8)  # another shoe
              + command(KEY, 0, frames.C_HELLO) + command(KEY, 0, frames.C_HELLO))  # uncounted
    for i in range(0, len(stream), 7):  # in fragments, as a UART delivers them
        chunk = stream[i : i + 7]
        port.feed(chunk, len(chunk), rec)
    assert rec.calls == [("command", frames.C_ACK, 1, b"\x00\x00\x00\x05"),
                         ("command", frames.C_HELLO, 0, b""), ("command", frames.C_HELLO, 0, b"")]
    assert port.counter == 1
    assert port.refused == 4  # the noise, the replay, the wrong key, the other shoe: counted only


def test_a_shoe_frame_echoed_back_is_no_command():
    """The same key signs both directions: a shoe frame sent back to the shoe changes nothing."""
    port = CommandPort((1, 9, KEY))
    rec = Recorder()
    echoed = command(KEY, 2011, frames.T_RESULT, bytes(12))
    port.feed(echoed, len(echoed), rec)
    assert rec.calls == [] and port.counter == 0 and port.refused == 1


def test_command_port_drops_an_overlong_run_and_resynchronises():
    port = CommandPort((1, 9, KEY))
    rec = Recorder()
    data = b"\x07" * 1000 + b"\x00" + command(KEY, 5, frames.C_ACK, b"\x00\x00\x00\x01")
    port.feed(data, len(data), rec)
    assert [c[0] for c in rec.calls] == ["command"]


# ---- the dealing shoe through its public seams ------------------------------------------------
class Link:
    def __init__(self):
        self.data = bytearray()

    def write(self, b):
        self.data += b

    def show(self, *state):
        self.state = state

    def announce(self, *result):
        pass


def provisioned(tmp_path):
    flash = tmp_path / "flash"
    flash.mkdir(exist_ok=True)
    (flash / "key").write_bytes(struct.pack(">HI", 1, 9) + KEY)
    return Flash(str(flash))


def test_app_deals_a_shoe_and_resumes_after_a_power_cut_at_every_record(tmp_path):
    tokens = cards.shuffled_shoe(8, seed=3)[:60]
    link = Link()
    app = ShoeApp(provisioned(tmp_path), link, link)
    app.start()
    for t in tokens:
        for b in (encode(ord("C")) if t == "CUT" else encode(ord("R"), t.encode())):
            app.sensor_byte(b)
        app.exit_edge()
    sent = [cobs.decode(p) for p in bytes(link.data).split(b"\x00")[:-1]]
    results = [f for f in sent if f[1] == frames.T_RESULT]
    assert len(results) == app.shoe.round_no > 5
    # A power cut after any whole record: the shoe boots to exactly that record's state.
    log = (tmp_path / "flash" / "log").read_bytes()
    records = list(RecordLog(Flash(str(tmp_path / "flash"))).records())
    cut = 0
    for i, (_, payload) in enumerate(records[:40]):
        cut += 7 + len(payload)
        (tmp_path / "flash" / "log").write_bytes(log[:cut])
        again = ShoeApp(Flash(str(tmp_path / "flash")), Link(), Link())
        again.start()
        held = [f for kind, p in records[: i + 1] for f in frames_in(kind, p)]
        assert again.outbox.seq == (frames.seq_of(held[-1]) if held else 0)
        assert list(again.unacked()) == held

"""The host's wire vocabulary (sabot.protocol): COBS framing with the `cobs` package against golden
bytes, parse() refusing each kind of bad frame with its reason, and every payload type decoded."""

import hashlib
import json
import struct

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, utils

from sabot import protocol as pr
from sabot.errors import SabotError

KEY = ec.derive_private_key(0x5AB07, ec.SECP256R1())  # a fixed key: repeatable tests
OTHER = ec.derive_private_key(0x07BA5, ec.SECP256R1())
CHAIN = bytes(range(32))
# initial_cards (unsigned), key 3, shoe 0x0A0B0C0D, boot 2, seq 7, chain 00..1f: shoe 1 round 5
GOLDEN_RAW = bytes.fromhex(
    "020300030a0b0c0d000200000007" + CHAIN.hex() + "00010005" + "2027331f")
# the signed frame's body (its signature is ECDSA's: new at every signing)
GOLDEN_BODY = bytes.fromhex("020100030a0b0c0d000200000007" + CHAIN.hex() + "00010802")


def frame(ftype, payload, seq=7):
    return pr.parse(pr.build(KEY, 3, 0x0A0B0C0D, 2, seq, CHAIN, ftype, payload))


@pytest.mark.parametrize("raw,encoded", [
    (b"\x00", b"\x01\x01\x00"),
    (b"\x00\x00", b"\x01\x01\x01\x00"),
    (b"\x11\x22\x00\x33", b"\x03\x11\x22\x02\x33\x00"),
    (b"\x11\x22\x33\x44", b"\x05\x11\x22\x33\x44\x00"),
    (b"\x11\x00\x00\x00", b"\x02\x11\x01\x01\x01\x00"),
    (bytes(range(1, 255)), b"\xff" + bytes(range(1, 255)) + b"\x00"),
])
def test_cobs_framing_matches_the_reference_vectors(raw, encoded):
    assert pr.encode_frame(raw) == encoded
    assert pr.decode_frame(encoded[:-1]) == raw


def test_an_unsigned_frame_encodes_to_the_golden_bytes_and_back():
    raw = pr.build(None, 3, 0x0A0B0C0D, 2, 7, CHAIN, pr.T_INITIAL_CARDS, b"\x00\x01\x00\x05"
                   + bytes.fromhex("2027331f"))
    assert raw == GOLDEN_RAW
    (encoded,) = pr.Deframer().feed(b"noise" + b"\x00" + pr.encode_frame(raw))[1:]
    f = pr.parse(pr.decode_frame(encoded))
    assert (f.type, f.key_id, f.shoe_id, f.boot, f.seq, f.chain) == (
        pr.T_INITIAL_CARDS, 3, 0x0A0B0C0D, 2, 7, CHAIN)
    assert f.signature == b"" and f.body == raw and f.digest == hashlib.sha256(raw).digest()
    assert not f.signed and not pr.verify(KEY.public_key(), f)  # sealed, never verified alone


def test_a_signed_frame_carries_a_raw_r_s_signature_over_the_digest_of_its_body():
    raw = pr.build(KEY, 3, 0x0A0B0C0D, 2, 7, CHAIN, pr.T_SHOE_START, b"\x00\x01\x08\x02")
    assert raw[:-pr.SIG_LEN] == GOLDEN_BODY and len(raw) == len(GOLDEN_BODY) + 64
    f = pr.parse(raw)
    assert f.body == GOLDEN_BODY and f.digest == hashlib.sha256(GOLDEN_BODY).digest()
    assert pr.verify(KEY.public_key(), f) and not pr.verify(OTHER.public_key(), f)
    # raw r||s is the DER signature's two integers: cryptography verifies it as such
    r, s = int.from_bytes(f.signature[:32], "big"), int.from_bytes(f.signature[32:], "big")
    KEY.public_key().verify(utils.encode_dss_signature(r, s), f.digest,
                            ec.ECDSA(utils.Prehashed(hashes.SHA256())))
    flipped = pr.parse(raw[:20] + bytes([raw[20] ^ 1]) + raw[21:])
    assert not pr.verify(KEY.public_key(), flipped)


def test_every_frame_up_to_the_largest_round_trips():
    for n in range(pr.MAX_FRAME + 1):
        raw = bytes((i * 7) % 3 for i in range(n))  # plenty of zeros
        encoded = pr.encode_frame(raw)
        assert len(encoded) <= pr.MAX_ENCODED + 1 and encoded.count(0) == 1
        assert pr.decode_frame(encoded[:-1]) == raw


def test_deframer_drops_runs_longer_than_any_frame_and_resynchronises():
    GOLDEN_ENCODED = pr.encode_frame(GOLDEN_RAW)
    d = pr.Deframer()
    assert d.feed(b"\x01" * (pr.MAX_ENCODED + 1)) == []  # dropped: no frame is that long
    # the whole run up to its 0x00 is noise, however the reads cut it; the next frame is whole
    assert d.feed(b"\x01" * 5 + b"\x00" + GOLDEN_ENCODED[:10]) == []
    assert d.feed(GOLDEN_ENCODED[10:]) == [GOLDEN_ENCODED[:-1]]
    # so a capture read in other pieces (a replay) gives the same frames
    stream = b"\x01" * 300 + b"\x00" + b"\x02" * 9 + b"\x00" + GOLDEN_ENCODED
    whole = pr.Deframer().feed(stream)
    for cut in range(1, len(stream)):
        d = pr.Deframer()
        assert d.feed(stream[:cut]) + d.feed(stream[cut:]) == whole == [b"\x02" * 9,
                                                                      GOLDEN_ENCODED[:-1]]


@pytest.mark.parametrize("raw,reason", [
    (GOLDEN_RAW[: pr.HEADER.size - 1], "too_short"),
    (GOLDEN_BODY[: pr.HEADER.size] + bytes(pr.SIG_LEN - 1), "too_short"),  # no signature room
    (GOLDEN_RAW + bytes(pr.MAX_FRAME), "too_long"),
    (b"\x01" + GOLDEN_RAW[1:], "bad_version"),  # a version-1 frame
])
def test_parse_refuses_a_malformed_frame_with_its_reason(raw, reason):
    with pytest.raises(pr.FrameError) as e:
        pr.parse(raw)
    assert e.value.reason == reason


def test_bytes_that_are_not_cobs_are_bad_framing():
    with pytest.raises(pr.FrameError) as e:
        pr.decode_frame(b"\x05\x01")  # the block claims more bytes than there are
    assert e.value.reason == "bad_framing"


def card(code):
    ranks, suits = "A23456789TJQK", "SHDC"
    return ranks.index(code[0]) * 4 + suits.index(code[1])


@pytest.mark.parametrize("ftype,payload,want", [
    (pr.T_SHOE_START, b"\x00\x02\x06\x19",
     {"event": "shoe_start", "shoe": 2, "decks": 6,
      "variant": {"game": "midibaccarat", "ez": False, "commission_free": True, "squeeze": True}}),
    (pr.T_BURN, b"\x00\x01\x00\x00" + bytes([card("3H"), card("KS"), card("2D"), card("9C")]),
     {"event": "burn", "shoe": 1, "cards": ["3H", "KS", "2D", "9C"]}),
    (pr.T_INITIAL_CARDS, b"\x00\x01\x00\x05" + bytes(map(card, ("9S", "8D", "KD", "9C"))),
     {"event": "initial_cards", "shoe": 1, "round": 5, "player": ["9S", "KD"],
      "banker": ["8D", "9C"]}),
    (pr.T_RESULT, b"\x00\x01\x00\x05\x22\x00" + bytes(map(card, ("9S", "KD", "8D", "9C")))
     + struct.pack(">HB", 1 | 4 | 8, 0),
     {"shoe": 1, "round": 5, "player": ["9S", "KD"], "banker": ["8D", "9C"], "player_total": 9,
      "banker_total": 7, "winner": "player", "flags": ["banker_natural", "player_natural"],
      "announcements": []}),
    (pr.T_IRREGULARITY, b"\x00\x01\x00\x02\x03" + bytes([card("7C")]) + b"\x00\x2a",
     {"event": "irregularity", "shoe": 1, "round": 2, "kind": "two_cards", "card": "7C",
      "position": 42}),
    (pr.T_RESOLUTION, b"\x00\x01\x00\x02\x03\x06\xff\x01\x21"
     + bytes(map(card, ("2C", "4C", "3C"))),
     {"event": "resolution", "shoe": 1, "round": 2, "resolution": "void_round",
      "kind": "card_missing", "card": None, "source": "host", "voided_cards": ["2C", "4C", "3C"]}),
    (pr.T_SHOE_END, b"\x00\x01\x00\x46\x01\x9a" + bytes([1] + [0] * 50 + [2]) + b"\x00\x03",
     {"event": "shoe_end", "shoe": 1, "rounds": 70, "position": 410,
      "inventory": {"AS": 1, "KC": 2}, "unknown": 3}),
    (pr.T_COMMAND_REJECTED, b"\x04\x82\x00\x00\x00\x09",
     {"event": "command_rejected", "reason": "not_now", "command": pr.C_RESOLVE, "counter": 9}),
])
def test_decode_payload_of_each_chained_type(ftype, payload, want):
    assert pr.decode_payload(frame(ftype, payload)) == (pr.TYPES[ftype], want)


@pytest.mark.parametrize("ftype,payload", [
    (pr.T_SHOE_START, b"\x00\x01\x08"),
    (pr.T_INITIAL_CARDS, b"\x00\x01\x00\x01\x00\x01\x02"),
    (pr.T_RESULT, b"\x00\x01\x00\x01\x42\x00" + bytes(6) + b"\x00\x01\x00"),  # four Player cards
    (pr.T_IRREGULARITY, b"\x00\x01\x00\x01\x63\x00\x00\x01"),  # no such kind
    (pr.T_RESOLUTION, b"\x00\x01\x00\x01\x01\x01\x00\x05\x00"),  # no such source
    (pr.T_SHOE_END, b"\x00\x01\x00\x01\x00\x10" + bytes(51)),
    (pr.T_COMMAND_REJECTED, b"\x01\x82\x00"),
    (pr.T_STATUS, bytes(29)),  # not a chained record
    (0x09, b""),
])
def test_decode_payload_refuses_a_payload_that_does_not_fit_its_type(ftype, payload):
    with pytest.raises(pr.FrameError) as e:
        pr.decode_payload(frame(ftype, payload))
    assert e.value.reason == "malformed_payload"


def test_decode_status_names_its_fields_and_refuses_a_short_payload():
    payload = struct.pack(">BHHHBIIIIBI", 3, 2, 14, 101, 1, 17, 40, 41, 44, 2, 9)
    assert pr.decode_status(payload) == {
        "phase": "held", "shoe": 2, "round": 14, "integrity": "tilt", "position": 101,
        "due": "player", "host_counter": 17, "acked": 40, "unacked_from": 41, "unacked_to": 44,
        "refused": 9, "flash_low": False, "withheld": False,  # a firmware before the flags
        "refused_bad_key": None, "refusals_unlogged": None, "tilt": None}  # and the causes
    flagged = pr.decode_status(payload + bytes([pr.S_FLASH_LOW | pr.S_WITHHELD]))
    assert flagged["flash_low"] and flagged["withheld"]
    assert not pr.decode_status(payload + b"\x00")["flash_low"]
    causes = pr.decode_status(payload + b"\x00" + struct.pack(">IIB", 3, 4, 2) + bytes(21))
    assert (causes["refused_bad_key"], causes["refusals_unlogged"], causes["tilt"]) == (
        3, 4, "log_unreadable")
    assert pr.refused_for_key(causes) == 3 and pr.refused_for_key(flagged) == 9
    with pytest.raises(pr.FrameError):
        pr.decode_status(payload[:-1])


def test_command_is_signed_by_the_command_key_with_key_id_boot_and_chain_zero():
    enc = pr.command(KEY, 0x0A0B0C0D, 12, pr.C_RESOLVE, bytes([pr.VOID_CARD]))
    f = pr.parse(pr.decode_frame(enc[:-1]))
    assert enc[-1] == 0 and pr.verify(KEY.public_key(), f)
    assert (f.type, f.key_id, f.seq, f.boot, f.chain, f.payload) == (
        pr.C_RESOLVE, 0, 12, 0, bytes(32), b"\x01")


@pytest.mark.parametrize("ftype,payload", [(pr.C_HELLO, b""), (pr.C_VERIFY, b"\x01" * 16)])
def test_hello_and_verify_go_unsigned(ftype, payload):
    enc = pr.command(None, 0x0A0B0C0D, 0, ftype, payload)
    f = pr.parse(pr.decode_frame(enc[:-1]))
    assert f.signature == b"" and f.payload == payload and f.raw == f.body
    assert len(f.raw) == pr.HEADER.size + len(payload)


def test_a_signed_command_needs_a_key():
    with pytest.raises(ValueError):
        pr.command(None, 1, 1, pr.C_ACK, bytes(4))


def test_variant_byte_round_trips_and_refuses_impossible_tables():
    for game in pr.GAMES:
        for ez, cf, sq in ((False, False, False), (True, False, True), (False, True, False)):
            v = pr.variant_byte(game, ez, cf, sq)
            assert pr.decode_variant(v) == {"game": game, "ez": ez, "commission_free": cf,
                                            "squeeze": sq}
    with pytest.raises(SabotError, match="unknown game 'punto'"):
        pr.variant_byte("punto")
    with pytest.raises(SabotError, match="different games"):
        pr.variant_byte(ez=True, commission_free=True)


def test_sabot_protocol_lists_the_frame_types_and_says_what_a_frame_holds(cli):
    from sabot.game.cards import shuffled_shoe
    from sabot.virtual import capture_gen

    r = cli("protocol")
    assert r.returncode == 0
    assert "0x04  result            shoe to host, chained, signed" in r.stdout
    assert "0x81  ack               host to shoe" in r.stdout
    signer = capture_gen.ShoeSigner(ec.generate_private_key(ec.SECP256R1()), 7)
    frames, _ = capture_gen.shoe_frames(signer, shuffled_shoe(8, 1), 1)
    r = cli("protocol", "--json", frames[3].hex(), signer.checkpoint().hex())
    assert r.returncode == 0, r.stderr
    first, cp = (json.loads(line) for line in r.stdout.splitlines())
    assert first["type"] == "result" and first["record"]["round"] == 1
    assert first["signature"] == "not checked" and first["shoe_id"] == "0x00000007"
    assert cp["type"] == "checkpoint" and cp["record"]["size"] == signer.seq
    text = cli("protocol", frames[3].hex()).stdout
    assert text.startswith("type result key_id 1 shoe_id 0x00000007") and '"round": 1' in text
    for bad, said in (("zz", "not a frame in hex"), ("0201", "not a frame of the protocol")):
        r = cli("protocol", bad)
        assert r.returncode == 2 and said in r.stderr and len(r.stderr.splitlines()) == 1

"""Dealing irregularities on the real firmware: each is reported with the card's identity and
position, holds the round until a supervisor or the host resolves it, and the resolution is
logged."""


import pytest

from sabot import protocol as pr
from sabot.protocol import KEEP_DUMMY, VOID_CARD, VOID_ROUND
from sabot.virtual.dealer_channel import CONFIRM, EMPTY, EXIT_EDGE, SUPERVISOR, sensor_frame

pytestmark = pytest.mark.board  # every test here starts a process


def test_exit_without_a_read_is_an_unreadable_card_until_voided(rig):
    rig.deal("9S")
    rig.send(bytes([EXIT_EDGE]))
    ir = rig.of("irregularity")[-1]
    assert (ir["kind"], ir["card"], ir["position"], ir["round"]) == ("unreadable_card", None, 4, 1)
    assert rig.phase == "held"
    rig.send(bytes([SUPERVISOR + VOID_CARD]))
    res = rig.of("resolution")[-1]
    assert res["resolution"] == "void_card" and res["source"] == "supervisor"
    rig.deal("8D", "KD", "9C")  # the round goes on: P 9S KD, B 8D 9C -> naturals
    result = rig.of("result")[-1]
    assert result["player"] == ["9S", "KD"] and result["banker"] == ["8D", "9C"]


def test_ctrl_c_and_noise_on_the_link_do_not_interrupt_dealing(rig):
    rig.link.write(b"\x03\x03\x04\x02" * 8 + b"\x00")  # Ctrl-C, Ctrl-D, raw-REPL: just noise here
    rig.deal("9S", "8D", "KD", "9C")
    assert rig.board.alive() and rig.of("result")[-1]["round"] == 1


def test_low_confidence_read_is_unreadable(rig):
    rig.send(sensor_frame("R", "QH", confidence=0x20) + bytes([EXIT_EDGE]))
    assert rig.of("irregularity")[-1]["kind"] == "unreadable_card"


def test_two_reads_before_one_exit_is_two_cards_out_with_the_first_card_kept(rig):
    rig.send(sensor_frame("R", "7C") + sensor_frame("R", "4D") + bytes([EXIT_EDGE]))
    kinds = [(r["kind"], r["card"]) for r in rig.of("irregularity")]
    assert ("two_cards", "7C") in kinds


def test_foreign_card_is_reported(rig):
    rig.send(sensor_frame("R", "XZ") + bytes([EXIT_EDGE]))
    assert rig.of("irregularity")[-1]["kind"] == "foreign_card"


def test_a_ninth_copy_in_an_eight_deck_shoe_is_held_not_dealt(rigs):
    rig = rigs()
    rig.deal(*["KS"] * 9)  # exposed king: ten burned; the ninth king of spades cannot exist
    ir = rig.of("irregularity")[-1]
    assert (ir["kind"], ir["card"], ir["position"]) == ("inventory_exceeded", "KS", 9)


def test_confirm_while_a_card_is_due_then_void_round_keeps_the_voided_cards(rig):
    rig.deal("2C", "3C", "4C")
    rig.send(bytes([CONFIRM]))
    assert rig.of("irregularity")[-1]["kind"] == "card_missing"
    rig.send(bytes([SUPERVISOR + VOID_CARD]))  # nothing to void: still held
    assert rig.phase == "held"
    rig.send(bytes([SUPERVISOR + VOID_ROUND]))
    res = rig.of("resolution")[-1]
    assert res["resolution"] == "void_round" and res["voided_cards"] == ["2C", "4C", "3C"]
    rig.deal("9S", "8D", "KD", "9C")
    assert rig.of("result")[-1]["round"] == 1  # the voided round did not count


def test_cards_exhausted_mid_round(rig):
    rig.deal("2C", "3C")
    rig.send(bytes([EMPTY]))
    assert rig.of("irregularity")[-1]["kind"] == "cards_exhausted"


def test_card_between_rounds_kept_as_a_dummy_hand_by_host_command(rig):
    rig.deal("9S", "8D", "KD", "9C")  # round 1 complete
    rig.send(bytes([EXIT_EDGE]))  # an unreadable card between rounds
    rig.deal("5H")  # then a card while held: not due
    assert rig.of("irregularity")[-1]["kind"] == "card_not_due"
    rig.link.resolve(KEEP_DUMMY)
    rig.settle()
    assert rig.of("resolution")[-1]["source"] == "host"
    rig.deal("9D", "8S", "KH")
    dummy = rig.of("result")[-1]
    assert dummy["player"][0] == "5H" and dummy.get("dummy") is True


def test_resolution_for_an_irregularity_never_raised_is_refused(rig):
    rig.link.resolve(VOID_CARD)
    rig.settle()
    rej = rig.of("command_rejected")[-1]
    assert rej["reason"] == "not_now" and not rig.of("resolution")


def refused_since(rig, before):
    rig.settle()
    return rig.link.ask(2)["refused"] - before


def test_replayed_host_command_is_refused_and_only_counted(rig):
    before = rig.link.ask(2)["refused"]
    st = rig.link.ask(2)
    seq = st["acked"]
    # a counted command must carry exactly the element's counter + 1: the counter it already
    # holds is a recorded command played again
    stale = pr.command(rig.key.private_key, rig.shoe_id, st["host_counter"], pr.C_RESOLVE,
                       bytes([VOID_CARD]))
    rig.link.write(stale)
    assert refused_since(rig, before) == 1
    assert not rig.of("command_rejected") and rig.link.ask(2)["acked"] == seq  # no frame spent


def test_command_under_the_wrong_key_is_refused_and_only_counted(rig):
    from cryptography.hazmat.primitives.asymmetric import ec

    before = rig.link.ask(2)["refused"]
    counter = rig.link.ask(2)["host_counter"] + 1  # fresh: only the signature is wrong
    other = ec.generate_private_key(ec.SECP256R1())
    rig.link.write(pr.command(other, rig.shoe_id, counter, pr.C_NEW_SHOE))
    assert refused_since(rig, before) == 1 and not rig.of("command_rejected")

"""Game variants on the shoe: the signed variant id, announcements (627a.11(a), 631a.12(a),
631c.5(e)) on the shoe's display and in the signed result, and the squeeze procedure (631a.9(d)):
no card identity reaches the link before the dealer's reveal, not even across a power cut."""

import pytest

from sabot import protocol as pr
from sabot.audit.validator import Validator
from sabot.protocol import variant_byte
from sabot.virtual.dealer_channel import REVEAL, card_bytes

from kit import signing_shoe, wait_for

NATURALS = ("9S", "8D", "KD", "9C")  # a four-card round: P 9 v B 8
DRAGON_7 = ("AS", "2D", "3H", "2C", "2H", "3S")  # P 6 (3 cards), B 7 (3 cards)
LUCKY_SIX_3 = ("2S", "AD", "KH", "AC", "2C", "4S")  # P 4, B 6 with three cards
TIE = ("7S", "7D", "KH", "QC")


@pytest.mark.board
def test_variant_is_signed_in_shoe_start(rigs):
    rig = rigs(variant_byte("minibaccarat", ez=True))
    start = rig.of("shoe_start")[-1]
    assert start["variant"] == {"game": "minibaccarat", "ez": True, "commission_free": False,
                                "squeeze": False}


@pytest.mark.long
@pytest.mark.board
def test_announcements_follow_the_variant(rigs):
    for variant, cards, said in [
        (variant_byte(ez=True), DRAGON_7, ["Dragon 7"]),
        (variant_byte(), DRAGON_7, []),  # no Dragon 7 call off an EZ table
        (variant_byte(commission_free=True), LUCKY_SIX_3, ["Lucky Six"]),
        (variant_byte(), TIE, ["tie hand"]),
    ]:
        rig = rigs(variant)
        rig.burn()
        rig.deal(*cards)
        result = rig.of("result")[-1]
        assert result["announcements"] == said, (variant, cards)
        assert wait_for(lambda: rig.board.announcements, 5)  # the display line, read off stdout
        assert rig.board.announcements[-1][3] == {(): 0, ("Dragon 7",): 2, ("Lucky Six",): 8,
                                                  ("tie hand",): 1}[tuple(said)]
        rig.close()


@pytest.mark.board
def test_squeeze_withholds_cards_until_the_reveal_even_across_a_power_cut(rigs):
    rig = rigs(variant_byte(squeeze=True))
    rig.burn()
    rig.deal(*NATURALS[:3])
    rig.board.send(card_bytes(NATURALS[3]))  # the hands are complete: now squeezed
    assert rig.board.wait(lambda s: s[6] == 1, 5)  # waiting for the reveal
    assert not rig.link.pump_until(lambda: rig.of("initial_cards") or rig.of("result"), 0.5)
    rig.board.kill()  # power cut while the hands are squeezed
    rig.board.start()
    rig.link.reconnect()
    assert rig.board.wait(lambda s: s[6] == 1, 5)
    assert not rig.link.pump_until(lambda: rig.of("initial_cards") or rig.of("result"), 0.5)
    rig.send(bytes([REVEAL]))
    assert [r["player"] for r in rig.of("initial_cards")] == [["9S", "KD"]]
    assert rig.of("result")[-1]["winner"] == "player"


def test_validator_alarms_on_a_wrong_announcement(tmp_path):
    s, entry = signing_shoe()
    v = Validator(entry, str(tmp_path / "a.db"))

    def frame(ftype, payload):
        raw = s.chained(ftype, payload)
        return raw, pr.encode_frame(raw)

    _start, e1 = frame(0x01, b"\x00\x01\x08\x02")  # plain baccarat
    # round 1: P 7S KH (7) v B 7D QC (7): a tie, announced as "Dragon 7" instead of "tie hand"
    cards = bytes([6 * 4 + 0, 12 * 4 + 1, 6 * 4 + 2, 11 * 4 + 3])
    payload = b"\x00\x01\x00\x01" + bytes([0x22, 0]) + cards + b"\x00\x03\x02"
    _bad, e2 = frame(pr.T_RESULT, payload)
    verdicts = v.receive(e1 + e2)
    # authentic and in sequence: stored, with an alarm the supervisor sees
    assert [(x[1], x[2]) for x in verdicts] == [("accepted", None), ("accepted", None)]
    kinds = [a["kind"] for a in v.alarms]  # (crafted: no burn, no initial cards either)
    assert "announcement_mismatch" in kinds
    assert "announcement_mismatch" in [a["kind"] for a in v.store.alarms()]

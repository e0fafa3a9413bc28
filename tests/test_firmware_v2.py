"""Protocol v2 on the shoe side, in-process under CPython with the real element driver on the
emulated chip (tests/kit/fw.py): status and integrity signed with the newest finished digest,
counted commands through the element's counter, refusals that cost no flash, the squeeze hold,
compaction, the signed MANIFEST boot check and the tilted shoe; on MicroPython the maintenance
helpers (maint.py) and the virtual board with the element as its own process."""

import hashlib
import struct

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed, decode_dss_signature

from sabot.game import cards
from shoe import frames, integrity, release
from shoe.app import ShoeApp
from shoe.dealing import PH_BURN_FIRST, PH_ENDED
from shoe.element import ElementError
from shoe.sensor import encode
from shoe.store import R_CHECKPOINT, R_FINAL, Flash, RecordLog
from shoe.tilt import TiltShoe

from kit import fw
from kit.fw import ProvisionedShoe, split, verify


class Link(fw.Link):
    def take(self):
        out = split(self.data)
        self.data = bytearray()
        return out


def card(app, token, serve=True):
    for b in (encode(ord("C")) if token == "CUT" else encode(ord("R"), token.encode())):
        app.sensor_byte(b)
    app.exit_edge()
    while serve and app.busy():
        app.service()


def hello(app, shoe, **kw):
    """A hello, and the passes of the board loop that make and send its status."""
    app.host_bytes(shoe.command(frames.C_HELLO, **kw))
    while app.busy():
        app.service()


def started(tmp_path, variant=None):
    shoe = ProvisionedShoe(tmp_path, variant=variant)
    link = Link()
    app = ShoeApp(Flash(str(shoe.flash)), link, link, shoe.element())
    app.start()
    while app.busy():
        app.service()
    return shoe, app, link


def status_of(f):
    p = frames.parse(f)
    names = ("phase", "shoe", "round", "position", "due", "host_counter", "acked",
             "unacked_from", "unacked_to", "integrity", "refused", "flags", "bad_key",
             "unlogged", "tilt")
    assert p[6][39:] == bytes(frames.STATUS_LEN - 39)  # room for later fields, zeros
    return p, dict(zip(names, struct.unpack(">BHHHBIIIIBIBIIB", p[6][:39]), strict=True))


def serve(app):
    while app.busy():  # the element checks a signed command from service(), as the loop does
        app.service()


def test_squeeze_status_names_no_due_hand_and_no_position_before_the_reveal(tmp_path):
    """The status answers any unsigned hello: while frames wait for the reveal it must not say
    who draws next, nor how many cards the round has had."""
    shoe, app, link = started(tmp_path, variant=2 | frames.V_SQUEEZE)
    for t in ("AS", "2H", "2S", "3D", "4C", "5H"):  # the burn, then four cards: a draw is due
        card(app, t)
    assert app.hold_from and app.shoe.due() and app.shoe.position == 6
    sent = [f for f in link.take() if frames.is_chained(f)]
    assert frames.seq_of(sent[-1]) == app.hold_from - 1 < app.outbox.done
    hello(app, shoe, shoe_id=0)
    status = link.take()[0]
    _, st = status_of(status)
    assert (st["due"], st["position"], st["flags"]) == (0, 0, frames.S_WITHHELD)
    # nor does its header name a withheld frame: the initial cards' digest would give their
    # four cards away to anyone trying 52**4 of them
    p = frames.parse(status)
    last = hashlib.sha256(sent[-1][: frames.body_len(sent[-1])]).digest()
    assert (p[4], p[5]) == (app.hold_from - 1, last) and st["unacked_to"] <= app.hold_from - 1
    app.reveal_button()
    serve(app)
    hello(app, shoe)
    _, st = status_of(next(f for f in link.take() if frames.type_of(f) == frames.T_STATUS))
    assert st["position"] == 6 and st["due"] == app.shoe.due() != 0 and st["flags"] == 0


def test_the_boot_counter_stops_at_its_maximum_and_the_shoe_tilts(tmp_path):
    from shoe.store import BOOT_MAX

    shoe, app, _ = started(tmp_path)
    assert app.boot == 1
    (shoe.flash / "boot").write_bytes(b"%d" % (BOOT_MAX - 2))
    again = ShoeApp(Flash(str(shoe.flash)), fw.Link(), fw.Link(), shoe.element())
    again.start()
    assert again.boot == BOOT_MAX - 1  # the last number a dealing shoe uses
    for _ in range(2):  # that power-on and every later one
        last = ShoeApp(Flash(str(shoe.flash)), fw.Link(), fw.Link(), shoe.element())
        with pytest.raises(ValueError, match="boot counter"):
            last.start()
        assert (shoe.flash / "boot").read_bytes() == b"%d" % BOOT_MAX  # never wrapped
    link = fw.Link()
    tilted = TiltShoe(Flash(str(shoe.flash)), link, link, None, (), shoe.element())
    tilted.start()  # what the board starts instead
    tilted.host_bytes(shoe.command(frames.C_HELLO))
    p, st = status_of(split(link.data)[0])
    assert p[3] == BOOT_MAX and st["integrity"] == frames.INTEGRITY_TILT


def deal_a_short_shoe(app):
    """60 cards, then the cut card: the shoe ends after the round in progress."""
    tokens = [t for t in cards.shuffled_shoe(8, seed=4) if t != "CUT"][:70]
    tokens.insert(60, "CUT")
    for t in tokens:
        card(app, t)
        if app.shoe.phase == PH_ENDED:
            break


def test_a_new_shoe_is_refused_while_the_flash_could_not_hold_it(tmp_path):
    from shoe.app import ALARM_FLASH_LOW
    from shoe.port import REJ_FLASH_LOW

    shoe, app, link = started(tmp_path)
    deal_a_short_shoe(app)
    unacked = app.outbox.done - app.outbox.acked
    from shoe.store import reserve

    # the reserve beside 4 kept frames, no more: these unacknowledged frames crowd it
    app.flash.capacity = reserve(8, 4)
    assert unacked > 4
    app.low = -1
    app.service()  # the board loop's next pass
    assert link.state[5] == ALARM_FLASH_LOW  # the lamp says so before anyone asks
    link.take()
    hello(app, shoe)
    _, st = status_of(link.take()[0])
    assert st["flags"] == frames.S_FLASH_LOW
    app.host_bytes(shoe.command(frames.C_NEW_SHOE))
    serve(app)
    rejected = [f for f in link.take() if frames.type_of(f) == frames.T_COMMAND_REJECTED]
    assert len(rejected) == 1 and frames.parse(rejected[0])[6][0] == REJ_FLASH_LOW
    assert app.shoe.phase == PH_ENDED and link.state[5] == ALARM_FLASH_LOW
    app.port._window -= 1000  # a second later
    app.host_bytes(shoe.ack(app.outbox.done))  # the host stores them: the flash has room again
    serve(app)
    app.host_bytes(shoe.command(frames.C_NEW_SHOE))
    serve(app)
    assert app.shoe.phase != PH_ENDED and link.state[5] == 0


def test_the_card_path_never_waits_and_a_hello_is_answered_after_what_came_before_it(tmp_path):
    shoe, app, link = started(tmp_path)
    for t in ("AS", "2H"):  # the burn
        card(app, t)
    link.take()
    for t in ("9S", "8D", "KD", "9C"):  # a natural round: initial_cards, then result
        card(app, t, serve=False)
    o = app.outbox
    assert o.seq == 4 and o.done == 2 and link.take() == []  # built and logged, nothing sent
    hello(app, shoe)
    sent = link.take()
    # the hello's answer comes after every frame made before it: finished first, then status
    assert [frames.type_of(f) for f in sent[:3]] == [frames.T_INITIAL, frames.T_RESULT,
                                                     frames.T_STATUS]
    assert frames.body_len(sent[0]) == len(sent[0])  # initial_cards: unsigned ...
    assert frames.parse(sent[1])[5] == hashlib.sha256(sent[0]).digest()  # ... sealed
    verify(shoe.public_key(), sent[1])
    p, st = status_of(sent[2])
    verify(shoe.public_key(), sent[2])
    assert p[4] == 4 and p[5] == hashlib.sha256(app.unacked()[-1][:-64]).digest()
    assert (st["unacked_from"], st["unacked_to"], st["host_counter"]) == (1, 4, 0)
    assert [frames.seq_of(f) for f in sent[3:]] == [1, 2, 3, 4]  # resent byte for byte
    assert sent[3:] == app.unacked()


def test_counted_commands_move_the_element_counter_and_refusals_cost_no_flash(tmp_path):
    shoe, app, link = started(tmp_path)
    card(app, "5S")  # exposed 5: five more to burn
    log = shoe.flash / "log"
    size = log.stat().st_size
    app.host_bytes(b"\x01\x02\x00" + shoe.command(frames.C_NEW_SHOE, counter=7)
                   + shoe.command(frames.C_RESOLVE, b"\x01", counter=1, shoe_id=3))
    assert app.port.refused == 3 and log.stat().st_size == size  # junk: a count, no write
    app.host_bytes(shoe.command(frames.C_NEW_SHOE))  # authentic, fresh, but mid-shoe
    while app.busy():
        app.service()
    sent = link.take()
    rejected = [f for f in sent if frames.type_of(f) == frames.T_COMMAND_REJECTED]
    assert len(rejected) == 1 and frames.parse(rejected[0])[6] == struct.pack(">BBI", 4, 0x83, 1)
    verify(shoe.public_key(), rejected[0])
    assert app.port.counter == 1 == shoe.element().counter(0)
    app.host_bytes(shoe.command(frames.C_NEW_SHOE, counter=1))  # the same command replayed
    assert app.port.refused == 4 and app.port.counter == 1
    hello(app, shoe)
    _, st = status_of(link.take()[0])
    assert st["host_counter"] == 1 and st["refused"] == 4


def test_ack_is_signed_logged_only_when_it_moves_and_survives_a_reboot(tmp_path):
    shoe, app, _ = started(tmp_path)
    for t in ("AS", "2H", "9S", "8D", "KD", "9C"):
        card(app, t)
    for ack in (shoe.ack(3), shoe.ack(2),  # older: nothing
                shoe.ack(3), shoe.command(frames.C_ACK, struct.pack(">I", 4),
                                          key=ec.generate_private_key(ec.SECP256R1()))):
        app.host_bytes(ack)
        while app.busy():  # the element checks it from service(), as in the board loop
            app.service()
        assert app.outbox.acked == 3
    assert app.port.refused == 1
    again = ShoeApp(Flash(str(shoe.flash)), Link(), Link(), shoe.element())
    again.start()
    assert again.outbox.acked == 3 and [frames.seq_of(f) for f in again.unacked()] == [4]


def test_squeeze_withholds_from_the_first_hand_until_the_reveal(tmp_path):
    shoe, app, link = started(tmp_path, variant=2 | frames.V_SQUEEZE)
    for t in ("AS", "2H", "9S", "8D", "KD", "9C"):
        card(app, t)
    sent = link.take()
    assert [frames.type_of(f) for f in sent] == [frames.T_SHOE_START, frames.T_BURN]
    assert app.outbox.done == 4  # finished (and logged) meanwhile, not sent
    hello(app, shoe)
    assert [frames.type_of(f) for f in link.take()] == [frames.T_STATUS, frames.T_SHOE_START,
                                                        frames.T_BURN]
    app.reveal_button()
    while app.busy():
        app.service()
    assert [frames.type_of(f) for f in link.take()] == [frames.T_INITIAL, frames.T_RESULT]


def test_new_shoe_compacts_to_a_checkpoint_and_the_unacknowledged_finished_frames(tmp_path):
    shoe, app, _ = started(tmp_path)
    deal_a_short_shoe(app)
    assert app.shoe.phase == PH_ENDED
    app.host_bytes(shoe.ack(5))
    while app.busy():
        app.service()
    held = app.unacked()
    app.host_bytes(shoe.command(frames.C_NEW_SHOE))
    while app.busy():
        app.service()
    records = list(RecordLog(Flash(str(shoe.flash))).records())
    assert records[0][0] == R_CHECKPOINT
    carried = [p[32:] for t, p in records if t == R_FINAL]
    assert carried[: len(held)] == held
    again = ShoeApp(Flash(str(shoe.flash)), Link(), Link(), shoe.element())
    again.start()
    assert again.shoe.shoe_no == 2 and again.unacked() == app.unacked()
    assert bytes(again.outbox.digest) == bytes(app.outbox.digest)


# ---- the signed MANIFEST and the tilted shoe -------------------------------------------------
def release_key():
    key = ec.generate_private_key(ec.SECP256R1())
    n = key.public_key().public_numbers()
    return key, n.x.to_bytes(32, "big") + n.y.to_bytes(32, "big")


def signed_manifest(tree, key, version=20):
    """The firmware's own MANIFEST form (shoe/integrity.py), signed here with the host's tools."""
    digest = integrity.digest(str(tree))
    signed = integrity.signed_digest(version, "virtual", digest)
    r, s = decode_dss_signature(key.sign(signed, ec.ECDSA(Prehashed(hashes.SHA256()))))
    sig = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    (tree / "MANIFEST").write_text(f"{digest.hex()}\n{version}\nvirtual\n{sig.hex()}\n")


def ilistdir(path):
    """MicroPython's os.ilistdir for CPython: (name, type) with 0x4000 for a directory."""
    import os

    return [(e.name, 0x4000 if e.is_dir() else 0x8000) for e in os.scandir(path)]


def test_boot_check_wants_the_digest_and_the_release_signature(tmp_path, monkeypatch):
    monkeypatch.setattr(integrity.os, "ilistdir", ilistdir, raising=False)
    tree = tmp_path / "tree"
    (tree / "shoe").mkdir(parents=True)
    (tree / "shoe" / "app.py").write_text("x = 1\n")
    shoe = ProvisionedShoe(tmp_path / "s")
    el = shoe.element()
    key, public = release_key()
    signed_manifest(tree, key)
    monkeypatch.setattr(release, "PUBLIC_KEY", None)
    assert integrity.check(str(tree), (), el) == "no release key in the tree"
    monkeypatch.setattr(release, "PUBLIC_KEY", public)
    assert integrity.check(str(tree), (), el) is None
    assert integrity.check(str(tree), (), None) is not None  # no element: no certified code
    other, _ = release_key()
    signed_manifest(tree, other)
    assert integrity.check(str(tree), (), el) == "MANIFEST signature invalid"
    signed_manifest(tree, key)
    (tree / "shoe" / "app.py").write_text("x = 2\n")
    assert integrity.check(str(tree), (), el) == "code differs from MANIFEST"
    (tree / "MANIFEST").write_text(integrity.digest(str(tree)).hex() + "\n")  # v1: no signature
    assert integrity.check(str(tree), (), el) == "MANIFEST malformed"


def test_tilted_shoe_answers_with_signed_status_and_integrity(tmp_path, monkeypatch):
    monkeypatch.setattr(integrity.os, "ilistdir", ilistdir, raising=False)
    shoe = ProvisionedShoe(tmp_path)
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "main.py").write_text("pass\n")
    link = Link()
    tilt = TiltShoe(Flash(str(shoe.flash)), link, link, str(tree), (), shoe.element())
    tilt.start()
    tilt.host_bytes(shoe.command(frames.C_HELLO) + shoe.command(frames.C_INTEGRITY, b"seed"))
    status, answer = link.take()
    for f in (status, answer):
        verify(shoe.public_key(), f)
    assert status_of(status)[1]["integrity"] == frames.INTEGRITY_TILT
    p = frames.parse(answer)
    assert p[0] == frames.T_INTEGRITY and p[6][0] == frames.INTEGRITY_TILT
    assert p[6][1:] == integrity.seeded(b"seed", str(tree))



# ---- on MicroPython: the virtual board ---------------------------
@pytest.mark.board
def test_virtual_board_deals_and_signs_through_the_element_process(shoe_flash, element):
    import os
    import socket
    import subprocess
    import time

    from sabot.virtual.dealer_channel import EXIT_EDGE

    from kit import FIRMWARE, ROOT, free_port_for_tests, micropython_bin

    flash, _, shoe = shoe_flash
    port = free_port_for_tests()
    env = dict(os.environ, MICROPYPATH=str(FIRMWARE))
    board = subprocess.Popen(
        [micropython_bin(), str(ROOT / "boards" / "virtual" / "main.py"), "--flash", str(flash),
         "--listen", f"127.0.0.1:{port}", "--element", element],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        while not board.stdout.readline().startswith(b"L "):  # indicator lines, then link up
            assert board.poll() is None, board.stderr.read()
        conn = socket.create_connection(("127.0.0.1", port), timeout=10)
        for t in ("AS", "2H", "9S", "8D", "KD", "9C"):
            board.stdin.write(encode(ord("R"), t.encode()) + bytes([EXIT_EDGE]))  # frame, exit
        board.stdin.flush()
        while not board.stdout.readline().startswith(b"A "):  # the round's result is shown
            assert board.poll() is None, board.stderr.read()
        time.sleep(0.5)  # the board finishes the frames on its own, polling every ~2 ms
        conn.sendall(shoe.command(frames.C_HELLO))
        got = bytearray()
        end = time.monotonic() + 10
        while True:  # what came before the hello depends on when the link was accepted
            sent = split(got)
            at = [frames.type_of(f) for f in sent].index(frames.T_STATUS) if any(
                frames.type_of(f) == frames.T_STATUS for f in sent) else -1
            if at >= 0 and len(sent) >= at + 5:  # the status and the 4 frames held
                sent = sent[at : at + 5]
                break
            assert time.monotonic() < end, sent
            got += conn.recv(4096)
        assert [frames.type_of(f) for f in sent] == [
            frames.T_STATUS, frames.T_SHOE_START, frames.T_BURN, frames.T_INITIAL, frames.T_RESULT]
        for f in sent:
            if frames.signed(frames.type_of(f)):
                verify(shoe.public_key(), f)
        assert frames.parse(sent[0])[4] == 4  # every frame finished while nobody asked
        conn.close()
    finally:
        board.kill()
        board.wait()


def test_squeezed_frames_withheld_over_a_power_cut_go_out_at_the_reveal(tmp_path):
    shoe, app, link = started(tmp_path, variant=2 | frames.V_SQUEEZE)
    for t in ("AS", "2H", "9S", "8D", "KD", "9C"):
        card(app, t)
    link.take()
    again = ShoeApp(Flash(str(shoe.flash)), link, link, shoe.element())
    again.start()
    assert again.hold_from == 3 and again.sent == 2
    again.reveal_button()
    while again.busy():
        again.service()
    assert [frames.seq_of(f) for f in link.take()] == [3, 4]


def test_a_signed_command_held_back_on_the_cable_is_stale_after_a_supervisor_resolution(tmp_path):
    """An insider drops the host's signed resolve, the supervisor resolves at the shoe, and the
    held-back command is delivered later, when another round is held: refused, because the
    supervisor's resolution moved the element's command counter too."""
    shoe, app, _ = started(tmp_path)
    card(app, "5S")  # an exposed five: five more to burn
    app.empty_sensor()  # shoe empty in the burn: held
    withheld = shoe.command(frames.C_RESOLVE, bytes((3,)))  # counter 1, never delivered now
    app.supervisor(4)  # the supervisor ends the shoe at the shoe itself
    while app.busy():
        app.service()
    assert app.port.counter == 1 and app.shoe.phase == PH_ENDED
    refused = app.port.refused
    app.host_bytes(withheld)
    assert app.port.refused == refused + 1 and app.port.counter == 1


class Spinning(Exception):
    pass


class CountsPending:
    """The shoe's element, counting how often the shoe asks whether it is busy: a loop that
    waits for it without moving its job on asks forever (then this raises, not hangs the test)."""

    def __init__(self, element, limit=100_000):
        self.element = element
        self.asked = 0
        self.limit = limit

    def __getattr__(self, name):
        return getattr(self.element, name)

    def pending(self):
        self.asked += 1
        if self.asked > self.limit:
            raise Spinning("the shoe waits for the element and moves nothing on")
        return self.element.pending()


def test_a_supervisor_resolution_while_a_status_is_signed_and_an_ack_is_taken_goes_through(
        tmp_path):
    """A hello's status is under way in the element (its digest queued) and a signed ack has been
    taken for its check when the supervisor resolves at the shoe: the resolution finishes the
    check first, and that waits for the element. The status must be moved on meanwhile (before,
    the shoe spun in CommandPort.finish forever, its lamps and link dead: seen in a soak)."""
    shoe = ProvisionedShoe(tmp_path)
    link = Link()
    element = CountsPending(shoe.element())
    app = ShoeApp(Flash(str(shoe.flash)), link, link, element)
    app.start()
    serve(app)
    card(app, "5S")  # an exposed five: five more to burn
    app.empty_sensor()  # shoe empty in the burn: held
    serve(app)
    app.host_bytes(shoe.command(frames.C_HELLO))
    app.service()  # the status's digest is queued in the element
    assert app._asked == 2 and element.pending()
    app.host_bytes(shoe.ack(app.outbox.done))  # taken for its check: the element is busy
    assert app.port._job
    element.asked = 0
    app.supervisor(4)  # end the shoe
    serve(app)
    assert app.shoe.phase == PH_ENDED and app.port.counter == 1 and not app.port._job
    statuses = [f for f in link.take() if frames.type_of(f) == frames.T_STATUS]
    assert statuses  # the hello was answered, signed
    verify(shoe.public_key(), statuses[-1])


class FailsOnce:
    """An element whose next queued step fails once (a late answer under load), then works."""

    def __init__(self, element):
        self.element = element
        self.fail = 0

    def __getattr__(self, name):
        return getattr(self.element, name)

    def sha_ready(self):
        if self.fail:
            self.fail -= 1
            self.element._pending = 0
            raise ElementError(0x102)
        return self.element.sha_ready()


def test_an_element_step_failing_while_a_hello_waits_is_taken_again(tmp_path):
    """A hello finishes the frames before its status; an element step that fails meanwhile (the
    driver's NO_RESPONSE) is done again, not an exception that resets the shoe."""
    shoe, app, link = started(tmp_path)
    app.element = app.outbox.element = app.port.element = FailsOnce(app.element)
    for t in ("AS", "2H", "9S", "8D", "KD", "9C"):
        card(app, t, serve=False)
    link.take()
    app.element.fail = 2
    hello(app, shoe)
    sent = link.take()
    assert app.element_errors == 2 and app.outbox.done == app.outbox.seq
    assert frames.T_STATUS in [frames.type_of(f) for f in sent]


def test_an_element_step_failing_while_a_card_waits_for_a_slot_is_taken_again(tmp_path):
    """A card whose frame finds every ring slot unfinished waits for the element there and then;
    a step the element fails meanwhile (its answer lost to its watchdog while the MCU was held
    up) is done again, not an exception that resets the shoe."""
    _, app, _ = started(tmp_path)
    app.element = app.outbox.element = app.port.element = FailsOnce(app.element)
    app.element.fail = 2
    tokens = ("AS", "2H", "9S", "8D", "KD", "9C", "3H", "4C", "5D", "6S", "7H", "8C", "TD", "JS",
              "QH", "KC", "AD", "2S", "3D", "4H")
    for t in tokens:
        card(app, t, serve=False)  # no service pass: the ring fills, begin() waits
    assert app.element.fail == 0  # both failures met on the card path, and outlived
    while app.busy():
        app.service()
    assert app.outbox.done == app.outbox.seq


def test_a_rekey_waits_for_a_round_dealt_in_a_later_shoe_than_the_last_rekeys(tmp_path):
    """The command key alone cannot use up the result key slots: a rekey waits for a round dealt
    — cards through the sensor — the first too, and after a rekey the next is refused (its own
    reason) until a round is dealt in a later shoe; new-shoe commands open nothing, and a reboot
    or a compaction forgets nothing."""
    from shoe.store import load_identity

    shoe, app, link = started(tmp_path)

    def rekey(app):
        app.port._window -= 1000  # a second later: under the signed commands' rate
        link.take()
        app.host_bytes(shoe.command(frames.C_REKEY, b"tech-ann"))
        serve(app)
        sent = [frames.parse(f) for f in link.take() if frames.is_chained(f)]
        refused = [p[6][0] for p in sent if p[0] == frames.T_COMMAND_REJECTED]
        return refused[0] if refused else load_identity(app.flash)[0]

    def reboot():
        again = ShoeApp(Flash(str(shoe.flash)), link, link, shoe.element())
        again.start()
        serve(again)
        return again

    def a_round(app):
        for t in ("9S", "8D", "KD", "9C"):  # a natural: initial cards, then the result
            card(app, t)

    for t in ("AS", "2H"):  # the burn
        card(app, t)
    assert rekey(app) == 8  # not even the first before a round is dealt
    a_round(app)
    assert rekey(app) == 2  # the first since provisioning
    assert rekey(app) == 8  # at once again: no round dealt since
    a_round(app)
    assert rekey(app) == 8  # a round, but in the shoe of the last rekey
    deal_a_short_shoe(app)
    app = reboot()
    for _ in range(3):  # new shoes by command only: no round dealt in any
        app.port._window -= 1000
        app.host_bytes(shoe.command(frames.C_NEW_SHOE))
        serve(app)
        assert rekey(app) == 8
    for t in ("AS", "2H"):
        card(app, t)
    a_round(app)
    deal_a_short_shoe(app)  # the round's shoe ends; the next starts (a compaction) ...
    app.port._window -= 1000
    app.host_bytes(shoe.command(frames.C_NEW_SHOE))
    serve(app)
    app = reboot()  # ... and after a reboot the shoe still knows a round was dealt
    assert app.shoe.round_no == 0 and rekey(app) == 3
    assert rekey(app) == 8


def test_a_new_shoe_over_a_shoe_that_dealt_nothing_is_refused(tmp_path):
    """A new shoe compacts the log (a sector erased on a raw partition): asked for over a shoe
    that dealt nothing, again and again, it would let a host wear the flash out; only an ended
    shoe takes one."""
    from shoe.port import REJ_NOT_NOW

    shoe, app, link = started(tmp_path)
    assert app.shoe.phase == PH_BURN_FIRST and not app.shoe.position
    before = app.shoe.shoe_no
    link.take()
    app.host_bytes(shoe.command(frames.C_NEW_SHOE))
    serve(app)
    rejected = [frames.parse(f)[6] for f in link.take()
                if frames.type_of(f) == frames.T_COMMAND_REJECTED]
    assert [r[0] for r in rejected] == [REJ_NOT_NOW] and app.shoe.shoe_no == before

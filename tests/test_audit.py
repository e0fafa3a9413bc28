"""The audit never stops and never lies: each scenario an attacker or a careless dealer tried,
on the virtual board (real MicroPython) with the validator on its link. Authentic frames in
sequence are stored whatever they say; what the host disagrees with is an alarm stored with
them."""

import json
import os
import shutil
import sqlite3
import struct
import subprocess
import sys

import pytest

from sabot import protocol as pr
from sabot.audit.store import open_store
from sabot.audit.validator import Validator
from sabot.link.host import HostLink
from sabot.protocol import END_SHOE, KEEP_DUMMY, VOID_CARD, VOID_ROUND
from sabot.virtual.dealer_channel import (
    CONFIRM,
    EMPTY,
    EXIT_EDGE,
    SUPERVISOR,
    card_bytes,
    sensor_frame,
)

from kit import SABOT, signing_shoe

NATURALS = ("9S", "8D", "KD", "9C")


def sabot(*args, **kw):
    return subprocess.run([*SABOT, *map(str, args)], capture_output=True, text=True, timeout=120,
                          **kw)


@pytest.fixture
def rig(rigs):
    """A new shoe, before its burn (each test deals the burn it needs)."""
    return rigs()


def irregularities(rig):
    return [r["kind"] for r in rig.of("irregularity")]


# ---- the burn is part of the shoe's accounting --------------------------------------------------
@pytest.mark.board
def test_shoe_empty_during_the_burn_holds_then_end_shoe_and_the_next_shoe_is_stored(rig):
    rig.deal("KS", "2H", "3H")  # an exposed king: ten to burn, two out
    rig.send(bytes([EMPTY]))
    assert irregularities(rig) == ["cards_exhausted"] and rig.phase == "held"
    rig.link.resolve(END_SHOE)
    rig.settle()
    assert rig.phase == "ended" and rig.of("shoe_end")[-1]["inventory"] == {"KS": 1, "2H": 1,
                                                                            "3H": 1}
    rig.link.new_shoe()
    rig.settle()
    rig.burn()
    rig.deal(*NATURALS)
    assert rig.of("result")[-1]["shoe"] == 2 and rig.of("result")[-1]["round"] == 1
    assert rig.alarms() == [] and rig.validator.counts["rejected"] == 0


@pytest.mark.board
def test_unreadable_card_during_the_burn_counts_as_burned_without_a_hold(rig):
    rig.deal("3S")
    rig.send(bytes([EXIT_EDGE]))  # a burned card not read
    assert irregularities(rig) == ["unreadable_burn_card"] and rig.phase == "burn"
    rig.deal("4H", "5H")
    assert rig.of("burn")[-1]["cards"] == ["3S", None, "4H", "5H"]
    rig.deal(*NATURALS)
    assert rig.of("result")[-1]["round"] == 1 and rig.alarms() == []


@pytest.mark.board
def test_unreadable_card_during_the_burn_then_void_round_never_skips_the_burn(rig):
    rig.deal("3S")
    rig.send(bytes([EXIT_EDGE]))
    rig.send(bytes([SUPERVISOR + VOID_ROUND]))  # no hold to resolve: refused, nothing skipped
    assert rig.phase == "burn"
    rig.deal("4H", "5H", *NATURALS)
    assert len(rig.of("burn")) == 1 and rig.alarms() == []


@pytest.mark.board
def test_unreadable_first_card_holds_until_the_supervisor_lets_the_shoe_go_on(rig):
    rig.send(bytes([EXIT_EDGE]))
    assert irregularities(rig) == ["unreadable_card"] and rig.phase == "held"
    rig.send(bytes([SUPERVISOR + VOID_CARD]))
    assert rig.phase == "burn_first"
    rig.burn()
    rig.deal(*NATURALS)
    assert rig.of("burn")[-1]["cards"] == ["AS", "2H"] and rig.alarms() == []


@pytest.mark.board
def test_cut_card_as_the_first_card_holds_and_continuing_makes_one_round_the_last(rig):
    rig.send(card_bytes("CUT"))
    assert irregularities(rig) == ["cut_card_in_burn"] and rig.phase == "held"
    rig.send(bytes([SUPERVISOR + VOID_CARD]))
    rig.burn()
    rig.deal(*NATURALS)
    assert rig.phase == "ended" and len(rig.of("result")) == 1 and rig.alarms() == []


@pytest.mark.board
def test_a_second_cut_card_holds_and_end_shoe_ends_it(rig):
    rig.burn()
    rig.deal("9S", "CUT", "8D", "KD", "9C")  # out during a round: this round and one more
    rig.deal("CUT")
    assert irregularities(rig) == ["second_cut_card"]
    rig.link.resolve(END_SHOE)
    rig.settle()
    res = rig.of("resolution")[-1]
    assert res["resolution"] == "end_shoe" and res["source"] == "host" and rig.phase == "ended"
    assert rig.alarms() == []


# ---- inventory counts every card that left the shoe -----------------------------------------
@pytest.mark.board
def test_a_ninth_ace_out_while_a_round_is_held_then_voided_is_flagged(rig):
    rig.deal("AS", "AS")  # the exposed ace and the one it burns
    rig.send(bytes([EXIT_EDGE]))  # an unreadable card: the shoe holds
    for _ in range(7):
        rig.deal("AS")  # while held: cards not due, counted out all the same
    rig.send(bytes([SUPERVISOR + VOID_CARD]))
    rig.send(bytes([EMPTY]))  # between rounds: the shoe ends
    end = rig.of("shoe_end")[-1]
    assert end["inventory"] == {"AS": 9} and end["unknown"] == 1
    assert "inventory_exceeded" in rig.alarms()
    assert "inventory_mismatch" not in rig.alarms()  # the host counted exactly what the shoe did


@pytest.mark.board
def test_a_card_kept_as_a_dummy_hand_is_counted_once(rig):
    rig.burn()
    rig.deal("5H")  # nothing is held, so a card between rounds is the next round's first card
    rig.deal("9S", "8D", "KD")
    rig.send(bytes([EXIT_EDGE]))  # unreadable between rounds: held
    rig.deal("7C")  # not due
    rig.link.resolve(KEEP_DUMMY)
    rig.settle()
    rig.deal("9D", "8S", "KH")
    assert rig.of("result")[-1]["dummy"] is True
    rig.send(bytes([EMPTY]))
    assert rig.alarms() == []  # the shoe's inventory and the host's agree


# ---- authentic means stored: a validator that meets a shoe mid-shoe ------------------------
def another_validator_deals_a_round(rig, db, round_no):
    """The rig's validator goes away; another one on `db` meets the shoe, which deals one more
    round: what did that validator store, and what did it say?"""
    rig.link.close()
    rig.validator.store.close()
    other = Validator(rig.config, str(db))
    link = HostLink(rig.board.url, other, rig.key)
    try:
        link.ask_until(lambda st: True, 5)
        rig.board.send(b"".join(card_bytes(t) for t in NATURALS))
        assert link.ask_until(lambda st: st["round"] == round_no and st["unacked_to"] == 0, 10)
    finally:
        link.close()
        other.store.close()
    rig.closed = True
    rig.board.stop()
    return other


@pytest.mark.board
def test_validator_on_a_fresh_database_mid_shoe_reanchors_with_a_gap_alarm(rig, tmp_path):
    rig.burn()
    rig.deal(*NATURALS, *NATURALS)
    fresh = another_validator_deals_a_round(rig, tmp_path / "fresh.db", 3)
    assert fresh.counts["rejected"] == 0 and fresh.counts["rounds"] == 1
    assert [a["kind"] for a in fresh.alarms] == ["sequence_gap"]


@pytest.mark.board
def test_validator_on_an_old_copy_of_its_database_reanchors_after_what_others_acknowledged(
        rig, tmp_path):
    rig.burn()
    rig.deal(*NATURALS)
    rig.validator.store.close()
    shutil.copy(rig.tmp / "audit.db", tmp_path / "old.db")  # a backup, taken here
    rig.validator.store = open_store(str(rig.tmp / "audit.db"))
    rig.deal(*NATURALS, *NATURALS)  # acknowledged by the live validator
    old = another_validator_deals_a_round(rig, tmp_path / "old.db", 4)
    assert old.counts["rejected"] == 0 and old.counts["rounds"] == 1
    assert "sequence_gap" in [a["kind"] for a in old.alarms]
    old.store.close()
    # audit verify names the hole (a store cannot tell it from a deletion) and wants it accepted
    r = sabot("audit", "verify", "--db", tmp_path / "old.db", "--registry", rig.registry)
    assert r.returncode != 0 and "acknowledged them" in r.stderr and "--allow-holes" in r.stderr
    r = sabot("audit", "verify", "--db", tmp_path / "old.db", "--registry", rig.registry,
              "--allow-holes")
    assert r.returncode == 0 and "acknowledged elsewhere: shoe" in r.stdout, r.stderr


@pytest.mark.board
def test_a_supervisor_resolution_at_the_shoe_uses_up_the_element_command_counter(rig):
    """On MicroPython with the element process: the supervisor's key moves the element's counter
    (a host command held back before it is stale), and the host's next command still fits."""
    rig.deal("5S")  # an exposed five: five more to burn
    rig.send(bytes([EMPTY]))  # shoe empty in the burn: held
    before = rig.validator.status["host_counter"]
    rig.send(bytes([SUPERVISOR + 4]))  # end shoe, at the shoe
    assert rig.phase == "ended" and rig.validator.status["host_counter"] == before + 1
    rig.link.new_shoe()  # counter + 1 from the status: obeyed
    rig.settle()
    assert rig.validator.status["host_counter"] == before + 2 and rig.phase == "burn_first"


# ---- the registry, not the shoe, says what the table is ----------------------------------------
def enc(raw):
    return pr.encode_frame(raw)


def test_an_implant_announcing_nine_decks_raises_config_mismatch_and_its_ninth_ace_is_flagged(
        tmp_path):
    s, entry = signing_shoe(decks=8)
    v = Validator(entry, str(tmp_path / "a.db"))
    ace = 0
    stream = enc(s.chained(pr.T_SHOE_START, b"\x00\x01\x09\x02"))  # 9 decks
    stream += enc(s.chained(pr.T_BURN, b"\x00\x01\x00\x00" + bytes([ace] * 2)))
    for i in range(7):  # seven cards not due: aces of spades
        stream += enc(s.chained(pr.T_IRREGULARITY,
                                b"\x00\x01\x00\x00" + struct.pack(">BBH", 1, ace, 3 + i)))
    v.receive(stream)
    kinds = [a["kind"] for a in v.alarms]
    assert kinds[0] == "config_mismatch" and "decks 9" in v.alarms[0]["detail"]
    assert "inventory_exceeded" in kinds and v.counts["rejected"] == 0


def test_a_resolution_naming_another_card_than_the_one_held_is_an_alarm(tmp_path):
    s, entry = signing_shoe()
    v = Validator(entry, str(tmp_path / "a.db"))
    stream = enc(s.chained(pr.T_SHOE_START, b"\x00\x01\x08\x02"))
    stream += enc(s.chained(pr.T_IRREGULARITY,
                            b"\x00\x01\x00\x00" + struct.pack(">BBH", 1, 5, 1)))  # 2H not due
    stream += enc(s.chained(pr.T_RESOLUTION,
                            b"\x00\x01\x00\x00" + bytes((1, 1, 9, 0, 0))))  # voids 3H instead
    v.receive(stream)
    assert [a["kind"] for a in v.alarms] == ["resolution_mismatch"]


# ---- the shoe: refusals cost nothing, echoes change nothing, maintenance waits ------------------
@pytest.mark.board
def test_two_thousand_junk_commands_cost_no_flash_and_are_counted(rig):
    before = rig.link.ask(2)
    log = rig.tmp / "flash" / "log"
    size = log.stat().st_size
    from cryptography.hazmat.primitives.asymmetric import ec

    other = ec.generate_private_key(ec.SECP256R1())  # not the command key the element holds
    junk = b"".join(pr.command(other, rig.shoe_id, 10**6 + i, pr.C_NEW_SHOE) for i in range(2000))
    rig.link.write(junk)
    rig.settle()
    after = rig.link.ask(2)
    assert after["refused"] - before["refused"] == 2000
    assert log.stat().st_size == size and after["acked"] == before["acked"]


@pytest.mark.board
def test_a_shoe_frame_echoed_back_to_the_shoe_is_refused_without_side_effects(rig):
    rig.burn()
    rig.deal(*NATURALS)
    before = rig.link.ask(2)
    result = rig.validator.store.db.execute(
        "SELECT raw FROM frames WHERE type='result' ORDER BY id DESC LIMIT 1").fetchone()[0]
    rig.link.write(pr.encode_frame(result))
    after = rig.link.ask(2)
    assert after["host_counter"] == before["host_counter"]
    assert after["refused"] == before["refused"] + 1
    rig.deal(*NATURALS)  # genuine acknowledgements still work
    assert rig.link.ask(2)["unacked_to"] == 0


@pytest.mark.board
def test_an_update_is_refused_while_a_round_is_held(rig):
    rig.burn()
    rig.deal(*NATURALS)
    rig.send(bytes([EXIT_EDGE]))  # between rounds, unreadable: held
    rig.link._command(pr.C_UPDATE, bytes(36) + b"tech")
    rig.settle()
    assert rig.of("command_rejected")[-1]["reason"] == "not_now"
    assert rig.board.alive()


# ---- the store is tamper-evident ----------------------------------------------------------------
@pytest.fixture(scope="module")
def demo_db(tmp_path_factory):
    """An audit store of two whole shoes, validated from a capture (capture_gen: signed as a
    version-2 shoe signs), and the registry that holds the shoe's public key: no secret."""
    from kit import validated_capture

    d = tmp_path_factory.mktemp("demo")
    v = validated_capture(d, 2, seed=5)
    assert v.counts["rejected"] == 0 and not v.alarms
    (d / "result.pem").unlink()  # the verifiers below hold public keys only
    return d


def verify(cli, db, d):
    return cli("audit", "verify", "--db", db, "--registry", d / "shoes.json")


def tampered(cli, demo_db, tmp_path, *sql):
    db = tmp_path / "t.db"
    shutil.copy(demo_db / "audit.db", db)
    con = sqlite3.connect(db)
    for s in sql:
        con.execute(s)
    con.commit()
    con.close()
    return verify(cli, db, demo_db)


def test_audit_verify_passes_an_untouched_store(cli, demo_db):
    r = verify(cli, demo_db / "audit.db", demo_db)
    assert r.returncode == 0 and r.stdout.startswith("ok: "), r.stderr


@pytest.mark.parametrize("name,sql", [
    ("inserted_round", ["INSERT INTO records (chain_no, frame_id, key_id, shoe_id, seq, kind,"
                        " shoe, round, record, row_hash) SELECT chain_no + 100000, frame_id,"
                        " key_id, shoe_id, seq + 100000, kind, shoe, 99, record, row_hash"
                        " FROM records"
                        " WHERE kind='result' LIMIT 1"]),
    ("winner_rewritten", ["DROP TRIGGER records_append_only_u",
                          "UPDATE records SET record = replace(record, '\"banker\"', '\"player\"')"
                          " WHERE kind='result'"]),
    ("rewritten_with_the_trigger_put_back", [
        "DROP TRIGGER records_append_only_u",
        "UPDATE records SET record = replace(record, '\"banker\"', '\"player\"') WHERE "
        "kind='result'",
        "CREATE TRIGGER records_append_only_u BEFORE UPDATE ON records BEGIN SELECT "
        "RAISE(ABORT, 'the audit log is append-only'); END"]),
    ("link_state_deleted", ["DROP TRIGGER link_state_append_only_d",
                            "DELETE FROM link_state WHERE id = (SELECT MIN(id) FROM link_state)"]),
    ("frame_deleted", ["DROP TRIGGER frames_append_only_d",
                       "DELETE FROM frames WHERE id = 5"]),
])
def test_audit_verify_finds_every_edit_of_the_store(cli, demo_db, tmp_path, name, sql):
    r = tampered(cli, demo_db, tmp_path, *sql)
    assert r.returncode != 0 and "does not hold" in r.stderr, (name, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr


def test_the_store_refuses_update_and_delete_outright(demo_db, tmp_path):
    db = tmp_path / "t.db"
    shutil.copy(demo_db / "audit.db", db)
    con = sqlite3.connect(db)
    for table in ("frames", "records", "link_state", "meta"):  # (row triggers need a row)
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            con.execute(f"DELETE FROM {table}")
    con.close()


def test_history_shows_and_filters_by_the_shoes_device_id(cli, demo_db):
    from sabot.registry import Registry

    shoe_id = Registry.load(str(demo_db / "shoes.json")).pick(None).shoe_id
    r = cli("history", "--db", demo_db / "audit.db", "--shoe-id", shoe_id, "--round", 3,
              "--json")
    recs = [json.loads(x) for x in r.stdout.splitlines()]
    assert r.returncode == 0 and recs and {x["shoe_id"] for x in recs} == {shoe_id}
    r = cli("history", "--db", demo_db / "audit.db", "--shoe-id", shoe_id + 1)
    assert r.returncode != 0


# ---- one validator per database and per port ---------------------------------------------------
def test_a_second_validator_on_the_same_database_is_refused_in_one_line(tmp_path):
    first = open_store(str(tmp_path / "a.db"))
    try:
        from sabot.errors import SabotError

        with pytest.raises(SabotError, match="in use by another validator"):
            open_store(str(tmp_path / "a.db"))
    finally:
        first.close()
    open_store(str(tmp_path / "a.db")).close()  # free again once the first has gone


def test_a_second_validator_on_the_same_serial_port_is_refused_port_busy(tmp_path):
    import pty

    from sabot.errors import SabotError
    from sabot.link.transport import ShoePort

    master, slave = pty.openpty()
    name = os.ttyname(slave)
    first = ShoePort(name, open_timeout=2)
    try:
        with pytest.raises(SabotError, match="busy"):
            ShoePort(name, open_timeout=0.5)
    finally:
        first.close()
        os.close(master)
        os.close(slave)


# ---- exit status: anything rejected or alarmed is a failure -----------------------------------
def frames_of(capture):
    return [p + b"\x00" for p in capture.split(b"\x00")[:-1]]


@pytest.mark.parametrize("cut", ["shoe_end", "last_20", "whole_shoe"])
def test_replay_of_a_capture_missing_its_end_exits_non_zero(cli, demo_db, tmp_path, cut):
    parts = frames_of((demo_db / "cap.bin").read_bytes())
    types = [pr.parse(pr.decode_frame(p[:-1])).type for p in parts]
    if cut == "shoe_end":
        parts = [p for p, t in zip(parts, types) if t != pr.T_SHOE_END]
    elif cut == "last_20":
        parts = parts[:-20]
    else:
        parts = []
    (tmp_path / "cap.bin").write_bytes(b"".join(parts))
    r = cli("replay", tmp_path / "cap.bin", "--registry", demo_db / "shoes.json")
    assert r.returncode != 0 and "Traceback" not in r.stderr


# ---- database faults: a one-line reason, nothing acknowledged that is not durable ---------------
def test_history_on_a_file_that_is_not_a_sabot_database_refuses_without_writing(cli, tmp_path):
    other = tmp_path / "other.db"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    before = other.read_bytes()
    r = cli("history", "--db", other)
    assert r.returncode != 0 and "not a sabot audit database" in r.stderr
    assert other.read_bytes() == before and not (tmp_path / "other.db-wal").exists()


def test_a_damaged_database_gives_one_line(cli, demo_db, tmp_path):
    db = tmp_path / "t.db"
    shutil.copy(demo_db / "audit.db", db)
    data = bytearray(db.read_bytes())
    data[100:4000] = os.urandom(3900)
    db.write_bytes(bytes(data))
    r = cli("history", "--db", db)
    assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1
    assert "Traceback" not in r.stderr


@pytest.mark.board
def test_a_full_disk_stores_and_acknowledges_nothing_of_that_read(tmp_path):
    """The file size limit stands in for a full disk: the batch fails whole, the validator says so
    in one line, and its state is what it was (so the shoe's resend is accepted later)."""
    code = f"""
import resource, signal, sys
sys.path.insert(0, {str(tmp_path)!r})
from sabot import keys
from sabot.virtual import capture_gen
from sabot.audit.validator import Validator
from sabot.errors import SabotError
key, cap, rounds = capture_gen.generate({str(tmp_path / 'gen')!r}, 1, seed=2)
v = Validator(key, {str(tmp_path / 'a.db')!r})
v.receive(cap[:2000])
stored = v.state["last_seq"]
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
size = __import__("os").path.getsize({str(tmp_path / 'a.db-wal')!r})
resource.setrlimit(resource.RLIMIT_FSIZE, (size + 1000, size + 1000))
try:
    v.receive(cap[2000:])
    print("stored everything")
except SabotError as e:
    print("ERROR", e)
    print("STATE", v.state["last_seq"] == stored)
"""
    os.makedirs(tmp_path / "gen")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "ERROR audit database" in r.stdout and "nothing of this read" in r.stdout, r.stderr
    assert "STATE True" in r.stdout


# ---- what the supervisor is told ---------------------------------------------------------------
@pytest.mark.board
def test_low_confidence_and_confirm_mid_round_still_store_every_frame(rig):
    rig.burn()
    rig.send(sensor_frame("R", "QH", confidence=0x20) + bytes([EXIT_EDGE]))
    rig.send(bytes([SUPERVISOR + VOID_CARD]))
    rig.deal("2C", "3C", "4C")
    rig.send(bytes([CONFIRM]))
    rig.send(bytes([SUPERVISOR + VOID_ROUND]))
    rig.deal(*NATURALS)
    assert rig.of("result")[-1]["round"] == 1 and rig.alarms() == []


# ---- found by an insider's review, kept found ---------------------------------------------------
def crafted_shoe(n):
    """n authentic chained frames of a shoe: shoe_start, burn, then unread burn cards (signed
    irregularities that change no accounting); with the signer and its registry entry."""
    s, entry = signing_shoe()
    payloads = [(pr.T_SHOE_START, b"\x00\x01\x08\x02"),
                (pr.T_BURN, b"\x00\x01\x00\x00" + bytes([0, 4]))]  # AS, 2S
    while len(payloads) < n:
        payloads.append((pr.T_IRREGULARITY, b"\x00\x01\x00\x00" + bytes([8, 255, 0, 3])))
    return [s.chained(ftype, payload) for ftype, payload in payloads[:n]], s, entry


def status_frame(s, frames, latest, acked, first, last):
    payload = struct.pack(">BHHHBIIIIBI", 2, 1, 0, 3, 1, 0, acked, first, last, 0, 0)
    chain = pr.parse(frames[latest - 1]).digest if latest else bytes(32)
    return pr.build(s.private_key, 1, s.shoe_id, 1, latest, chain, pr.T_STATUS, payload)


def test_a_new_frame_before_the_first_status_loses_nothing_of_what_the_shoe_resends(tmp_path):
    """Live, a validator that has not met the shoe may get a new frame before the status that
    answers its hello, then the resends of older ones: it anchors at the status, stores all."""
    frames, s, entry = crafted_shoe(6)
    v = Validator(entry, str(tmp_path / "a.db"))
    v.live = True
    stream = [frames[5], status_frame(s, frames, 6, 0, 1, 6), *frames]
    verdicts = v.receive(b"".join(pr.encode_frame(f) for f in stream))
    assert [x[1] for x in verdicts] == ["deferred", "accepted"] + ["accepted"] * 6
    assert v.counts["rejected"] == 0 and v.alarms == [] and v.state["last_seq"] == 6


def test_a_store_ahead_of_its_shoe_is_named_and_nothing_stops(tmp_path):
    frames, s, entry = crafted_shoe(5)
    v = Validator(entry, str(tmp_path / "a.db"))
    v.receive(b"".join(pr.encode_frame(f) for f in frames))
    recorded = pr.encode_frame(status_frame(s, frames, 2, 0, 1, 2))  # the shoe was at seq 2
    # a recording played back on the cable, however often: refused, the audit goes on
    for _ in range(5):
        assert [verdict for _, verdict, _ in v.receive(recorded)] == ["rejected"]
    assert v.rejections[-1]["reason"] == "replayed" and v.behind_store() is None
    # a shoe that answers only with statuses of its own older than the store is behind it
    # (each signature fresh): the first contact says so in one line (answering.first_status)
    for _ in range(2):
        assert [verdict for _, verdict, _ in v.receive(
            pr.encode_frame(status_frame(s, frames, 2, 0, 1, 2)))] == ["rejected"]
    assert "re-provisioned shoe or an altered store" in v.behind_store()


def rechain(db):
    """What an insider with write access does after an edit: renumber and rehash every row
    (test_audit_verify.py)."""
    from test_audit_verify import rechain as insider

    insider(db)


@pytest.mark.board
def test_audit_verify_finds_a_deleted_alarm_even_with_the_chain_recomputed(tmp_path, rigs):
    rig = rigs()
    rig.deal("AS", "AS")
    rig.send(bytes([EXIT_EDGE]))
    for _ in range(7):
        rig.deal("AS")  # a ninth ace: inventory_exceeded
    rig.close()
    db = rig.tmp / "audit.db"
    assert sabot("audit", "verify", "--db", db, "--registry", rig.registry).returncode == 0
    con = sqlite3.connect(db)
    con.execute("DROP TRIGGER alarms_append_only_d")
    con.execute("DELETE FROM alarms WHERE kind='inventory_exceeded'")
    con.commit()
    con.close()
    rechain(db)
    r = sabot("audit", "verify", "--db", db, "--registry", rig.registry)
    assert r.returncode != 0 and "inventory_exceeded" in r.stderr


def test_audit_verify_finds_a_record_without_a_frame_and_a_trigger_of_its_own(cli, demo_db,
                                                                              tmp_path):
    r = tampered(cli, demo_db, tmp_path, "CREATE TRIGGER quiet BEFORE INSERT ON alarms BEGIN "
                 "SELECT RAISE(IGNORE); END")
    assert r.returncode != 0 and "quiet" in r.stderr
    db = tmp_path / "t.db"
    shutil.copy(demo_db / "audit.db", db)
    con = sqlite3.connect(db)
    con.execute("INSERT INTO records (chain_no, frame_id, key_id, shoe_id, seq, kind, shoe,"
                " round, record, row_hash) SELECT 1000000, 1000000, key_id, shoe_id, 1000000,"
                " kind, shoe, 99, record, row_hash FROM records WHERE kind='result' LIMIT 1")
    con.commit()
    con.close()
    rechain(db)
    r = verify(cli, db, demo_db)
    assert r.returncode != 0 and "no accepted frame" in r.stderr


def test_a_round_after_the_shoe_ended_and_a_result_without_initial_cards_are_alarms(tmp_path):
    frames, s, entry = crafted_shoe(2)
    v = Validator(entry, str(tmp_path / "a.db"))
    end = s.chained(pr.T_SHOE_END, b"\x00\x01\x00\x00\x00\x03" + bytes(52) + b"\x00\x00")
    cards = bytes([8 * 4, 7 * 4 + 1, 12 * 4, 8 * 4 + 3])  # 9S 8H KS 9C: P 9S KS, B 8H 9C
    result = s.chained(pr.T_RESULT, b"\x00\x01\x00\x01" + bytes([0x22, 0])
                       + bytes([cards[0], cards[2], cards[1], cards[3]]) + b"\x00\x05\x00")
    v.receive(b"".join(pr.encode_frame(f) for f in [*frames, end, result]))
    kinds = [a["kind"] for a in v.alarms]
    assert "round_after_shoe_end" in kinds and "missing_initial_cards" in kinds


def test_a_burn_with_the_cut_card_in_it_is_a_burn_mismatch(tmp_path):
    s, entry = signing_shoe()
    v = Validator(entry, str(tmp_path / "a.db"))
    e1 = enc(s.chained(pr.T_SHOE_START, b"\x00\x01\x08\x02"))
    e2 = enc(s.chained(pr.T_BURN, b"\x00\x01\x00\x00" + bytes([4, 52, 8])))
    v.receive(e1 + e2)
    assert [a["kind"] for a in v.alarms] == ["burn_mismatch"]
    assert "CUT" not in v.state["inventory"]["counts"]


def test_a_registry_naming_a_shoe_twice_or_with_wrong_types_is_refused(tmp_path):
    from sabot.errors import SabotError
    from sabot.registry import Registry

    for shoes in ([{"shoe_id": 7, "decks": 6}, {"shoe_id": 7, "decks": 8}],
                  [{"shoe_id": 7, "ez": "no"}], [{"shoe_id": 7, "decks": True}]):
        (tmp_path / "r.json").write_text(json.dumps({"shoes": shoes}))
        with pytest.raises(SabotError):
            Registry.load(str(tmp_path / "r.json"))


def test_history_on_a_store_missing_a_table_is_one_line(cli, demo_db, tmp_path):
    db = tmp_path / "t.db"
    shutil.copy(demo_db / "audit.db", db)
    con = sqlite3.connect(db)
    con.execute("DROP TABLE integrity_checks")
    con.commit()
    con.close()
    for args in (("history", "--db", db), ("audit", "verify", "--db", db, "--registry",
                                            demo_db / "shoes.json")):
        r = cli(*args)
        assert r.returncode != 0 and "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1


def test_update_and_rekey_frames_are_alarms_and_a_deleted_one_is_found(tmp_path):
    """A shoe's maintenance frames (docs/PROTOCOL.md): an update applied, one refused, a rekey
    are alarms with who asked; `audit verify` derives them again from the frames, so deleting
    one — chain recomputed — is found."""
    frames, s, entry = crafted_shoe(2)
    by = b"tech-ann".ljust(16, b"\0")
    frames += [s.chained(pr.T_MAINTENANCE, bytes([2]) + struct.pack(">I", 7) + by + bytes(32)
                         + struct.pack(">I", 20)),
               s.chained(pr.T_MAINTENANCE, bytes([3, 0, 0, 0, 8]) + by + bytes([4]) + bytes(32)
                         + struct.pack(">I", 21)),
               s.chained(pr.T_MAINTENANCE, bytes([4, 0, 0, 0, 9]) + by + b"\x00\x02" + bytes(64)),
               s.chained(pr.T_SHOE_START, b"\x00\x02\x08\x02")]  # the next shoe
    db = tmp_path / "a.db"
    v = Validator(entry, str(db))
    v.receive(b"".join(pr.encode_frame(f) for f in frames))
    v.finish()
    v.store.close()
    kinds = [a["kind"] for a in v.alarms]
    assert kinds[:3] == ["firmware_update", "update_refused", "rekey"]  # then missing_shoe_end
    from sabot.pit.pages import Pit

    pit = Pit(str(db), [entry])
    pit.refresh()  # the next shoe has started: the device's alarms are still in the pit's view
    shown = [a["kind"] for a in pit.tables()[0].alarms]
    assert pit.tables()[0].shoe == 2 and {"firmware_update", "rekey"} <= set(shown)
    assert "tech-ann" in v.alarms[0]["detail"] and "version 20" in v.alarms[0]["detail"]
    assert "version 21: not_signed_by_the_release_key" in v.alarms[1]["detail"]
    from sabot.audit.verify import verify as audit_verify

    assert audit_verify(str(db), {entry.shoe_id: entry})["ok"]
    con = sqlite3.connect(db)
    con.execute("DROP TRIGGER alarms_append_only_d")
    con.execute("DELETE FROM alarms WHERE kind='update_refused'")
    con.commit()
    con.close()
    rechain(db)
    out = audit_verify(str(db), {entry.shoe_id: entry})
    assert not out["ok"] and "update_refused" in out["problem"]


def test_the_dashboard_escapes_markup_an_edited_store_holds_in_any_column(tmp_path):
    """A stored XSS once: the alarms table's `round` column was rendered raw. Every value a
    page shows is escaped, numbers' columns included."""
    from sabot.pit.pages import Pit, dashboard_html, scoreboard_html

    frames, _, entry = crafted_shoe(3)
    db = tmp_path / "a.db"
    v = Validator(entry, str(db))
    v.receive(b"".join(pr.encode_frame(f) for f in frames))
    v.store.close()
    con = sqlite3.connect(db)
    markup = "<script>alert(1)</script>"
    con.execute("INSERT INTO alarms (chain_no, frame_id, raised_at, key_id, shoe_id, shoe, round,"
                " kind, detail, row_hash) VALUES (999999, 1, 0, 1, ?, 1, ?, ?, ?, x'00')",
                (entry.shoe_id, markup, "rules_mismatch", markup))
    con.commit()
    con.close()
    pit = Pit(str(db), [entry])
    pit.refresh()
    t = pit.tables()[0]
    t.rounds.append({"round": markup, "player": [markup], "banker": ["AS"], "winner": "banker",
                     "player_total": markup, "banker_total": 0, "flags": [markup]})
    for page in (dashboard_html(pit), scoreboard_html(pit, t)):
        assert "<script" not in page and "&lt;script&gt;" in page

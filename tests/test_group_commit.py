"""Group commit (audit/group_commit.py): several shoes' reads stored by one durable commit, each
acknowledged only after it; a commit the database refuses takes none of them, and a serve killed
between a commit and its acknowledgements loses nothing and stores nothing twice."""

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from sabot.audit.group_commit import GroupCommit
from sabot.audit.store import open_store
from sabot.audit.validator import Validator
from sabot.audit.verify import verify
from sabot.errors import SabotError
from sabot.pit.serve import LockedValidator
from sabot.virtual import capture_gen

from kit import SABOT
from kit.serve_rig import ServeRig


def _shoes(tmp_path, n=3):
    """n shoes' captures of one 8-deck shoe each, cut in two at a frame's end."""
    out = []
    for i in range(n):
        d = tmp_path / f"shoe{i}"
        d.mkdir()
        entry, cap, rounds = capture_gen.generate(str(d), 1, seed=40 + i, shoe_id=0x5AB0_7000 + i)
        cut = cap.index(b"\x00", len(cap) // 2) + 1
        out.append((entry, (cap[:cut], cap[cut:]), rounds))
    return out


def _together(group, validators, parts):
    """Each validator's read, all queued behind the lock at once (so one commit must take them
    all); what each receive returned or raised."""
    results = [None] * len(validators)

    def read(i):
        try:
            results[i] = validators[i].receive(parts[i])
        except SabotError as e:
            results[i] = e

    with group:  # the store held while every read queues
        threads = [threading.Thread(target=read, args=(i,)) for i in range(len(validators))]
        for t in threads:
            t.start()
        end = time.monotonic() + 10
        while group.queued < len(validators) and time.monotonic() < end:
            time.sleep(0.001)
        assert group.queued == len(validators)
    for t in threads:
        t.join(30)
    return results


def test_reads_queued_behind_a_commit_are_stored_by_one_and_a_refused_commit_takes_none(
        tmp_path):
    shoes = _shoes(tmp_path)
    store = open_store(str(tmp_path / "audit.db"), threads=True)
    group = GroupCommit(store, wait=5.0)  # the last read to queue commits, not the clock
    vs = [LockedValidator(group, entry, store) for entry, _, _ in shoes]

    first = _together(group, vs, [parts[0] for _, parts, _ in shoes])
    assert all(isinstance(r, list) and r for r in first), first
    assert (group.commits, group.reads) == (1, 3)
    # each read's frames carry the time it was taken, not the batch's first read's
    times = store.db.execute("SELECT shoe_id, MIN(received_at), MAX(received_at) FROM frames"
                             " GROUP BY shoe_id ORDER BY MIN(id)").fetchall()
    assert [t[1] == t[2] for t in times] == [True] * 3
    assert times[0][1] < times[1][1] < times[2][1]

    # the disk full at the next commit: all three reads refused, none of them taken
    pages = store.db.execute("PRAGMA page_count").fetchone()[0]
    store.db.execute(f"PRAGMA max_page_count = {pages}")
    before = [(dict(v.counts), v.state["last_seq"]) for v in vs]
    refused = _together(group, vs, [parts[1] for _, parts, _ in shoes])
    assert all(isinstance(r, SabotError) for r in refused), refused
    assert all("nothing of this read was stored or acknowledged" in str(r) for r in refused)
    assert [(v.counts, v.state["last_seq"]) for v in vs] == before
    assert (group.commits, group.reads) == (1, 3)

    # the shoes send them again: stored once, as a lone validator takes each shoe whole
    store.db.execute("PRAGMA max_page_count = 1073741823")
    again = _together(group, vs, [parts[1] for _, parts, _ in shoes])
    assert all(isinstance(r, list) and r for r in again), again
    assert (group.commits, group.reads) == (2, 6)
    for v, (entry, parts, rounds) in zip(vs, shoes):
        alone = Validator(entry, str(tmp_path / f"alone-{entry.shoe_id}.db"))
        alone.receive(parts[0])
        alone.receive(parts[1])
        assert v.counts == alone.counts and v.counts["rounds"] == rounds
        assert v.counts["rejected"] == 0 and not v.alarms
        alone.store.close()
    store.close()
    r = verify(str(tmp_path / "audit.db"), {e.shoe_id: e for e, _, _ in shoes})
    assert r["ok"], r
    assert r["rounds"] == sum(n for _, _, n in shoes)


def test_a_read_with_no_whole_frame_waits_for_no_commit(tmp_path):
    (entry, parts, _), = _shoes(tmp_path, 1)
    store = open_store(str(tmp_path / "audit.db"), threads=True)
    group = GroupCommit(store)
    v = LockedValidator(group, entry, store)
    assert v.receive(parts[0][:5]) == []  # a torn frame: nothing to store yet
    assert group.commits == 0
    assert v.receive(parts[0][5:])
    assert (group.commits, group.reads) == (1, 1)
    store.close()


def test_a_row_the_database_refuses_refuses_only_its_own_shoes_read(tmp_path):
    """Every row of one shoe refused (what row security does once `sabot pit-role` moves that
    shoe to another pit while this serve runs; here a trigger): the other shoes' reads that
    shared its commit are stored on their own, that shoe's read alone is refused."""
    shoes = _shoes(tmp_path)
    store = open_store(str(tmp_path / "audit.db"), threads=True)
    group = GroupCommit(store, wait=5.0)
    vs = [LockedValidator(group, entry, store) for entry, _, _ in shoes]
    moved = shoes[0][0].shoe_id
    store.db.execute(f"CREATE TEMP TRIGGER moved BEFORE INSERT ON frames WHEN NEW.shoe_id ="
                     f" {moved} BEGIN SELECT RAISE(ABORT, 'new row violates row-level security"
                     " policy'); END")
    results = _together(group, vs, [parts[0] for _, parts, _ in shoes])
    assert isinstance(results[0], SabotError) and "row-level security" in str(results[0])
    assert all(isinstance(r, list) and r for r in results[1:]), results
    assert vs[0].state["last_seq"] == 0 and vs[1].state["last_seq"] > 0
    assert (group.commits, group.reads) == (2, 2)  # each of the two on its own
    store.close()


def _moved(store, shoe_id):
    """Every row of this shoe refused from now on (a trigger standing for the row security
    that `pit-role` gives a shoe moved to another pit)."""
    store.db.execute(f"CREATE TEMP TRIGGER moved BEFORE INSERT ON frames WHEN NEW.shoe_id ="
                     f" {shoe_id} BEGIN SELECT RAISE(ABORT, 'row-level security'); END")


def test_a_read_committed_again_alone_meets_its_validator_as_it_was(tmp_path):
    """A read undone with the batch another shoe's refused row sank, and committed again on its
    own, decides what it decided the first time: a shoe dealt in the same order as an earlier
    one keeps its repeated_sequence alarm (the watch and the shared sequence index went back
    too), and a shoe met mid-log anchors again instead of calling every frame a gap."""
    def gen(name, seed, shoe_id):
        (tmp_path / name).mkdir()
        return capture_gen.generate(str(tmp_path / name), 1, seed=seed, shoe_id=shoe_id)

    (ex, capx, _), (ey, capy, _) = gen("x", 40, 0x5AB0_7000), gen("y", 40, 0x5AB0_7001)
    (ea, capa, _), (eb, capb, _) = gen("a", 41, 0x5AB0_7002), gen("b", 42, 0x5AB0_7003)
    cut = capy.index(b"\x00", len(capy) - 400) + 1  # Y's last read holds its shoe's end
    late = _frames(capb)
    store = open_store(str(tmp_path / "audit.db"), threads=True)
    group = GroupCommit(store, wait=5.0)
    vx, vy, va, vb = (LockedValidator(group, e, store) for e in (ex, ey, ea, eb))
    vx.receive(capx)
    vy.receive(capy[:cut])
    _moved(store, ea.shoe_id)
    results = _together(group, [vy, va, vb], [capy[cut:], capa, b"".join(late[4:12])])
    assert isinstance(results[1], SabotError)
    assert [a["kind"] for a in vy.alarms] == ["repeated_sequence"]
    assert [v for _, v, _ in results[2]] == ["accepted"] * 8, results[2]
    stored = store.db.execute("SELECT shoe_id, kind FROM alarms WHERE kind != 'sequence_gap'"
                              ).fetchall()
    assert stored == [(ey.shoe_id, "repeated_sequence")]
    store.db.execute("DROP TRIGGER temp.moved")
    store.close()
    assert verify(str(tmp_path / "audit.db"), {e.shoe_id: e for e in (ex, ey, ea, eb)})["ok"]


def _frames(cap):
    return [f + b"\x00" for f in cap.split(b"\x00") if f]


@pytest.mark.board  # the server is a process
def test_on_postgresql_a_shoe_whose_rows_are_refused_holds_up_no_other_shoe(tmp_path):
    """The same on a floor's PostgreSQL store: a trigger raising for one shoe's rows (as row
    security does for a shoe `pit-role` moved away) refuses that shoe's read, and the reads it
    shared a commit with are stored on their own."""
    from kit.pg import shared_server

    shoes = _shoes(tmp_path)
    url = shared_server().database()
    store = open_store(url, threads=True)
    moved = shoes[0][0].shoe_id
    with psycopg_connection(url) as con:
        con.execute("CREATE FUNCTION refuse_moved() RETURNS trigger LANGUAGE plpgsql AS $$ "
                    "BEGIN RAISE EXCEPTION 'new row violates row-level security policy'; END $$")
        con.execute(f"CREATE TRIGGER moved BEFORE INSERT ON frames FOR EACH ROW WHEN "
                    f"(NEW.shoe_id = {moved}) EXECUTE FUNCTION refuse_moved()")
    group = GroupCommit(store, wait=5.0)
    vs = [LockedValidator(group, entry, store) for entry, _, _ in shoes]
    results = _together(group, vs, [parts[0] for _, parts, _ in shoes])
    assert isinstance(results[0], SabotError) and "row-level security" in str(results[0])
    assert all(isinstance(r, list) and r for r in results[1:]), results
    assert (group.commits, group.reads) == (2, 2)
    store.close()


@pytest.mark.board  # the server is a process
def test_a_name_with_a_nul_in_a_signed_maintenance_frame_is_stored_on_postgresql(tmp_path):
    """The name a command's sender signs into it comes back in the shoe's maintenance frame;
    one holding a NUL (no text PostgreSQL keeps) is stored shown as U+FFFD, with the reads of
    the shoes it shares a commit with, not refused with them at every resend."""
    import struct

    from cryptography.hazmat.primitives.asymmetric import ec

    from sabot import keys
    from sabot import protocol as pr
    from sabot.game.cards import shuffled_shoe
    from sabot.registry import ShoeEntry

    from kit.pg import shared_server

    def shoe(shoe_id):
        key = ec.generate_private_key(ec.SECP256R1())
        entry = ShoeEntry(shoe_id)
        entry.add_public_key(1, keys.public_pem(key.public_key()))
        return entry, capture_gen.ShoeSigner(key, shoe_id)

    def encoded(frames):
        return b"".join(pr.encode_frame(f) for f in frames)

    (ea, sa), (eb, sb), (ec_, sc) = shoe(0x5AB0_7201), shoe(0x5AB0_7202), shoe(0x5AB0_7203)
    rekey = sa.chained(pr.T_MAINTENANCE, bytes([4]) + struct.pack(">I", 7)
                       + b"pit\x00boss".ljust(16, b"\0") + struct.pack(">H64s", 2, bytes(64)))
    fb, _ = capture_gen.shoe_frames(sb, shuffled_shoe(8, 1), 1)
    fc, _ = capture_gen.shoe_frames(sc, shuffled_shoe(8, 2), 1)
    url = shared_server().database()
    store = open_store(url, threads=True)
    group = GroupCommit(store, wait=5.0)
    vs = [LockedValidator(group, e, store) for e in (ea, eb, ec_)]
    results = _together(group, vs, [encoded([rekey]), encoded(fb[:6]), encoded(fc[:6])])
    assert all(isinstance(r, list) and r for r in results), results
    assert (group.commits, group.reads) == (1, 3)
    assert [a["detail"] for a in vs[0].alarms if a["kind"] == "rekey"] == [
        "the shoe's element made result key version 2 (asked by pit\ufffdboss, command 7)"]
    store.close()


def psycopg_connection(url):
    import psycopg

    return psycopg.connect(url, autocommit=True)


def test_a_page_asking_for_the_store_gives_up_in_time_while_a_commit_stalls(tmp_path):
    """A batch open (another shoe's read on its way to the lock) whose commit then waits on the
    file's write lock, taken by another program: acquire(timeout=...), as the dashboard asks,
    returns False in its time, not when the commit is done."""
    import sqlite3

    (entry, parts, _), = _shoes(tmp_path, 1)
    db = str(tmp_path / "audit.db")
    store = open_store(db, threads=True)
    group = GroupCommit(store, wait=0.3)
    v = LockedValidator(group, entry, store)
    v.receive(parts[0][:2000])
    other = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")  # a backup, a sqlite3 shell: the write lock taken
    with group._queue:
        group.queued += 1  # another shoe's read on its way: the batch waits for it
    done, frames = [], v.counts["frames"]
    t = threading.Thread(target=lambda: done.append(v.receive(parts[0][2000:])))
    t.start()
    end = time.monotonic() + 10
    while v.counts["frames"] == frames and time.monotonic() < end:  # until the read is staged
        time.sleep(0.002)
    began = time.monotonic()
    # the batch waits for the read on its way, then its commit stalls: either way, no store
    assert group.acquire(timeout=0.6) is False
    assert time.monotonic() - began < 3
    with group._queue:
        group.queued -= 1
    other.execute("ROLLBACK")
    t.join(30)
    assert done and done[0]  # stored once the lock was let go
    assert group.acquire(timeout=1.0)
    group.release()
    store.close()


def test_reads_go_on_while_pages_keep_asking_for_the_store(tmp_path):
    """Other users taking the store again and again (pages, the recording watch) hold back no
    read for long, and never inside a batch: two shoes' captures, fed in small reads, are all
    stored while two threads take and let go of the store without pause."""
    shoes = _shoes(tmp_path, 2)
    store = open_store(str(tmp_path / "audit.db"), threads=True)
    group = GroupCommit(store, wait=0.005)
    vs = [LockedValidator(group, entry, store) for entry, _, _ in shoes]
    stop, inside = threading.Event(), []

    def page():
        while not stop.is_set():
            if group.acquire(timeout=0.01):
                inside.append(group._batch is not None)
                time.sleep(0.0005)
                group.release()

    def feed(v, cap):
        for at in range(0, len(cap), 200):
            v.receive(cap[at:at + 200])

    pages = [threading.Thread(target=page) for _ in range(2)]
    for t in pages:
        t.start()
    began = time.monotonic()
    feeds = [threading.Thread(target=feed, args=(v, parts[0] + parts[1]))
             for v, (_, parts, _) in zip(vs, shoes)]
    for t in feeds:
        t.start()
    for t in feeds:
        t.join(60)
    stop.set()
    for t in pages:
        t.join(10)
    assert time.monotonic() - began < 30
    assert inside and not any(inside)  # the store was theirs only between batches
    for v, (_, _, rounds) in zip(vs, shoes):
        assert v.counts["rounds"] == rounds and v.counts["rejected"] == 0
    store.close()
    assert verify(str(tmp_path / "audit.db"), {e.shoe_id: e for e, _, _ in shoes})["ok"]


@pytest.mark.board
def test_a_table_whose_reads_the_store_refuses_is_not_recording_while_the_others_record(
        tmp_path):
    """An insider with the audit file adds a trigger refusing one shoe's rows: the other table
    goes on recording, and the refused one is `not recording` (the API, /api/health's 503), not
    a healthy or `silent` table; once the trigger goes, it records again and loses nothing."""
    import sqlite3
    import urllib.error
    import urllib.request

    # (a bound past the hello's 2 s: the other shoe's statuses keep the store itself confirmed)
    rig = ServeRig(tmp_path, shoes=2, seed=5, cut_from_end=300, extra=["--store-alarm", "3"])
    try:
        moved = rig.shoe_ids[0]
        con = sqlite3.connect(str(rig.db))
        con.execute(f"CREATE TRIGGER moved BEFORE INSERT ON frames WHEN NEW.shoe_id = {moved}"
                    " BEGIN SELECT RAISE(ABORT, 'refused by the insider'); END")
        con.commit()
        rig.deal()
        end = time.monotonic() + 60
        while True:
            states = {t["table"]: t["state"] for t in rig.get("/api/tables")}
            if states[rig.tables[0]] == "not recording" or time.monotonic() > end:
                break
            time.sleep(0.2)
        assert states[rig.tables[0]] == "not recording", states
        try:
            urllib.request.urlopen(rig.url + "/api/health", timeout=10)
            raise AssertionError("/api/health answered 200 while a table records nothing")
        except urllib.error.HTTPError as e:
            health = json.loads(e.read())
            assert e.code == 503 and not health["recording"]
        assert health["not_recording"] is None  # the store confirms the other table's commits
        assert "refused by the insider" in health["attention"][rig.tables[0]]["detail"]
        rig.wait_dealt()
        con.execute("DROP TRIGGER moved")
        con.commit()
        con.close()
        rig.assert_every_round_stored()
    finally:
        rig.stop()


@pytest.mark.board
@pytest.mark.long
def test_reads_after_a_refused_commit_wait_for_the_resends_and_no_gap_is_rejected(tmp_path):
    """Another program holds the file's write lock past the store's busy timeout while two
    shoes deal: the reads then are refused, the frames after them wait for the shoes' resends
    (as after a reconnection) instead of being stored as gaps, and every round is stored
    once."""
    import sqlite3

    rig = ServeRig(tmp_path, shoes=2, seed=9)
    try:
        rig.deal()
        time.sleep(1.5)
        con = sqlite3.connect(str(rig.db), isolation_level=None)
        con.execute("BEGIN IMMEDIATE")
        time.sleep(11)  # past the store's 10 s busy timeout: its commits are refused
        con.execute("ROLLBACK")
        con.close()
        rig.assert_every_round_stored()
    finally:
        rig.stop()
    db = sqlite3.connect(str(rig.db))
    verdicts = dict(db.execute("SELECT verdict, COUNT(*) FROM frames GROUP BY 1").fetchall())
    gaps = db.execute("SELECT COUNT(*) FROM frames WHERE reason = 'sequence_gap'").fetchone()[0]
    db.close()
    assert gaps == 0 and verdicts.get("deferred") and not verdicts.get("rejected"), verdicts


# serve, killed right after a commit that stored reads of several shoes, before any of their
# acknowledgements went: the power cut in the one window where frames are stored but the shoes
# still hold them (its disk slowed, so that reads of several shoes meet in a commit for sure)
CRASH_AFTER_COMMIT = """
import os, signal, sys, time
from sabot.audit import group_commit
commit = group_commit.GroupCommit._commit
def crash(self, batch, alone=False):
    time.sleep(0.05)  # a slow disk: the shoes' reads queue behind each commit
    commit(self, batch, alone)
    if batch.error is None and len(batch.reads) >= 2 and self.commits >= 10:
        os.kill(os.getpid(), signal.SIGKILL)
group_commit.GroupCommit._commit = crash
from sabot.cli import main
sys.argv[0] = "sabot"
sys.exit(main())
"""


@pytest.mark.board
@pytest.mark.long
def test_serve_killed_between_a_group_commit_and_its_acks_loses_nothing_and_stores_nothing_twice(
        tmp_path):
    rig = ServeRig(tmp_path, shoes=3, seed=61, cut_from_end=300,  # shoes of about 25 rounds
                   command=[sys.executable, "-c", CRASH_AFTER_COMMIT])
    try:
        rig.deal()
        try:
            code = rig.proc.wait(60)
        except subprocess.TimeoutExpired:
            pytest.fail("serve was not killed: no commit stored several shoes' reads")
        assert code == -9, rig.log_text()  # killed after a group commit
        db = open_store(str(rig.db), writer=False)
        stored = list(db.records(("result",)))
        db.close()
        assert stored, "nothing was stored before the crash"
        rig.start()  # serve again: the shoes resend all they still hold
        rig.assert_every_round_stored()
        stats = rig.get("/api/stats")
        assert stats["reads_committed"] >= stats["commits"] > 0
    finally:
        rig.stop()
    h = subprocess.run([*SABOT, "history", "--db", rig.db, "--json"], capture_output=True,
                       text=True, timeout=60)
    rounds = [json.loads(x) for x in h.stdout.splitlines() if '"winner"' in x]
    assert len(rounds) == sum(len(rig.expected(i)) for i in range(3))  # none twice
    # what the first serve stored and never acknowledged came again, and was taken as resent
    db = open_store(str(rig.db), writer=False)
    resent = db.db.execute("SELECT COUNT(*) FROM frames WHERE verdict='resent'").fetchone()[0]
    db.close()
    assert resent > 0
    a = subprocess.run([*SABOT, "audit", "verify", "--db", rig.db, "--registry", rig.registry],
                       capture_output=True, text=True, timeout=120)
    assert a.returncode == 0, a.stdout + a.stderr
    assert os.path.exists(rig.db)

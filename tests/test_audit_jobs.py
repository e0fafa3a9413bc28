"""`sabot audit verify --jobs N`: the frames' signatures checked by processes a window of rows
ahead of the walk (audit/signatures_ahead.py) give the verdict the walk alone gives — for a
store that holds, and for one where an insider put in a frame the shoe did not sign and chained
it anew — and the command says the same with any N."""

import os
import shutil
import signal
import sqlite3

import pytest
from test_audit_verify import drop_triggers, rechain, restore_triggers

from sabot import protocol as pr
from sabot.audit import replay as replay_module
from sabot.audit import signatures_ahead
from sabot.audit.validator import Validator
from sabot.audit.verify import verify
from sabot.registry import Registry
from sabot.virtual import capture_gen


@pytest.fixture(autouse=True)
def window(monkeypatch):
    """A window of 256 rows: a store of three shoes reaches past it, so the processes take
    part (the command's is 2,048 rows)."""
    monkeypatch.setattr(signatures_ahead, "AHEAD", 256)


@pytest.fixture(scope="module")
def day(tmp_path_factory):
    """A store of three shoes (860 rows)."""
    d = tmp_path_factory.mktemp("day")
    entry, cap, _ = capture_gen.generate(str(d), 3, seed=4)
    v = Validator(entry, str(d / "day.db"))
    v.receive(cap)
    v.store.close()
    Registry(str(d / "shoes.json")).put(entry)
    return d, entry


@pytest.mark.board  # processes
def test_the_processes_check_ahead_and_the_verdict_is_the_walks(day, monkeypatch):
    d, entry = day
    pools = []

    class Counted(signatures_ahead.ProcessPoolExecutor):
        def __init__(self, *args, **kw):
            pools.append(self)
            super().__init__(*args, **kw)

    monkeypatch.setattr(signatures_ahead, "ProcessPoolExecutor", Counted)
    alone = verify(str(d / "day.db"), {entry.shoe_id: entry}, jobs=1)
    assert alone["ok"] and alone["rows"] > signatures_ahead.AHEAD and not pools
    pooled = verify(str(d / "day.db"), {entry.shoe_id: entry}, jobs=2)
    assert pooled == alone and len(pools) == 1


@pytest.mark.board  # processes
def test_a_frame_the_shoe_did_not_sign_is_found_by_either(day, tmp_path):
    """An insider turns a result's card in the middle of the day and chains the store anew: the
    frame's signature no longer holds, and both walks name that frame."""
    d, entry = day
    db = tmp_path / "edited.db"
    shutil.copy(d / "day.db", db)
    con = sqlite3.connect(db)
    fid, raw = con.execute("SELECT id, raw FROM frames WHERE type='result' ORDER BY id "
                           "LIMIT 1 OFFSET 200").fetchone()
    turned = bytearray(raw)
    turned[pr.HEADER.size + 6] ^= 1  # the Player's first card
    drop_triggers(con, str(db))  # (what an insider with the database's password can do)
    con.execute("UPDATE frames SET raw=? WHERE id=?", (bytes(turned), fid))
    con.commit()
    con.close()
    rechain(str(db))
    got = [verify(str(db), {entry.shoe_id: entry}, jobs=n) for n in (1, 2)]
    assert got[0] == got[1] and not got[0]["ok"]
    assert f"frame id {fid}" in got[0]["problem"] and "valid signature" in got[0]["problem"]


@pytest.mark.board  # processes: the command as a user runs it
def test_audit_verify_says_the_same_with_any_number_of_jobs(cli, day):
    d, _ = day
    said = [cli("audit", "verify", "--db", d / "day.db", "--registry", d / "shoes.json",
                "--jobs", n) for n in ("1", "2")]
    assert [r.returncode for r in said] == [0, 0] and said[0].stdout == said[1].stdout
    assert said[0].stdout.startswith("ok: ")


@pytest.mark.board  # processes
def test_several_captures_replay_side_by_side_with_one_verdict(cli, tmp_path):
    """`sabot replay A B --jobs 2`: each capture replayed as it would be alone, in processes of
    their own; the counts summed, each rejection naming its capture, and a frame turned in one
    of them fails the whole command."""
    import json

    reg = Registry(str(tmp_path / "shoes.json"))
    paths = []
    for i, sid in enumerate((0x5AB0_0021, 0x5AB0_0022)):
        (tmp_path / f"w{i}").mkdir()
        entry, cap, _ = capture_gen.generate(str(tmp_path / f"w{i}"), 1, seed=i, shoe_id=sid)
        reg.put(entry)
        paths.append(tmp_path / f"cap{i}.bin")
        paths[-1].write_bytes(cap)
    alone = [json.loads(cli("replay", p, "--registry", reg.path, "--json").stdout)
             for p in paths]
    r = cli("replay", *paths, "--registry", reg.path, "--json", "--jobs", "2")
    assert r.returncode == 0, r.stderr
    both = json.loads(r.stdout)
    assert [{k: v for k, v in c.items() if k != "capture"} for c in both["captures"]] == alone
    assert both["verified"] == sum(a["verified"] for a in alone) > 200
    assert both["rounds"] == sum(a["rounds"] for a in alone)
    cap = bytearray(paths[1].read_bytes())
    cap[len(cap) // 2] ^= 0x40  # a byte of a frame in the middle of the second capture
    paths[1].write_bytes(bytes(cap))
    r = cli("replay", *paths, "--registry", reg.path, "--json", "--jobs", "2")
    assert r.returncode != 0
    said = json.loads(r.stdout)
    assert said["rejections"] and {x["capture"] for x in said["rejections"]} == {str(paths[1])}


def _dying(batch):
    """A check that kills its process (a pool's process lost)."""
    os.kill(os.getpid(), signal.SIGKILL)


@pytest.mark.board  # processes
def test_a_checking_process_lost_leaves_the_walk_to_check_alone(day, monkeypatch):
    """A process of the pool killed mid-way (out of memory, say): the walk checks what it did
    not answer, and the verdict is the same."""
    d, entry = day
    alone = verify(str(d / "day.db"), {entry.shoe_id: entry}, jobs=1)
    died = []
    real = signatures_ahead.SignaturesAhead.authentic

    def authentic(self, rid, f):
        got = real(self, rid, f)
        if got is None and self.lost:
            died.append(rid)
        return got

    monkeypatch.setattr(signatures_ahead, "_checks", _dying)
    monkeypatch.setattr(signatures_ahead.SignaturesAhead, "authentic", authentic)
    assert verify(str(d / "day.db"), {entry.shoe_id: entry}, jobs=2) == alone
    assert died  # the pool broke, and the walk went on alone


_PARENT = os.getpid()
_REPLAY = replay_module.replay


def _replay_dying(capture, config):
    """A replay that kills its process when it is a pool's (a process lost)."""
    if os.getpid() != _PARENT:
        os.kill(os.getpid(), signal.SIGKILL)
    return _REPLAY(capture, config)


@pytest.mark.board  # processes
def test_a_replay_whose_process_is_lost_is_replayed_in_this_one(tmp_path, monkeypatch):
    entry, cap, _ = capture_gen.generate(str(tmp_path), 1, seed=8)
    want = [_REPLAY(cap, entry)] * 2
    monkeypatch.setattr(replay_module, "replay", _replay_dying)
    assert replay_module.replay_all([cap, cap], [entry, entry], 2) == want


def _edited(day, tmp_path, *sql):
    d, _ = day
    db = tmp_path / "edited.db"
    shutil.copy(d / "day.db", db)
    con = sqlite3.connect(db)
    drop_triggers(con, str(db))
    for q in sql:
        con.execute(q)
    restore_triggers(con, str(db))  # (the insider puts them back, word for word)
    con.commit()
    con.close()
    return db


@pytest.mark.board  # processes
def test_a_row_the_store_cannot_give_is_said_where_the_walk_meets_it(day, tmp_path):
    """A row edited early, and a later row within the window whose hash is no hash at all (or
    a frame's bytes far longer than any frame's): the walk ahead of which the processes read
    names the first edit, as the walk alone does, in one line, never a traceback."""
    _, entry = day
    db = _edited(day, tmp_path,
                 "UPDATE frames SET received_at = received_at + 1 WHERE id = 5",
                 "UPDATE frames SET row_hash = 'x' WHERE id = 60",
                 "UPDATE frames SET raw = zeroblob(300000) WHERE id BETWEEN 70 AND 90")
    got = [verify(str(db), {entry.shoe_id: entry}, jobs=n) for n in (1, 2)]
    assert got[0] == got[1] and "frames id 5 " in got[0]["problem"], got[0]["problem"]
    db = _edited(day, tmp_path, "UPDATE frames SET row_hash = 'x' WHERE id = 60")
    out = verify(str(db), {entry.shoe_id: entry}, jobs=1)
    assert "frames id 60 " in out["problem"] and "altered or inserted" in out["problem"]


@pytest.mark.board  # processes
def test_the_checking_processes_leave_ctrl_c_to_the_command():
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(1, initializer=signatures_ahead.quiet,
                             mp_context=multiprocessing.get_context("fork")) as pool:
        assert pool.submit(signal.getsignal, signal.SIGINT).result() == signal.SIG_IGN


def test_jobs_default_to_the_cores_this_process_may_run_on():
    from sabot.cli.options import cores

    assert cores() == min(64, len(os.sched_getaffinity(0))) and cores(1) == 1


def test_rows_read_ahead_are_all_given_before_a_row_that_cannot_be_read(monkeypatch):
    """The store failing at some row (a page that cannot be read): every row before it reaches
    the walk first, so the walk says what it finds in them, as it does alone."""
    monkeypatch.setattr(signatures_ahead, "AHEAD", 4)

    def rows():
        for i in range(1, 10):
            yield ("alarms", i, i, (None,) * 8, b"")
        raise sqlite3.DatabaseError("database disk image is malformed")

    ahead = signatures_ahead.SignaturesAhead(2, {})
    seen = []
    with pytest.raises(sqlite3.DatabaseError):
        for row in ahead.rows(rows()):
            seen.append(row[1])
    ahead.close()
    assert seen == list(range(1, 10))

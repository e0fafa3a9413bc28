"""`sabot audit verify --jobs N`: the frames' signatures checked by processes a window of rows
ahead of the walk (audit/signatures_ahead.py) give the verdict the walk alone gives — for a
store that holds, and for one where an insider put in a frame the shoe did not sign and chained
it anew — and the command says the same with any N."""

import os
import shutil
import signal
import sqlite3

import pytest
from test_audit_verify import drop_triggers, rechain

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

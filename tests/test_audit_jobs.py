"""`sabot audit verify --jobs N`: the frames' signatures checked by processes a window of rows
ahead of the walk (audit/signatures_ahead.py) give the verdict the walk alone gives — for a
store that holds, and for one where an insider put in a frame the shoe did not sign and chained
it anew — and the command says the same with any N."""

import shutil
import sqlite3

import pytest
from test_audit_verify import drop_triggers, rechain

from sabot import protocol as pr
from sabot.audit import signatures_ahead
from sabot.audit.validator import Validator
from sabot.audit.verify import verify
from sabot.registry import Registry
from sabot.virtual import capture_gen


@pytest.fixture(scope="module")
def day(tmp_path_factory):
    """A day's store of 12 shoes (3,400 rows: past the window, so the processes take part)."""
    d = tmp_path_factory.mktemp("day")
    entry, cap, _ = capture_gen.generate(str(d), 12, seed=4)
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
                           "LIMIT 1 OFFSET 300").fetchone()
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

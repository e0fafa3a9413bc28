"""What the pit's pages follow and the shift report reads through the audit store, on SQLite
and on a real PostgreSQL server alike (kit/pg.py): the newest authentic frame of each shoe and
when it was stored, the records and alarms of a span of time, and the operator log's entries
with their times."""

import dataclasses
import time

import pytest

from sabot.audit.store import open_store
from sabot.audit.validator import Validator
from sabot.virtual import capture_gen

from kit.pg import shared_server


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgresql",
                                                                 marks=pytest.mark.board)])
def written(request, tmp_path_factory):
    """(store, registry entry, rounds, time before, time after) of one whole shoe validated with
    an entry the shoe contradicts (EZ: alarms stored too), and two operator entries."""
    d = tmp_path_factory.mktemp("follow")
    entry, cap, rounds = capture_gen.generate(str(d), 1, seed=7)
    db = str(d / "audit.db") if request.param == "sqlite" else shared_server().database()
    before = time.time()
    v = Validator(dataclasses.replace(entry, ez=True), db)
    v.receive(cap)
    seq = v.state["last_seq"]
    for n, dealer in enumerate(("dan", "erin")):
        v.store.log_operation({"operation": "sign_on", "shoe_id": entry.shoe_id,
                               "dealer": dealer, "by": dealer}, entry.shoe_id, seq - n)
    v.store.close()
    after = time.time()
    store = open_store(db, writer=False)
    yield store, entry, rounds, before, after
    store.close()


def test_frames_since_gives_each_shoes_newest_authentic_frame_and_when(written):
    store, entry, _, before, after = written
    top, newest = store.frames_since(0)
    at, seq = newest[entry.shoe_id]
    assert before <= at <= after and seq == store.link(0, entry.shoe_id)["last_seq"]
    assert top > 0 and store.frames_since(top) == (top, {})


def test_records_and_alarms_of_a_span_of_time(written):
    store, entry, rounds, before, after = written
    every = store.records_between(before, after + 1)
    assert sum(r.kind == "result" for r in every) == rounds
    assert all(r.record["shoe_id"] == entry.shoe_id and r.record["seq"] > 0 for r in every)
    assert store.records_between(after + 1, after + 2) == []
    alarms = store.alarms_between(before, after + 1)
    assert alarms and [a["id"] for a in alarms] == [a["id"] for a in store.alarms_since(0)]
    assert store.alarms_between(0, before) == []


def test_operations_since_gives_the_entries_with_their_rows_and_times(written):
    store, entry, _, before, after = written
    ops = store.operations_since(0)
    assert [o["dealer"] for o in ops] == ["dan", "erin"]
    assert all(before <= o["logged_at"] <= after and o["shoe_id"] == entry.shoe_id
               for o in ops)
    assert ops[0]["seq"] == ops[1]["seq"] + 1
    assert store.operations_since(ops[0]["id"]) == ops[1:]
    assert store.operations_since(0, until=before) == []

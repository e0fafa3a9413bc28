"""The audit store's queries: what the pit pages, soak and `audit verify` read through it, on a
store a real Validator wrote from signed frames (no board). Every test runs on both back-ends of
the store's contract, as open_store() opens them: a SQLite file, and a database on a real
PostgreSQL server (kit/pg.py, the run's one server)."""

import dataclasses
import sqlite3
import struct
import threading

import pytest

from sabot import protocol as pr
from sabot.audit.store import COLUMNS, StoreUnreadable, is_server_url, open_store
from sabot.audit.store_sqlite import TRIGGERS
from sabot.audit.validator import Validator
from sabot.audit.verify import verify
from sabot.errors import SabotError
from sabot.game.cards import card_index
from sabot.virtual import capture_gen

from kit import signing_shoe

# a column renamed under the store, in each database's words
NO_COLUMN = {"sqlite": "no such column", "postgresql": 'column "record" does not exist'}


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgresql",
                                                                marks=pytest.mark.board)])
def backend(request):
    """None for SQLite files; for PostgreSQL, the run's one server (tests/conftest.py stops
    it)."""
    if request.param == "sqlite":
        return None
    from kit.pg import shared_server

    return shared_server()


def new_db(backend, d):
    """A fresh store's `--db`: d/audit.db, or a fresh database on the server."""
    return str(d / "audit.db") if backend is None else backend.database()


def copy_of(db, d):
    """A copy of the store at `db`, as it stands: a SQLite backup, or a database made from it
    (CREATE DATABASE ... TEMPLATE)."""
    if not is_server_url(db):
        copy = str(d / "copy.db")
        src, dst = sqlite3.connect(db), sqlite3.connect(copy)
        src.backup(dst)
        src.close()
        dst.close()
        return copy
    import secrets

    import psycopg

    base, _, name = db.rpartition("/")
    copy = f"{name}_copy_{secrets.token_hex(6)}"
    with psycopg.connect(f"{base}/postgres", autocommit=True) as con:
        con.execute(f"CREATE DATABASE {copy} TEMPLATE {name}".encode())
    return f"{base}/{copy}"


def execute(db, sql):
    """One statement run on the store's database, outside the store."""
    if not is_server_url(db):
        con = sqlite3.connect(db)
        con.execute(sql)
        con.commit()
        con.close()
        return
    import psycopg

    with psycopg.connect(db, autocommit=True) as con:
        con.execute(sql.encode())


@pytest.fixture(scope="module")
def written(backend, tmp_path_factory):
    """(store's --db, registry entry, the validator's last state, rounds) of one whole shoe
    validated with a registry entry the shoe contradicts (EZ), so alarms are stored too."""
    d = tmp_path_factory.mktemp("store")
    entry, cap, rounds = capture_gen.generate(str(d), 1, seed=5)
    path = new_db(backend, d)
    v = Validator(dataclasses.replace(entry, ez=True), path)
    v.receive(cap)
    state = v.state
    v.store.close()
    return path, entry, state, rounds


@pytest.fixture
def store(written):
    s = open_store(written[0], writer=False)
    yield s
    s.close()


def test_records_since_follows_the_records_in_storage_order_with_receive_times(store, written):
    new = store.records_since(0)
    assert [(r.kind, r.record) for r in new] == store.records()  # one shoe: seq order
    assert [r.id for r in new] == sorted(r.id for r in new) and len(new) == written[3] * 2 + 3
    assert all(r.shoe_id == written[1].shoe_id and r.received_at > 0 for r in new)
    assert store.records_since(new[-1].id) == [] and store.records_since(new[0].id) == new[1:]


def test_result_records_are_the_stored_rounds_with_their_frames(store, written):
    results = store.result_records()
    assert len(results) == written[3]
    assert [fid for fid, _ in results] == sorted({fid for fid, _ in results})
    assert [dict(rec, shoe_id=written[1].shoe_id) for _, rec in results] == [
        r for _, r in store.records(("result",))]


def test_alarms_since_and_the_alarmed_frames_agree_with_alarms(store):
    every = store.alarms()
    assert any(a["kind"] == "config_mismatch" for a in every)
    since = store.alarms_since(0)
    assert [{k: v for k, v in a.items() if k not in ("id", "raised_at", "seq")}
            for a in since] == every
    assert all(isinstance(a["raised_at"], float) and a["seq"] is not None for a in since)
    assert store.alarms_since(since[0]["id"]) == since[1:]
    assert store.alarmed_frame_ids() == {a["frame_id"] for a in every}


def test_latest_inventory_is_the_accounts_the_validator_stored_last(store, written):
    _, entry, state, _ = written
    assert store.latest_inventory(entry.shoe_id) == state["inventory"]
    assert store.latest_inventory(entry.shoe_id)["ended"]
    assert store.latest_inventory(entry.shoe_id + 1) is None


def test_a_restarted_validator_reads_back_the_state_it_stored(written, tmp_path):
    path, entry, state, _ = written
    copy = copy_of(path, tmp_path)
    v = Validator(dataclasses.replace(entry, ez=True), copy)
    assert v.state == state and v.state is v.accounts.state
    v.store.close()


def test_chain_counts_tables_and_triggers(store):
    counts = store.chain_counts()
    assert set(counts) == set(COLUMNS) and all(n == seen for n, seen in counts.values())
    assert sum(n for n, _ in counts.values()) == store.head_no
    assert set(COLUMNS) <= store.tables()
    assert set(store.triggers()) == set(store.expected_triggers())
    if not is_server_url(store.path):
        assert set(store.triggers()) == set(TRIGGERS)


def test_a_status_saying_frames_were_acknowledged_elsewhere_is_a_named_hole(backend, tmp_path):
    s, entry = signing_shoe()
    path = new_db(backend, tmp_path)
    v = Validator(entry, path)
    first = s.chained(pr.T_SHOE_START, struct.pack(">HBB", 1, 8, 2))
    v.receive(pr.encode_frame(first))
    s.chained(pr.T_BURN, b"")  # two frames acknowledged to another host: never seen here
    s.chained(pr.T_BURN, b"")
    status = s.status(capture_gen.status_payload(acked=3))
    v.receive(pr.encode_frame(status))
    burn = s.chained(pr.T_BURN, struct.pack(">HH", 1, 0)
                     + bytes(card_index(c) for c in ("2S", "4H", "5D")))
    v.receive(pr.encode_frame(burn))
    assert [a["kind"] for a in v.alarms] == ["sequence_gap"]
    assert [a["frame_id"] for a in v.store.alarms()] == [2]  # on the status
    v.store.close()
    r = verify(path, {entry.shoe_id: entry})
    assert r["ok"] and r["holes"] == [{"shoe_id": entry.shoe_id, "first": 2, "last": 3}]


def test_a_read_the_database_refuses_is_store_unreadable_and_verify_says_so(backend, written,
                                                                           tmp_path):
    copy = copy_of(written[0], tmp_path)
    # no UPDATE: no trigger fires
    execute(copy, "ALTER TABLE records RENAME COLUMN record TO body")
    words = NO_COLUMN["sqlite" if backend is None else "postgresql"]
    store = open_store(copy, writer=False)
    with pytest.raises(StoreUnreadable) as e:
        store.records()
    assert isinstance(e.value, SabotError) and words in e.value.reason
    store.close()
    r = verify(copy, {written[1].shoe_id: written[1]})
    assert not r["ok"] and r["problem"].startswith(f"the store cannot be read ({words}")


def test_a_threaded_writer_takes_reads_from_another_thread(backend, tmp_path):
    s, entry = signing_shoe()
    store = open_store(new_db(backend, tmp_path), threads=True)
    v = Validator(entry, store)
    out = []
    t = threading.Thread(target=lambda: out.extend(v.receive(pr.encode_frame(
        s.chained(pr.T_SHOE_START, struct.pack(">HBB", 1, 8, 2))))))
    t.start()
    t.join()
    assert [verdict for _, verdict, _ in out] == ["accepted"]
    assert store.records() == [("shoe_start", {"event": "shoe_start", "shoe": 1, "decks": 8,
                                               "variant": pr.decode_variant(2),
                                               "shoe_id": entry.shoe_id})]
    store.close()

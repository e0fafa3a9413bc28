"""The audit store in PostgreSQL (`--db postgresql://...`, audit/store_pg.py) on a real server
(kit/pg.py: initdb and pg_ctl in a temporary directory): the same capture validated into it and
into SQLite reads back the same; its triggers refuse edits even on a replica's session; `audit
verify` finds each edit an insider with the database's superuser makes; a second writer, another
program's database and a server that does not answer are refused in one line, the password never
printed."""

import json
import subprocess
import threading

import psycopg
import pytest

from sabot.audit.store import open_store
from sabot.audit.validator import Validator
from sabot.errors import SabotError
from sabot.registry import Registry
from sabot.virtual import capture_gen

from kit import SABOT
from kit.pg import shared_server

pytestmark = pytest.mark.board  # the server is a process


@pytest.fixture(scope="module")
def server():
    return shared_server()  # the run's one server (tests/conftest.py stops it)


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    d = tmp_path_factory.mktemp("pgcap")
    entry, cap, rounds = capture_gen.generate(str(d), 1, seed=5)
    Registry(str(d / "shoes.json")).put(entry)
    return entry, cap, rounds, d / "shoes.json"


@pytest.fixture(scope="module")
def validated(server, capture):
    """The capture validated into a database of its own, once: each test edits a copy."""
    entry, cap, _, registry = capture
    url = server.database()
    validate(entry, cap, url)
    assert verify(url, registry)[0] == 0
    return url


def clone(url):
    """A copy of the database at `url` (CREATE DATABASE ... TEMPLATE): its URL."""
    import secrets

    base, _, name = url.rpartition("/")
    copy = f"{name}_copy_{secrets.token_hex(6)}"
    with psycopg.connect(f"{base}/postgres", autocommit=True) as con:
        con.execute(f"CREATE DATABASE {copy} TEMPLATE {name}".encode())
    return f"{base}/{copy}"


def validate(entry, cap, db):
    v = Validator(entry, db)
    v.receive(cap)
    v.finish()
    v.store.close()
    return v


def sabot(*args):
    return subprocess.run([*SABOT, *map(str, args)], capture_output=True, text=True, timeout=120)


def verify(db, registry):
    r = sabot("audit", "verify", "--db", db, "--registry", registry)
    return r.returncode, r.stdout + r.stderr


def test_a_capture_validated_into_postgresql_reads_back_as_in_sqlite(server, capture, tmp_path):
    entry, cap, rounds, registry = capture
    url, lite = server.database(), tmp_path / "audit.db"
    for db in (url, lite):
        v = validate(entry, cap, str(db))
        assert v.counts["rounds"] == rounds and v.counts["rejected"] == 0
    code, said = verify(url, registry)
    assert code == 0 and f"{rounds} rounds" in said, said
    histories = [sabot("history", "--db", db, "--json").stdout for db in (url, lite)]
    assert histories[0] == histories[1] and histories[0].count('"winner"') == rounds
    # the same rows in the same places of the chain (the hashes differ: each row holds the
    # time it was received)
    heads = []
    for db in (url, str(lite)):
        s = open_store(db, writer=False)
        heads.append((s.head_no, sorted(s.chain_counts().items())))
        s.close()
    assert heads[0] == heads[1] and heads[0][0] > 250


def test_its_triggers_refuse_edits_even_on_a_replica_session(validated):
    url = clone(validated)
    with psycopg.connect(url, autocommit=True) as con:
        for sql in ("UPDATE frames SET verdict = 'x' WHERE id = 2", "DELETE FROM records",
                    "TRUNCATE alarms", "TRUNCATE frames CASCADE"):
            with pytest.raises(psycopg.Error, match="append-only"):
                con.execute(sql.encode())
        # a logical or streaming replica applies rows as session_replication_role = replica:
        # the triggers are ENABLE ALWAYS, so they fire there too
        con.execute(b"SET session_replication_role = replica")
        with pytest.raises(psycopg.Error, match="append-only"):
            con.execute(b"DELETE FROM records")


EDITS = {
    # name: (the insider's SQL as the database's superuser, what audit verify says)
    "trigger disabled": ("ALTER TABLE records DISABLE TRIGGER records_append_only_u",
                         "trigger records_append_only_u was altered"),
    "trigger dropped, a signature flipped": (
        "DROP TRIGGER frames_append_only_u ON frames; UPDATE frames SET raw = "
        "overlay(raw placing decode(lpad(to_hex(get_byte(raw, length(raw) - 1) # 1), 2, '0'),"
        " 'hex') from length(raw)) WHERE id = (SELECT MIN(id) FROM frames WHERE type = "
        "'result')", "trigger frames_append_only_u is missing"),
    "the function emptied": (
        "CREATE OR REPLACE FUNCTION sabot_append_only() RETURNS trigger LANGUAGE plpgsql AS "
        "$x$ BEGIN RETURN NEW; END $x$", "function sabot_append_only was altered"),
    "a round rewritten, the trigger put back": (
        "DROP TRIGGER records_append_only_u ON records; UPDATE records SET record = "
        "replace(record, '\"winner\": \"banker\"', '\"winner\": \"player\"') WHERE id = "
        "(SELECT MIN(id) FROM records WHERE kind = 'result' AND record LIKE "
        "'%\"winner\": \"banker\"%'); CREATE TRIGGER records_append_only_u BEFORE UPDATE ON "
        "records FOR EACH ROW EXECUTE FUNCTION sabot_append_only(); ALTER TABLE records ENABLE "
        "ALWAYS TRIGGER records_append_only_u", "records"),
    "an alarm-free round deleted, the trigger put back": (
        "DROP TRIGGER records_append_only_d ON records; DELETE FROM records WHERE id = "
        "(SELECT MAX(id) FROM records WHERE kind = 'result'); CREATE TRIGGER "
        "records_append_only_d BEFORE DELETE ON records FOR EACH ROW EXECUTE FUNCTION "
        "sabot_append_only(); ALTER TABLE records ENABLE ALWAYS TRIGGER records_append_only_d",
        ""),
}


@pytest.mark.parametrize("edit", EDITS)
def test_audit_verify_on_postgresql_finds_an_insiders_edit(validated, capture, edit):
    from sabot.audit.verify import verify as audit_verify

    url = clone(validated)
    sql, said = EDITS[edit]
    with psycopg.connect(url, autocommit=True) as con:
        con.execute(sql.encode())
    out = audit_verify(url, Registry.load(str(capture[3])).shoes)
    assert not out["ok"] and said in out["problem"], out


def test_a_second_validator_of_a_shoe_another_programs_database_and_no_server_are_one_line(
        server, capture):
    entry = capture[0]
    url = server.database()
    first = Validator(entry, url)
    try:
        with pytest.raises(SabotError, match=r"shoe 0x\w+ is being validated into .* by "
                           r"sabot \(from 127\.0\.0\.1, server pid \d+, connected since "
                           r"[0-9:]+\): one validator per shoe"):
            Validator(entry, url)  # another writer, the same shoe: named as the server knows it
    finally:
        first.store.close()
    Validator(entry, url).store.close()  # its claim went with its connection
    first = Validator(entry, url)
    threading.Timer(0.5, first.store.close).start()  # a validator stopping meanwhile
    Validator(entry, url).store.close()  # asked again within the grace: claimed once it let go
    foreign = server.database()
    with psycopg.connect(foreign, autocommit=True) as con:
        con.execute(b"CREATE TABLE payroll (name TEXT)")
    with pytest.raises(SabotError, match="another program's"):
        Validator(entry, foreign)  # a writer, refused before it makes any table
    r = sabot("history", "--db", foreign)
    assert r.returncode == 2 and "another program's" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    with psycopg.connect(foreign, autocommit=True) as con:  # untouched
        assert [t for (t,) in con.execute(b"SELECT table_name FROM information_schema.tables"
                                          b" WHERE table_schema = 'public'")] == ["payroll"]
    gone = f"postgresql://sabot:s3cret@127.0.0.1:{server.port + 1}/audit1"
    r = sabot("history", "--db", gone)
    assert r.returncode == 2 and "cannot connect" in r.stderr and "s3cret" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    out = json.dumps(sabot("audit", "verify", "--db", gone, "--key", "x").stderr)
    assert "s3cret" not in out


@pytest.mark.long
def test_pits_writing_one_database_at_once_keep_one_chain_that_verifies(server, tmp_path):
    """Three writers (three pits' serve processes, each its own connection) validate a shoe each
    into one database at the same time, read by read: every round of every shoe is stored once
    and the one row chain they share verifies."""
    import threading

    url = server.database()
    reg = Registry(str(tmp_path / "shoes.json"))
    shoes = []
    for i in range(3):
        d = tmp_path / f"pit{i}"
        d.mkdir()
        entry, cap, rounds = capture_gen.generate(str(d), 1, seed=30 + i, shoe_id=0x5AB0_0100 + i)
        reg.put(entry)
        shoes.append((entry, cap, rounds))
    errors = []

    def pit(entry, cap):
        try:
            v = Validator(entry, url)  # a writer of its own
            for at in range(0, len(cap), 397):  # reads of a link, cut anywhere
                v.receive(cap[at:at + 397])
            v.finish()
            v.store.close()
            assert v.counts["rejected"] == 0
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=pit, args=(e, c)) for e, c, _ in shoes]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    code, said = verify(url, tmp_path / "shoes.json")
    assert code == 0 and f"{sum(r for _, _, r in shoes)} rounds" in said, said
    store = open_store(url, writer=False)
    try:
        for entry, _, rounds in shoes:
            assert len(store.records(["result"], shoe_id=entry.shoe_id)) == rounds
    finally:
        store.close()


def through_relay(server, capture, rest):
    """The capture validated into a fresh database through a CuttingProxy: its first half, then
    rest(relay, validator, the other half) makes the other reads with what it does to the link.
    Every round must then be stored once and the chain whole; the relay is returned."""
    from kit.pg import CuttingProxy

    entry, cap, rounds, registry = capture
    direct = server.database()
    relay = CuttingProxy(server.port)
    try:
        v = Validator(entry, relay.url(direct.rpartition("/")[2]))
        v.store.db.say = None
        half = len(cap) // 2
        v.receive(cap[:half])
        rest(relay, v, cap[half:])
        v.finish()
        v.store.close()
        assert v.counts["rejected"] == 0 and v.counts["rounds"] == rounds
    finally:
        relay.close()
    code, said = verify(direct, registry)
    assert code == 0 and f"{rounds} rounds" in said, said
    store = open_store(direct, writer=False)
    try:
        assert len(store.records(["result"])) == rounds  # none twice
    finally:
        store.close()
    return relay


@pytest.mark.parametrize("cut", ["before", "after"])
def test_a_commit_whose_answer_is_lost_is_stored_once(server, capture, cut):
    """The network lost under a batch's COMMIT (a real relay cuts it): before the server had it,
    the batch is written again on the next connection; after (the server committed, the answer
    never came), the store finds its last row there and takes it as stored. Either way the
    validator goes on, nothing is stored twice, and audit verify finds the chain whole."""
    def rest(relay, v, data):
        relay.armed = cut
        v.receive(data[:500])  # its commit is cut, and waited out
        assert relay.cuts == 1
        v.receive(data[500:])
    through_relay(server, capture, rest)


def test_a_server_lost_again_as_the_session_is_made_again_is_waited_out(server, capture):
    """The COMMIT's answer lost, then the new connection cut as its session is made again (its
    first setting): that connection is tried again whole, the batch found stored, and the
    validator goes on (it was refused as though the server had not come back, its batch stored
    and unacknowledged: the shoe's resend of it then failed on the records' unique key)."""
    def rest(relay, v, data):
        relay.armed, relay.then = "after", [(b"set_config", "before")]
        v.receive(data)
        assert relay.cuts == 2
    through_relay(server, capture, rest)


def until(read, done, seconds):
    """read() again until done(its value) (an unanswered read counts as not done yet)."""
    import time

    end, got = time.monotonic() + seconds, None
    while time.monotonic() < end:
        try:
            got = read()
            if done(got):
                return got
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"not within {seconds} s: {got}")


@pytest.mark.long
def test_two_pits_on_one_database_make_one_floor(server, tmp_path):
    """Two pits' `sabot serve` (one shoe each) write one database; `sabot serve --floor` and
    either pit host serve /floor and /api/floor: every pit and table, its state, filtered by
    pit; each pit's own dashboard keeps to its tables; a pit that stops is shown as no longer
    validated, under the pit it was."""
    import urllib.error
    import urllib.request

    from kit.procs import free_port_for_tests
    from kit.serve_rig import ServeRig

    url = server.database()
    pits = {}
    floor = None
    try:
        for n in (1, 2):
            d = tmp_path / f"pit{n}"
            d.mkdir()
            pits[n] = ServeRig(d, shoes=1, seed=60 + n, db=url, pit=f"pit-{n}",
                               first_shoe=0x5AB0_0001 + 0x100 * n, prefix=f"P{n}",
                               cut_from_end=300)  # a short shoe: about 22 rounds
        everyone = Registry(str(tmp_path / "floor.json"))
        for rig in pits.values():
            for entry in Registry.load(str(rig.registry)).shoes.values():
                everyone.put(entry)
        for rig in pits.values():
            rig.deal()
        for rig in pits.values():
            rig.wait_dealt()
            rig.wait_stored()
        port = free_port_for_tests()
        log = open(tmp_path / "floor.log", "w")
        floor = subprocess.Popen([*SABOT, "serve", "--floor", "--listen", f"127.0.0.1:{port}",
                                  "--db", url, "--registry", str(tmp_path / "floor.json")],
                                 stderr=log, cwd=tmp_path)

        def get(path, base=f"http://127.0.0.1:{port}"):
            with urllib.request.urlopen(base + path, timeout=10) as r:
                return r.read().decode()

        got = until(lambda: json.loads(get("/api/floor")),
                    lambda f: {p["pit"] for p in f["pits"]} == {"pit-1", "pit-2"}, 30)
        tables = {t["table"]: t for p in got["pits"] for t in p["tables"]}
        assert got["tables"] == 2 and set(tables) == {"P1-01", "P2-01"}
        assert tables["P1-01"]["pit"] == "pit-1" and tables["P2-01"]["pit"] == "pit-2"
        assert tables["P1-01"]["state"] == tables["P2-01"]["state"] == "ended"
        assert tables["P2-01"]["round"] == len(pits[2].expected(0))
        one = json.loads(get("/api/floor?pit=pit-2"))
        assert [p["pit"] for p in one["pits"]] == ["pit-2"] and one["tables"] == 1
        with pytest.raises(urllib.error.HTTPError) as missing:
            get("/api/floor?pit=nope")
        assert missing.value.code == 404
        page = get("/floor")
        assert "P1-01" in page and "P2-01" in page and "Alarms across the floor" in page
        # a pit host serves the floor too (another pit's tables named as its registry knows
        # them: pit 1's has its own shoe only), and its own dashboard only its own tables
        on_pit1 = json.loads(get("/api/floor", pits[1].url))
        assert {(p["pit"], t["shoe_id"]) for p in on_pit1["pits"] for t in p["tables"]} == {
            ("pit-1", 0x5AB0_0101), ("pit-2", 0x5AB0_0201)}
        assert [t["table"] for t in pits[1].get("/api/tables")] == ["P1-01"]
        # pit 2 stops: its table is no longer validated, and still shown as pit 2's
        assert pits.pop(2).stop() == 0
        tables = until(lambda: {t["table"]: t for p in json.loads(get("/api/floor"))["pits"]
                                for t in p["tables"]},
                       lambda ts: ts["P2-01"]["state"] == "no validator", 10)
        assert tables["P2-01"]["pit"] == "pit-2" and tables["P1-01"]["state"] == "ended"
    finally:
        if floor is not None:
            floor.send_signal(2)
            assert floor.wait(20) == 0
        for rig in pits.values():
            rig.stop()


def test_a_server_away_longer_than_the_wait_refuses_reads_until_it_is_back(server, capture,
                                                                          monkeypatch):
    """The server away for longer than the store waits (RECONNECT_S): each read is refused in
    one line (a SabotError: the session goes on, nothing acknowledged), never a driver's
    exception; once it is back the same validator stores the rest, every round once."""
    from sabot.audit import store_pg_connection

    monkeypatch.setattr(store_pg_connection, "RECONNECT_S", 0.5)

    def rest(relay, v, data):
        relay.away()
        for _ in range(2):  # the link's next reads, refused: the shoe keeps them
            with pytest.raises(SabotError, match="nothing of this read was stored"):
                v.receive(data[:500])
        relay.away(False)
        v.receive(data)
    through_relay(server, capture, rest)


def test_a_claim_still_held_as_the_server_comes_back_is_waited_for(server, capture):
    """The writer's connection cut while another session holds its shoe's claim (on a real
    floor: its own old session, until the server sees that connection gone): the writer waits
    for the claim instead of refusing every read, and goes on once it is free."""
    import threading

    from sabot.audit.store_pg import shoe_key

    def rest(relay, v, data):
        relay.away()
        zombie = psycopg.connect(v.store.url.replace(f":{relay.port}/", f":{server.port}/"),
                                 autocommit=True)
        zombie.execute("SELECT pg_advisory_lock(%s)", (shoe_key(v.shoe_id),))
        relay.away(False)
        threading.Timer(1.5, zombie.close).start()
        v.receive(data)  # waits for the claim, then stores
    through_relay(server, capture, rest)

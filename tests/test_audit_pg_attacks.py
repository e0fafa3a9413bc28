"""Attacks on the PostgreSQL audit store an insider review found (the database's superuser,
every host file): each was not found by audit verify, or broke a writer, before its fix."""

import subprocess
import threading

import psycopg
import pytest
from test_audit_pg import capture, clone, server, validated  # noqa: F401  (fixtures)

from sabot.audit.store import open_store
from sabot.audit.validator import Validator
from sabot.audit.verify import verify as audit_verify
from sabot.errors import SabotError
from sabot.registry import Registry
from sabot.virtual import capture_gen

from kit import SABOT

pytestmark = pytest.mark.board

SPLIT_VIEW = """
ALTER TABLE records RENAME TO records_g;
CREATE TABLE records_f AS SELECT * FROM records_g;
UPDATE records_f SET record = replace(record, '"winner": "banker"', '"winner": "player"')
 WHERE id = (SELECT MIN(id) FROM records_g WHERE record LIKE '%"winner": "banker"%');
CREATE VIEW records AS SELECT * FROM records_g WHERE current_query() ~ 'chain_no'
 UNION ALL SELECT * FROM records_f WHERE current_query() !~ 'chain_no';
CREATE FUNCTION public.pg_get_triggerdef(oid) RETURNS text LANGUAGE sql STABLE AS
 $f$ SELECT replace(pg_catalog.pg_get_triggerdef($1), 'ON public.records_g ',
 'ON public.records ') $f$;
CREATE VIEW public.pg_trigger AS SELECT t.oid, CASE WHEN t.tgrelid = 'records_g'::regclass
 THEN 'records'::regclass::oid ELSE t.tgrelid END AS tgrelid, t.tgname, t.tgisinternal,
 t.tgenabled FROM pg_catalog.pg_trigger t;
ALTER DATABASE {db} SET search_path = public, pg_catalog;
"""

ATTACKS = {
    # the trigger function emptied; an overload of its name keeps the genuine body
    "overload": ("CREATE OR REPLACE FUNCTION sabot_append_only() RETURNS trigger LANGUAGE plpgsql"
                 " AS $x$ BEGIN RETURN OLD; END $x$; CREATE FUNCTION sabot_append_only(x int)"
                 " RETURNS void LANGUAGE plpgsql AS $b$ BEGIN RAISE EXCEPTION 'the audit log is"
                 " append-only'; END $b$", "function sabot_append_only was altered"),
    # triggers disabled; a view pg_trigger ahead of the catalog's says they are enabled
    "catalog shadowed": ("ALTER TABLE records DISABLE TRIGGER USER; ALTER DATABASE {db} SET"
                         " search_path = public, pg_catalog; CREATE VIEW public.pg_trigger AS"
                         " SELECT oid, tgrelid, tgname, tgisinternal, 'A'::\"char\" AS tgenabled"
                         " FROM pg_catalog.pg_trigger", "records_append_only_u was altered"),
    # history reads a round the shoe did not deal, audit verify the genuine one
    "split view": (SPLIT_VIEW, "records_append_only_u was altered"),
    "a rule on insert": ("CREATE RULE quiet AS ON INSERT TO alarms DO INSTEAD NOTHING",
                         "table alarms was altered"),
    "a table inheriting": ("CREATE TABLE alarms_x () INHERITS (alarms)", "table alarms"),
}


@pytest.mark.parametrize("attack", ATTACKS)
def test_attack_found(validated, capture, attack):  # noqa: F811
    url = clone(validated)
    sql, said = ATTACKS[attack]
    with psycopg.connect(url, autocommit=True) as con:
        con.execute(sql.format(db=url.rsplit("/", 1)[1]).encode())
    out = audit_verify(url, Registry.load(str(capture[3])).shoes)
    assert not out["ok"] and said in out["problem"], out
    r = subprocess.run([*SABOT, "audit", "verify", "--db", url, "--registry", capture[3]],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and said in r.stderr, r.stderr


@pytest.fixture(scope="module")
def two_shoes(tmp_path_factory):
    d = tmp_path_factory.mktemp("two")
    reg = Registry(str(d / "shoes.json"))
    shoes = []
    for i in range(2):
        (d / str(i)).mkdir()
        entry, cap, _ = capture_gen.generate(str(d / str(i)), 1, seed=40 + i,
                                             shoe_id=0x5AB0_0400 + i)
        reg.put(entry)
        shoes.append((entry, cap))
    return shoes, Registry.load(str(d / "shoes.json")).shoes


def test_writers_keep_one_chain_under_a_repeatable_read_default(server, two_shoes):  # noqa: F811
    """A database whose default isolation is REPEATABLE READ: each commit's snapshot predated
    the chain's lock, so two writers numbered the same rows (a duplicate key: a pit's validator
    stopped)."""
    shoes, reg = two_shoes
    url = server.database()
    with psycopg.connect(url, autocommit=True) as con:
        con.execute(f"ALTER DATABASE {url.rsplit('/', 1)[1]} SET default_transaction_isolation"
                    " = 'repeatable read'".encode())
    open_store(url).close()
    errors = []

    def pit(entry, cap):
        try:
            v = Validator(entry, url)
            for at in range(0, len(cap), 97):
                v.receive(cap[at:at + 97])
            v.finish()
            v.store.close()
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=pit, args=s) for s in shoes]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    assert audit_verify(url, reg)["ok"]


def test_audit_verify_of_a_store_being_written_sees_one_moment(server, two_shoes):  # noqa: F811
    """Each table read on its own took a live store's newest rows, in one table and not yet in
    the next, for deletions."""
    shoes, reg = two_shoes
    url = server.database()
    v = Validator(shoes[0][0], url)
    v.receive(shoes[0][1])
    v.finish()
    v.store.close()

    def writer():
        w = Validator(shoes[1][0], url)
        for at in range(0, len(shoes[1][1]), 41):
            w.receive(shoes[1][1][at:at + 41])
        w.store.close()

    t = threading.Thread(target=writer)
    t.start()
    problems = []
    while t.is_alive():
        problems.append(audit_verify(url, reg)["problem"])
    t.join()
    assert len(problems) >= 2 and problems == [None] * len(problems), problems


def test_a_database_set_to_commit_without_waiting_is_overruled(server):  # noqa: F811
    """ALTER DATABASE ... SET synchronous_commit = off (or local: the standby not waited for) by
    an insider: a durable writer commits with it on all the same, so an acknowledged frame is
    on disk and on the synchronous standby."""
    url = server.database()
    name = url.rpartition("/")[2]
    for setting in ("off", "local"):
        with psycopg.connect(server.url(), autocommit=True) as con:
            con.execute(f"ALTER DATABASE {name} SET synchronous_commit = {setting}".encode())
        store = open_store(url)
        try:
            assert store.db.execute("SHOW synchronous_commit").fetchone()[0] == "on"
        finally:
            store.close()


def test_a_pit_role_that_may_only_insert_validates_and_edits_nothing(server, capture):  # noqa: F811
    """IT makes the store (its first writer), then gives a pit's role SELECT and INSERT only: the
    pit's validator writes through it, and an UPDATE or DELETE is refused by the database's
    permissions before the trigger is reached."""
    import secrets

    entry, cap, rounds, registry = capture
    url = server.database()
    open_store(url).close()  # the tables, made by IT's role
    role = f"pit_{secrets.token_hex(4)}"
    with psycopg.connect(url, autocommit=True) as con:
        con.execute(f"CREATE ROLE {role} LOGIN".encode())
        con.execute(f"GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA public TO {role}".encode())
    as_pit = url.replace("//sabot@", f"//{role}@")
    v = Validator(entry, as_pit)
    v.receive(cap)
    v.finish()
    v.store.close()
    assert v.counts["rounds"] == rounds and v.counts["rejected"] == 0
    with psycopg.connect(as_pit, autocommit=True) as con:
        for sql in ("UPDATE records SET kind = 'x'", "DELETE FROM frames",
                    "TRUNCATE alarms"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                con.execute(sql.encode())
    assert audit_verify(url, Registry.load(str(registry)).shoes)["ok"]


def test_row_security_lets_a_pit_insert_only_its_own_shoes_rows(server, tmp_path):  # noqa: F811
    """`sabot pit-role` gives each pit's role its shoes: pit A's serve stores shoe A's rounds,
    and a validator of pit B's shoe connecting as pit A stores nothing (the row security
    policy refuses it, in one line); audit verify holds, and finds the policy gone when an
    insider drops it."""
    import secrets

    url = server.database()
    open_store(url).close()  # IT makes the store
    roles, shoes = [], []
    for i in range(2):
        d = tmp_path / f"pit{i}"
        d.mkdir()
        entry, cap, rounds = capture_gen.generate(str(d), 1, seed=70 + i, shoe_id=0x5AB0_0A00 + i)
        shoes.append((entry, cap, rounds))
        role = f"pit_{secrets.token_hex(4)}"
        roles.append(role)
        with psycopg.connect(url, autocommit=True) as con:
            con.execute(f"CREATE ROLE {role} LOGIN".encode())
        if i == 0:  # the command once; the second pit as it does it, in this process
            r = subprocess.run([*SABOT, "pit-role", "--db", url, "--role", role, "--shoe-id",
                                hex(entry.shoe_id)], capture_output=True, text=True)
            assert r.returncode == 0 and f"role {role}" in r.stdout, r.stderr
        else:
            it = open_store(url)
            it.assign_pit(role, [entry.shoe_id])
            it.close()
    as_a = url.replace("//sabot@", f"//{roles[0]}@")
    entry, cap, rounds = shoes[0]
    v = Validator(entry, as_a)
    v.receive(cap)
    v.finish()
    v.store.close()
    assert v.counts["rounds"] == rounds
    other = Validator(shoes[1][0], as_a)
    with pytest.raises(SabotError, match="row-level security") as refused:
        other.receive(shoes[1][1][:2000])
    assert "\n" not in str(refused.value) and "nothing of this read was stored" in str(
        refused.value)
    other.store.close()
    reg = Registry(str(tmp_path / "shoes.json"))
    for e, _, _ in shoes:
        reg.put(e)
    r = audit_verify(url, {e.shoe_id: e for e, _, _ in shoes})
    assert r["ok"] and r["rounds"] == rounds, r
    bad = clone(url)
    with psycopg.connect(bad, autocommit=True) as con:
        con.execute(b"DROP POLICY records_pit ON records")
    r = audit_verify(bad, {e.shoe_id: e for e, _, _ in shoes})
    assert not r["ok"] and "policy records_pit on records is missing" in r["problem"], r
    r = subprocess.run([*SABOT, "pit-role", "--db", str(tmp_path / "a.db"), "--role", "x",
                        "--shoe-id", "1"], capture_output=True, text=True)
    assert r.returncode != 0 and "SQLite" in r.stderr and "Traceback" not in r.stderr


def test_a_pit_is_never_left_with_no_shoe_and_so_with_every_shoes_rows(server, tmp_path):  # noqa: F811
    """A role in pit_shoes for no shoe is held to no shoe's rows: pit-role with no --shoe-id is
    refused, and pit A whose only shoe moves to pit B loses its INSERT (it could insert rows
    naming pit B's shoe, and audit verify found nothing wrong with a rejected frame's)."""
    import secrets

    url = server.database()
    open_store(url).close()
    d = tmp_path / "pit"
    d.mkdir()
    entry, cap, _ = capture_gen.generate(str(d), 1, seed=90, shoe_id=0x5AB0_0B00)
    pits = [f"pit_{secrets.token_hex(4)}" for _ in range(2)]
    with psycopg.connect(url, autocommit=True) as con:
        for role in pits:
            con.execute(f"CREATE ROLE {role} LOGIN".encode())
    r = subprocess.run([*SABOT, "pit-role", "--db", url, "--role", pits[0]],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "no shoe named" in r.stderr and "Traceback" not in r.stderr
    it = open_store(url)  # IT's role, as sabot pit-role opens it
    try:
        for role, shoe in ((pits[0], 0x5AB0_0B01), (pits[1], entry.shoe_id),
                           (pits[1], 0x5AB0_0B01)):  # pit A's only shoe goes to pit B
            it.assign_pit(role, [shoe])
    finally:
        it.close()
    v = Validator(entry, url.replace("//sabot@", f"//{pits[0]}@"))
    with pytest.raises(SabotError, match="permission denied"):
        v.receive(cap[:2000])
    v.store.close()


def test_a_frameless_alarm_naming_no_shoe_is_found(server):  # noqa: F811
    """Row security lets a pit's role insert rows naming no shoe (a frame too damaged to name
    one); a missing_shoe_end alarm on no frame and no shoe, which no validator raises (it names
    its shoe), is found by audit verify."""
    import secrets

    url = server.database()
    open_store(url).close()
    role = f"pit_{secrets.token_hex(4)}"
    with psycopg.connect(url, autocommit=True) as con:
        con.execute(f"CREATE ROLE {role} LOGIN".encode())
    open_store(url).assign_pit(role, [0x5AB0_0C00])
    store = open_store(url.replace("//sabot@", f"//{role}@"))
    store.begin()
    store.add_alarm(None, None, None, {"kind": "missing_shoe_end", "shoe": 3, "detail": "x"})
    store.commit()
    store.close()
    r = audit_verify(url, {})
    assert not r["ok"] and "no frame and no shoe" in r["problem"], r


def test_a_pit_role_writes_no_table_but_its_shoes_rows_not_meta_nor_pit_shoes(server, tmp_path):  # noqa: F811
    """A pit's role inserted a second meta row (meta had no row security and its grant had
    INSERT): every pit's audit verify then failed, and nothing named who wrote it. Now `sabot
    pit-role` grants no write of meta or pit_shoes, and should IT grant INSERT on meta by hand,
    row security still refuses a pit's role; a store made before has meta's policy added when
    pit-role runs on it, and audit verify finds it dropped."""
    import secrets

    url = server.database()
    open_store(url).close()
    role = f"pit_{secrets.token_hex(4)}"
    with psycopg.connect(url, autocommit=True) as con:
        con.execute(f"CREATE ROLE {role} LOGIN".encode())
    r = subprocess.run([*SABOT, "pit-role", "--db", url, "--role", role, "--shoe-id",
                        "0x5ab00d00"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    as_pit = url.replace("//sabot@", f"//{role}@")
    meta_row = (b"INSERT INTO meta (id, chain_no, name, value, row_hash)"
                b" VALUES (2, 2, 'schema2', 'x', '\\x00'::bytea)")
    with psycopg.connect(as_pit, autocommit=True) as con:
        for sql in (meta_row, b"INSERT INTO pit_shoes (shoe_id, role) VALUES (1, 'x')",
                    b"UPDATE pit_shoes SET role = 'x'", b"DELETE FROM pit_shoes",
                    b"UPDATE meta SET value = 'x'"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                con.execute(sql)
    with psycopg.connect(url, autocommit=True) as con:
        con.execute(f"GRANT INSERT ON meta TO {role}".encode())
    with psycopg.connect(as_pit, autocommit=True) as con, pytest.raises(
            psycopg.errors.InsufficientPrivilege, match="row-level security"):
        con.execute(meta_row)
    r = audit_verify(url, {})
    assert r["ok"], r
    # a store made before meta had a policy: pit-role adds it (and takes the INSERT back)
    with psycopg.connect(url, autocommit=True) as con:
        con.execute(b"DROP POLICY meta_pit ON meta; DROP POLICY meta_read ON meta;"
                    b" ALTER TABLE meta DISABLE ROW LEVEL SECURITY")
    r = audit_verify(url, {})
    assert not r["ok"] and "table meta was altered" in r["problem"], r
    it = open_store(url)
    it.assign_pit(role, [0x5AB0_0D00])
    it.close()
    with psycopg.connect(as_pit, autocommit=True) as con, pytest.raises(
            psycopg.errors.InsufficientPrivilege):
        con.execute(meta_row)
    assert audit_verify(url, {})["ok"]

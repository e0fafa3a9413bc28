"""`sabot audit verify` against an insider: someone who can edit the SQLite file and then
recompute the whole row chain (`rechain`), but holds no shoe's key. Each attack below passed an
`audit verify` that checked only the row chain (shown by running these tests against that
code); what the store's signed frames and authentic statuses prove is now derived again and
compared, row by row and column by column. What lies beyond a store's own reach is pinned down
at the end (docs/SECURITY.md).

The stores are written by real Validators from frames signed as a shoe signs them (no board).
The same tests run on both backends: each store of a module fixture (a pit, a shoe's content
alarms, an operated shoe) is a SQLite file and, again, a database on a real PostgreSQL server
(kit/pg.py), edited there with the same SQL."""

import json
import shutil
import sqlite3
import struct

import pytest

from sabot import protocol as pr
from sabot.audit.store import COLUMNS, GENESIS, is_server_url, open_store, row_hash
from sabot.audit.store_sqlite import TRIGGERS
from sabot.audit.validator import Validator
from sabot.audit.verify import verify as audit_verify
from sabot.game.cards import shuffled_shoe
from sabot.registry import Registry
from sabot.virtual.capture_gen import shoe_frames, status_payload

from kit import signing_shoe

A, B = 0x5AB0_000A, 0x5AB0_000B


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgresql",
                                                                marks=pytest.mark.board)])
def backend(request):
    """None for SQLite files; for PostgreSQL, a server of this module's own."""
    if request.param == "sqlite":
        yield None
        return
    from kit.pg import shared_server

    yield shared_server()  # the run's one server (tests/conftest.py stops it)


def new_store(d, backend):
    """Where the store of fixture directory `d` is made: d/audit.db, or a fresh database whose
    URL d/db.url keeps."""
    if backend is None:
        return str(d / "audit.db")
    url = backend.database()
    (d / "db.url").write_text(url)
    return url


def store_of(d):
    url = d / "db.url"
    return url.read_text() if url.exists() else str(d / "audit.db")


class PgConnection:
    """A PostgreSQL database with sqlite3's calling convention (`?`, execute, commit)."""

    def __init__(self, url):
        from sabot.audit.store_pg_connection import Connection

        self.db = Connection(url)

    def execute(self, sql, args=None):
        return self.db.execute(sql, args)

    def executemany(self, sql, rows):
        self.db.executemany(sql, rows)

    def commit(self):
        pass  # autocommit

    def close(self):
        self.db.close()


def connect(db):
    return PgConnection(db) if is_server_url(db) else sqlite3.connect(db)


def drop_triggers(con, db):
    if is_server_url(db):
        from sabot.audit.store_pg import TRIGGER_ON

        for name, (table, _) in TRIGGER_ON.items():
            con.execute(f"DROP TRIGGER IF EXISTS {name} ON {table}")
        return
    for t in COLUMNS:
        for op in ("u", "d"):
            con.execute(f"DROP TRIGGER IF EXISTS {t}_append_only_{op}")


def restore_triggers(con, db):
    """The triggers put back word for word."""
    if is_server_url(db):
        from sabot.audit.store_pg import TRIGGER_ON, trigger_sql

        for name, (table, _) in TRIGGER_ON.items():
            con.execute(trigger_sql(name))
            con.execute(f"ALTER TABLE {table} ENABLE ALWAYS TRIGGER {name}")
        return
    for sql in TRIGGERS.values():
        con.execute(sql)


def copy_store(db, tmp_path):
    if not is_server_url(db):
        shutil.copy(db, tmp_path / "edited.db")
        return str(tmp_path / "edited.db")
    import secrets

    import psycopg

    base, _, name = db.rpartition("/")
    copy = f"{name}_edited_{secrets.token_hex(6)}"
    with psycopg.connect(f"{base}/postgres", autocommit=True) as con:
        con.execute(f"CREATE DATABASE {copy} TEMPLATE {name}".encode())
    return f"{base}/{copy}"


def rechain(db):
    """What an insider with write access does after an edit: renumber every table's ids one by
    one (and the frame ids records and alarms name), renumber and rehash every row of the chain,
    put the triggers back word for word."""
    con = connect(db)
    drop_triggers(con, db)
    for t in COLUMNS:
        ids = [i for (i,) in con.execute(f"SELECT id FROM {t} ORDER BY chain_no")]
        moves = [(-new, old) for new, old in enumerate(ids, 1)]
        con.executemany(f"UPDATE {t} SET id=? WHERE id=?", moves)
        if t == "frames":
            for ref in ("records", "alarms"):
                con.executemany(f"UPDATE {ref} SET frame_id=? WHERE frame_id=?", moves)
        con.execute(f"UPDATE {t} SET id = -id WHERE id < 0")
    con.execute("UPDATE records SET frame_id = -frame_id WHERE frame_id < 0")
    con.execute("UPDATE alarms SET frame_id = -frame_id WHERE frame_id < 0")
    con.commit()
    store = open_store(str(db), writer=False)
    rows = list(store.rows())
    store.close()
    prev = GENESIS
    places: dict[str, list[tuple]] = {}
    for no, (table, rid, _, values, _) in enumerate(rows, 1):
        prev = row_hash(prev, table, no, rid, values)
        places.setdefault(table, []).append((-no, prev, rid))
    for table, batch in places.items():
        con.executemany(f"UPDATE {table} SET chain_no=?, row_hash=? WHERE id=?", batch)
    for t in COLUMNS:
        con.execute(f"UPDATE {t} SET chain_no = -chain_no")
    restore_triggers(con, db)
    con.commit()
    con.close()


def edited(store_dir, tmp_path, *steps):
    """A copy of the store with each step (SQL, or a function of the connection) run on it,
    triggers dropped, and the chain recomputed."""
    db = copy_store(store_of(store_dir), tmp_path)
    con = connect(db)
    drop_triggers(con, db)
    for step in steps:
        if callable(step):
            step(con)
        else:
            con.execute(step)
    con.commit()
    con.close()
    rechain(db)
    return db


def inserted_after(table, frame_id, columns, select):
    """A step inserting one row of `table` right after frame `frame_id`'s row, in the chain and
    in its table's ids, as an insider who renumbers places it: `select` gives `columns` (FROM
    frames f WHERE f.id = frame_id)."""

    def step(con):
        place = con.execute("SELECT chain_no FROM frames WHERE id=?", (frame_id,)).fetchone()[0]
        after = con.execute(f"SELECT COALESCE(MAX(id), 0) FROM {table} WHERE chain_no < ?",
                            (place,)).fetchone()[0]
        for t in COLUMNS:  # make room: every later place and id one further
            con.execute(f"UPDATE {t} SET chain_no = -(chain_no + 1) WHERE chain_no > ?", (place,))
            con.execute(f"UPDATE {t} SET chain_no = -chain_no WHERE chain_no < 0")
        con.execute(f"UPDATE {table} SET id = -(id + 1) WHERE id > ?", (after,))
        con.execute(f"UPDATE {table} SET id = -id WHERE id < 0")
        con.execute(f"INSERT INTO {table} (id, chain_no, {columns}, row_hash) SELECT {after + 1},"
                    f" {place + 1}, {select}, ? FROM frames f WHERE f.id = {frame_id}",
                    (b"\x00",))

    return step


def check(store_dir, db):
    return audit_verify(str(db), Registry.load(str(store_dir / "shoes.json")).shoes)


def status(signer, frames, latest, acked, integrity=1, phase=2, shoe=1, host_counter=0):
    """An authentic status of `signer`'s shoe naming frame `latest` (1-based) as its newest."""
    payload = status_payload(phase=phase, shoe=shoe, host_counter=host_counter, acked=acked,
                             unacked_from=acked + 1 if latest > acked else 0,
                             unacked_to=latest if latest > acked else 0, integrity=integrity)
    chain = pr.parse(frames[latest - 1]).digest if latest else bytes(32)
    return pr.build(signer.private_key, signer.key_id, signer.shoe_id, signer.boot, latest,
                    chain, pr.T_STATUS, payload)


def framed(*raws):
    return b"".join(pr.encode_frame(r) for r in raws)


# ---- a pit's store: two tables on one store, as `sabot serve` writes it ----------------------
@pytest.fixture(scope="module")
def pit(tmp_path_factory, backend):
    """Shoes A and B, each validated by its own Validator on one AuditStore, their reads
    interleaved as serve's are: B's registry entry says EZ (its shoe does not: config_mismatch),
    B's shoe tilts for one status, a frame of B arrives with a damaged signature and a frame
    arrives unparsable. A's last round and its closing status come before B's last reads, so
    B's rows are the store's newest."""
    d = tmp_path_factory.mktemp("pit")
    sa, ea = signing_shoe(A)
    sb, eb = signing_shoe(B, ez=True)
    reg = Registry(str(d / "shoes.json"))
    reg.put(ea)
    reg.put(eb)
    fa, _ = shoe_frames(sa, shuffled_shoe(2, seed=3), 1)
    fb, _ = shoe_frames(sb, shuffled_shoe(2, seed=4), 1)
    store = open_store(new_store(d, backend))
    va, vb = Validator(ea, store, watch=False), Validator(eb, store, watch=False)
    damaged = fb[11][:-1] + bytes([fb[11][-1] ^ 1])  # a result: signed
    va.receive(framed(*fa[:10]))
    vb.receive(framed(*fb[:10]))
    vb.receive(framed(damaged, b"\x02junk", *fb[10:20]))
    va.receive(framed(*fa[10:-3]))
    vb.receive(framed(status(sb, fb, 20, 20, integrity=2)))  # the shoe's code fails its check
    va.receive(framed(*fa[-3:]))
    va.receive(framed(status(sa, fa, len(fa), len(fa), phase=4)))
    vb.receive(framed(status(sb, fb, 20, 20), *fb[20:]))
    vb.receive(framed(status(sb, fb, len(fb), len(fb), phase=4)))
    store.close()
    kinds = [a["kind"] for a in va.alarms + vb.alarms]
    assert va.alarms == [] and "config_mismatch" in kinds and "tilt" in kinds
    assert [r["reason"] for r in vb.rejections] == ["bad_signature", "too_short"]
    assert check(d, store_of(d))["ok"]
    return d


def a_result(pit, n=0):
    """(frame id, seq) of A's n-th result."""
    con = connect(store_of(pit))
    row = con.execute("SELECT frame_id, seq FROM records WHERE kind='result' AND shoe_id=?"
                      " ORDER BY id LIMIT 1 OFFSET ?", (A, n)).fetchone()
    con.close()
    return row


def found(out, *words):
    assert not out["ok"], "the edit passed audit verify"
    assert all(w in out["problem"] for w in words), out["problem"]


def test_the_pit_store_as_written_verifies(pit):
    out = check(pit, store_of(pit))
    assert out["ok"] and out["rounds"] > 10, out


# records: every column is the frame's, one record per accepted frame
def test_a_round_moved_to_another_table_is_found(pit, tmp_path):
    fid, _ = a_result(pit)
    db = edited(pit, tmp_path,
                f"UPDATE records SET shoe_id={B}, seq=seq+5000 WHERE frame_id={fid}")
    found(check(pit, db), f"frame id {fid}", "record")


def test_two_rounds_swapped_in_the_round_column_are_found(pit, tmp_path):
    f1, _ = a_result(pit, 0)
    f2, _ = a_result(pit, 1)
    db = edited(pit, tmp_path,
                f"UPDATE records SET round = 1000 WHERE frame_id={f1}",
                f"UPDATE records SET round = 1 WHERE frame_id={f2}",
                f"UPDATE records SET round = 2 WHERE frame_id={f1}")
    found(check(pit, db), "record")


def test_a_record_whose_seq_and_shoe_columns_were_rewritten_is_found(pit, tmp_path):
    fid, seq = a_result(pit, 2)
    found(check(pit, edited(pit, tmp_path, f"UPDATE records SET seq={seq + 500}, shoe=7 "
                                           f"WHERE frame_id={fid}")), "record")


def test_an_invented_round_beside_the_genuine_record_of_its_frame_is_found(pit, tmp_path):
    fid, seq = a_result(pit, 3)
    con = connect(store_of(pit))
    rec = json.loads(con.execute(f"SELECT record FROM records WHERE frame_id={fid}").fetchone()[0])
    con.close()
    fake = json.dumps(dict(rec, round=8, winner="player", player=["9S", "KD"]), sort_keys=True)
    db = edited(pit, tmp_path, inserted_after(
        "records", fid, "frame_id, key_id, shoe_id, seq, kind, shoe, round, record",
        f"{fid}, f.key_id, f.shoe_id, {seq + 900}, 'result', 1, 8, '{fake}'"))
    found(check(pit, db), f"frame id {fid}", "record")


# frames: the columns history, the pages and the checks select by are the raw frame's header
def test_a_frame_whose_header_columns_were_rewritten_is_found(pit, tmp_path):
    fid, seq = a_result(pit, 4)
    db = edited(pit, tmp_path, f"UPDATE frames SET shoe_id={B}, seq={seq + 1000}, boot=9 "
                               f"WHERE id={fid}")
    found(check(pit, db), f"frame id {fid}")


# alarms: every column, not only (frame, kind)
def test_an_alarm_moved_to_another_round_and_reworded_is_found(pit, tmp_path):
    db = edited(pit, tmp_path, "UPDATE alarms SET round=5, shoe=3, detail='nothing to see'"
                               " WHERE kind='config_mismatch'")
    found(check(pit, db), "config_mismatch")


def test_an_alarm_moved_to_another_shoe_id_is_found(pit, tmp_path):
    db = edited(pit, tmp_path, f"UPDATE alarms SET shoe_id={A} WHERE kind='config_mismatch'")
    found(check(pit, db), "config_mismatch")


# one table's newest rounds, and a whole shoe, deleted while the other table's later rows stay
def newest_of_a(pit):
    """The frame ids of A's last round and its shoe_end."""
    con = connect(store_of(pit))
    ids = [r[0] for r in con.execute("SELECT id FROM frames WHERE shoe_id=? AND verdict="
                                     "'accepted' AND type!='status' ORDER BY id DESC LIMIT 3",
                                     (A,))]
    con.close()
    return ",".join(map(str, ids))


def test_one_tables_newest_rounds_deleted_while_the_others_later_rows_stay_are_found(
        pit, tmp_path):
    ids = newest_of_a(pit)
    db = edited(pit, tmp_path, f"DELETE FROM records WHERE frame_id IN ({ids})",
                f"DELETE FROM alarms WHERE frame_id IN ({ids})",
                f"DELETE FROM frames WHERE id IN ({ids})")
    found(check(pit, db), f"shoe {A:#010x}")


def test_one_tables_newest_rounds_and_their_link_state_deleted_are_found_by_its_status(
        pit, tmp_path):
    """The thorough insider deletes the validator's link state rows after those frames too: A's
    own later status still says the shoe's frames up to its last were acknowledged here."""
    ids = newest_of_a(pit)
    first = min(map(int, ids.split(",")))
    db = edited(pit, tmp_path, f"DELETE FROM records WHERE frame_id IN ({ids})",
                f"DELETE FROM alarms WHERE frame_id IN ({ids})",
                f"DELETE FROM frames WHERE id IN ({ids})",
                f"DELETE FROM link_state WHERE shoe_id={A} AND id > (SELECT MAX(id) FROM"
                f" link_state WHERE shoe_id={A} AND chain_no < (SELECT chain_no FROM frames"
                f" WHERE id < {first} ORDER BY id DESC LIMIT 1))")
    found(check(pit, db), f"shoe {A:#010x}")


def test_every_row_of_one_shoes_frames_records_and_alarms_deleted_is_found(pit, tmp_path):
    db = edited(pit, tmp_path, f"DELETE FROM records WHERE shoe_id={B}",
                f"DELETE FROM alarms WHERE shoe_id={B}",
                f"DELETE FROM frames WHERE shoe_id={B}")
    found(check(pit, db), f"shoe {B:#010x}")


# rejected-frame evidence, tilt alarms, link state
def test_a_rejected_frames_reason_rewritten_is_found(pit, tmp_path):
    db = edited(pit, tmp_path, "UPDATE frames SET reason='replayed' WHERE reason='bad_signature'")
    found(check(pit, db), "replayed")


def test_a_genuine_frame_stored_as_rejected_for_a_bad_signature_is_found(pit, tmp_path):
    fid, _ = a_result(pit, 5)
    db = edited(pit, tmp_path, "UPDATE frames SET (raw, key_id, shoe_id, boot, seq, type) ="
                               " (SELECT raw, key_id, shoe_id, boot, seq, type FROM frames WHERE"
                               f" id={fid}) WHERE reason='bad_signature'")
    found(check(pit, db), "bad_signature")


def test_a_deleted_tilt_alarm_is_found(pit, tmp_path):
    found(check(pit, edited(pit, tmp_path, "DELETE FROM alarms WHERE kind='tilt'")), "tilt")


ALARM = "frame_id, raised_at, key_id, shoe_id, shoe, round, kind, detail"


def test_a_tilt_alarm_on_a_status_that_says_ok_is_found(pit, tmp_path):
    con = connect(store_of(pit))
    fid = con.execute(f"SELECT id FROM frames WHERE type='status' AND shoe_id={A}").fetchone()[0]
    con.close()
    db = edited(pit, tmp_path, inserted_after(
        "alarms", fid, ALARM, "f.id, f.received_at, f.key_id, f.shoe_id, 1, NULL, 'tilt', "
        "'the shoe''s code does not match its MANIFEST: it deals nothing'"))
    found(check(pit, db), "tilt", "inserted")


def test_a_link_state_row_rewritten_is_found(pit, tmp_path):
    db = edited(pit, tmp_path, "UPDATE link_state SET inventory = replace(inventory,"
                               " '\"unknown\": 0', '\"unknown\": 3') WHERE id = 3")
    found(check(pit, db), "link state")


def test_a_link_state_row_deleted_in_the_middle_is_found(pit, tmp_path):
    db = edited(pit, tmp_path, "DELETE FROM link_state WHERE id = 3")
    found(check(pit, db), "link state")


def test_a_tilt_raised_again_by_a_later_session_passes_and_the_first_is_required(tmp_path):
    """A validator raises tilt at the first tilted status it sees; a later session on the same
    store raises it again while the shoe is still tilted. Both stores are honest; without the
    first alarm the store is not."""
    s, entry = signing_shoe(A)
    Registry(str(tmp_path / "shoes.json")).put(entry)
    frames = [s.chained(pr.T_SHOE_START, b"\x00\x01\x08\x02")]
    db = tmp_path / "audit.db"
    for n in (1, 2):
        v = Validator(entry, str(db), watch=False)
        v.receive(framed(*frames[: 2 - n], status(s, frames, 1, 1, integrity=2)))
        v.store.close()
        assert [a["kind"] for a in v.alarms] == ["tilt"]
    assert check(tmp_path, db)["ok"]
    out = check(tmp_path, edited(tmp_path, tmp_path, "DELETE FROM alarms WHERE id = 1"))
    found(out, "tilt", "does not hold")


def test_the_command_counter_passing_half_its_range_is_an_alarm_derived_again(tmp_path):
    """A flood of signed commands drives the element's command counter towards its end, after
    which the shoe takes no counted command again: the status whose host counter first passes
    COUNTER_LOW (3 days before the end at the shoe's rate limit) raises counter_low, once, also
    across a validator's restart; audit verify derives it again from the statuses."""
    from sabot.audit.records import COUNTER_LOW

    s, entry = signing_shoe(A)
    Registry(str(tmp_path / "shoes.json")).put(entry)
    frames = [s.chained(pr.T_SHOE_START, b"\x00\x01\x08\x02")]
    db = tmp_path / "audit.db"
    raised = []
    for counts in ((12, COUNTER_LOW - 1, COUNTER_LOW + 3), (COUNTER_LOW + 9,)):
        v = Validator(entry, str(db), watch=False)
        for n, counter in enumerate(counts):
            v.receive(framed(*frames[: 1 - n], status(s, frames, 1, 1, host_counter=counter)))
        v.store.close()
        raised += v.alarms
    assert [a["kind"] for a in raised] == ["counter_low"]
    assert "1,048,572 counted commands left (73 hours" in raised[0]["detail"]
    assert check(tmp_path, db)["ok"]
    out = check(tmp_path, edited(tmp_path, tmp_path, "DELETE FROM alarms WHERE id = 1"))
    found(out, "counter_low", "does not hold")


def test_an_unsigned_frame_met_again_before_its_seal_is_stored_deferred_and_verifies(tmp_path):
    """After a reconnect the shoe resends an initial_cards whose seal had not come: the first copy
    is stored deferred, the second is sealed and taken (validator.py); an honest store."""
    s, entry = signing_shoe(A)
    Registry(str(tmp_path / "shoes.json")).put(entry)
    cards = bytes([8 * 4, 7 * 4 + 1, 12 * 4, 8 * 4 + 3])  # 9S 8H KS 9C: P 9S KS, B 8H 9C
    frames = [s.chained(pr.T_SHOE_START, b"\x00\x01\x08\x02"),
              s.chained(pr.T_BURN, b"\x00\x01\x00\x00" + bytes([0, 4])),
              s.chained(pr.T_INITIAL_CARDS, struct.pack(">HH", 1, 1) + cards),
              s.chained(pr.T_RESULT, struct.pack(">HH", 1, 1) + bytes([0x22, 0])
                        + bytes([cards[0], cards[2], cards[1], cards[3]]) + b"\x00\x05\x00")]
    v = Validator(entry, str(tmp_path / "audit.db"), watch=False)
    v.receive(framed(*frames[:3]))
    v.receive(framed(frames[2], frames[3]))
    v.store.close()
    assert v.counts["deferred"] == 1 and v.counts["rejected"] == 0 and v.alarms == []
    out = check(tmp_path, tmp_path / "audit.db")
    assert out["ok"] and out["frames"] == 4, out["problem"]


# ---- gap alarms are derived, never read ---------------------------------------------------------
@pytest.fixture(scope="module")
def content(tmp_path_factory, backend):
    """A shoe whose frames raise missing_burn, missing_initial_cards (a round before the burn,
    with no initial cards), round_out_of_order (round 3 after 1) and inventory_mismatch (the
    shoe_end counts nothing)."""
    d = tmp_path_factory.mktemp("content")
    s, entry = signing_shoe(A)
    Registry(str(d / "shoes.json")).put(entry)
    cards = bytes([8 * 4, 7 * 4 + 1, 12 * 4, 8 * 4 + 3])  # 9S 8H KS 9C: P 9S KS, B 8H 9C

    def result(rnd):
        return s.chained(pr.T_RESULT, struct.pack(">HH", 1, rnd) + bytes([0x22, 0])
                         + bytes([cards[0], cards[2], cards[1], cards[3]]) + b"\x00\x05\x00")

    frames = [s.chained(pr.T_SHOE_START, b"\x00\x01\x08\x02"), result(1),
              s.chained(pr.T_BURN, b"\x00\x01\x00\x00" + bytes([0, 4])),  # AS, 2S
              s.chained(pr.T_INITIAL_CARDS, struct.pack(">HH", 1, 3) + cards), result(3),
              s.chained(pr.T_SHOE_END, b"\x00\x01\x00\x03\x00\x09" + bytes(52) + b"\x00\x00")]
    v = Validator(entry, new_store(d, backend), watch=False)
    v.receive(framed(*frames))
    v.store.close()
    assert {"missing_burn", "missing_initial_cards", "round_out_of_order",
            "inventory_mismatch"} <= {a["kind"] for a in v.alarms}
    assert "sequence_gap" not in {a["kind"] for a in v.alarms}
    assert check(d, store_of(d))["ok"]
    return d


def test_an_inserted_gap_alarm_no_longer_hides_deleted_content_alarms(content, tmp_path):
    """Before, a stored sequence_gap alarm marked the shoe's accounts partial in audit verify: one
    inserted on the round before the burn stopped it deriving these four, so they could go."""
    db = edited(content, tmp_path,
                "DELETE FROM alarms WHERE kind IN ('missing_burn', 'missing_initial_cards',"
                " 'round_out_of_order', 'inventory_mismatch')",
                inserted_after("alarms", 2, ALARM, "f.id, f.received_at, f.key_id, f.shoe_id,"
                               " 1, NULL, 'sequence_gap', 'frames 1..1 were never seen here"
                               " (acknowledged to another host)'"))
    found(check(content, db), "frame id 2", "missing_burn", "does not hold")


# ---- the operator log: in the chain, each entry checked against the frame the shoe signed ------
@pytest.fixture(scope="module")
def operated(tmp_path_factory, backend):
    """A shoe held by a card not due, resolved from the host (void-card by sue), ended, and its
    next shoe started from the host (by tech): the operator log as `sabot resolve` and `sabot
    new-shoe` write it (link/operate.py)."""
    from sabot.game.cards import card_index
    from sabot.link.operate import log_operation

    d = tmp_path_factory.mktemp("operated")
    s, entry = signing_shoe(A)
    Registry(str(d / "shoes.json")).put(entry)
    inventory = bytearray(52)
    for c in ("AS", "2S", "2H"):
        inventory[card_index(c)] += 1
    frames = [s.chained(pr.T_SHOE_START, b"\x00\x01\x08\x02"),
              s.chained(pr.T_BURN, b"\x00\x01\x00\x00" + bytes([0, 4])),  # AS, 2S
              s.chained(pr.T_IRREGULARITY, b"\x00\x01\x00\x00"
                        + struct.pack(">BBH", 1, card_index("2H"), 3)),  # 2H not due: held
              s.chained(pr.T_RESOLUTION, b"\x00\x01\x00\x00"
                        + bytes((1, 1, card_index("2H"), 1, 0))),  # void_card, from the host
              s.chained(pr.T_SHOE_END, struct.pack(">HHH", 1, 0, 4) + bytes(inventory)
                        + b"\x00\x00"),
              s.chained(pr.T_SHOE_START, b"\x00\x02\x08\x02")]
    v = Validator(entry, new_store(d, backend), watch=False)
    v.receive(framed(*frames[:4]))
    log_operation(v.store, {"operation": "resolve", "resolution": "void_card", "by": "sue",
                            "shoe_id": A, "shoe": 1, "round": 0, "irregularity": "card_not_due",
                            "card": "2H", "source": "host", "port": "/dev/ttyACM0"}, 4)
    v.receive(framed(*frames[4:]))
    log_operation(v.store, {"operation": "new_shoe", "by": "tech", "shoe_id": A,
                            "ended_shoe": 1, "shoe": 2, "port": "/dev/ttyACM0"}, 6)
    v.store.close()
    assert v.alarms == [] and check(d, store_of(d))["ok"]
    return d


def test_history_operations_prints_the_operator_log_from_the_store(cli, operated):
    r = cli("history", "--db", store_of(operated), "--operations")
    ops = [json.loads(line) for line in r.stdout.splitlines()]
    assert r.returncode == 0 and [(o["operation"], o["by"]) for o in ops] == [
        ("resolve", "sue"), ("new_shoe", "tech")]
    assert {"at", "host", "user", "port"} <= set(ops[0]) and ops[0]["card"] == "2H"
    r = cli("history", "--db", store_of(operated), "--operations", "--shoe-id", A + 1)
    assert r.returncode == 0 and r.stdout == ""


def test_a_deleted_operator_entry_for_a_resolution_the_shoe_signed_is_found(operated, tmp_path):
    db = edited(operated, tmp_path, "DELETE FROM operations WHERE operation='resolve'")
    found(check(operated, db), "void_card", "no operator entry")


@pytest.mark.parametrize("field,value", [("round", 5), ("resolution", "end_shoe"),
                                         ("card", "9S"), ("shoe", 2)])
def test_an_operator_entry_altered_against_the_shoes_signed_resolution_is_found(
        operated, tmp_path, field, value):
    def alter(con):  # the entry's JSON rewritten with one field changed (the same SQL on both)
        rid, text = con.execute("SELECT id, entry FROM operations WHERE operation='resolve'"
                                ).fetchone()
        con.execute("UPDATE operations SET entry=? WHERE id=?",
                    (json.dumps(dict(json.loads(text), **{field: value})), rid))

    db = edited(operated, tmp_path, alter)
    found(check(operated, db), "operator entry", "the shoe signed")


def test_an_invented_operator_entry_is_found(operated, tmp_path):
    """A new_shoe entry naming the burn, and a second entry for the genuine resolution."""
    for sql in ("UPDATE operations SET seq = 2 WHERE operation='new_shoe'",
                "UPDATE operations SET seq = 4, operation = 'resolve', entry = (SELECT entry FROM"
                " operations WHERE operation='resolve') WHERE operation='new_shoe'"):
        found(check(operated, edited(operated, tmp_path, sql)), "operator entry")


def test_an_old_store_is_refused_in_one_line_by_every_reader_and_writer(cli, operated,
                                                                         tmp_path):
    db = tmp_path / "old.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE meta (id INTEGER PRIMARY KEY, chain_no INTEGER, name TEXT, "
                "value TEXT, row_hash BLOB)")
    con.execute("INSERT INTO meta VALUES (1, 1, 'schema', 'sabot-audit/3', x'00')")
    con.commit()
    con.close()
    before = db.read_bytes()
    for args in (("history", "--db", db, "--operations"),
                 ("audit", "verify", "--db", db, "--registry", operated / "shoes.json")):
        r = cli(*args)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert "sabot-audit/3" in r.stderr and "operator log" in r.stderr
    assert db.read_bytes() == before  # readers never write
    from sabot.errors import SabotError

    with pytest.raises(SabotError, match=r"sabot-audit/3 audit database .*new database"):
        open_store(str(db))  # nor does a validator append to it


# ---- beyond a store's own reach (docs/SECURITY.md), pinned down so the claim stays exact -------
def test_the_whole_tail_of_one_shoe_is_beyond_the_stores_own_reach(pit, tmp_path):
    """Nothing one shoe signs refers to another: A's newest rounds deleted with every row derived
    from them and every later status of A pass, though B's rows stored after them stay. So does
    every row of B deleted — then only the registry says B should be there, and verify names it.
    The shoe's own status, another host's store and the outside anchor (the shoe's witnessed
    log) close this."""
    ids = newest_of_a(pit)
    first = min(map(int, ids.split(",")))
    out = check(pit, edited(
        pit, tmp_path, f"DELETE FROM records WHERE frame_id IN ({ids})",
        f"DELETE FROM alarms WHERE frame_id IN ({ids})",
        f"DELETE FROM frames WHERE shoe_id={A} AND id >= {first}",
        f"DELETE FROM link_state WHERE shoe_id={A} AND chain_no > (SELECT chain_no FROM frames"
        f" WHERE id < {first} ORDER BY id DESC LIMIT 1)"))
    assert out["ok"] and out["absent"] == [], out["problem"]
    out = check(pit, edited(pit, tmp_path, *(f"DELETE FROM {t} WHERE shoe_id={B}" for t in
                                             ("records", "alarms", "frames", "link_state"))))
    assert out["ok"] and out["absent"] == [B], out["problem"]


def test_frames_a_status_named_that_never_reached_the_store_are_named(cli, tmp_path):
    """A store that ends after a status naming frames it never got (the session ended before
    the shoe resent them, or they were deleted with everything after): named, and non-zero
    unless --allow-holes, as a hole is."""
    s, entry = signing_shoe(A)
    reg = tmp_path / "shoes.json"
    Registry(str(reg)).put(entry)
    frames = [s.chained(pr.T_SHOE_START, b"\x00\x01\x08\x02"),
              s.chained(pr.T_BURN, b"\x00\x01\x00\x00" + bytes([0, 4]))]
    frames += [s.chained(pr.T_IRREGULARITY, b"\x00\x01\x00\x00" + bytes([8, 255, 0, 3]))
               for _ in range(3)]
    v = Validator(entry, str(tmp_path / "a.db"), watch=False)
    v.receive(framed(*frames[:3], status(s, frames, 5, 3)))
    v.store.close()
    r = cli("audit", "verify", "--db", tmp_path / "a.db", "--registry", reg)
    assert r.returncode == 1 and "missing at the store's end" in r.stderr, r.stderr
    assert f"shoe {A:#010x} seq 4..5" in r.stderr
    r = cli("audit", "verify", "--db", tmp_path / "a.db", "--registry", reg, "--allow-holes")
    assert r.returncode == 0 and "never reached this store" in r.stdout, r.stderr

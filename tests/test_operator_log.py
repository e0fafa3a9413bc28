"""The operator log's entries for what the pit does that no shoe signs (`sign_on`, `sign_off`,
`acknowledge`, `serve_alarm`, as `sabot serve` writes them): `audit verify` takes them, and finds
one put where it cannot stand — naming a frame or an alarm stored only after it, an alarm of
another kind or shoe, a shape serve never writes — with the chain recomputed by the insider of
test_audit_verify.py. What they say (who signed on) is the host's word: pinned down at the end.
Both backends, as test_audit_verify.py's stores."""

import json
import sqlite3
import struct

import pytest
from test_audit_verify import (  # noqa: F401 (backend: the fixture, for this module too)
    A,
    B,
    backend,
    check,
    connect,
    edited,
    found,
    framed,
    new_store,
    status,
    store_of,
)

from sabot import protocol as pr
from sabot.audit.store import COLUMNS, open_store
from sabot.audit.validator import Validator
from sabot.errors import SabotError
from sabot.game.cards import card_index, shuffled_shoe
from sabot.registry import Registry
from sabot.virtual.capture_gen import shoe_frames

from kit import signing_shoe

AT = "2025-03-01T21:04:05+01:00"
SILENT = ("the shoe has sent nothing since 21:03:00 although its link is up: check the shoe and "
          "its cable")


def log(store, operation, seq, **more):
    """An entry as serve logs it, through the store's own writer."""
    store.log_operation({"operation": operation, "shoe_id": A, "by": "sue", "role": "supervisor",
                         "from": "10.0.0.7", "via": "serve", "at": AT, "table": "BAC-1",
                         **more}, A, seq)


@pytest.fixture(scope="module")
def hosted(tmp_path_factory, backend):  # noqa: F811
    """Shoe A validated in four reads (its registry entry says EZ, the shoe does not: a
    config_mismatch alarm on its shoe_start, seq 1; a tilt alarm on a later status), with the
    pit's entries between them: a serve_alarm and a dealer signed on before any frame (seq 0),
    an acknowledgement of the config_mismatch (naming seq 1) and of a link_silent alarm of serve's
    (no alarm row), the dealers changing, several entries naming one frame."""
    d = tmp_path_factory.mktemp("hosted")
    s, entry = signing_shoe(A, ez=True)
    Registry(str(d / "shoes.json")).put(entry)
    frames, _ = shoe_frames(s, shuffled_shoe(2, seed=5), 1)
    store = open_store(new_store(d, backend))
    v = Validator(entry, store, watch=False)
    log(store, "serve_alarm", 0, kind="not_recording", raised_at=AT, cleared_at=AT,
        detail="the audit database has confirmed no commit since 21:04:00")
    log(store, "sign_on", 0, dealer="Ann")
    v.receive(framed(*frames[:10]))
    mismatch = store.alarms_since(0)[0]
    assert mismatch["kind"] == "config_mismatch"
    log(store, "acknowledge", 1, alarm={"id": mismatch["id"], "kind": "config_mismatch",
                                        "raised_at": AT, "detail": mismatch["detail"]},
        note="the registry is being corrected")
    log(store, "acknowledge", v.state["last_seq"], note="",
        alarm={"id": None, "kind": "link_silent", "raised_at": AT, "detail": SILENT})
    v.receive(framed(*frames[10:20]))
    log(store, "serve_alarm", v.state["last_seq"], kind="link_silent", raised_at=AT,
        cleared_at=AT, detail=SILENT)
    log(store, "sign_off", v.state["last_seq"], dealer="Ann")
    log(store, "sign_on", v.state["last_seq"], dealer="Bob")
    v.receive(framed(status(s, frames, 20, 20, integrity=2)))  # the tilt: an alarm stored later
    v.receive(framed(status(s, frames, 20, 20), *frames[20:]))
    log(store, "sign_off", v.state["last_seq"], dealer="Bob")
    store.close()
    kinds = [a["kind"] for a in v.alarms]
    assert kinds[0] == "config_mismatch" and "tilt" in kinds
    out = check(d, store_of(d))
    assert out["ok"], out["problem"]
    return d


def entry_of(con, kind, dealer=None):
    """(id, entry) of the first entry of operation `kind` (of that dealer)."""
    for rid, text in con.execute("SELECT id, entry FROM operations WHERE operation=? ORDER BY id",
                                 (kind,)).fetchall():
        if dealer is None or json.loads(text).get("dealer") == dealer:
            return rid, json.loads(text)
    raise AssertionError(f"no {kind} entry")


def rewritten(kind, fields, of=None):
    """A step rewriting the JSON of an entry of operation `kind` (of dealer `of`): `fields`
    changed (the same SQL on both backends)."""
    def step(con):
        rid, entry = entry_of(con, kind, of)
        con.execute("UPDATE operations SET entry=? WHERE id=?",
                    (json.dumps(dict(entry, **fields)), rid))

    return step


def test_the_pits_entries_of_each_kind_pass_and_history_prints_them(cli, hosted):
    r = cli("history", "--db", store_of(hosted), "--operations")
    ops = [json.loads(line) for line in r.stdout.splitlines()]
    assert r.returncode == 0, r.stderr
    assert [o["operation"] for o in ops] == ["serve_alarm", "sign_on", "acknowledge",
                                             "acknowledge", "serve_alarm", "sign_off", "sign_on",
                                             "sign_off"]
    assert [o["dealer"] for o in ops if "dealer" in o] == ["Ann", "Ann", "Bob", "Bob"]
    assert ops[2]["alarm"]["kind"] == "config_mismatch" and ops[2]["seq"] == 1
    assert ops[0]["seq"] == 0 and ops[4]["seq"] == ops[5]["seq"] == ops[6]["seq"] == 20


def test_an_acknowledgement_of_an_alarm_stored_after_it_is_found(hosted, tmp_path):
    con = connect(store_of(hosted))
    tilt = con.execute("SELECT id FROM alarms WHERE kind='tilt'").fetchone()[0]
    con.close()
    db = edited(hosted, tmp_path, rewritten("acknowledge", {"alarm": {
        "id": tilt, "kind": "tilt", "raised_at": AT, "detail": "x"}}))
    found(check(hosted, db), f"acknowledges alarm id {tilt}", "no alarm stored before it")


def test_a_sign_on_naming_a_frame_stored_after_it_is_found(hosted, tmp_path):
    db = edited(hosted, tmp_path, "UPDATE operations SET seq = 30 WHERE operation='sign_on'"
                                  " AND seq = 20")
    found(check(hosted, db), "sign_on by sue", "seq 30", "not its newest frame stored before")


def test_a_pit_entry_moved_back_among_older_frames_is_found(hosted, tmp_path):
    """serve names the shoe's newest frame when it logs a pit entry: one naming an older frame
    was moved (a dealer's rounds handed to another)."""
    db = edited(hosted, tmp_path,
                "UPDATE operations SET seq = 10 WHERE operation='sign_off' AND seq = 20")
    found(check(hosted, db), "sign_off by sue", "seq 10", "not its newest frame stored before")


def test_an_alarm_acknowledged_twice_or_before_it_was_raised_is_found(hosted, tmp_path):
    con = connect(store_of(hosted))
    entry, logged = con.execute("SELECT entry, logged_at FROM operations"
                                " WHERE operation='acknowledge' AND seq = 1").fetchone()
    raised = con.execute("SELECT raised_at FROM alarms WHERE id = 1").fetchone()[0]
    con.close()
    def again(con):  # the same acknowledgement once more, at the chain's end
        top = max(con.execute(f"SELECT COALESCE(MAX(chain_no), 0) FROM {t}").fetchone()[0]
                  for t in COLUMNS)
        rid = con.execute("SELECT MAX(id) FROM operations").fetchone()[0] + 1
        con.execute("INSERT INTO operations (id, chain_no, logged_at, shoe_id, seq, operation,"
                    " entry, row_hash) VALUES (?, ?, ?, ?, 1, 'acknowledge', ?, ?)",
                    (rid, top + 1, logged, A, entry, bytes(32)))
    twice = edited(hosted, tmp_path, again)
    found(check(hosted, twice), "acknowledges an alarm acknowledged before it")
    early = edited(hosted, tmp_path, f"UPDATE operations SET logged_at = {raised - 3600}"
                   " WHERE operation='acknowledge' AND seq = 1")
    found(check(hosted, early), "logged before alarm id 1 it acknowledges was raised")


@pytest.mark.parametrize("step,said", [
    (rewritten("acknowledge", {"alarm": {"id": 1, "kind": "tilt", "raised_at": AT,
                                         "detail": "x"}}),
     "that row is a config_mismatch"),  # the alarm acknowledged said to be another kind
    ("UPDATE operations SET seq = 5 WHERE operation='acknowledge' AND seq = 1",
     "not seq 1"),  # the frame it names moved off the alarm's
    (rewritten("sign_on", {"operation": "sign_off"}, of="Ann"), "not the entry its columns say"),
    (rewritten("sign_off", {"via": "cli"}, of="Bob"), "not given via serve"),
    (rewritten("sign_on", {"dealer": "a dealer whose name is far too long"}, of="Bob"), "dealer"),
    (rewritten("serve_alarm", {"kind": "all_quiet"}), "no alarm serve raises"),
    (f"UPDATE operations SET shoe_id = {B}, entry = replace(entry, '{A}', '{B}')"
     " WHERE operation='sign_off'", f"shoe {B:#010x}"),  # moved to a shoe with no frame here
    ("UPDATE operations SET operation = 'coffee', entry = replace(entry, '\"sign_on\"',"
     " '\"coffee\"') WHERE operation = 'sign_on'", "no operation sabot logs"),
], ids=["alarm-kind", "alarm-frame", "operation", "via", "dealer", "serve-alarm-kind",
        "other-shoe", "unknown"])
def test_an_altered_pit_entry_is_found(hosted, tmp_path, step, said):
    found(check(hosted, edited(hosted, tmp_path, step)), "operator entry", said)


def test_who_a_pit_entry_names_is_the_hosts_word(hosted, tmp_path):
    """Beyond what audit verify can show (docs/SECURITY.md): no shoe signs who signed on or what
    a note says, so a dealer's name or a note rewritten passes."""
    db = edited(hosted, tmp_path, rewritten("sign_on", {"dealer": "Zed"}, of="Bob"),
                rewritten("acknowledge", {"note": "nothing to see"}))
    out = check(hosted, db)
    assert out["ok"], out["problem"]



# ---- entries owed by serve's commands (link/operate.py), stored with the frame they name ------
def _owing_shoe(tmp_path):
    """A signing shoe (registered) and a validator past its first burn: (signer, validator,
    its store's path)."""
    s, entry = signing_shoe(A)
    Registry(str(tmp_path / "shoes.json")).put(entry)
    db = str(tmp_path / "audit.db")
    v = Validator(entry, db, watch=False)
    v.receive(framed(s.chained(pr.T_SHOE_START, b"\x00\x01\x08\x02"),
                     s.chained(pr.T_BURN, b"\x00\x01\x00\x00" + bytes([0, 4]))))  # AS, 2S
    return s, v, db


def _held(s, card):
    """The shoe's irregularity: `card` not due, the shoe held."""
    return s.chained(pr.T_IRREGULARITY, b"\x00\x01\x00\x00"
                     + struct.pack(">BBH", 1, card_index(card), 3))


def _resolved(s, card, resolution=1, source=1):
    """The shoe's resolution of that hold (1: void_card, 4: end_shoe; source 1: the host, 0:
    the supervisor's key switch)."""
    return s.chained(pr.T_RESOLUTION, b"\x00\x01\x00\x00"
                     + bytes((resolution, 1, card_index(card), source, 0)))


def _resolving(v, by, resolution="void-card"):
    """What serve's resolve owes the operator log once sent (Operation.resolve, its shoe's
    status as it stood)."""
    from sabot.link.operate import Operation

    op = Operation.__new__(Operation)
    op._attach("/dev/ttyACM0", v, None, None, {"role": "supervisor", "via": "serve"})
    op.cli = False
    return op._owe(op._resolution_entry({"shoe": 1}, resolution, by))


def _entries(db):
    con = sqlite3.connect(db)
    rows = [(seq, json.loads(e)["by"]) for seq, e in con.execute(
        "SELECT seq, entry FROM operations ORDER BY id")]
    con.close()
    return rows


def _refusing(db):
    con = sqlite3.connect(db)
    con.execute("CREATE TRIGGER refused BEFORE INSERT ON frames WHEN NEW.type = 'resolution'"
                " BEGIN SELECT RAISE(ABORT, 'refused by another program'); END")
    con.commit()
    return con


def test_an_owed_entry_is_stored_with_its_frame_once_a_refused_read_comes_again(tmp_path):
    """The read bringing the resolution serve sent is refused (another program's trigger):
    neither the frame nor its entry is stored, and the shoe's resend stores both in one batch,
    the entry once; audit verify finds the resolution's entry."""
    s, v, db = _owing_shoe(tmp_path)
    v.receive(framed(_held(s, "2H")))
    _resolving(v, "sue")
    resolution = _resolved(s, "2H")
    con = _refusing(db)
    with pytest.raises(SabotError, match="refused by another program"):
        v.receive(framed(resolution))
    assert _entries(db) == [] and len(v.owed) == 1  # still owed: the read was not stored
    con.execute("DROP TRIGGER refused")
    con.commit()
    con.close()
    v.receive(framed(resolution))  # the shoe's resend
    assert _entries(db) == [(4, "sue")] and v.owed == () and v.counts["rejected"] == 0
    v.store.close()
    out = check(tmp_path, db)
    assert out["ok"], out["problem"]


def test_each_owed_entry_goes_to_the_resolution_of_its_own_hold(tmp_path):
    """Two entries owed at once (a command whose resolution the store has not kept yet, and one
    for the hold after it), Alice's owed first: each goes to the resolution of the hold it was
    given for, neither to the other's."""
    s, v, db = _owing_shoe(tmp_path)
    v.receive(framed(_held(s, "2H")))
    first = v.state["inventory"]["held"]
    v.state["inventory"]["held"] = {"kind": "card_not_due", "card": "3H"}  # the next hold's
    _resolving(v, "alice")
    v.state["inventory"]["held"] = first
    _resolving(v, "bob")
    v.receive(framed(_resolved(s, "2H")))
    assert _entries(db) == [(4, "bob")] and len(v.owed) == 1
    v.receive(framed(_held(s, "3H"), _resolved(s, "3H")))
    assert _entries(db) == [(4, "bob"), (6, "alice")] and v.owed == ()
    v.store.close()
    out = check(tmp_path, db)
    assert out["ok"], out["problem"]


@pytest.mark.parametrize("how", ["the supervisor's key switch", "another resolution"])
def test_an_owed_entry_ends_when_its_hold_is_resolved_otherwise(tmp_path, how):
    """Alice's command shows no effect (its entry still owed), and the hold is resolved another
    way: her entry is owed no more, so a later resolution from the host that nobody logged is
    not hers, and audit verify names it."""
    s, v, db = _owing_shoe(tmp_path)
    v.receive(framed(_held(s, "2H")))
    _resolving(v, "alice")
    v.receive(framed(_resolved(s, "2H", source=0) if how.startswith("the supervisor")
                     else _resolved(s, "2H", resolution=4)))
    assert v.owed == ()
    v.receive(framed(_held(s, "3H"), _resolved(s, "3H")))
    assert _entries(db) == []
    v.store.close()
    assert "has no operator entry" in check(tmp_path, db)["problem"]


def test_a_store_refusal_is_ridden_out_on_the_link_and_a_commit_in_doubt_is_not(tmp_path):
    """On a link told to ride out refusals (`sabot resolve`'s, once its command is sent), a read
    the store refused is asked of the shoe again; a commit whose outcome is in doubt (a
    PostgreSQL server lost as the COMMIT went, raised as the store raises it) is no refusal: it
    reaches the command, which then says so rather than calling the read unstored."""
    import os

    from sabot.audit.store import StoreRefused
    from sabot.link.host import HostLink
    from sabot.link.transport import ShoePort

    s, v, db = _owing_shoe(tmp_path)
    master, slave = os.openpty()
    port = ShoePort(os.ttyname(slave), open_timeout=5)
    os.close(slave)
    try:
        link = HostLink(port, v, None)
        met = []
        link.on_store_refused = met.append
        con = _refusing(db)
        os.write(master, framed(_held(s, "2H")))
        assert [r[1] for r in link.pump(1.0)] == ["accepted"] and not met  # no resolution
        resolution = _resolved(s, "2H")
        os.write(master, framed(resolution))
        assert link.pump(1.0) == [] and isinstance(met[-1], StoreRefused)
        assert link.validator.awaiting_status and v.state["last_seq"] == 3
        con.execute("DROP TRIGGER refused")
        con.commit()
        con.close()
        commit = v.store.commit

        def in_doubt():
            commit()
            raise SabotError("audit database x: lost as a read was committed, and stopped "
                             "before it came back")

        v.store.commit = in_doubt
        os.write(master, framed(resolution))
        with pytest.raises(SabotError, match="lost as a read was committed"):
            link.pump(1.0)
    finally:
        port.close()
        os.close(master)
        v.store.close()

"""The shoe's witnessed log against what no store shows about itself (docs/SECURITY.md): each
attack below is first shown to pass `audit verify` on the store alone, then found by `audit
verify --witness-state` with the state of a witness that cosigned the shoe's checkpoints —
even with every host file (store, registry) rewritten consistently:
- the tail of a shoe deleted with everything after it (a prefix of the store's row chain);
- the shoe's whole history swapped for another the same shoe dealt;
- the registry's key replaced and every frame signed again with the new one."""

import json
import sqlite3
import subprocess
import time

import pytest
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from sabot import keys, note, tlog
from sabot import protocol as pr
from sabot.audit.cosign import load_witness_state
from sabot.audit.validator import Validator
from sabot.audit.verify import verify
from sabot.errors import SabotError
from sabot.game.cards import shuffled_shoe
from sabot.registry import Registry, ShoeEntry
from sabot.virtual import capture_gen
from sabot.witness.service import Witness

from kit import SABOT

SHOE = 0x5AB0_0023


def entry_of(key, shoe_id=SHOE):
    e = ShoeEntry(shoe_id)
    e.add_public_key(1, keys.public_pem(key.public_key()))
    return e


def dealt(db, key, seed, witness=None, shoe_id=SHOE):
    """A store of one whole shoe the shoe signed with `key`, a read per frame (as a slow
    dealer's), a checkpoint after every tenth frame and at the end; each checkpoint sent to
    `witness` as the pit does."""
    signer = capture_gen.ShoeSigner(key, shoe_id)
    frames, _ = capture_gen.shoe_frames(signer, shuffled_shoe(8, seed), 1)
    entry = entry_of(key, shoe_id)
    v = Validator(entry, str(db), watch=False)
    last = 0
    for i in range(len(frames)):
        got = [frames[i]] + ([signer.checkpoint(i + 1)] if (i + 1) % 10 == 0
                             or i + 1 == len(frames) else [])
        v.receive(b"".join(pr.encode_frame(r) for r in got))
        if witness is not None and len(got) > 1:
            cp = pr.parse(got[1])
            proof = tlog.consistency_proof(v.log.hashes, last, cp.seq) if last else []
            answer = witness.add_checkpoint(tlog.add_checkpoint_body(
                last, proof, pr.checkpoint_note(cp, key.public_key())))
            assert answer.status == 200, answer.body
            last = cp.seq
    v.store.close()
    return len(frames)


@pytest.fixture(scope="module")
def witnessed(tmp_path_factory):
    d = tmp_path_factory.mktemp("witnessed")
    key = ec.generate_private_key(ec.SECP256R1())
    w = Witness(str(d / "w.db"), ed25519.Ed25519PrivateKey.generate(), {SHOE: entry_of(key)},
                "regulator.example/w1")
    size = dealt(d / "pit.db", key, 7, w)
    state = d / "state.json"
    state.write_text(json.dumps(w.state()))
    vkey = w.vkey
    w.close()
    return {"dir": d, "key": key, "size": size, "state": state, "vkey": vkey,
            "logs": load_witness_state(str(state), [note.Verifier.parse(vkey)])}


def test_the_store_as_witnessed_passes(witnessed):
    logs = witnessed["logs"]
    assert [(w.shoe_id, w.size) for w in logs] == [(SHOE, witnessed["size"])]
    got = verify(str(witnessed["dir"] / "pit.db"), {SHOE: entry_of(witnessed["key"])}, logs)
    assert got["ok"], got["problem"]
    assert [{k: w[k] for k in ("shoe_id", "witness", "size")} for w in got["witnessed"]] == [
        {"shoe_id": SHOE, "witness": "regulator.example/w1", "size": witnessed["size"]}]
    assert abs(got["witnessed"][0]["state_at"] - time.time()) < 600
    assert got["unwitnessed"] == []


def test_a_shoe_no_witness_holds_is_named_not_witnessed(witnessed, tmp_path):
    db = tmp_path / "two.db"
    db.write_bytes((witnessed["dir"] / "pit.db").read_bytes())
    other = ec.generate_private_key(ec.SECP256R1())
    dealt(db, other, 9, shoe_id=SHOE + 1)  # a second shoe the casino never sent the witness
    entries = {SHOE: entry_of(witnessed["key"]), SHOE + 1: entry_of(other, SHOE + 1)}
    got = verify(str(db), entries, witnessed["logs"])
    assert got["ok"] and got["unwitnessed"] == [SHOE + 1], got["problem"]


def test_a_deleted_tail_passes_alone_and_is_found_against_the_witness(witnessed, tmp_path):
    db = tmp_path / "cut.db"
    db.write_bytes((witnessed["dir"] / "pit.db").read_bytes())
    con = sqlite3.connect(db)
    triggers = con.execute("SELECT name, sql FROM sqlite_master WHERE type='trigger'").fetchall()
    for name, _ in triggers:
        con.execute(f"DROP TRIGGER {name}")
    # the store's tail: everything after the read that stored frame 100 (its link state row)
    fid = con.execute("SELECT id FROM frames WHERE seq=100 AND type!='checkpoint'").fetchone()[0]
    cut = con.execute("SELECT MIN(chain_no) FROM link_state WHERE chain_no > (SELECT chain_no"
                      " FROM frames WHERE id=?)", (fid,)).fetchone()[0]
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    for t in tables:
        con.execute(f"DELETE FROM {t} WHERE chain_no > ?", (cut,))
    for _, sql in triggers:
        con.execute(sql)
    con.commit()
    con.close()
    entries = {SHOE: entry_of(witnessed["key"])}
    alone = verify(str(db), entries)
    assert alone["ok"], alone["problem"]  # what a store alone cannot show
    got = verify(str(db), entries, witnessed["logs"])
    assert not got["ok"]
    assert "holds its log only up to 100 frames" in got["problem"]
    assert "deleted" in got["problem"]


def test_a_history_swapped_for_another_passes_alone_and_is_found(witnessed, tmp_path):
    other = tmp_path / "other.db"
    n = dealt(other, witnessed["key"], 8)  # the same shoe, another shoe of cards
    entries = {SHOE: entry_of(witnessed["key"])}
    alone = verify(str(other), entries)
    assert alone["ok"], alone["problem"]
    got = verify(str(other), entries, witnessed["logs"])
    assert not got["ok"]
    assert ("is another one" if n >= witnessed["size"] else "only up to") in got["problem"]


def test_a_replaced_registry_key_and_frames_signed_again_pass_alone_and_are_found(
        witnessed, tmp_path):
    """The insider's attack of SECURITY.md: a key of their own in the registry as version 1, and
    the same history signed again with it (replay and audit verify passed it)."""
    mine = ec.generate_private_key(ec.SECP256R1())
    forged = tmp_path / "forged.db"
    dealt(forged, mine, 7)  # the same cards, every frame signed again
    entries = {SHOE: entry_of(mine)}
    alone = verify(str(forged), entries)
    assert alone["ok"], alone["problem"]
    got = verify(str(forged), entries, witnessed["logs"])
    assert not got["ok"] and "the registry's key was replaced" in got["problem"]


@pytest.mark.board
def test_a_state_not_signed_by_the_witness_given_is_refused_in_one_line(witnessed, tmp_path):
    """The state is signed whole: a log's size lowered (a copy from before a tail was cut, as it
    were) or its line left out, and the copy no longer holds; the per-log fields beside the
    signed text are not what is checked."""
    state = json.loads(witnessed["state"].read_text())
    size = state["logs"][0]["size"]
    verifiers = [note.Verifier.parse(witnessed["vkey"])]
    for edit in (lambda s: s.replace(f" {size} ", " 100 ", 1),  # a size lowered
                 lambda s: s.replace(s.split("\n")[1] + "\n", "", 1)):  # the log left out
        bad = tmp_path / "state.json"
        bad.write_text(json.dumps(dict(state, signed=edit(state["signed"]))))
        with pytest.raises(SabotError, match="not signed by a witness given"):
            load_witness_state(str(bad), verifiers)
    pruned = tmp_path / "pruned.json"
    pruned.write_text(json.dumps(dict(state, logs=[])))  # the people's list only: still all
    assert [w.size for w in load_witness_state(str(pruned), verifiers)] == [size]
    reg = tmp_path / "shoes.json"
    Registry(str(reg)).put(entry_of(witnessed["key"]))
    base = [*SABOT, "audit", "verify", "--db", str(witnessed["dir"] / "pit.db"), "--registry",
            str(reg)]
    r = subprocess.run([*base, "--witness-state", str(bad), "--witness", witnessed["vkey"]],
                       capture_output=True, text=True)
    assert r.returncode != 0 and r.stderr.count("\n") == 1, r.stderr
    r = subprocess.run([*base, "--witness-state", str(witnessed["state"])],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "--witness VKEY" in r.stderr, r.stderr
    r = subprocess.run([*base, "--witness-state", str(witnessed["state"]), "--witness",
                        witnessed["vkey"]], capture_output=True, text=True)
    assert r.returncode == 0 and "as witnessed: shoe" in r.stdout, r.stderr


def test_a_checkpoint_with_a_chain_it_does_not_sign_and_a_witness_answering_junk(witnessed):
    """A checkpoint's signature covers its note, not its header: one carrying a chain (an
    unsigned field someone put there) is no frame the shoe sends. A witness whose 409 names no
    size, or that speaks no HTTP, is one reason, never the pit's cosigning thread stopped."""
    from sabot.audit.cosign import WitnessSpec, cosign

    signer = capture_gen.ShoeSigner(witnessed["key"], SHOE)
    signer.chained(pr.T_SHOE_START, b"\x00\x01\x08\x02")
    raw = signer.checkpoint()
    assert pr.parse(raw).seq == 1
    moved = raw[:14] + b"\xee" * 32 + raw[46:]  # the header's chain field
    with pytest.raises(pr.FrameError, match="malformed_payload"):
        pr.parse(moved)
    w = WitnessSpec("http://127.0.0.1:9", note.Verifier.parse(witnessed["vkey"]))
    signed = pr.checkpoint_note(pr.parse(raw), witnessed["key"].public_key())
    for answer in ((409, "\u00b2"), (409, "9" * 40), (500, ""), (200, "no signature\n")):
        line, why = cosign(w, signed, 1, signer.log.hashes, {}, send=lambda url, body,
                           a=answer: a)
        assert line is None and why, answer


def test_a_signature_made_high_on_the_cable_is_refused_and_the_log_holds(witnessed, tmp_path):
    """(r, n - s) verifies as (r, s) does, but a frame's exact bytes are a leaf of the shoe's log:
    only the low form the shoe sends is taken (firmware/shoe/element_wire.py low_s), so a copy
    changed on the cable is refused and the genuine frame, sent again, keeps the store's log the
    shoe's (its checkpoint holds, no checkpoint_mismatch)."""
    signer = capture_gen.ShoeSigner(witnessed["key"], SHOE)
    frames, _ = capture_gen.shoe_frames(signer, shuffled_shoe(8, 3), 1)
    genuine = frames[1]  # the burn: signed
    s = int.from_bytes(genuine[-32:], "big")
    assert s <= pr.P256_ORDER // 2  # what the shoe (and this stand-in) signs
    high = genuine[:-32] + (pr.P256_ORDER - s).to_bytes(32, "big")
    v = Validator(entry_of(witnessed["key"]), str(tmp_path / "a.db"), watch=False)
    got = v.receive(b"".join(pr.encode_frame(r) for r in (frames[0], high)))
    assert [(verdict, reason) for _, verdict, reason in got] == [("accepted", None),
                                                                 ("rejected", "bad_signature")]
    v.receive(b"".join(pr.encode_frame(r) for r in (*frames[1:20], signer.checkpoint(20))))
    assert v.checkpoint is not None and v.checkpoint.seq == 20
    assert not [a for a in v.alarms if a["kind"] == "checkpoint_mismatch"]
    v.store.close()


def test_a_casino_with_two_stores_checks_each_shoe_in_its_own(tmp_path):
    """One witness holds two shoes' logs, each shoe writing to its own store: each store alone
    lacks the other's log (refused: "never stored here"), and with only_stored (`audit verify
    --only-stored-shoes`) the other is named, not required, while its own is still checked."""
    keys_ = [ec.generate_private_key(ec.SECP256R1()) for _ in range(2)]
    entries = {SHOE + i: entry_of(k, SHOE + i) for i, k in enumerate(keys_)}
    w = Witness(str(tmp_path / "w.db"), ed25519.Ed25519PrivateKey.generate(), entries,
                "regulator.example/w1")
    for i, k in enumerate(keys_):
        dealt(tmp_path / f"pit{i}.db", k, 20 + i, w, shoe_id=SHOE + i)
    state = tmp_path / "state.json"
    state.write_text(json.dumps(w.state()))
    logs = load_witness_state(str(state), [note.Verifier.parse(w.vkey)])
    w.close()
    alone = verify(str(tmp_path / "pit0.db"), entries, logs)
    assert not alone["ok"] and "never stored here" in alone["problem"]
    got = verify(str(tmp_path / "pit0.db"), entries, logs, only_stored=True)
    assert got["ok"] and got["elsewhere"] == [SHOE + 1], got["problem"]
    assert [x["shoe_id"] for x in got["witnessed"]] == [SHOE]

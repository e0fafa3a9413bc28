"""Exit status (CONTRACTS "Exit status"): 0 when the record verified, 1 when it did not (a rejected
frame, an alarm, a store that does not hold), 2 on bad input, usage or I/O, 130 when interrupted;
each failure one line on stderr. Real runs of `sabot.cli.main` in-process, on captures and stores
made by capture_gen's signer (no board)."""

import json
import sys

import pytest

from sabot import protocol as pr
from sabot.audit.validator import Validator
from sabot.cli import main
from sabot.errors import BAD_INPUT, INTERRUPTED, NOT_VERIFIED, OK, NotVerified, SabotError
from sabot.registry import Registry
from sabot.release.verify_firmware import NoIntegrityAnswer
from sabot.virtual import capture_gen

from kit import flip_a_stored_result


@pytest.fixture(scope="module")
def shoe(tmp_path_factory):
    """A whole shoe's capture and the registry holding its public key."""
    d = tmp_path_factory.mktemp("exit")
    entry, cap, _ = capture_gen.generate(str(d), 1, seed=5)
    Registry(str(d / "shoes.json")).put(entry)
    (d / "cap.bin").write_bytes(cap)
    return d, entry, cap


def run(capsys, *args):
    """(exit status, stdout, stderr) of `sabot ARGS`."""
    status = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return status, out, err


def one_line(err):
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_replay_of_an_authentic_capture_exits_0(shoe, capsys):
    d, _, _ = shoe
    status, out, err = run(capsys, "replay", d / "cap.bin", "--registry", d / "shoes.json")
    assert status == OK, err
    assert " 0 rejected" in out


def test_replay_of_a_capture_with_a_rejected_frame_exits_1(shoe, tmp_path, capsys):
    d, _, cap = shoe
    parts = [p for p in cap.split(b"\x00") if p]
    raw = bytearray(pr.decode_frame(parts[1]))
    raw[-1] ^= 1  # the burn's signature, one bit off
    parts[1] = pr.encode_frame(bytes(raw))[:-1]
    (tmp_path / "bad.bin").write_bytes(b"".join(p + b"\x00" for p in parts))
    status, _, err = run(capsys, "replay", tmp_path / "bad.bin", "--registry", d / "shoes.json")
    assert status == NOT_VERIFIED
    assert "frames rejected" in one_line(err) and "bad_signature" in err


def test_replay_of_a_missing_capture_or_registry_exits_2(shoe, tmp_path, capsys):
    d, _, _ = shoe
    status, _, err = run(capsys, "replay", tmp_path / "none.bin", "--registry", d / "shoes.json")
    assert status == BAD_INPUT and "cannot read capture" in one_line(err)
    status, _, err = run(capsys, "replay", d / "cap.bin", "--registry", tmp_path / "no.json")
    assert status == BAD_INPUT and "no shoe registry at" in one_line(err)
    shoe_file = tmp_path / "myshoe.txt"
    shoe_file.write_text("AS 2H 3D\nCUT\n")  # a shoe file passed where a capture belongs
    status, out, err = run(capsys, "replay", shoe_file, "--registry", d / "shoes.json")
    assert status == BAD_INPUT and "holds no sabot frame" in one_line(err) and not out


def stored(entry, cap, db):
    v = Validator(entry, str(db))
    v.receive(cap)
    v.finish()
    v.store.close()


def test_audit_verify_exits_0_on_a_sound_store_and_1_on_a_tampered_one(shoe, tmp_path, capsys):
    d, entry, cap = shoe
    db = tmp_path / "a.db"
    stored(entry, cap, db)
    status, out, err = run(capsys, "audit", "verify", "--db", db, "--registry", d / "shoes.json")
    assert status == OK and out.startswith("ok: "), err
    flip_a_stored_result(db)
    status, _, err = run(capsys, "audit", "verify", "--db", db, "--registry", d / "shoes.json")
    assert status == NOT_VERIFIED and "does not hold" in one_line(err)


def test_audit_verify_of_a_file_that_is_no_store_exits_2(shoe, tmp_path, capsys):
    d, _, _ = shoe
    (tmp_path / "x.db").write_text("not a database at all\n" * 100)
    status, _, err = run(capsys, "audit", "verify", "--db", tmp_path / "x.db", "--registry",
                         d / "shoes.json")
    assert status == BAD_INPUT, err
    one_line(err)


def test_a_usage_error_exits_2_in_one_line(capsys):
    for args in (["replay"], ["serve", "--db", "x.db", "--listen", "nowhere"],
                 ["board", "--listen", "127.0.0.1:70000"], ["no-such-command"]):
        with pytest.raises(SystemExit) as e:
            main(args)
        assert e.value.code == BAD_INPUT, args
        assert "--help" in one_line(capsys.readouterr().err), args


def test_bad_input_exits_2(tmp_path, capsys):
    (tmp_path / "r.jsonl").write_text("{not json\n")
    status, _, err = run(capsys, "settle", tmp_path / "r.jsonl")
    assert status == BAD_INPUT and "not JSON" in one_line(err)
    # a registry nested thousands deep: one line, no traceback (it was a RecursionError)
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    status, _, err = run(capsys, "audit", "verify", "--db", tmp_path / "a.db", "--registry",
                         tmp_path / "deep.json")
    assert status == BAD_INPUT and "nested too deep" in one_line(err)
    # a huge registry is not read whole, and a table name with a line break or an escape
    # sequence in it is no name: one line each
    (tmp_path / "huge.json").write_text('{"shoes": [], "pad": "' + " " * (5 << 20) + '"}')
    status, _, err = run(capsys, "replay", tmp_path / "r.jsonl", "--registry",
                         tmp_path / "huge.json")
    assert status == BAD_INPUT and "over 4 MB" in one_line(err)
    for name in ("BAC\n07", "BAC\x1b[2J07"):
        (tmp_path / "odd.json").write_text(json.dumps({"shoes": [{"shoe_id": 7, "table": name}]}))
        status, _, err = run(capsys, "replay", tmp_path / "r.jsonl", "--registry",
                             tmp_path / "odd.json")
        assert status == BAD_INPUT and "unprintable character" in one_line(err), name
        assert "\x1b" not in err


def test_ctrl_c_exits_130(monkeypatch, capsys):
    class Interrupted:
        def __iter__(self):
            raise KeyboardInterrupt

        def read(self):
            raise KeyboardInterrupt

    monkeypatch.setattr(sys, "stdin", Interrupted())
    status, _, err = run(capsys, "roads")
    assert status == INTERRUPTED and "interrupted" in one_line(err)


def test_errors_carry_their_exit_status():
    assert SabotError("x").exit_status == BAD_INPUT
    assert NotVerified("x").exit_status == NOT_VERIFIED
    assert isinstance(NotVerified("x"), SabotError)
    assert NoIntegrityAnswer("x").exit_status == BAD_INPUT  # a silent shoe: I/O, not a verdict


def test_a_command_refused_before_the_shoe_is_asked_exits_2(tmp_path, capsys):
    """A forgotten --db, a store another validator holds, a file that is not a sabot store: bad
    input (2), never a verdict on the record (1), each in one line."""
    import sqlite3

    from sabot import keys
    from sabot.audit.store import open_store

    key = tmp_path / "k"
    keys.create(str(key))
    port = ("--port", "socket://127.0.0.1:1", "--key", key, "--registry", tmp_path / "none.json")
    with pytest.raises(SystemExit) as e:
        main(["status", *map(str, port)])
    assert e.value.code == BAD_INPUT and "--db" in one_line(capsys.readouterr().err)
    con = sqlite3.connect(tmp_path / "other.db")  # another program's database
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    held = open_store(str(tmp_path / "held.db"))
    try:
        for db, said in (("held.db", "in use by another validator"),
                         ("other.db", "not a sabot audit database")):
            for cmd in ("validate", "status"):
                status, _, err = run(capsys, cmd, *port, "--db", tmp_path / db)
                assert status == BAD_INPUT and said in one_line(err), (cmd, err)
    finally:
        held.close()

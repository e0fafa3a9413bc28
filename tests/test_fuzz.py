"""Fuzzing the parsers that face the outside: the firmware's sensor decoder and command intake (on
real MicroPython, seeded random bytes) and the host's frame intake (hypothesis)."""

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sabot import protocol as pr
from sabot.audit.validator import Validator
from sabot.virtual import capture_gen

from kit import ROOT

MP = ROOT / "tests" / "mp"


@pytest.mark.board
def test_sensor_decoder_survives_10000_random_cases_and_resyncs(mpy):
    r = mpy(MP / "fuzz_sensor.py", 10000, 1)
    assert r.returncode == 0, r.stderr.decode()
    cases, resynced, phantom, flips, two_flips = map(int, re.findall(rb"\d+", r.stdout))
    assert cases == resynced == 10000
    assert phantom == 0 and flips == 0 and two_flips == 0


@pytest.mark.board
def test_command_intake_survives_random_bytes_and_obeys_none(mpy, shoe_flash, element):
    flash, _, _ = shoe_flash
    r = mpy(MP / "fuzz_commands.py", flash, element, 3000, 2)
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.split() == [b"cases", b"3000", b"accepted", b"0"]


_GENUINE = {}


def genuine(tmp_path_factory=None):
    if not _GENUINE:
        import tempfile

        tmp = tempfile.mkdtemp()
        key, cap, _ = capture_gen.generate(tmp, 1, seed=3)
        parts = [p + b"\x00" for p in cap.split(b"\x00")[:-1]]
        raws = {pr.decode_frame(p[:-1]) for p in parts}
        _GENUINE.update(key=key, parts=parts, raws=raws, tmp=tmp)
    return _GENUINE


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(noise=st.lists(st.binary(max_size=60), min_size=1, max_size=8), where=st.integers(0, 30),
       flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 7)), max_size=4))
@pytest.mark.long
def test_validator_never_accepts_what_was_not_sent_and_resyncs(noise, where, flips):
    g = genuine()
    parts = list(g["parts"][:40])
    stream = bytearray(b"".join(parts[:where]) + b"".join(noise) + b"\x00"
                       + b"".join(parts[where:]))
    for pos, bit in flips:
        stream[pos % len(stream)] ^= 1 << bit
    import os
    import tempfile

    fd, db = tempfile.mkstemp(dir=g["tmp"], suffix=".db")
    os.close(fd)
    v = Validator(g["key"], db)
    verdicts = v.receive(bytes(stream))
    v.store.close()
    for frame, verdict, _ in verdicts:
        if verdict == "accepted":
            assert frame.raw in g["raws"]  # only frames the shoe really sent
    if not flips and where == 0:
        # Noise before the first frame: the genuine stream after it verifies in full.
        assert sum(1 for _, v_, _ in verdicts if v_ == "accepted") == 40


# JSON a person or a script can hand the host: nested past any parser's depth, nested just short
# of it (then each reader meets it), cut short, not UTF-8, of the wrong kinds, a number past
# Python's digits limit
DEEP = 100_000
FIELDS = ("table", "round", "wagers", "accounts", "shoes", "winner", "logs", "name", "password",
          "action", "capture", "state")
BAD_JSON = {
    "nested": b"[" * DEEP + b"]" * DEEP,
    "nested_open": b'{"a": ' * DEEP,
    "nested_values": b"{" + b", ".join(b'"%s": %s%s' % (f.encode(), b"[" * 900, b"]" * 900)
                                       for f in FIELDS) + b"}",
    "truncated": b'{"table": {"game": "baccarat"}, "accounts": [{"name": "al',
    "not_utf8": b'{"name": "\xff\xfe", "accounts": "\xc3("}',
    "wrong_types": b'{"table": 5, "round": "x", "wagers": {}, "accounts": [7], "shoes": [[]], '
                   b'"winner": [], "logs": {}, "name": 1, "password": [], "capture": 3}',
    "not_an_object": b'["accounts", "shoes"]',
    "long_number": b'{"table": ' + b"9" * 5000 + b"}",
}


def _asgi(app, path, body, headers=()):
    """(status, body) of one POST to an ASGI app, run in this process: an exception the app does
    not answer comes out here."""
    import asyncio

    sent = []

    async def receive():
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
             "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
             "root_path": "", "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 5000),
             "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
                         *headers]}
    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    return start["status"], b"".join(m.get("body", b"") for m in sent
                                     if m["type"] == "http.response.body")


@pytest.mark.parametrize("kind", sorted(BAD_JSON))
def test_every_json_input_is_refused_in_one_line_whatever_it_holds(cli, tmp_path, kind):
    """Every command that reads JSON a user gives it (a file, standard input, a capture's marks)
    and serve's JSON API: one line on stderr and exit 2 (or a 4xx with one JSON line), never a
    traceback, whatever the JSON."""
    import json

    from starlette.applications import Starlette

    from sabot import note
    from sabot.audit.replay import MARK
    from sabot.pit.accounts import Accounts
    from sabot.pit.console import Console

    from kit import registry_of

    data = BAD_JSON[kind]
    given = tmp_path / "given.json"
    given.write_bytes(data)
    reg = registry_of(tmp_path, 0x5AB00001)
    capture = tmp_path / "capture.bin"
    capture.write_bytes(MARK + data + b"\x00")
    vkey = note.Verifier("w", note.COSIGNATURE, bytes(32)).vkey()
    runs = [
        ("settle", given),
        ("settle", "--table", "bac1", "--registry", given),
        ("roads", given),
        ("accounts", "list", "--accounts", given),
        ("serve", "--accounts", given, "--db", tmp_path / "serve.db", "--registry", reg,
         "--listen", "127.0.0.1:0"),
        ("audit", "verify", "--db", tmp_path / "audit.db", "--registry", reg, "--witness-state",
         given, "--witness", vkey),
        ("replay", capture, "--registry", reg),
    ]
    for args in runs:
        r = cli(*args)
        assert "Traceback" not in r.stderr, (args, r.stderr)
        # (a capture whose only mark is no mark is bytes taken: replay says they hold no frame,
        # 2, or none of the shoe's, its verdict 1)
        assert r.returncode == 2 or (args[0] == "replay" and r.returncode == 1), (args, r)
        assert len(r.stderr.strip().splitlines()) == 1, (args, r)
    stdin = cli("settle", stdin=data.decode("utf-8", "replace"))
    assert stdin.returncode == 2 and len(stdin.stderr.strip().splitlines()) == 1, stdin

    console = Console(Accounts(str(tmp_path / "none.json"), {}), None, lambda name: None,
                      list, lambda title, body: None)
    app = Starlette(routes=console.routes())
    for path in ("/api/login", "/api/operate"):
        status, body = _asgi(app, path, data[:4000], [(b"x-csrf-token", b"x")])
        assert 400 <= status < 500, (path, status, body)
        assert len(body.splitlines()) == 1 and "error" in json.loads(body), (path, body)


STORED_JSON = {"nested": "[" * 100_000 + "]" * 100_000, "not_json": '{"event": "initial_ca',
               "not_utf8": b'{"event": "\xff"}', "not_an_object": "[3, 1]"}


@pytest.mark.parametrize("kind", sorted(STORED_JSON))
def test_an_edited_stored_record_is_one_line_and_a_finding_never_a_traceback(cli, capsys,
                                                                             tmp_path, kind):
    """A record row of a real store edited by hand (its trigger dropped and put back), its JSON
    nested past the parser's depth, not JSON, not UTF-8 (TEXT, as an edit in the sqlite3 shell
    stores it) or no object: history says which row in one line, exit 2; audit verify names the
    row as altered, exit 1; the pit's tables skip it, say so once in serve's log, and follow the
    rows after it."""
    import sqlite3

    from sabot.audit.store_sqlite import TRIGGERS
    from sabot.pit import api
    from sabot.pit.tables import Pit

    from kit import validated_capture

    v = validated_capture(tmp_path, 1, seed=5)
    db = str(tmp_path / "audit.db")
    con = sqlite3.connect(db)
    con.execute("DROP TRIGGER records_append_only_u")
    value = STORED_JSON[kind]
    cast = "CAST(? AS TEXT)" if isinstance(value, bytes) else "?"
    con.execute(f"UPDATE records SET record={cast} WHERE id=3", (value,))  # round 1's cards
    con.execute(TRIGGERS["records_append_only_u"])
    con.commit()
    con.close()

    history = cli("history", "--db", db)
    assert "Traceback" not in history.stderr, history.stderr
    assert history.returncode == 2, history
    assert history.stderr.strip().splitlines() == [history.stderr.strip()], history
    assert "records id 3" in history.stderr, history.stderr

    verified = cli("audit", "verify", "--db", db, "--registry", tmp_path / "shoes.json")
    assert "Traceback" not in verified.stderr, verified.stderr
    assert verified.returncode == 1, verified
    assert len(verified.stderr.strip().splitlines()) == 1, verified
    assert "records id 3 (row" in verified.stderr and "was altered" in verified.stderr, verified

    pit = Pit(db, [v.config])
    pit.refresh()
    assert pit.unreadable_rows == 1 and pit.problem is None, (pit.unreadable_rows, pit.problem)
    floor = api.floor_json(pit)
    table = pit.table(floor["pits"][0]["tables"][0]["table"])
    assert table is not None and api.detail(pit, table)["rounds"], "no round followed after it"
    logged = capsys.readouterr().err
    assert logged.count("records id 3") == 1 and "Traceback" not in logged, logged
    pit.refresh()
    assert pit.unreadable_rows == 1 and "records id 3" not in capsys.readouterr().err

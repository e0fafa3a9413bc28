"""Bad input found in the bench trial, and its kin: each one line on stderr, a non-zero exit, no
traceback. Shoe files that cannot be dealt are refused before anything runs. Every command's
--help has a description, its defaults and an example; --version names the firmware."""

import json
import os
import re
import subprocess

import pytest

from sabot import keys
from sabot.cli import HelpFormatter, build_parser
from sabot.errors import SabotError

from kit import SABOT, registry_of

TABLE = {"game": "baccarat", "vigorish": "at_payout"}
ROUND = {"player": ["AS", "4H", "KC"], "banker": ["KD", "7C"]}
WAGER = {"seat": 3, "wager": "banker", "amount_cents": 500}


def one_line_failure(r):
    assert r.returncode != 0, r.stdout
    assert "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def request(**over):
    req = {"table": dict(TABLE), "round": dict(ROUND), "wagers": [dict(WAGER)]}
    for where, value in over.items():
        part, _, field = where.partition("__")
        if field:
            req[part][field] = value
        else:
            req[part] = value
    return json.dumps(req)


@pytest.mark.parametrize("text", [
    request(round__player=[1, 2]),
    request(table__ez="yes"),
    request(table__side_wagers="house_money"),
    request(markers="x"), request(markers=[1, 2]), request(markers={"abc": 5}),
    request(markers={"3": "abc"}), request(markers={"3": -500}), request(collect_markers=5),
    request(markers={"3": "abc"}, table__vigorish="deferred"),
    request(collect_markers=5, table__vigorish="deferred"),
])
def test_settle_refuses_values_of_the_wrong_kind_in_one_line(cli, text):
    one_line_failure(cli("settle", stdin=text))


def test_settle_refuses_a_binary_file(cli, tmp_path):
    f = tmp_path / "blob"
    f.write_bytes(bytes(range(256)) * 4)
    one_line_failure(cli("settle", f))


def test_provision_refuses_bad_ids_and_paths(cli, tmp_path):
    flash = tmp_path / "flash"
    for extra in (["--shoe-id", "99999999999"], ["--shoe-id", "x"], ["--shoe-id", "-5"]):
        one_line_failure(cli("provision", "--key", tmp_path / "k", "--flash", flash, *extra))
    afile = tmp_path / "afile"
    afile.write_text("x")
    one_line_failure(cli("provision", "--key", tmp_path / "k2", "--flash", afile))
    one_line_failure(cli("provision", "--key", tmp_path / "no" / "dir" / "k", "--flash", flash))


def test_provision_gives_a_registered_shoe_id_to_no_new_element(cli, tmp_path):
    """A second element under a registered id would replace that shoe's key in the registry
    (its genuine frames rejected from then on): refused before the shoe is touched. The same shoe
    provisioned again for the same key is kept."""
    reg = tmp_path / "shoes.json"
    first = ("provision", "--key", tmp_path / "k1", "--flash", tmp_path / "a", "--shoe-id", "7",
             "--registry", reg)
    assert cli(*first).returncode == 0
    before = reg.read_text()
    r = cli("provision", "--key", tmp_path / "k2", "--flash", tmp_path / "b", "--shoe-id", "7",
            "--registry", reg)
    one_line_failure(r)
    assert "registered already" in r.stderr and reg.read_text() == before
    assert not (tmp_path / "b" / "identity").exists()
    r = cli(*first)  # kept: the same element, the same key
    assert r.returncode == 0 and json.loads(reg.read_text()) == json.loads(before)
    one_line_failure(cli("provision", "--key", tmp_path / "k1", "--port", "socket://127.0.0.1:1",
                         "--shoe-id", "7", "--registry", reg))  # refused before any port opens
    assert reg.read_text() == before


def test_provision_refuses_a_registry_it_could_not_write_before_the_shoe_is_touched(cli,
                                                                                   tmp_path):
    """Provisioning locks the element for good, so a registry that could not take the shoe's
    entry afterwards (its folder missing, or the file too full for another entry) is refused
    first: nothing is made, no key, no element, nothing left beside the registry."""
    for reg in (tmp_path / "no" / "dir" / "shoes.json", tmp_path / "full.json"):
        if reg.name == "full.json":
            reg.write_text('{"shoes": []}' + " " * (4 * 1024 * 1024 - 20))
        r = cli("provision", "--key", tmp_path / "k", "--flash", tmp_path / "f", "--registry",
                reg)
        one_line_failure(r)
        assert "cannot write shoe registry" in r.stderr, r.stderr
        assert not (tmp_path / "k").exists() and not (tmp_path / "f").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full.json"]


def test_a_registry_write_that_fails_leaves_no_file_beside_it(tmp_path):
    """The file a registry is written to before it is renamed into place is removed when the
    rename fails, and the registry in memory is as it was; what it could not write is kept for
    the caller (provision prints it)."""
    from sabot.registry import Registry, ShoeEntry

    reg = Registry.load(str(tmp_path / "shoes.json"))
    reg.put(ShoeEntry(1, table="T1"))
    os.remove(reg.path)
    os.mkdir(reg.path)  # the rename onto it fails
    with pytest.raises(SabotError, match="cannot write shoe registry"):
        reg.put(ShoeEntry(2, table="T2"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shoes.json"]
    assert list(reg.shoes) == [1] and '"table": "T2"' in reg.unwritten


def test_other_bad_arguments_fail_in_one_line(cli, tmp_path):
    key = tmp_path / "k"
    keys.create(str(key))
    r = cli("demo", "--capture", tmp_path / "no" / "cap.bin", "--db", tmp_path / "a.db", "--key",
            key)
    one_line_failure(r)
    assert "cannot write capture" in r.stderr and not (tmp_path / "a.db").exists()
    one_line_failure(cli("board", "--listen", "127.0.0.1:99999", "--flash", tmp_path / "f",
                         "--key", key))
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        one_line_failure(cli("board", "--listen", f"127.0.0.1:{s.getsockname()[1]}", "--flash",
                             tmp_path / "f", "--key", key))
    for extra in (["--shoes", "-1"], ["--fault-rate", "-1"], ["--fault-rate", "nan"],
                  ["--fault-rate", "2"]):
        one_line_failure(cli("soak", *extra))
    one_line_failure(cli("replay", key, "--key", tmp_path))
    one_line_failure(cli("replay", key, "--registry", tmp_path / "none.json"))
    one_line_failure(cli("verify-firmware", "--port", "socket://127.0.0.1:1", "--seed", "00",
                         "--key", key))
    one_line_failure(cli("audit", "verify", "--db", tmp_path / "none.db"))
    r = cli("audit", "verify", "--db", tmp_path / "none.db", "--registry", tmp_path / "no.json")
    one_line_failure(r)
    assert "no shoe registry" in r.stderr  # not taken for an altered store
    r = cli("status", "--port", "socket://127.0.0.1:1", "--key", tmp_path, "--db",
            tmp_path / "s.db")
    one_line_failure(r)
    assert "is a directory" in r.stderr and "chmod" not in r.stderr
    one_line_failure(cli("validate", "--port", "socket://127.0.0.1:1", "--key", key, "--db",
                         tmp_path / "v.db", "--baud", "fast"))


def test_a_version_1_key_file_is_refused_in_one_line(cli, tmp_path):
    old = tmp_path / "shoe.key"
    old.write_bytes(bytes(38))
    old.chmod(0o600)
    with pytest.raises(SabotError, match="is a version-1 shared key file; make a command key"):
        keys.load(str(old))
    for cmd in (["status", "--port", "socket://127.0.0.1:1", "--key", old, "--db",
                 tmp_path / "s.db"],
                ["demo", "--db", tmp_path / "d.db", "--key", old]):
        r = cli(*cmd)
        one_line_failure(r)
        assert "version-1 shared key file" in r.stderr


def test_a_command_key_is_made_0600_never_over_a_file_and_refused_when_others_read_it(tmp_path):
    import os
    import stat

    path = tmp_path / "host.pem"
    k = keys.create(str(path))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert "BEGIN PUBLIC KEY" in k.public_pem() and keys.load(str(path)).public_pem() == \
        k.public_pem()
    with pytest.raises(SabotError, match="never overwritten"):
        keys.create(str(path))
    path.chmod(0o644)
    with pytest.raises(SabotError, match="readable by others"):
        keys.load(str(path))
    junk = tmp_path / "junk.pem"
    junk.write_text("not a key")
    junk.chmod(0o600)
    with pytest.raises(SabotError, match="not a sabot key file"):
        keys.load(str(junk))


@pytest.mark.board
def test_bench_with_stdin_closed_says_it_needs_a_technician(tmp_path):
    from sabot.virtual.board import VirtualBoard

    from kit import SIGN_MS, provision_shoe

    key, flash, _, registry = provision_shoe(tmp_path)
    shoe = tmp_path / "shoe.txt"
    shoe.write_text("AS 9S 2S KD 3H 3C 8D KS 5H 4C 6D CUT 7S 9H 2D TC JH QS")
    board = VirtualBoard(flash, sign_ms=SIGN_MS).start()
    try:
        r = subprocess.run([*SABOT, "bench", shoe, "--port", board.url, "--key", key.path,
                            "--registry", registry, "--db", tmp_path / "b.db"],
                           capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
    finally:
        board.stop()
    assert r.returncode != 0 and "stdin is closed" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("text,said", [
    ("AS " * 9 + "2H 3H 4H 5H 6H", "9 copies of AS"),
    ("# nothing here\n", "holds no cards"),
    ("9S 2S 3S 4S", "too short"),
])
def test_deal_demo_and_bench_refuse_a_shoe_that_cannot_be_dealt(cli, tmp_path, text, said):
    shoe = tmp_path / "shoe.txt"
    shoe.write_text(text)
    for cmd in (["deal", shoe], ["demo", "--shoe", shoe, "--db", tmp_path / "d.db", "--key",
                                 tmp_path / "k"], ["bench", shoe]):
        r = cli(*cmd)
        one_line_failure(r)
        assert said in r.stderr
    assert not (tmp_path / "d.db").exists()


def test_shuffle_writes_a_shoe_that_deals(cli, tmp_path):
    out = tmp_path / "s.txt"
    r = cli("shuffle", "--decks", "2", "--seed", "9", "--cut", "14", "-o", out)
    assert r.returncode == 0, r.stderr
    words = out.read_text().split()
    assert len(words) == 105 and words.index("CUT") == 104 - 14
    one_line_failure(cli("shuffle", "-o", out))  # never overwrites a shoe file
    assert cli("shuffle", "--seed", "9", "--decks", "2", "--cut", "14").stdout == out.read_text()


def test_version_and_every_help_has_a_description_defaults_and_an_example(cli):
    r = cli("--version")
    assert r.returncode == 0 and r.stdout.startswith("sabot ") and "firmware" in r.stdout
    parser = build_parser()
    sub = parser._subparsers._group_actions[0]
    for name, p in sub.choices.items():
        text = p.format_help()
        assert p.description, name
        assert "example: sabot " + name in text, name
        for action in p._actions:
            if action.option_strings and action.default not in (None, False, "==SUPPRESS=="):
                shown = HelpFormatter(name)._get_help_string(action)
                assert "default" in shown, (name, action.dest)
            if "--json" in action.option_strings:
                assert action.help and len(action.help) > 10, name


# ---- honest commands: --db named, refusals before the port, files untouched

PORT_COMMANDS = (["status"], ["new-shoe", "--by", "x"], ["resolve", "void-card", "--by", "x"],
                 ["validate"])


def test_every_command_validating_a_shoes_link_needs_db_and_says_so(cli, tmp_path):
    """One rule, stated in each --help: no default store for a shoe's link (a forgotten --db
    split one shoe's chain across ./sabot.db and the real store); demo alone keeps one."""
    import os

    from sabot.cli.options import DB_RULE

    key = tmp_path / "k"
    keys.create(str(key))
    here = set(os.listdir("."))
    url = ("--port", "socket://127.0.0.1:1")
    for cmd in [*PORT_COMMANDS, ["bench", tmp_path / "shoe.txt"],
                ["serve", "--listen", "127.0.0.1:1"]]:
        r = cli(*cmd, *(url if cmd[0] != "serve" else ()), "--key", key)
        one_line_failure(r)
        assert r.returncode == 2 and "--db" in r.stderr, (cmd, r.stderr)
    assert set(os.listdir(".")) == here  # no ./sabot.db, no lock, nothing
    parser = build_parser()
    sub = parser._subparsers._group_actions[0]
    for name in ("validate", "serve", "status", "new-shoe", "resolve", "bench", "demo"):
        text = " ".join(sub.choices[name].format_help().split()).replace("- ", "-")
        assert " ".join(DB_RULE.split(";")[0].split()) in text, name
        if name != "demo":  # its own virtual shoe: ./sabot.db, said so
            assert "--db DB" in text and "(default" not in text.split("--db DB")[-1][:60], name
    assert "default ./sabot.db" in " ".join(sub.choices["demo"].format_help().split())


def test_a_refused_command_never_opens_the_shoes_port(cli, tmp_path):
    """Every check that can refuse (the key file, the registry, the audit database in use or not
    a sabot store) is made before the port is opened: opening it would knock the link of the
    validator already on it off. Here the 'shoe' is a listening socket: nothing connects."""
    import socket
    import sqlite3

    from sabot.audit.store import open_store

    key = tmp_path / "k"
    keys.create(str(key))
    one, two = registry_of(tmp_path, 7), registry_of(tmp_path, 7, 8, name="two.json")
    held = open_store(str(tmp_path / "held.db"))  # another validator's store
    foreign = tmp_path / "foreign.db"
    con = sqlite3.connect(foreign)
    con.execute("CREATE TABLE invoices (n)")
    con.commit()
    con.close()
    in_use = (["--key", key, "--db", tmp_path / "held.db", "--registry", one],
              "in use by another validator")
    cases = [(cmd, *in_use) for cmd in [*PORT_COMMANDS, ["bench", tmp_path / "shoe.txt"]]] + [
        # a registry of two shoes and no --shoe-id: the store is refused before the port is
        # asked which shoe it is
        (["validate"], ["--key", key, "--db", tmp_path / "held.db", "--registry", two],
         "in use by another validator"),  # (command, options, what its one line says)
        (["status"], ["--key", key, "--db", foreign, "--registry", two],
         "not a sabot audit database"),
        (["status"], ["--key", key, "--db", tmp_path / "a.db", "--registry",
                      tmp_path / "none.json"], "no shoe registry"),
        (["status"], ["--key", key, "--db", tmp_path / "a.db", "--registry", two, "--shoe-id",
                      "9"], "not in the shoe registry"),
        (["status"], ["--key", key, "--db", tmp_path / "no" / "a.db", "--registry", one],
         "no directory"),
        (["status"], ["--key", tmp_path / "none.pem", "--db", tmp_path / "a.db", "--registry",
                      one], "cannot read key file"),
    ]
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)
        srv.setblocking(False)
        url = f"socket://127.0.0.1:{srv.getsockname()[1]}"
        try:
            for cmd, extra, said in cases:
                r = cli(*cmd, "--port", url, *extra)
                one_line_failure(r)
                assert r.returncode == 2 and said in r.stderr, (cmd, extra, r.stderr)
                with pytest.raises(BlockingIOError):
                    srv.accept()  # the port was never opened
        finally:
            held.close()
    assert not (tmp_path / "a.db").exists()


def test_a_foreign_file_given_as_db_is_left_exactly_as_it_was(cli, tmp_path):
    """A SQLite file of another program (or any file) named as --db is refused in one line
    before anything touches it or what is beside it: no switch to WAL, no lock file; and the
    demo refuses before it makes a key, provisions a shoe or registers a table."""
    import os
    import sqlite3

    foreign, text = tmp_path / "ledger.db", tmp_path / "notes.txt"
    con = sqlite3.connect(foreign)
    con.execute("CREATE TABLE ledger (amount_cents)")
    con.execute("INSERT INTO ledger VALUES (500)")
    con.commit()
    con.close()
    text.write_text("not a database\n")
    key = tmp_path / "k"
    keys.create(str(key))
    registry = registry_of(tmp_path, 7)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    for db in (foreign, text):
        for cmd in (["validate", "--port", "socket://127.0.0.1:1", "--key", key, "--registry",
                     registry], ["status", "--port", "socket://127.0.0.1:1", "--key", key,
                                 "--registry", registry],
                    ["demo", "--key", tmp_path / "demo.pem", "--registry",
                     tmp_path / "demo-shoes.json"]):
            r = cli(*cmd, "--db", db)
            one_line_failure(r)
            assert r.returncode == 2 and "is not a sabot audit database" in r.stderr, r.stderr
    after = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    assert after == before and sorted(os.listdir(tmp_path)) == sorted(before)  # no .lock, -wal,
    con = sqlite3.connect(f"file:{foreign}?mode=ro", uri=True)  # .flash, key or registry
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    con.close()


def test_a_demo_on_a_store_in_use_provisions_and_registers_nothing(cli, tmp_path):
    from sabot.audit.store import open_store

    held = open_store(str(tmp_path / "held.db"))
    try:
        r = cli("demo", "--db", tmp_path / "held.db", "--key", tmp_path / "demo.pem",
                "--registry", tmp_path / "shoes.json")
    finally:
        held.close()
    one_line_failure(r)
    assert r.returncode == 2 and "in use by another validator" in r.stderr
    assert not any(p.name.startswith(("demo", "shoes", "held.db.flash")) for p in
                   tmp_path.iterdir())


@pytest.mark.parametrize("url", ["ftp://pit3:8000", "http://pit3:8000/table", "http://:80",
                                 "http://pit3:port", "pit3:8000"])
def test_serve_refuses_a_public_url_that_is_no_servers_address(cli, tmp_path, url):
    r = cli("serve", "--floor", "--db", tmp_path / "pit.db", "--public-url", url)
    one_line_failure(r)
    assert "--public-url takes this server's address" in r.stderr
    assert not (tmp_path / "pit.db").exists()


@pytest.mark.parametrize("args,said", [
    (["history", "--shoe-id", "x"], "argument --shoe-id: not a whole number: 'x'"),
    (["history", "--shoe-id", "-1"], "argument --shoe-id: must be from 0 to 4294967295"),
    (["history", "--shoe", "one"], "argument --shoe: not a whole number: 'one'"),
    (["history", "--round", "2.5"], "argument --round: not a whole number: '2.5'"),
    (["history", "--round", "70000"], "argument --round: must be from 0 to 65535"),
    (["demo", "--seed", "x"], "argument --seed: not a whole number: 'x'"),
    (["soak", "--seed", "x"], "argument --seed: not a whole number: 'x'"),
    (["shuffle", "--seed", "1.5"], "argument --seed: not a whole number: '1.5'"),
])
def test_a_bad_option_value_says_what_the_option_wants(cli, args, said):
    r = cli(*args)
    one_line_failure(r)
    assert r.returncode == 2 and said in r.stderr, r.stderr


def test_no_option_answers_a_bad_value_with_argparse_words():
    """Every option of every command that converts its value, given one it cannot take, says in
    plain words what it wants: never `invalid <lambda> value` or `invalid int value` (argparse
    names the type callable's __name__)."""
    import argparse
    import contextlib
    import io

    from sabot.cli.options import plain_usage

    said = []
    top = build_parser()
    commands = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    for name in commands.choices:
        sub = next(a for a in build_parser(name)._actions
                   if isinstance(a, argparse._SubParsersAction)).choices[name]
        for action in sub._actions:
            if action.type is None or not action.option_strings:
                continue
            for bad in ("x", "-5", "1.5", "nan", ""):
                err = io.StringIO()
                with contextlib.redirect_stderr(err), contextlib.suppress(SystemExit):
                    sub.parse_args([action.option_strings[0], bad])
                line = err.getvalue()
                if f"argument {action.option_strings[0]}" in line:
                    said.append(line)
                    assert not re.search(r"invalid \S+ value", line), line
    assert len(said) > 40  # the sweep met the options it is for
    assert plain_usage("argument --shoe-id: invalid <lambda> value: 'x'") == (
        "argument --shoe-id: not a value this option takes: 'x'")


@pytest.mark.board
def test_a_board_that_dies_at_its_start_is_said_with_its_own_last_words(tmp_path):
    """MicroPython's unix port prints an uncaught exception on standard output: a board whose
    code fails to start is named by that, not by 'no message'."""
    from sabot.errors import SabotError
    from sabot.virtual.board import VirtualBoard

    from kit import SIGN_MS, provision_shoe

    _, flash, _, _ = provision_shoe(tmp_path)
    code = tmp_path / "code"
    code.mkdir()
    (code / "main.py").write_text("import a_module_the_build_left_out\n")
    with pytest.raises(SabotError, match="ImportError: no module named "
                                         "'a_module_the_build_left_out'"):
        VirtualBoard(flash, sign_ms=SIGN_MS, code=code).start()

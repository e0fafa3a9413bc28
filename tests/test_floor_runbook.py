"""docs/FLOOR.md, the floor's runbook, run as written (tests/kit/runbook.py reads its blocks out of
the document and runs them with bash): two real PostgreSQL servers set up by its blocks, `sabot
serve` with two virtual shoes writing through the pit's URL, the primary killed mid-shoe and the
runbook's failover run, the old primary rejoined, a backup restored and verified. And `sabot
floor`'s refusals, each one line, on the run's shared server.

Stood in for, and why (kit/runbook.py): apt-get (the packages are here already), systemctl (the
test's servers are started and stopped with pg_ctl, not systemd) and `sudo -u postgres` (the
test's servers run as the test's own user, nobody under root, with a home of the test's). Not
run: the install-sabot block (docs/INSTALL.md's install, which tests/test_install.py runs: this
one is held to it here) and the serve block (it names USB shoes: serve runs with virtual shoes and
that block's URL for pit 1). Every other block runs as written."""

import json
import shutil
import time

import psycopg
import pytest

from kit import ROOT
from kit.pg import shared_server

pytestmark = pytest.mark.board  # servers and sabot commands are processes


def count_results(server):
    """Rounds stored on `server` (its own socket, its superuser)."""
    with psycopg.connect(server.admin("floor"), autocommit=True) as con:
        return con.execute(b"SELECT count(*) FROM records WHERE kind = 'result'").fetchone()[0]


def until(check, seconds, what):
    end = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < end, what
        time.sleep(0.1)


def fail_over_mid_shoe(floor, tmp_path):
    """Serve validating two shoes through pit 1's URL; db1 killed mid-shoe and the failover block
    run: every round of both shoes stored once, the rest of them on db2."""
    from kit.serve_rig import ServeRig

    db1, db2 = floor.server("db1"), floor.server("db2")
    rig = ServeRig(tmp_path, shoes=2, seed=41, db=floor.pit_url(), pit="pit-1",
                   cut_from_end=220)  # ~36 rounds a shoe
    try:
        rig.deal()
        until(lambda: count_results(db1) >= 12, 60, rig.log_text())
        db1.kill()
        held = count_results(db2)  # all db1 acknowledged (synchronous), and no more: read-only
        said = floor.run("it", "watch", check=False)
        assert said.returncode == 1 and "NOT recording: no server takes writes" in said.stdout, \
            said.stdout + said.stderr
        said = floor.run("it", "failover").stdout
        assert f"the old primary {db1.address()} does not answer" in said, said
        assert f"promoted {db2.address()}" in said and "records, on" in said, said
        rig.wait_dealt()
        rig.wait_stored()
        for i in range(2):
            assert rig.stored(i) == rig.expected(i)  # every round once, in order
        # the rest were stored on db2 once it was promoted: none waited for a standby
        assert count_results(db2) == sum(map(len, map(rig.expected, range(2)))) > held + 10
        log = rig.log_text()
        said = [line for line in log.splitlines() if "audit database" in line
                and (" lost (" in line or " back after " in line)]  # serve's lines, as its others
        assert len(said) >= 2 and all(line.startswith("sabot serve: ") for line in said), log
    except BaseException:
        rig.stop()
        raise
    assert rig.stop() == 0


def rejoin_and_lose_the_standby(floor):
    """db1 rejoined by the rejoin block, the floor synchronous again; then db1 lost: the floor
    stops recording until the primary stops waiting (standby-lost), and the standby back is
    required again."""
    db1, db2 = floor.server("db1"), floor.server("db2")
    db1.wait_gone()  # what a machine that lost power has: no process left of its server
    floor.run("db1", "rejoin")
    said = floor.run("it", "sync").stdout
    assert f"{db2.address()}: each commit now waits for its synchronous standby" in said
    assert f"{db1.address()}: standby, streaming from 127.0.0.1:{db2.port}" in said, said
    assert "the floor records: each commit is on" in said, said
    # promoting a standby whose primary is up but not reached (a typo in --old, a network cut
    # from IT's workstation only) would make two primaries: refused, nothing changed
    wrong = floor.shell("it", 'sabot floor promote --db "postgresql://sabot@$DB1/postgres"'
                              ' --old "postgresql://sabot@127.0.0.1:1/postgres"')
    assert wrong.returncode == 2 and "is streaming from a primary that is up" in \
        wrong.stderr, wrong.stdout + wrong.stderr
    assert "the floor records: each commit is on" in floor.run("it", "watch").stdout
    db1.kill()
    said = floor.run("it", "watch", check=False)
    assert said.returncode == 1, said.stdout + said.stderr
    assert (f"NOT recording: every commit on {db2.address()} waits for 1 synchronous "
            "standby") in said.stdout, said.stdout
    said = floor.run("it", "standby-lost", swapped=True).stdout  # db2 is the primary now
    assert f"the floor records, on {db2.address()} alone" in said, said
    db1.wait_gone()
    db1.launch()  # back, and required again
    said = floor.run("it", "sync").stdout
    assert "the floor records: each commit is on" in said, said


@pytest.mark.long
def test_the_runbook_as_written_keeps_the_floor_recording_through_a_failover(tmp_path,
                                                                             monkeypatch):
    """Sections 1-4 make db1 the primary, db2 its synchronous standby and pit 1's role; serve
    validates two shoes through pit 1's URL; db1 is killed (SIGKILL) mid-shoe and the failover
    block run: every round of both shoes is stored once, on db2, which goes on taking them.
    Then db1 rejoins as db2's standby and the floor is synchronous again; the standby lost stops
    the floor's recording (status says so) until the primary is told to stop waiting, and it is
    required again once back; a backup restored verifies; and a switchover back (the failover
    block with DB1 and DB2 exchanged) fences db2, which still answers; its fence taken off, two
    servers take writes, and status says the floor is not safe."""
    from kit.runbook import PASSWORDS, Floor

    floor = Floor()
    db1, db2 = floor.server("db1"), floor.server("db2")
    try:
        floor.set_up()
        floor.set_up_pits()
        monkeypatch.setenv("PGPASSFILE", floor.pgpass("pit1"))  # pit 1's host's ~/.pgpass
        fail_over_mid_shoe(floor, tmp_path)
        rejoin_and_lose_the_standby(floor)

        shutil.copy(tmp_path / "shoes.json", floor.hosts["it"].home + "/floor-shoes.json")
        floor.run("it", "backup")
        said = floor.run("it", "restore-check").stdout
        assert "ok: " in said and "rounds" in said, said

        said = floor.run("it", "failover", swapped=True).stdout
        assert f"fenced the old primary {db2.address()}" in said, said
        assert f"promoted {db1.address()}" in said, said
        with psycopg.connect(db2.admin(), autocommit=True) as con:
            assert con.execute(b"SHOW default_transaction_read_only").fetchone()[0] == "on"
        with psycopg.connect(floor.url("floor"), passfile=floor.pgpass("it")) as con:
            assert con.info.port == db1.port  # the pits' kind of URL skips the fenced one
        with psycopg.connect(db2.admin(), autocommit=True) as con:  # the fence taken off
            con.execute(b"ALTER SYSTEM RESET default_transaction_read_only")
            con.execute(b"SELECT pg_reload_conf()")
        until(lambda: floor.run("it", "watch", check=False).returncode == 1, 10, floor.log())
        assert "the floor is NOT safe: " in floor.said[-1][2] and "both take writes" in \
            floor.said[-1][2], floor.said[-1][2]
        # the two-primaries block: db1 was promoted last, so db2 (its DB1 there) is fenced
        said = floor.run("it", "two-primaries", swapped=True).stdout
        assert f"fenced {db2.address()}" in said and "the floor records" in said, said

        everything = floor.log()
        assert not [p for p in PASSWORDS.values() if p in everything]
    finally:
        floor.stop()


def test_the_install_block_is_install_md_s():
    """The install-sabot block is not run here: it installs sabot as docs/INSTALL.md does, whose
    blocks tests/test_install.py runs — the same pipx environment and command directory as its
    settings, and the same pipx install of a wheel make dist builds."""
    import re

    from kit.runbook import blocks

    block = blocks()["install-sabot"]
    install = (ROOT / "docs" / "INSTALL.md").read_text()
    for name in ("PIPX_HOME", "PIPX_BIN_DIR"):
        ours = re.search(rf"\b{name}=(\S+)", block)
        theirs = re.search(rf"\b{name}=(\S+)", install)
        assert ours and theirs and ours[1] == theirs[1], name
    # the wheel, with the constraints make dist writes beside it, as INSTALL.md installs it
    wheel = re.search(r'^pipx install --pip-args="--constraint \./sabot-constraints\.txt" '
                      r"\./(sabot-\S+\.whl)$", block, re.M)
    assert wheel, "a pipx install of the wheel with its constraints"
    assert re.fullmatch(r"sabot-\d+\.\d+\.\d+-cp311-cp311-linux_x86_64\.whl", wheel[1])
    assert re.search(r'^pipx install --pip-args="--constraint \$\{WHEEL%/\*\}/'
                     r'sabot-constraints\.txt" "\$WHEEL"$', install, re.M)


# ---- sabot floor's refusals, each one line, nothing changed --------------------------------
@pytest.fixture(scope="module")
def server():
    return shared_server()


def settings(url):
    with psycopg.connect(url, autocommit=True) as con:
        return con.execute(b"SELECT current_setting('synchronous_standby_names'),"
                           b" current_setting('default_transaction_read_only')").fetchone()


def one_line(r, status):
    assert r.returncode == status, r.stdout + r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr
    return r.stderr


def test_status_of_a_primary_alone_says_it_records_without_a_standby(cli, server):
    dead = "127.0.0.1:1"  # nothing listens there
    url = f"postgresql://sabot@127.0.0.1:{server.port},{dead}/postgres"
    r = cli("floor", "status", "--db", url)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"127.0.0.1:{server.port}: primary, takes writes; commits wait for no standby" \
        in r.stdout
    assert f"{dead}: does not answer" in r.stdout and "the floor records, on" in r.stdout
    out = json.loads(cli("floor", "status", "--db", url, "--json").stdout)
    assert out["recording"] is True
    assert [(s["answers"], s.get("role")) for s in out["servers"]] == [(True, "primary"),
                                                                         (False, None)]


def test_promote_refuses_a_primary_and_changes_nothing(cli, server):
    before = settings(server.url())
    err = one_line(cli("floor", "promote", "--db", server.url(), "--old", server.url()), 2)
    assert "--db and --old both name" in err
    err = one_line(cli("floor", "promote", "--db", server.url()), 2)
    assert "is not a standby" in err and "nothing was promoted or fenced" in err
    assert settings(server.url()) == before


def test_fence_refuses_the_floors_only_primary_and_changes_nothing(cli, server):
    before = settings(server.url())
    err = one_line(cli("floor", "fence", "--db", server.url(), "--floor", server.url()), 2)
    assert "no other server of --floor takes writes" in err and "nothing fenced" in err
    assert settings(server.url()) == before


def test_sync_without_a_standby_refuses_and_requires_none(cli, server):
    before = settings(server.url())
    r = cli("floor", "sync", "--db", server.url(), "--wait", "0.3")
    err = one_line(r, 1)
    assert "no standby streams from" in err and "none is required" in err
    assert settings(server.url()) == before == ("", "off")


def test_what_each_commit_waits_for_is_read_from_synchronous_standby_names():
    from sabot.audit.floor import required_standbys

    assert [required_standbys(n) for n in ("", " ", "*", "db2", "a, b", "FIRST 2 (a, b, c)",
                                           "any 3 (a,b,c)", "2 (a, b)")] == [0, 0, 1, 1, 1, 2,
                                                                              3, 2]


def test_no_server_answering_is_one_line_with_no_password(cli):
    url = "postgresql://sabot:s3cret-word@127.0.0.1:1,127.0.0.1:2/floor"
    r = cli("floor", "status", "--db", url)
    err = one_line(r, 2)
    assert err.startswith("sabot floor: no server answers: 127.0.0.1:1: ")
    for args in (["promote", "--db", "postgresql://sabot:s3cret-word@127.0.0.1:1/floor"],
                 ["sync", "--db", url, "--wait", "0.1"]):
        r = cli("floor", *args)
        err = one_line(r, 2)
        assert "s3cret-word" not in r.stdout + r.stderr
    assert "does not answer" in one_line(cli("floor", "promote", "--db", url.replace(
        ",127.0.0.1:2", "")), 2)
    assert "name one" in one_line(cli("floor", "promote", "--db", url), 2)
    assert "not a PostgreSQL URL" in one_line(cli("floor", "status", "--db", "x y"), 2)

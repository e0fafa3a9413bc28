"""Operating a shoe over its port, as a bench technician does by hand (docs/TECHNICIAN.md,
"Bench testing a shoe over USB"): the virtual board deals two shoe files, and every host
command reaches it through a real pseudo-terminal (socat), as a USB CDC shoe appears: validate
until the shoe ends, status, new-shoe, an irregularity resolved from the host with who gave it
logged, and the next shoe."""

import json
import os
import socket
import subprocess
import threading
import time

import pytest

from sabot import keys
from sabot.game import cards, rules

from kit import SABOT, BoardProcess, PtyBridge, free_port_for_tests


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    """Each test's commands find their own ./sabot-shoes.json (sabot provision writes it)."""
    monkeypatch.chdir(tmp_path)


def run(*args, timeout=120, **kw):
    return subprocess.run([*SABOT, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, **kw)


def status(tty, key, db):
    r = run("status", "--port", tty, "--key", key, "--db", db, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.long
@pytest.mark.board
def test_two_shoes_by_hand_over_a_tty_with_status_a_resolution_and_new_shoe(tmp_path):
    key, flash, db = tmp_path / "host.pem", tmp_path / "flash", tmp_path / "audit.db"
    assert run("provision", "--key", key, "--flash", flash).returncode == 0
    shoe1, shoe2 = tmp_path / "shoe1.txt", tmp_path / "shoe2.txt"
    r = run("shuffle", "--decks", "8", "--seed", "3", "-o", shoe1)
    assert r.returncode == 0, r.stderr
    # shoe 2 has no cut card: it runs out mid-round and the supervisor ends it from the host
    assert run("shuffle", "--decks", "1", "--seed", "5", "--cut", "0", "-o", shoe2).returncode == 0
    tokens1 = cards.read_shoe_file(shoe1)
    port = free_port_for_tests()
    board = BoardProcess("--listen", f"127.0.0.1:{port}", "--flash", flash, "--shoe", shoe1,
                         "--shoe", shoe2)
    bridge = None
    try:
        board.wait_line("listening on")
        bridge = PtyBridge(tmp_path, port)
        tty = bridge.path
        v = run("validate", "--port", tty, "--key", key, "--db", db, "--until", "shoe-end",
                "--json")
        assert v.returncode == 0, v.stderr
        printed = [json.loads(line) for line in v.stdout.splitlines()]
        assert [x for x in printed if "winner" in x] == rules.deal_shoe(tokens1)
        assert printed[-1]["event"] == "shoe_end" and "shoe 1 ended" in v.stderr

        st = status(tty, key, db)
        assert st["phase"] == "ended" and st["shoe"] == 1 and st["unacknowledged"] == 0
        assert {"position", "round", "integrity", "boot"} <= set(st)
        board.wait_line("waiting for the host's new-shoe")
        r = run("new-shoe", "--port", tty, "--key", key, "--db", db, "--by", "tech")
        assert r.returncode == 0, r.stderr
        assert "shoe 2 started" in r.stdout
        # mid-shoe a second new-shoe is refused, in one line
        r = run("new-shoe", "--port", tty, "--key", key, "--db", db, "--by", "tech")
        assert r.returncode != 0 and "has not ended" in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1

        v = run("validate", "--port", tty, "--key", key, "--db", db, "--until", "irregularity")
        assert v.returncode == 0, v.stderr
        assert "holds shoe 2" in v.stderr
        st = status(tty, key, db)
        assert st["phase"] == "held" and st["pending"]["kind"] == "cards_exhausted"
        r = run("resolve", "end-shoe", "--port", tty, "--key", key, "--db", db, "--by", "Sue")
        assert r.returncode == 0, r.stderr
        assert "end_shoe" in r.stdout and "Sue" in r.stdout
        st = status(tty, key, db)
        assert st["phase"] == "ended" and st["shoe"] == 2
        r = run("resolve", "void-card", "--port", tty, "--key", key, "--db", db, "--by", "Sue")
        assert r.returncode != 0 and "no irregularity is pending" in r.stderr
    finally:
        if bridge:
            bridge.stop()
        board.stop()
    ops = [json.loads(x) for x in run("history", "--db", db, "--operations").stdout.splitlines()]
    assert [(o["operation"], o["by"]) for o in ops] == [("new_shoe", "tech"), ("resolve", "Sue")]
    assert ops[1]["resolution"] == "end_shoe" and ops[1]["source"] == "host"
    assert {o["host"] for o in ops} == {socket.gethostname()}
    h = run("history", "--db", db, "--shoe", "2", "--json")
    assert any(json.loads(x).get("event") == "resolution" for x in h.stdout.splitlines())
    a = run("audit", "verify", "--db", db, "--key", key)  # --key: accepted, not needed
    assert a.returncode == 0, a.stdout + a.stderr


@pytest.mark.board
def test_the_board_shows_its_lamps_and_display_on_stdout(tmp_path):
    key, flash = tmp_path / "host.pem", tmp_path / "flash"
    assert run("provision", "--key", key, "--flash", flash).returncode == 0
    shoe = tmp_path / "shoe.txt"
    shoe.write_text("AS 9S  2S KD 3H 3C 8D  KS 5H 4C 6D CUT 7S 9H 2D TC JH QS")
    port = free_port_for_tests()
    proc = subprocess.Popen([*SABOT, "board", "--listen", f"127.0.0.1:{port}", "--flash", flash,
                             "--shoe", shoe], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("display: player"):
                break
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    assert any(x.startswith("lamps: draw for player | display: shoe 1 round 1") for x in lines)
    assert "display: player 3  banker 3  -> tie" in "".join(lines)


def no_shoe(tmp_path, serve):
    """A TCP port where something else (or nothing) speaks, behind a real pty."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    stop = threading.Event()

    def accept():
        while not stop.is_set():
            srv.settimeout(0.2)
            try:
                c, _ = srv.accept()
            except OSError:
                continue
            threading.Thread(target=serve, args=(c, stop), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return srv, stop


def registry(tmp_path, shoe_id=7, name="shoes.json"):
    """A registry holding one shoe with a public key of no shoe here."""
    from cryptography.hazmat.primitives.asymmetric import ec

    from sabot.registry import Registry, ShoeEntry

    entry = ShoeEntry(shoe_id)
    entry.add_public_key(1, keys.public_pem(ec.generate_private_key(ec.SECP256R1()).public_key()))
    Registry.load(str(tmp_path / name)).put(entry)
    return tmp_path / name


@pytest.mark.long
@pytest.mark.board
def test_silence_and_garbage_each_get_one_line_and_fail(tmp_path):
    keys.create(str(tmp_path / "k"))
    db = tmp_path / "a.db"
    reg = registry(tmp_path)

    def silent(c, stop):
        while not stop.is_set():
            time.sleep(0.1)
        c.close()

    def garbage(c, stop):
        while not stop.is_set():
            try:
                c.sendall(os.urandom(64) + b"\x00" + os.urandom(16) + b"\x00")
            except OSError:
                return
            time.sleep(0.02)

    for serve, said in ((silent, "no shoe answered on"),
                        (garbage, "does not speak the sabot protocol")):
        srv, stop = no_shoe(tmp_path, serve)
        bridge = PtyBridge(tmp_path, srv.getsockname()[1])
        try:
            t0 = time.monotonic()
            r = run("validate", "--port", bridge.path, "--key", tmp_path / "k", "--db", db,
                    "--wait", "2", "--registry", reg)
            assert r.returncode != 0 and said in r.stderr, r.stderr
            assert len(r.stderr.strip().splitlines()) <= 2  # the reason and the summary
            r = run("status", "--port", bridge.path, "--key", tmp_path / "k", "--db", db,
                    "--wait", "2", "--registry", reg)
            assert r.returncode != 0 and said in r.stderr, r.stderr
            assert len(r.stderr.strip().splitlines()) == 1 and time.monotonic() - t0 < 30
            if serve is silent:  # nothing was received: no database left behind (garbage is kept
                assert not db.exists() and not (tmp_path / "a.db.lock").exists()  # as evidence)
        finally:
            bridge.stop()
            stop.set()
            srv.close()


def test_a_shoe_signing_with_another_key_than_the_registry_holds_is_named_in_one_line(tmp_path):
    """A registry whose public key for this shoe is another's: every frame the shoe sends (its
    statuses answering the host's hellos) fails the signature, and the host says so."""
    from sabot.audit.validator import Validator
    from sabot.errors import SabotError
    from sabot.link.answering import first_status
    from sabot.link.host import HostLink

    from kit import signing_shoe
    from kit.ports import shoe_on_a_socket_pair, status_answer

    signer, _ = signing_shoe(0x5AB0_0002)
    _, forged = signing_shoe(0x5AB0_0002)  # the same shoe id, another key
    port, shoe = shoe_on_a_socket_pair(status_answer(signer))
    v = Validator(forged, str(tmp_path / "w.db"))
    try:
        link = HostLink(port, v, None)
        with pytest.raises(SabotError) as e:
            first_status(link, "socket://shoe", wait=4)
    finally:
        port.close()
        shoe.stop()
        v.store.close()
    assert "does not sign with the public key the registry holds" in str(e.value)
    assert "\n" not in str(e.value) and shoe.received  # the hellos reached the shoe



def test_a_port_that_cannot_be_opened_fails_at_once_and_leaves_no_database(cli, tmp_path):
    key = tmp_path / "k"
    keys.create(str(key))
    registry(tmp_path, name="sabot-shoes.json")  # the default, in the working directory
    for url, said in (("socket://127.0.0.1", "socket:// wants HOST:PORT"),
                      ("bogus://x", "unknown scheme 'bogus'")):
        for cmd in (["validate"], ["status"],
                    ["new-shoe"], ["resolve", "void-card", "--by", "x"]):
            t0 = time.monotonic()
            r = cli(*cmd, "--port", url, "--key", key, "--db", tmp_path / "a.db")
            assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1, r.stderr
            assert time.monotonic() - t0 < 5
            assert said in r.stderr, r.stderr
            assert not (tmp_path / "a.db").exists()
    r = cli("status", "--port", tmp_path / "no-such-tty", "--key", key, "--db", tmp_path / "a.db",
            "--baud", "9600")
    assert r.returncode != 0 and "cannot open" in r.stderr
    assert not (tmp_path / "a.db").exists()


@pytest.mark.board
def test_a_pit_registry_of_two_shoes_needs_no_shoe_id_the_shoe_says_which_it_is(tmp_path):
    """CONTRACTS' `validate --port URL --key FILE --db PATH` with a registry of several shoes: a
    hello to any shoe, and the shoe's signed status names it."""
    reg, key = tmp_path / "pit.json", tmp_path / "host.pem"
    for name, table in (("t1", "BAC-01"), ("t2", "BAC-02")):
        r = run("provision", "--key", key, "--flash", tmp_path / name, "--table", table,
                "--registry", reg)
        assert r.returncode == 0, r.stderr
    port = free_port_for_tests()
    board = BoardProcess("--listen", f"127.0.0.1:{port}", "--flash", tmp_path / "t2")
    try:
        board.wait_line("listening on")
        st = run("status", "--port", f"socket://127.0.0.1:{port}", "--key", key, "--registry",
                 reg, "--db", tmp_path / "a.db", "--json")
        assert st.returncode == 0, st.stderr
        from sabot.registry import Registry

        t2 = next(e for e in Registry.load(str(reg)).shoes.values() if e.table == "BAC-02")
        assert json.loads(st.stdout)["shoe_id"] == t2.shoe_id
    finally:
        board.stop()


def test_a_shoe_whose_frames_come_before_its_status_is_not_called_foreign():
    """An emulated Pico still signing what it dealt sends authentic frames (deferred until the
    status answering the hello) long before that status: they prove the port speaks sabot."""
    from collections import Counter
    from types import SimpleNamespace

    from sabot.link.answering import _why_silent

    validator = SimpleNamespace(counts=Counter(deferred=3), shoe_id=7)
    link = SimpleNamespace(rx_bytes=400, validator=validator)
    assert _why_silent(link, "socket://x", 5.0, Counter(), 2.0, False) is None
    said = _why_silent(link, "socket://x", 5.0, Counter(), 5.0, True)
    assert "sends its frames" in said and "--wait" in said
    validator.counts = Counter()  # the same bytes with no frame of a shoe among them
    assert "does not speak the sabot protocol" in _why_silent(link, "socket://x", 5.0, Counter(),
                                                              2.0, False)


@pytest.mark.board
def test_a_command_a_forger_crowds_out_of_the_element_is_sent_again_and_obeyed_once(tmp_path):
    """A forger on the cable sends a new-shoe signed with another key just ahead of the host's:
    the shoe takes the forged one for its element's check and refuses the genuine one with a
    count and nothing else (one signed command at a time). The host's next status shows that
    (more refused, the command counter not moved), so it sends the command again. A forger ahead
    of every send keeps it out for the 5 s the host tries: it says so, and that nothing was done;
    ahead of the first only, the new shoe starts, once, and is logged once."""
    from sabot import protocol as pr
    from sabot.errors import SabotError
    from sabot.link.operate import Operation
    from sabot.virtual.dealer import Dealer
    from sabot.virtual.demo import DRAIN_WAIT, Session

    deck = cards.shuffled_shoe(1, seed=9, cut_from_end=0)[:-1]
    tokens = deck[:12] + ["CUT"] + deck[12:]
    key = keys.create(str(tmp_path / "command.pem"))
    forger = keys.create(str(tmp_path / "forger.pem"))
    s = Session(tokens, key, str(tmp_path / "audit.db"), str(tmp_path / "flash"))
    board, link = s.start_board()
    try:
        s.ensure_new_shoe(board, link)
        done = threading.Event()
        threading.Thread(target=lambda: (Dealer(board, tokens).deal(), done.set()),
                         daemon=True).start()
        while not done.is_set():
            link.pump()
        assert link.drain(DRAIN_WAIT)
        before = link.ask(5)
        assert before is not None and before["phase"] == "ended"
        genuine_write, genuine_new_shoe = link.write, link.new_shoe
        sends, crowd = [], ["every"]

        def crowded(data):  # the one write of the host's new-shoe, the forger's frame ahead
            link.write = genuine_write
            st = s.validator.status
            genuine_write(pr.command(forger.private_key, s.validator.shoe_id,
                                     st["host_counter"] + 1, pr.C_NEW_SHOE) + data)

        def new_shoe():
            sends.append(time.monotonic())
            if crowd[0] == "every" or len(sends) == 1:
                link.write = crowded
            genuine_new_shoe()

        link.new_shoe = new_shoe
        op = Operation.on_link(board.url, s.validator, link)
        with pytest.raises(SabotError, match=r"the shoe took none of \d+ sends of it within 5 s: "
                                             r".*nothing was done"):
            op.new_shoe("tech")
        kept_out = link.ask(5)
        assert kept_out["phase"] == "ended" and len(sends) >= 3
        assert kept_out["host_counter"] == before["host_counter"]  # none taken
        sends.clear()
        crowd[:] = ["first"]
        out = op.new_shoe("tech")
        after = link.ask(5)
    finally:
        s.close()
    assert out["phase"] == "burn_first" and out["shoe"] == 2, out
    assert len(sends) >= 2  # sent again: the first was crowded out
    assert after["host_counter"] == before["host_counter"] + 1  # obeyed once
    assert after["refused"] >= kept_out["refused"] + 2  # the forged one, and the genuine crowded
    assert after["refused_bad_key"] >= kept_out["refused_bad_key"] + 1  # the forger's
    assert [r["shoe"] for k, r in s.records if k == "shoe_start"] == [1, 2]
    assert not [r for k, r in s.records if k == "command_rejected"]


@pytest.mark.board
def test_a_resolution_the_store_refuses_for_a_moment_is_stored_with_its_entry(rig):
    """`sabot resolve`'s session, the command sent, meets an audit store refusing the shoe's
    resolution (another program's trigger, dropped once it refused): it asks the shoe again,
    as serve does, and the resolution and its operator entry are stored together once the store
    takes them."""
    import sqlite3

    from sabot.link.operate import Operation
    from sabot.virtual.dealer_channel import EMPTY

    rig.deal("2C", "3C")
    rig.send(bytes([EMPTY]))  # no cards left mid-round: held
    assert rig.phase == "held"
    op = Operation.__new__(Operation)
    op._attach(rig.board.url, rig.validator, rig.link, None)  # as `sabot resolve` makes it
    con = sqlite3.connect(rig.tmp / "audit.db")
    con.execute("CREATE TRIGGER refused BEFORE INSERT ON frames WHEN NEW.type = 'resolution'"
                " BEGIN SELECT RAISE(ABORT, 'refused by another program'); END")
    con.commit()

    def drop():  # once the store has refused the shoe's resolution
        end = time.monotonic() + 10
        while not op.store_refusal and time.monotonic() < end:
            time.sleep(0.05)
        other = sqlite3.connect(rig.tmp / "audit.db")
        other.execute("DROP TRIGGER refused")
        other.commit()
        other.close()

    dropper = threading.Thread(target=drop)
    dropper.start()
    try:
        done = op.resolve("end-shoe", "sue")
    finally:
        dropper.join()
    assert done["resolution"]["resolution"] == "end_shoe"
    assert "refused by another program" in op.store_refusal  # it was met, and gone through
    entries = [(op, json.loads(e)["by"]) for op, e in con.execute(
        "SELECT operation, entry FROM operations").fetchall()]
    con.close()
    assert entries == [("resolve", "sue")], entries

"""One host at a time on a networked shoe's link (docs/PROTOCOL.md "One host at a time"): a
second host is told, in one line, who holds the link and since when, and the holder is never
disturbed; a holder silent for LINK_IDLE gives way, one that hung up at once. On the virtual
board and the emulated Pico; the host side's reading of that line, and every command's one line
and exit 2, against a local socket that answers as a taken shoe."""

import os
import re
import signal
import socket
import sqlite3
import subprocess
import threading
import time

import pytest

from sabot import keys
from sabot import protocol as pr
from sabot.audit.replay import MARK
from sabot.link.transport import LinkTaken, ShoePort

from kit import SABOT, SIGN_MS, free_port_for_tests, provision_shoe, registry_of, wait_for

NATURALS = ("9S", "8D", "KD", "9C")  # a round of four cards: player 9, banker 7
HOLDER = "10.1.2.3:40412"
SAID = (f"the shoe's link is taken by another host ({HOLDER}, for 42 s): one validator per shoe "
        "— stop that one first")


class TakenShoe:
    """A TCP port that answers every connection with `parts` (the taken line of a networked shoe
    whose link another host holds, or other bytes), `pause` seconds between them, and `hold`
    seconds later hangs up (what the host sent read first, as the boards do)."""

    def __init__(self, parts, pause=0.0, hold=0.0):
        self.parts, self.pause, self.hold = parts, pause, hold
        self.srv = socket.create_server(("127.0.0.1", 0))
        self.url = f"socket://127.0.0.1:{self.srv.getsockname()[1]}"
        self.srv.settimeout(0.1)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stopped.is_set():
            try:
                conn, _ = self.srv.accept()
            except OSError:
                continue
            with conn:
                for i, part in enumerate(self.parts):
                    if i:
                        time.sleep(self.pause)
                    conn.sendall(part)
                self.stopped.wait(self.hold)
                conn.setblocking(False)
                try:
                    while conn.recv(4096):
                        pass
                except OSError:
                    pass

    def close(self):
        self.stopped.set()
        self.thread.join(5)
        self.srv.close()


def read_until_taken(port, wait=5.0):
    """What the port read before LinkTaken, and the LinkTaken (None if none came within `wait`
    seconds, or the connection ended first)."""
    got = b""
    end = time.monotonic() + wait
    while time.monotonic() < end:
        try:
            got += port.read(0.05)
        except LinkTaken as e:
            return got, e
        except ConnectionError:
            break
    return got, None


def test_the_taken_line_split_across_reads_is_recognised_and_stays_said_until_reopen():
    shoe = TakenShoe([f"sabot-link taken by {HOLDER[:6]}".encode(),
                      f"{HOLDER[6:]} for 42 s\n".encode()], pause=0.3)
    try:
        port = ShoePort(shoe.url)
        assert port.read(0.2) == b""  # the line's first part: held, not handed on
        got, taken = read_until_taken(port)
        assert got == b"" and taken is not None
        assert (taken.holder, taken.seconds) == (HOLDER, 42)
        assert str(taken) == f"{shoe.url}: {SAID}" and "\n" not in str(taken)
        for again in (port.read, lambda: port.write(b"\x00"), port.frames):
            with pytest.raises(LinkTaken):  # said until reopened: the shoe hung up on us
                again()
        port.reopen(5)  # a new connection, told again
        assert read_until_taken(port)[1] is not None
        port.close()
    finally:
        shoe.close()


def test_first_bytes_that_only_begin_like_the_line_are_handed_on_untouched():
    frame = pr.encode_frame(bytes(range(1, 40)))
    for parts in ([b"sab", b"otage" + frame], [b"sabot-link taken by no newline" + b"x" * 200],
                  [frame, b"sabot-link taken by 1.2.3.4:5 for 6 s\n"]):
        shoe = TakenShoe(parts, pause=0.1, hold=0.5)
        try:
            port = ShoePort(shoe.url)
            got, taken = read_until_taken(port, 0.4)
            port.close()
        finally:
            shoe.close()
        # only a connection's first line can be the shoe's word; later, it is bytes like any
        assert taken is None and got == b"".join(parts), parts


def test_each_command_on_a_taken_shoe_ends_with_that_line_and_exit_2(cli, tmp_path):
    """status, new-shoe, resolve, validate, verify-firmware (and the shoe named by the port, for a
    registry of several): the line, alone, exit 2; never a traceback, never a lost link or a
    silent shoe."""
    key = keys.create(str(tmp_path / "host.pem")).path
    one, two = registry_of(tmp_path, 7), registry_of(tmp_path, 7, 8, name="two.json")
    build = tmp_path / "build"
    build.mkdir()
    (build / "MANIFEST").write_text("a build\n")
    shoe = TakenShoe([f"sabot-link taken by {HOLDER} for 42 s\n".encode()])
    common = ("--port", shoe.url, "--key", key)
    try:
        for n, args in enumerate((("status", *common, "--registry", one),
                                  ("status", *common, "--registry", two),
                                  ("new-shoe", *common, "--registry", one, "--by", "ann"),
                                  ("resolve", "void-card", *common, "--registry", one, "--by",
                                   "ann"),
                                  ("validate", *common, "--registry", one),
                                  ("verify-firmware", "--port", shoe.url, "--registry", one,
                                   "--seed", "ab" * 16, "--build", build))):
            db = tmp_path / f"{n}.db"
            r = cli(*args, *(("--db", db) if args[0] != "verify-firmware" else ()))
            assert r.returncode == 2, (args, r.stderr)
            assert r.stderr.splitlines() == [f"sabot {args[0]}: {shoe.url}: {SAID}"], r.stderr
            if args[0] != "validate":  # (validate's session keeps its store: link/session.py)
                assert not db.exists()  # nothing stored: no database left behind
    finally:
        shoe.close()


def local_ports(pid):
    """The local TCP ports of a process's sockets (Linux /proc)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for row in f.read().splitlines()[1:]:
                fields = row.split()
                if fields[9] in inodes:
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def stored_rounds(db):
    """The round results an audit store holds (read beside the validator writing it)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute("SELECT COUNT(*) FROM records WHERE kind='result'").fetchone()[0]
    finally:
        con.close()


class Lines:
    """A process's stdout lines, read as they come."""

    def __init__(self, stream):
        self.seen = []
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream):
        for line in stream:
            self.seen.append(line)


@pytest.mark.board
def test_while_validate_holds_a_shoe_status_is_told_who_and_validate_goes_on(tmp_path):
    from sabot.virtual.board import VirtualBoard
    from sabot.virtual.dealer_channel import card_bytes

    key, flash, _, reg = provision_shoe(tmp_path)
    db, other, cap = tmp_path / "audit.db", tmp_path / "other.db", tmp_path / "cap.bin"
    board = VirtualBoard(flash, port=free_port_for_tests(), sign_ms=SIGN_MS).start()
    validate = None
    try:
        board.send(b"".join(card_bytes(t) for t in ("AS", "2H", *NATURALS)))  # burn, a round
        assert board.wait_read(10)
        validate = subprocess.Popen([*SABOT, "validate", "--port", board.url, "--key", key.path,
                                     "--db", db, "--registry", reg, "--capture", cap, "--json"],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out = Lines(validate.stdout)

        def rounds():
            return sum('"winner"' in line for line in out.seen)

        assert wait_for(lambda: rounds() == 1, 30), "validate did not store the round"
        r = subprocess.run([*SABOT, "status", "--port", board.url, "--key", key.path, "--db",
                            other, "--registry", reg], capture_output=True, text=True,
                           timeout=60)
        said = r.stderr.splitlines()
        assert r.returncode == 2 and len(said) == 1 and "Traceback" not in r.stderr, r.stderr
        named = re.search(r"taken by another host \(127\.0\.0\.1:(\d+), for (\d+) s\): one "
                          r"validator per shoe", said[0])
        assert named, said
        assert int(named[1]) in local_ports(validate.pid)  # validate's own connection
        assert not other.exists()
        board.send(b"".join(card_bytes(t) for t in NATURALS))
        assert wait_for(lambda: stored_rounds(db) == 2, 30), "validate stopped storing rounds"
    finally:
        if validate is not None:
            validate.send_signal(signal.SIGTERM)
            validate.wait(30)
        board.stop()
    err = validate.stderr.read()
    assert validate.returncode == 0, err
    assert "link lost" not in err and "validated:" in err and "2 rounds" in err, err
    assert cap.read_bytes().count(MARK) == 1  # one connection from start to end: never knocked


@pytest.fixture(scope="module")
def pico_tree(tmp_path_factory):
    """The Pico's built code tree, signed by a throwaway release key."""
    from sabot.release.build import build

    tmp = tmp_path_factory.mktemp("pico")
    return build("rpi_pico", tmp / "code", tmp / "release.pem", log=lambda line: None)["dir"]


@pytest.mark.board
@pytest.mark.parametrize("kind", ["virtual", "rpi_pico"])
def test_a_silent_holder_gives_way_after_link_idle_and_one_that_hung_up_at_once(
        kind, tmp_path, monkeypatch, request):
    """With LINK_IDLE at 1 s ($SABOT_LINK_IDLE_MS): a host that connected and sent one byte holds
    the link (a second is told so, naming it) until 1 s after that byte, then the next host gets
    it and the silent one is hung up on; a host that says its last words and hangs up gives the
    link to one that connects at that very moment."""
    from sabot.audit.validator import Validator
    from sabot.link.host import HostLink
    from sabot.virtual.board import VirtualBoard

    monkeypatch.setenv("SABOT_LINK_IDLE_MS", "1000")
    code = request.getfixturevalue("pico_tree") if kind == "rpi_pico" else None
    key, flash, config, _ = provision_shoe(tmp_path)
    board = VirtualBoard(flash, port=free_port_for_tests(), sign_ms=SIGN_MS, board=kind,
                         code=code).start()
    v = Validator(config, str(tmp_path / "a.db"))
    link = None
    try:
        link = HostLink(board.url, v, key)  # the board's loop is up and reads its link
        assert link.ask(5) is not None
        link.close()
        link = None
        silent = socket.create_connection(("127.0.0.1", board.port), timeout=5)
        silent.sendall(b"\x00")  # a frame's end (line noise to the shoe), then nothing
        since = time.monotonic()
        holder = f"127.0.0.1:{silent.getsockname()[1]}"
        time.sleep(0.2)  # the board takes it before the next one connects
        port = ShoePort(board.url)
        try:
            _, taken = read_until_taken(port)
        finally:
            port.close()
        assert taken is not None and taken.holder == holder and taken.seconds == 0
        while link is None:  # told so until LINK_IDLE after that byte: then the link is ours
            try:
                link = HostLink(board.url, v, key)
            except LinkTaken as e:
                assert e.holder == holder and time.monotonic() - since < 3.0
        assert time.monotonic() - since >= 1.0 and link.ask(5) is not None
        while silent.recv(4096):  # what the shoe sent it, then its hang-up: not a word more
            pass
        silent.close()
        link.close()
        last = socket.create_connection(("127.0.0.1", board.port), timeout=5)
        last.sendall(b"\x00" * 600 + pr.command(None, config.shoe_id, 0, pr.C_HELLO))
        last.close()  # its last words, more than one read of them, and gone
        link = HostLink(board.url, v, key)  # connected as it hung up: the link is this one's
        assert link.ask(5) is not None
    finally:
        if link is not None:
            link.close()
        board.stop()
        v.store.close()

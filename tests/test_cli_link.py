"""The bench path of docs/COMMANDS.md: provision a virtual shoe, run it with `sabot board`,
validate its link with `sabot validate` from another process, then read the audit log back."""

import json
import os
import subprocess

import pytest

from sabot import keys
from sabot import protocol as pr
from sabot.audit.validator import Validator
from sabot.game import cards, rules
from sabot.registry import Registry

from kit import SABOT, BoardProcess, free_port_for_tests, registry_of, signing_shoe


@pytest.mark.long
@pytest.mark.board
def test_board_and_validate_from_the_command_line_store_what_the_rules_deal(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # ./sabot-shoes.json: this test's shoe alone
    key, flash = tmp_path / "host.pem", tmp_path / "flash"
    db, cap = tmp_path / "audit.db", tmp_path / "cap.bin"
    r = subprocess.run([*SABOT, "provision", "--key", key, "--flash", flash], capture_output=True,
                       text=True)  # registers the shoe in ./sabot-shoes.json
    assert r.returncode == 0, r.stderr
    assert oct(os.stat(key).st_mode & 0o777) == "0o600"
    tokens = cards.shuffled_shoe(1, seed=6)
    shoe = tmp_path / "shoe.txt"
    shoe.write_text(cards.format_shoe(tokens))
    port = free_port_for_tests()
    board = BoardProcess("--listen", f"127.0.0.1:{port}", "--flash", flash, "--shoe", shoe)
    try:
        board.wait_line("listening on")
        v = subprocess.run([*SABOT, "validate", "--port", f"socket://127.0.0.1:{port}", "--key",
                            key, "--db", db, "--capture", cap, "--seconds", "4", "--json"],
                           capture_output=True, text=True, timeout=60)
    finally:
        board.stop()
    assert v.returncode == 0, v.stderr
    printed = [json.loads(line) for line in v.stdout.splitlines()]
    rounds = [x for x in printed if "winner" in x]
    assert rounds == rules.deal_shoe(tokens)
    h = subprocess.run([*SABOT, "history", "--db", db, "--json"], capture_output=True, text=True)
    stored = [json.loads(x) for x in h.stdout.splitlines() if '"winner"' in x]
    shoe_id = Registry.load().pick(None).shoe_id
    assert {r.pop("shoe_id") for r in stored} == {shoe_id}  # two tables' round 7 told apart
    assert stored == rounds
    # the capture replays as the live validator took it: the shoe dealt before validate
    # connected, so it begins with frames sent then, before the status and the resends
    rp = subprocess.run([*SABOT, "replay", cap, "--json"], capture_output=True, text=True)
    out = json.loads(rp.stdout)
    assert rp.returncode == 0 and out["rejected"] == 0 and out["rounds"] == len(rounds), rp.stderr
    # no private key anywhere the host keeps: not in the flash, not in the store or capture
    secret = keys.private_pem(keys.load(str(key)).private_key)
    from sabot.virtual.element_store import KeyStore

    result_key = KeyStore(tmp_path / "flash.element").private_key(0)
    scalar = result_key.private_numbers().private_value.to_bytes(32, "big")
    for path in (db, cap, *flash.iterdir()):
        data = path.read_bytes()
        assert secret not in data and scalar not in data and b"PRIVATE" not in data
        assert scalar.hex().encode() not in data


def test_boot_counter_going_backwards_is_rejected(tmp_path):
    s, entry = signing_shoe()
    v = Validator(entry, str(tmp_path / "a.db"))
    s.boot = 5
    enc1 = pr.encode_frame(s.chained(pr.T_SHOE_START, b"\x00\x01\x08\x02"))  # 8-deck baccarat
    s.boot = 4
    enc2 = pr.encode_frame(s.chained(pr.T_SHOE_START, b"\x00\x01\x08\x02"))
    verdicts = v.receive(enc1 + enc2)
    assert [x[1] for x in verdicts] == ["accepted", "rejected"]
    assert verdicts[1][2] == "boot_backwards"


def test_10000_seeded_random_chunks_into_the_validator_accept_nothing(tmp_path):
    import random

    rng = random.Random(7)
    _, entry = signing_shoe()
    v = Validator(entry, str(tmp_path / "a.db"))
    data = bytes(rng.getrandbits(8) for _ in range(400_000))
    chunks = [data[i : i + rng.randint(1, 80)] for i in range(0, len(data), 40)][:10_000]
    accepted = 0
    for c in chunks:
        accepted += sum(1 for _, verdict, _ in v.receive(c) if verdict == "accepted")
    assert len(chunks) == 10_000 and accepted == 0
    # the noise really did reach the parser as candidate frames (its runs up to a frame's length
    # between zeros: a longer run is line noise, dropped whole however the reads cut it)
    assert v.counts["frames"] > 800


# ---- what answers on the port, each its own line ---------------------------------------------

# What the unix-port MicroPython REPL sent back to a hello (its COBS bytes hold a Ctrl-A: the raw
# REPL), recorded from a blank `sabot board --root` (test_deploy checks it on the board itself)
REPL_ANSWER = (b"\r\n>>> \r\nMicroPython 9458e3a23f on 2026-07-05; linux [GCC 14.2.1] version\r\n"
               b'Type "help()" for more information.\r\n>>> \r\n'
               + b"raw REPL; CTRL-B to exit\r\n>" * 4)


class Speaker:
    """A TCP port where something other than the expected shoe answers: nothing, junk, a REPL's
    words, or another shoe (each hello answered with `shoe`'s signed status)."""

    def __init__(self, says, shoe=None):
        import socket
        import threading

        self.says, self.shoe = says, shoe
        self.srv = socket.create_server(("127.0.0.1", 0))
        self.url = f"socket://127.0.0.1:{self.srv.getsockname()[1]}"
        self.stopped = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        import threading

        self.srv.settimeout(0.1)
        while not self.stopped.is_set():
            try:
                conn, _ = self.srv.accept()
            except OSError:
                continue
            threading.Thread(target=self._talk, args=(conn,), daemon=True).start()

    def _talk(self, conn):
        from sabot.virtual.capture_gen import status_payload

        conn.settimeout(0.1)
        deframer = pr.Deframer()
        with conn:
            while not self.stopped.is_set():
                try:
                    data = conn.recv(4096)
                except TimeoutError:
                    continue
                except OSError:
                    return
                if not data:
                    return
                try:
                    if self.says == "echo":  # a loopback: what we send comes back
                        conn.sendall(data)
                    elif self.says == "junk":
                        conn.sendall(bytes(range(1, 250)) * 2)
                    elif self.says == "repl":
                        conn.sendall(REPL_ANSWER)
                    elif self.says == "shoe":  # as a shoe does: hellos to it or any shoe
                        for encoded in deframer.feed(data):
                            hello = pr.parse(pr.decode_frame(encoded))
                            mine = hello.shoe_id in (0, self.shoe.shoe_id)
                            if hello.type == pr.C_HELLO and mine:
                                conn.sendall(pr.encode_frame(self.shoe.status(status_payload())))
                except OSError:
                    return

    def close(self):
        self.stopped.set()
        self.srv.close()


@pytest.mark.parametrize("says,one,several", [
    ("silence", "not a byte came back", "not a byte came back"),
    ("junk", "does not speak the sabot protocol", "does not speak the sabot protocol"),
    ("repl", "at its MicroPython REPL", "at its MicroPython REPL"),
    ("echo", "sends back what we send it", "sends back what we send it"),
    ("shoe", "answers on", "does not hold it"),
])
def test_what_answers_instead_of_a_registered_shoe_is_named_with_what_to_do(cli, tmp_path, says,
                                                                             one, several):
    """Nothing at all, a device that is no sabot shoe, a shoe left at its MicroPython REPL (a
    deploy interrupted or never run), another shoe than the registry's: four causes, four lines
    (the same line for all of them before), with a registry of one shoe (hello to it) and of
    several (hello to any shoe: identify)."""
    other, _ = signing_shoe(0x0BAD_0001)
    speaker = Speaker(says, other)
    key = tmp_path / "k"
    keys.create(str(key))
    try:
        for reg, said in ((registry_of(tmp_path, 7), one),
                          (registry_of(tmp_path, 7, 8, name="two.json"), several)):
            r = cli("status", "--port", speaker.url, "--key", key, "--db", tmp_path / "a.db",
                    "--registry", reg, "--wait", "1")
            assert r.returncode == 2 and said in r.stderr, r.stderr
            assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
            if says == "repl":
                assert "sabot deploy --port" in r.stderr and "provision" in r.stderr
    finally:
        speaker.close()
    # (our echoed hellos are frames the store keeps, rejected: evidence of what the port did)
    assert says == "echo" or not (tmp_path / "a.db").exists()


@pytest.fixture(scope="module")
def dealing_shoe(tmp_path_factory):
    """A provisioned virtual shoe on a board, three cards into its shoe (frames it holds
    unacknowledged), and the registry; the command key it was provisioned with, and another."""
    from sabot.virtual.board import VirtualBoard
    from sabot.virtual.dealer_channel import card_bytes

    from kit import SIGN_MS, provision_shoe

    tmp = tmp_path_factory.mktemp("dealing")
    key, flash, _, reg = provision_shoe(tmp)
    board = VirtualBoard(flash, port=free_port_for_tests(), sign_ms=SIGN_MS).start()
    try:
        for card in ("AS", "2H", "3D"):
            board.send(card_bytes(card))
        assert board.wait_read(10)
        yield board, tmp, key, keys.create(str(tmp / "other.pem")), reg
    finally:
        board.stop()


@pytest.mark.board
def test_a_command_key_the_shoe_refuses_is_said_within_seconds_and_fails(dealing_shoe, cli):
    """The shoe refuses a command whose signature its element does not verify with nothing but
    a count (status `refused`): status, new-shoe and validate read that count after their signed
    commands and say, in seconds, that the shoe refuses our key (exit 2: the --key given is
    wrong); nothing was acknowledged. With the shoe's own key all of it is taken."""
    import time

    board, tmp, key, other, reg = dealing_shoe
    db = tmp / "a.db"
    common = ("--port", board.url, "--db", db, "--registry", reg)
    r = cli("status", *common, "--key", other.path, "--json")
    st = json.loads(r.stdout)
    assert r.returncode == 2 and st["command_key"] == "refused", r.stderr
    assert st["unacknowledged"] > 0 and st["acked"] == 0 and st["refused"] >= 2
    assert "refuses our commands" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = cli("new-shoe", *common, "--key", other.path, "--by", "tech")
    assert r.returncode == 2 and "refuses our commands" in r.stderr, r.stderr
    t0 = time.monotonic()
    r = cli("validate", *common, "--key", other.path, "--seconds", "2")
    assert r.returncode == 2 and time.monotonic() - t0 < 8, r.stderr
    said = r.stderr.splitlines()
    assert "refuses our commands" in said[0], r.stderr  # said while it ran, before the summary
    assert "none acknowledged" in said[-2] and "nothing acknowledged" in said[-1]
    r = cli("status", *common, "--key", key.path, "--json")
    st = json.loads(r.stdout)
    assert r.returncode == 0 and st["command_key"] == "accepted", r.stderr
    assert st["unacknowledged"] == 0 and st["acked"] > 0  # what validate stored, acknowledged now


@pytest.mark.board
def test_a_flash_directory_takes_one_board_at_a_time(dealing_shoe, cli):
    """A second board on a flash directory in use would deal from the same log and element:
    refused in one line before its element or firmware starts."""
    from sabot.errors import SabotError
    from sabot.virtual.board import VirtualBoard, lock_flash

    board, tmp, *_ = dealing_shoe
    second = VirtualBoard(board.flash_dir, port=free_port_for_tests())
    with pytest.raises(SabotError, match="is in use by another board") as e:
        second.start()
    assert "\n" not in str(e.value) and second.proc is None and second.element.proc is None
    r = cli("board", "--listen", f"127.0.0.1:{free_port_for_tests()}", "--flash",
            board.flash_dir)
    assert r.returncode == 2 and "in use by another board" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert board.alive() and board.flash_lock is not None
    spare = tmp / "spare"
    spare.mkdir()
    os.close(lock_flash(str(spare)))  # let go when closed: the next board takes it
    os.close(lock_flash(str(spare)))

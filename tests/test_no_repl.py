"""No REPL on the data port: Ctrl-C (0x03), raw REPL (0x01), soft reset (0x04) and paste mode
(0x05) flooded at the shoe during boot, while dealing, after a forced crash and with a full flash
never bring a REPL banner onto the link; a crash ends in a reset (or the tilt), never a prompt."""

import socket
import time

import pytest

from sabot.virtual.board import VirtualBoard
from sabot.virtual.dealer import Dealer
from sabot.virtual.dealer_channel import card_bytes

from kit import SIGN_MS, provision_shoe

pytestmark = pytest.mark.board  # every test here starts a process

FLOOD = b"\x03\x01\x04\x05\r\n" * 50
BANNERS = (b"MicroPython", b">>>", b"raw REPL", b"paste mode", b"soft reboot", b"Traceback")


def flood(port, seconds=1.0):
    """Flood the shoe's port with REPL control bytes; everything it says back (nothing from a
    port that refuses the connection: a shoe gone to reset)."""
    got = b""
    end = time.monotonic() + seconds
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=2)
    except ConnectionRefusedError:
        return got
    with s:
        s.settimeout(0.05)
        while time.monotonic() < end:
            try:
                s.sendall(FLOOD)
            except OSError:
                break
            try:
                got += s.recv(65536)
            except (TimeoutError, OSError):
                pass
    return got


def assert_no_repl(data):
    for banner in BANNERS:
        assert banner not in data, banner


@pytest.fixture
def board(tmp_path):
    _, flash, _, _ = provision_shoe(tmp_path)
    b = VirtualBoard(flash, sign_ms=SIGN_MS)
    yield b
    b.stop()


def test_floods_during_boot_and_while_dealing_bring_no_repl(board):
    board.start()
    assert_no_repl(flood(board.port, 0.5))  # right at boot
    dealer = Dealer(board, ["AS", "2H", "9S", "8D", "KD", "9C", "5H"])
    for _ in range(4):
        dealer.step()
        assert_no_repl(flood(board.port, 0.2))
    assert board.alive() and board.indicator[2] >= 4  # it went on dealing


def test_a_full_flash_crash_ends_in_a_reset_and_the_tilt_never_a_repl(board, tmp_path):
    board.start(flash_bytes=3000)  # the flash log can grow to 3 KB, no further
    seen = b""
    for i in range(200):
        board.send(card_bytes(("AS", "2H", "9S", "8D", "KD", "9C")[i % 6]))
        if not board.wait_read(5) or not board.alive():
            break
    assert board.proc.wait(10) == 4  # the crash: a reset, not a stop at a prompt
    err = board.proc.stderr.read().decode()
    assert "reset" in err
    # Powered up again on the same full flash: the frame it left unfinished cannot be logged
    # either, so this boot too ends in a reset (perhaps before the flood connects), never a REPL.
    board.start(flash_bytes=3000)
    seen += flood(board.port, 1.0)
    assert_no_repl(seen)
    assert board.proc.wait(10) == 4


@pytest.mark.long
def test_a_provisioned_shoe_that_lost_its_identity_is_not_blank(tmp_path):
    """Only the element's lock state makes a shoe blank: a provisioned one whose identity file is
    deleted tilts and floods bring no REPL, on the virtual --root board as on a
    Pico's main.py; the same shoe with its element factory-fresh would keep the REPL."""
    from kit import BoardProcess, free_port_for_tests, port_accepts, wait_for
    from kit.run import install_build

    root = tmp_path / "board"
    install_build(root, tmp_path / "release.pem")  # the run's build (kit/run.py)
    port = free_port_for_tests()
    board = BoardProcess("--listen", f"127.0.0.1:{port}", "--root", root, "--key",
                         tmp_path / "host.pem", "--registry", tmp_path / "shoes.json")
    try:
        board.wait_line("firmware running")
    finally:
        board.stop()
    (root / "data" / "identity").unlink()
    port = free_port_for_tests()  # (the first board's may not be free again yet on a busy host)
    board = BoardProcess("--listen", f"127.0.0.1:{port}", "--root", root)
    try:
        board.wait_line("firmware running")
        assert wait_for(lambda: port_accepts(port))
        assert_no_repl(flood(port, 1.0))
        assert board.proc.poll() is None
    finally:
        board.stop()
    (root / "main.py").unlink()  # no firmware at all: still no REPL on a provisioned board
    board = BoardProcess("--listen", f"127.0.0.1:{port}", "--root", root)
    try:
        board.wait_line("nothing runs and no REPL is offered")
        assert not port_accepts(port) or b">>>" not in flood(port, 0.5)
    finally:
        board.stop()

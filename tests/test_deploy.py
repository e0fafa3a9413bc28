"""Deployment for real: an empty virtual board (the unix-port MicroPython with a REPL on its port,
as a fresh Pico has on USB) gets the firmware through genuine mpremote sessions (`sabot deploy`),
is provisioned with its key, boots, and passes a seeded integrity challenge. A second deploy onto
the now-dealing shoe goes through the authenticated maintenance command."""

import json
import os
import subprocess
import sys

from sabot.virtual import free_port

from conftest import BoardProcess, port_accepts, wait_for

SABOT = [sys.executable, "-m", "sabot.cli"]


def run(*args, timeout=180):
    return subprocess.run([*SABOT, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def test_deploy_to_an_empty_board_then_redeploy_to_a_dealing_one(tmp_path):
    root, key = tmp_path / "board", tmp_path / "shoe.key"
    root.mkdir()
    port = free_port()
    url = f"socket://127.0.0.1:{port}"
    board = BoardProcess("--listen", f"127.0.0.1:{port}", "--root", root)
    try:
        board.wait_line("REPL on")
        assert wait_for(lambda: port_accepts(port))
        r = run("deploy", "--port", url, "--board", "virtual", "--key", key)
        assert r.returncode == 0, r.stderr
        assert "provisioning shoe" in r.stderr and "matches MANIFEST" in r.stderr
        assert (root / "shoe" / "app.mpy").exists()
        assert (root / "data" / "key").read_bytes() == key.read_bytes()
        assert oct(os.stat(key).st_mode & 0o777) == "0o600"
        board.wait_line("firmware running")
        v = run("verify-firmware", "--port", url, "--seed", os.urandom(16).hex(), "--key", key)
        assert v.returncode == 0 and v.stdout.startswith("PASS"), v.stdout + v.stderr

        # A stale module from an older build must not survive a deploy.
        (root / "shoe" / "stale.mpy").write_bytes(b"M\x06")
        r = run("deploy", "--port", url, "--board", "virtual", "--key", key)
        assert r.returncode == 0, r.stderr
        assert not (root / "shoe" / "stale.mpy").exists()
        assert "sent it to maintenance" in r.stderr and "provisioning" not in r.stderr
        assert "already has a key: kept" in r.stderr and "removing shoe/stale.mpy" in r.stderr
        board.wait_line("firmware running")
        v = run("verify-firmware", "--port", url, "--seed", os.urandom(16).hex(), "--key", key)
        assert v.returncode == 0, v.stdout + v.stderr
    finally:
        board.stop()


def test_maintenance_at_power_on_keeps_a_deployed_board_at_its_repl(tmp_path):
    """`--maintenance` is the confirm button held at power-on: the deployed firmware does not start
    and mpremote reaches the REPL, which sees the board's filesystem."""
    from sabot.build import build

    root = tmp_path / "board"
    info = build("virtual", root)
    assert (root / "main.py").exists() and info["manifest"]
    port = free_port()
    url = f"socket://127.0.0.1:{port}"
    board = BoardProcess("--listen", f"127.0.0.1:{port}", "--root", root, "--maintenance")
    try:
        board.wait_line("REPL on")
        assert wait_for(lambda: port_accepts(port))
        mpremote = [os.path.join(os.path.dirname(sys.executable), "mpremote"), "connect", url,
                    "resume"]
        r = subprocess.run([*mpremote, "exec", "import os; print(sorted(os.listdir()))"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert "'main.py'" in r.stdout and "'shoe'" in r.stdout
    finally:
        board.stop()


def test_deploy_over_a_tty_clears_what_the_build_does_not_own_and_hard_resets(tmp_path):
    """A Pico as a technician finds it: an old boot.py and lib/ on it, its port a real tty. Deploy
    removes them (saying so), keeps the data directory, copies file by file, and boots main.py with
    a hard reset; a second deploy keeps the key unless --rekey."""
    from conftest import PtyBridge

    root, key = tmp_path / "board", tmp_path / "shoe.key"
    (root / "lib" / "old").mkdir(parents=True)
    (root / "boot.py").write_text("print('old boot')\n")
    (root / "lib" / "old" / "thing.py").write_text("x = 1\n")
    (root / "data").mkdir()
    (root / "data" / "notes").write_text("kept\n")
    port = free_port()
    board = BoardProcess("--listen", f"127.0.0.1:{port}", "--root", root)
    bridge = None
    try:
        board.wait_line("REPL on")
        assert wait_for(lambda: port_accepts(port))
        bridge = PtyBridge(tmp_path, port)
        r = run("deploy", "--port", bridge.path, "--board", "virtual", "--key", key,
                "--baud", "115200")
        assert r.returncode == 0, r.stderr
        assert "removing boot.py" in r.stderr and "removing directory lib/" in r.stderr
        assert "copied shoe/app.mpy" in r.stderr and "hard reset" in r.stderr
        assert not (root / "boot.py").exists() and not (root / "lib").exists()
        assert (root / "data" / "notes").read_text() == "kept\n"
        board.wait_line("firmware running")
        st = run("status", "--port", bridge.path, "--key", key, "--db", tmp_path / "a.db",
                 "--json")
        assert st.returncode == 0, st.stderr
        assert json.loads(st.stdout)["integrity"] == "ok"

        # the dealing shoe again, re-keyed on request (kept otherwise: the test above)
        other = tmp_path / "other.key"
        r = run("deploy", "--port", bridge.path, "--board", "virtual", "--key", key,
                "--rekey", other)
        assert r.returncode == 0, r.stderr
        assert "sent it to maintenance" in r.stderr and "re-keying" in r.stderr
        assert (root / "data" / "key").read_bytes() == other.read_bytes()
        board.wait_line("firmware running")
        st = run("status", "--port", bridge.path, "--key", other, "--db", tmp_path / "b.db")
        assert st.returncode == 0, st.stderr
    finally:
        if bridge:
            bridge.stop()
        board.stop()

"""Deployment for real: a blank virtual board (the unix-port MicroPython with a REPL on its port,
as a fresh Pico has on USB, and a factory-fresh secure element) gets the firmware through genuine
mpremote sessions (`sabot deploy`), is provisioned over the same port (`sabot provision --port`),
boots, and passes a seeded integrity challenge checked with the registry alone. A second deploy
onto the now-dealing shoe goes through the signed maintenance command; `--rekey` has the element
make result key version 2."""

import json
import os
import subprocess
import sys

import pytest

from kit import ROOT, SABOT, BoardProcess, free_port_for_tests, port_accepts, wait_for

pytestmark = pytest.mark.board  # every test here starts a process


def run(env, *args, timeout=180):
    return subprocess.run([*SABOT, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env)


@pytest.fixture
def env(tmp_path):
    """The environment of this test's sabot commands: the repository seen through symlinks, with
    a build/ of its own (`sabot deploy` builds into SABOT_ROOT/build/BOARD, which tests running at
    the same time must not share)."""
    tree = tmp_path / "checkout"
    tree.mkdir()
    for name in ("firmware", "boards", "host_tools"):
        (tree / name).symlink_to(ROOT / name)
    return dict(os.environ, SABOT_ROOT=str(tree))


def test_a_blank_board_is_deployed_then_provisioned_over_its_port(env, tmp_path):
    """The bench walk-through of README: a blank board (empty filesystem, factory-fresh element)
    takes the firmware, is provisioned over its port and deals; a deploy to a dealing shoe, and
    what it removes, is the tty test's."""
    from sabot.registry import Registry

    root, key, reg = tmp_path / "board", tmp_path / "host.pem", tmp_path / "shoes.json"
    release = ("--release-key", tmp_path / "release.pem")
    port = free_port_for_tests()
    url = f"socket://127.0.0.1:{port}"
    provision = ("provision", "--port", url, "--key", key, "--registry", reg, "--table",
                 "BAC-09", "--ez", "--side-wagers", "dragon7,panda8")
    board = BoardProcess("--listen", f"127.0.0.1:{port}", "--root", root)
    try:
        board.wait_line("REPL on")
        assert wait_for(lambda: port_accepts(port))
        r = run(env, *provision)  # nothing to run the provisioning yet
        assert r.returncode == 2 and "deploy it first" in r.stderr, r.stderr
        r = run(env, "deploy", "--port", url, "--board", "virtual", "--key", key, "--registry",
                reg, *release)
        assert r.returncode == 0, r.stderr
        assert "matches MANIFEST" in r.stderr and "the shoe is blank" in r.stderr
        assert not reg.exists() and not (root / "data" / "identity").exists()
        assert (root / "shoe" / "app.mpy").exists() and (root / "shoe" / "release.py").exists()
        r = run(env, *provision)
        assert r.returncode == 0, r.stderr
        entry = Registry.load(str(reg)).pick(None)
        assert entry.table == "BAC-09" and entry.ez and entry.side_wagers == ["dragon7", "panda8"]
        assert len(entry.serial) == 18 and entry.serial in r.stdout and entry.key_versions == [1]
        assert (root / "data" / "identity").exists() and not (root / "data" / "key").exists()
        assert oct(os.stat(key).st_mode & 0o777) == "0o600"
        assert b"PRIVATE" not in b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file())
        board.wait_line("firmware running")
        r = run(env, *provision)  # once only: the shoe deals and has no REPL
        assert r.returncode == 2 and "provisioned already" in r.stderr, r.stderr
        v = run(env, "verify-firmware", "--port", url, "--seed", os.urandom(16).hex(),
                "--registry", reg)  # no key: the registry's public key checks the answer
        assert v.returncode == 0 and v.stdout.startswith("PASS"), v.stdout + v.stderr
    finally:
        board.stop()


def test_maintenance_at_power_on_keeps_a_deployed_board_at_its_repl(tmp_path):
    """`--maintenance` is a board on the bench with its case open (BOOTSEL / SWD; no button does
    it): the deployed firmware does not start and mpremote reaches the REPL, which sees the
    board's filesystem."""
    from sabot.release.build import build

    root = tmp_path / "board"
    info = build("virtual", root, release=tmp_path / "release.pem")
    assert (root / "main.py").exists() and info["manifest"]
    port = free_port_for_tests()
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


def test_deploy_over_a_tty_clears_what_the_build_does_not_own_and_hard_resets(env, tmp_path):
    """A Pico as a technician finds it: an old boot.py and lib/ on it, its port a real tty. Deploy
    removes them (saying so), keeps the data directory, copies file by file, and boots main.py with
    a hard reset; a second deploy with --rekey registers result key version 2 beside version 1."""
    from sabot.registry import Registry

    from kit import PtyBridge

    root, key, reg = tmp_path / "board", tmp_path / "host.pem", tmp_path / "shoes.json"
    release = ("--release-key", tmp_path / "release.pem")
    (root / "lib" / "old").mkdir(parents=True)
    (root / "boot.py").write_text("print('old boot')\n")
    (root / "lib" / "old" / "thing.py").write_text("x = 1\n")
    port = free_port_for_tests()
    board = BoardProcess("--listen", f"127.0.0.1:{port}", "--root", root, "--key", key,
                         "--registry", reg)
    bridge = None
    try:
        board.wait_line("REPL on")  # provisioned at the factory: identity in data/, element
        (root / "data" / "notes").write_text("kept\n")  # the technician's file in data/
        assert wait_for(lambda: port_accepts(port))
        bridge = PtyBridge(tmp_path, port)
        drops = bridge.drops
        r = run(env, "deploy", "--port", bridge.path, "--board", "virtual", "--key", key,
                "--baud", "115200", "--registry", reg, *release)
        assert r.returncode == 0, r.stderr
        assert "removing boot.py" in r.stderr and "removing directory lib/" in r.stderr
        assert "copied shoe/app.mpy" in r.stderr and "hard reset" in r.stderr
        assert not (root / "boot.py").exists() and not (root / "lib").exists()
        assert (root / "data" / "notes").read_text() == "kept\n"
        board.wait_line("firmware running")
        bridge.wait_back(drops + 1)  # the hard reset dropped the tty: the new one, not the old
        st = run(env, "status", "--port", bridge.path, "--key", key, "--db", tmp_path / "a.db",
                 "--registry", reg, "--json")
        assert st.returncode == 0, st.stderr
        assert json.loads(st.stdout)["integrity"] == "ok"

        # the dealing shoe again, its element making the next result key on request
        drops = bridge.drops
        r = run(env, "deploy", "--port", bridge.path, "--board", "virtual", "--key", key,
                "--rekey", "--registry", reg, *release)
        assert r.returncode == 0, r.stderr
        assert "sent it to maintenance" in r.stderr and "made result key version 2" in r.stderr
        assert Registry.load(str(reg)).pick(None).key_versions == [1, 2]  # the old one kept
        board.wait_line("firmware running")
        bridge.wait_back(drops + 2)  # dropped into maintenance, then by the hard reset
        st = run(env, "status", "--port", bridge.path, "--key", key, "--db", tmp_path / "a.db",
                 "--registry", reg)  # the same audit chain goes on under key version 2
        assert st.returncode == 0, st.stderr
        a = run(env, "audit", "verify", "--db", tmp_path / "a.db", "--registry", reg)
        assert a.returncode == 0, a.stderr
    finally:
        if bridge:
            bridge.stop()
        board.stop()


def test_a_host_hanging_up_as_the_repl_answers_unplugs_the_port_only(tmp_path):
    """The REPL bridge of a blank board: a host that sends a line and hangs up while the REPL
    still answers it leaves the REPL up for the next session (it used to end the whole board,
    so the next mpremote found the port refused)."""
    import socket
    import time

    port = free_port_for_tests()
    board = BoardProcess("--listen", f"127.0.0.1:{port}", "--root", tmp_path / "board")
    try:
        board.wait_line("REPL on")
        assert wait_for(lambda: port_accepts(port))
        for _ in range(3):
            with socket.create_connection(("127.0.0.1", port)) as s:
                s.sendall(b"print('x' * 200000)\r")
                time.sleep(0.2)  # the answer is under way: hang up in the middle of it
        mpremote = [os.path.join(os.path.dirname(sys.executable), "mpremote"), "connect",
                    f"socket://127.0.0.1:{port}", "resume"]
        r = subprocess.run([*mpremote, "exec", "print(6 * 7)"], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0 and "42" in r.stdout, r.stderr + board.said()
        assert board.proc.poll() is None
    finally:
        board.stop()

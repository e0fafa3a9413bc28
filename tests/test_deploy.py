"""Deployment for real: a blank virtual board (the unix-port MicroPython with a REPL on its port,
as a fresh Pico has on USB, and a factory-fresh secure element) gets the firmware through genuine
mpremote sessions (`sabot deploy`), is provisioned over the same port (`sabot provision --port`),
boots, and passes a seeded integrity challenge checked with the registry alone. A second deploy
onto the now-dealing shoe goes through the sabot protocol's update channel (no REPL); `--rekey`
has the element make result key version 2."""

import base64
import json
import os
import subprocess
import sys

import pytest

from kit import (
    ROOT,
    SABOT,
    BoardProcess,
    free_port_for_tests,
    port_accepts,
    registry_of,
    wait_for,
)

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


def first_checkpoint_is_key_1s(entry):
    """The log's first checkpoint, signed by key 1 inside the element as the shoe made it (on
    MicroPython: maint.provision), is kept in the registry for the witnesses (sabot bind)."""
    from sabot import note, tlog

    origin = tlog.origin(entry.shoe_id)
    text, _ = note.verified(entry.first_checkpoint,
                            [note.ecdsa_verifier(origin, entry.public_key(1))])
    assert text == f"{origin}\n0\n{base64.b64encode(tlog.EMPTY_ROOT).decode()}\n"


@pytest.mark.long
def test_a_blank_board_is_deployed_then_provisioned_over_a_tty(env, tmp_path):
    """The bench walk-through of docs/TECHNICIAN.md on a real tty: a blank board (an old boot.py
    and lib/ on it, a factory-fresh element) takes the firmware at its REPL (deploy removes what
    the build does not own and keeps the data directory), is provisioned over the same port and
    deals."""
    from sabot.registry import Registry

    from kit import PtyBridge

    root, key, reg = tmp_path / "board", tmp_path / "host.pem", tmp_path / "shoes.json"
    release = ("--release-key", tmp_path / "release.pem")
    (root / "lib" / "old").mkdir(parents=True)
    (root / "data").mkdir()
    (root / "boot.py").write_text("print('old boot')\n")
    (root / "lib" / "old" / "thing.py").write_text("x = 1\n")
    (root / "data" / "notes").write_text("kept\n")  # the technician's file in data/
    port = free_port_for_tests()
    board = BoardProcess("--listen", f"127.0.0.1:{port}", "--root", root)
    bridge = None
    try:
        board.wait_line("REPL on")
        assert wait_for(lambda: port_accepts(port))
        bridge = PtyBridge(tmp_path, port)
        tty = bridge.path
        provision = ("provision", "--port", tty, "--key", key, "--registry", reg, "--table",
                     "BAC-09", "--ez", "--side-wagers", "dragon7,panda8", "--decks", "6")
        r = run(env, *provision)  # nothing to run the provisioning yet
        assert r.returncode == 2 and "deploy it first" in r.stderr, r.stderr
        # a shoe at its REPL (blank, or its first deploy interrupted) is said to be one, with
        # what to do, by the commands that expect a dealing shoe
        pit = registry_of(tmp_path, 7, 8, name="pit.json")
        r = run(env, "status", "--port", tty, "--key", key, "--db", tmp_path / "s.db",
                "--registry", pit)
        assert r.returncode == 2 and "at its MicroPython REPL" in r.stderr, r.stderr
        assert "sabot deploy --port" in r.stderr and not (tmp_path / "s.db").exists()
        r = run(env, "deploy", "--port", tty, "--board", "virtual", "--key", key, "--baud",
                "115200", "--registry", reg, *release)
        assert r.returncode == 0, r.stderr + board.said()
        assert "matches MANIFEST" in r.stderr and "the shoe is blank" in r.stderr
        assert "removing boot.py" in r.stderr and "removing directory lib/" in r.stderr
        assert "copied shoe/app.mpy" in r.stderr
        assert not (root / "boot.py").exists() and not (root / "lib").exists()
        assert (root / "data" / "notes").read_text() == "kept\n"
        assert not reg.exists() and not (root / "data" / "identity").exists()
        drops = bridge.drops
        r = run(env, *provision)
        assert r.returncode == 0, r.stderr
        entry = Registry.load(str(reg)).pick(None)
        assert entry.table == "BAC-09" and entry.ez and entry.side_wagers == ["dragon7", "panda8"]
        # the shoe's own maint.provision wrote its configuration: EZ Baccarat (6), 6 decks
        assert entry.decks == 6 and (root / "data" / "variant").read_bytes() == b"\x06\x06"
        assert len(entry.serial) == 18 and entry.serial in r.stdout and entry.key_versions == [1]
        first_checkpoint_is_key_1s(entry)
        assert (root / "data" / "identity").exists() and not (root / "data" / "key").exists()
        assert oct(os.stat(key).st_mode & 0o777) == "0o600"
        assert b"PRIVATE" not in b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file())
        board.wait_line("firmware running")
        bridge.wait_back(drops + 1)  # the hard reset dropped the tty: the new one, not the old
        r = run(env, *provision)  # once only: the shoe deals and has no REPL
        assert r.returncode == 2 and "provisioned already" in r.stderr, r.stderr
    finally:
        if bridge:
            bridge.stop()
        board.stop()


@pytest.mark.long
def test_a_dealing_shoe_is_updated_and_rekeyed_over_a_tty_with_no_repl(env, tmp_path):
    """A provisioned shoe (its firmware in its filesystem, provisioned at the factory) updated
    over a real tty through the sabot protocol alone — no REPL — and, with --rekey, its element
    making result key version 2, certified by its attestation key."""
    from kit import PtyBridge
    from kit.run import install_build

    root, key, reg = tmp_path / "board", tmp_path / "host.pem", tmp_path / "shoes.json"
    release = ("--release-key", tmp_path / "release.pem")
    install_build(root, tmp_path / "release.pem")  # the run's build (kit/run.py)
    port = free_port_for_tests()
    # a simulated dealer deals one round (a burn, then a natural) and draws no more: a rekey
    # waits for a round dealt since provisioning
    (tmp_path / "round.txt").write_text("AS 2H 9S 8D KD 9C\n")
    board = BoardProcess("--listen", f"127.0.0.1:{port}", "--root", root, "--key", key,
                         "--registry", reg, "--shoe", tmp_path / "round.txt")
    bridge = None
    try:
        board.wait_line("firmware running")
        assert wait_for(lambda: port_accepts(port))
        bridge = PtyBridge(tmp_path, port)
        assert wait_for(lambda: json.loads(run(
            env, "status", "--port", bridge.path, "--key", key, "--db", tmp_path / "a.db",
            "--registry", reg, "--json").stdout or "{}").get("round", 0) >= 1, timeout=30)
        update_the_dealing_shoe(env, bridge.path, key, reg, release, tmp_path)
    finally:
        if bridge:
            bridge.stop()
        board.stop()


def update_the_dealing_shoe(env, tty, key, reg, release, tmp_path):
    """The dealing shoe: updated through the protocol, its element making the next key. The
    registry holds another shoe too: with no --shoe-id, the shoe's signed answer says which one
    is on the port (as for status and validate)."""
    from sabot.registry import Registry

    (ours,) = Registry.load(str(reg)).shoes
    registry_of(tmp_path, 0x0BAD_0002, name=reg.name)  # a second shoe, on another table
    r = run(env, "deploy", "--port", tty, "--board", "virtual", "--key", key, "--rekey",
            "--by", "tech-ann", "--registry", reg, *release)
    assert r.returncode == 0, r.stderr
    assert "update begun" in r.stderr and "made result key version 2" in r.stderr
    assert "could not record" not in r.stderr  # a fresh shoe's budget holds the update's frames
    assert "seeded HMAC" in r.stderr and "mpremote" not in r.stderr
    shoes = Registry.load(str(reg)).shoes
    assert shoes[ours].key_versions == [1, 2]  # the old one kept
    assert shoes[0x0BAD_0002].key_versions == [1]  # the other shoe's entry as it was
    st = run(env, "status", "--port", tty, "--key", key, "--db", tmp_path / "a.db",
             "--registry", reg, "--json")  # the same audit chain goes on under version 2
    now = json.loads(st.stdout)
    assert now["integrity"] == "ok", st.stderr
    assert now["commands_left"] == 2_097_151 - now["host_counter"] > 0  # the element's counter
    h = run(env, "history", "--db", tmp_path / "a.db", "--alarms")
    kinds = [json.loads(line)["kind"] for line in h.stdout.splitlines()]
    assert "firmware_update" in kinds and "rekey" in kinds, h.stdout + h.stderr
    from sabot.pit.pages import Pit, dashboard_html  # the pit dashboard shows them

    pit = Pit(str(tmp_path / "a.db"), list(Registry.load(str(reg)).shoes.values()))
    pit.refresh()
    html = dashboard_html(pit)
    assert "firmware_update" in html and "tech-ann" in html
    a = run(env, "audit", "verify", "--db", tmp_path / "a.db", "--registry", reg)
    assert a.returncode == 0, a.stderr
    v = run(env, "verify-firmware", "--port", tty, "--seed", os.urandom(16).hex(),
            "--registry", reg)  # no key: the registry's public key checks the answer
    assert v.returncode == 0 and v.stdout.startswith("PASS"), v.stdout + v.stderr


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

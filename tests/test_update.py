"""Updates through the sabot protocol, on the virtual board running a built, release-signed tree
(real MicroPython, the element emulator): a build signed by the release key the shoe trusts is
staged, checked, recorded in the chain, switched to and booted; another release key's build is
refused and the shoe deals on with its firmware; chunks a stranger puts on the cable are dropped;
a power cut mid-stream leaves the old tree, one mid-switch is finished at boot; a tilted shoe
takes an update and resends what it held. Every update is a chained frame and an alarm."""

import os
import shutil
import time

import pytest

from sabot import protocol as pr
from sabot.errors import SabotError
from sabot.link.transport import ShoePort
from sabot.release import update as channel
from sabot.release.build import (
    FIRMWARE_VERSION,
    code_digest,
    release_key,
    sign_manifest,
    sign_update,
)
from sabot.virtual.board import VirtualBoard
from sabot.virtual.dealer import Dealer

from kit import SIGN_MS, provision_shoe, run_micropython

pytestmark = pytest.mark.board  # every test here starts a board

ROUND = ["AS", "2H", "9S", "8D", "KD", "9C"]  # a burn, then a natural (player 9, banker 7)


def variant_of(build_dir, release, note, version=FIRMWARE_VERSION, board="virtual"):
    """The build with one more file, signed again: a tree that differs from the running one."""
    (build_dir / "NOTES").write_text(note)
    digest = code_digest(build_dir)
    (build_dir / "MANIFEST").write_text(sign_manifest(release_key(release), digest, board,
                                                      version))
    sign_update(release_key(release), build_dir)
    return {"dir": str(build_dir), "manifest": digest}


@pytest.fixture(scope="module")
def built():
    """The run's one build (kit/run.py: mpy-cross takes seconds), and its release key."""
    from kit.run import built_tree

    return built_tree()[0]


@pytest.fixture
def shoe(tmp_path, built):
    key, flash, config, _registry = provision_shoe(tmp_path)
    code = tmp_path / "code"
    shutil.copytree(built / "tree", code)
    shutil.copy(built / "release.pem", tmp_path / "release.pem")
    board = VirtualBoard(flash, code=code, sign_ms=SIGN_MS)
    board.start()
    yield key, config, board, code, tmp_path
    board.stop()


def maintenance_frames(port, config):
    """Every maintenance frame the shoe still holds, decoded (a hello makes it resend them)."""
    ch = channel.ShoeChannel(port, None, config)
    assert ch.hello(5.0) is not None
    out = []
    while True:
        f = ch.wait_for(lambda f: f if f.type == pr.T_MAINTENANCE and ch.authentic(f) else None,
                        1.0)
        if f is None:
            return out
        out.append(pr.decode_payload(f)[1])


def test_a_signed_update_switches_and_another_release_key_is_refused(shoe):
    key, config, board, code, tmp = shoe
    dealer = Dealer(board, ROUND * 2)
    for _ in range(len(ROUND)):
        dealer.step()
    shutil.copytree(code, tmp / "b2")
    info = variant_of(tmp / "b2", tmp / "release.pem", "second build\n")
    port = ShoePort(board.url)
    try:
        # a stranger's chunk 1 (another stream) is dropped, the genuine stream goes on
        data = channel.stream(info["dir"])
        _, forged = channel.chain(b"x" * len(data))
        ch = channel.ShoeChannel(port, key, config)
        refused_before = ch.hello(5.0)["refused"]
        i, nxt, piece = forged[0]
        ch.send(pr.C_UPDATE_DATA, i.to_bytes(2, "big") + nxt + piece)
        rec = channel.update(port, key, config, info, "tech-ann", (said := []).append)
        # its update_begun recorded (the unsigned progress of chunk 0 comes before it)
        assert not any("could not record" in line for line in said), said
    finally:
        port.close()
    assert rec["what"] == "update_applied" and rec["manifest"] == info["manifest"]
    assert board.wait_off() == 4  # a reset: the board boots the new tree
    assert (code / "NOTES").read_text() == "second build\n"
    assert code_digest(code) == info["manifest"] and not (code / "update.tmp").exists()
    board.start()
    port = ShoePort(board.url)
    try:
        st = channel.back_after_boot(port, key, config)
        assert st["integrity"] == "ok"
        # another release key's build: refused, and the shoe deals on with what it runs
        shutil.copytree(tmp / "b2", tmp / "b3")  # the same tree, signed by another key
        other = variant_of(tmp / "b3", tmp / "other-release.pem", "mallory's build\n")
        with pytest.raises(SabotError, match="not_signed_by_the_release_key"):
            channel.update(port, key, config, other, "mallory", lambda m: None)
        # an older build, genuinely signed by the trusted key, and one of before the version
        # line (every build that still had a command handing the port to the REPL): refused
        shutil.copytree(tmp / "b2", tmp / "b4")
        older = variant_of(tmp / "b4", tmp / "release.pem", "older\n", FIRMWARE_VERSION - 1)
        with pytest.raises(SabotError, match="older_than_running"):
            channel.update(port, key, config, older, "mallory", lambda m: None)
        digest = older["manifest"]
        old_form = pr.sign_digest(release_key(tmp / "release.pem"), bytes.fromhex(digest))
        (tmp / "b4" / "MANIFEST").write_text(f"{digest}\n{old_form.hex()}\n")
        # the stream itself signed by the release key (as a release of that time could not
        # be): the shoe stages it and refuses its MANIFEST
        sign_update(release_key(tmp / "release.pem"), tmp / "b4", FIRMWARE_VERSION, "virtual")
        with pytest.raises(SabotError, match="manifest_malformed"):
            channel.update(port, key, config, older, "mallory", lambda m: None)
        # a build for another board, genuinely signed: it would not boot here, and a
        # provisioned shoe has no REPL to recover it
        pico = variant_of(tmp / "b4", tmp / "release.pem", "for a Pico\n", board="rpi_pico")
        with pytest.raises(SabotError, match="built_for_another_board"):
            channel.update(port, key, config, pico, "tech", lambda m: None)
        recs = maintenance_frames(port, config)
    finally:
        port.close()
    assert code_digest(code) == info["manifest"]  # untouched
    # another key's build, an older one and another board's: refused at chunk 0, before a byte
    # was kept (nothing begun); the malformed MANIFEST, signed as a stream, at the stream's end
    assert [(r["what"], r["by"]) for r in recs] == [
        ("update_begun", "tech-ann"), ("update_applied", "tech-ann"),
        ("update_refused", "mallory"), ("update_refused", "mallory"),
        ("update_begun", "mallory"), ("update_refused", "mallory"),
        ("update_refused", "tech")]
    assert recs[1]["version"] == FIRMWARE_VERSION
    assert recs[2]["reason"] == "not_signed_by_the_release_key" and recs[2]["manifest"] == "0" * 64
    for _ in range(len(ROUND)):
        dealer.step()
    assert board.alive() and board.indicator[2] >= 2 * len(ROUND) - 1
    assert refused_before is not None


def test_a_power_cut_mid_stream_leaves_the_old_tree(shoe):
    key, config, board, code, tmp = shoe
    before = code_digest(code)
    shutil.copytree(code, tmp / "b2")
    info = variant_of(tmp / "b2", tmp / "release.pem", "never landed\n")
    length, head, chunks = channel.prepared(info["dir"])
    port = ShoePort(board.url)
    try:
        ch = channel.ShoeChannel(port, key, config)
        _, nxt0, release = chunks[0]
        _counter, rec = ch.command(pr.C_UPDATE, length.to_bytes(4, "big") + head + b"t",
                                  "update", after=lambda: ch.send(pr.C_UPDATE_DATA,
                                                                  bytes(2) + nxt0 + release))
        assert rec["what"] == "update_begun"
        for i, nxt, piece in chunks[1 : len(chunks) // 2]:
            ch.send(pr.C_UPDATE_DATA, i.to_bytes(2, "big") + nxt + piece)
            assert ch.wait_for(lambda f: f.type == pr.T_UPDATE_PROGRESS or None, 2.0)
    finally:
        port.close()
    assert (code / "update.tmp").exists()
    board.kill()
    board.start()
    assert not (code / "update.tmp").exists() and code_digest(code) == before
    port = ShoePort(board.url)
    try:
        assert channel.back_after_boot(port, key, config)["integrity"] == "ok"
        recs = maintenance_frames(port, config)
    finally:
        port.close()
    # its update_begun does not stand alone: the boot recorded who began what never ended
    assert [(r["what"], r.get("reason"), r["by"]) for r in recs] == [
        ("update_begun", None, "t"), ("update_refused", "interrupted", "t")]


def test_a_switch_cut_short_is_finished_at_boot(tmp_path):
    """resume() on MicroPython: a journaled switch with half its files moved completes, the old
    tree's extra file goes, the data directory stays."""
    root = tmp_path / "root"
    (root / "shoe").mkdir(parents=True)
    (root / "data").mkdir()
    (root / "data" / "log").write_bytes(b"kept")
    (root / "main.py").write_text("old")
    (root / "shoe" / "gone.mpy").write_text("old only")
    stage = root / "update.tmp"
    (stage / "shoe").mkdir(parents=True)
    (stage / "shoe" / "a.mpy").write_text("new a")  # not moved yet
    (root / "MANIFEST").write_text("new manifest")  # moved before the cut
    (stage / "main.py").write_text("new main")
    (stage / ".journal").write_text("MANIFEST\nmain.py\nshoe/a.mpy\n")
    script = tmp_path / "resume.py"
    script.write_text("import sys\nfrom shoe import update\n"
                      "print(update.resume(sys.argv[1], ('data',)))\n")
    r = run_micropython(script, root)
    assert r.stdout.strip() == b"True", r.stderr
    assert (root / "main.py").read_text() == "new main"
    assert (root / "shoe" / "a.mpy").read_text() == "new a"
    assert not (root / "shoe" / "gone.mpy").exists() and not stage.exists()
    assert (root / "data" / "log").read_bytes() == b"kept"


def test_a_tilted_shoe_resends_what_it_held_and_takes_an_update(shoe):
    key, config, board, code, tmp = shoe
    dealer = Dealer(board, ROUND)
    for _ in range(len(ROUND)):
        dealer.step()
    board.stop()
    shutil.copytree(code, tmp / "good")
    good = {"dir": str(tmp / "good"), "manifest": code_digest(code)}
    (code / "shoe" / "implant.py").write_text("print('pwned')\n")  # the tree no longer matches
    board.start()
    assert board.wait(lambda s: s[0] == 5)  # tilt: the alarm lamp, nothing dealt
    port = ShoePort(board.url)
    try:
        ch = channel.ShoeChannel(port, key, config)
        st = ch.hello(5.0)
        assert st["phase"] == "tilt" and st["integrity"] == "tilt"
        assert st["tilt"] == "code_not_the_signed_build"  # it says why
        assert st["unacked_from"] == 1 and st["unacked_to"] >= 3  # what it dealt, still held
        seen = set()
        ch.wait_for(lambda f: seen.add(f.seq) if f.type < pr.T_STATUS else None, 2.0)
        assert set(range(1, st["unacked_to"] + 1)) <= seen | {
            f.seq for f in ch.backlog if f.type < pr.T_STATUS}
        try:
            rec = channel.update(port, key, config, good, "tech", lambda m: None)
        except channel.OutcomeUnseen:  # the reset dropped the port before its outcome was read
            rec = {"what": "update_applied"}  # the boot below shows what it did
    finally:
        port.close()
    assert rec["what"] == "update_applied"
    assert board.wait_off() == 4
    assert not (code / "shoe" / "implant.py").exists()
    board.start()
    port = ShoePort(board.url)
    try:
        st = channel.back_after_boot(port, key, config)
    finally:
        port.close()
    assert st["integrity"] == "ok" and st["phase"] != "tilt"


def test_no_command_has_the_element_sign_a_digest_the_host_chose(shoe):
    """The insider holds the command key: every command type, each with the chosen digest as
    its payload (and its padding), makes the shoe sign nothing over that digest or its hash."""
    import hashlib

    key, config, board, code, _tmp = shoe
    chosen = hashlib.sha256(b"a round the shoe never dealt").digest()
    targets = {chosen, hashlib.sha256(chosen).digest()}
    public = config.public_key(1)
    port = ShoePort(board.url)
    signed = []
    try:
        ch = channel.ShoeChannel(port, key, config)
        for ftype in [*range(pr.C_HELLO, pr.C_REKEY + 2), 0xFF]:  # every command, and others
            st = ch.hello(5.0)
            ch.send(ftype, chosen, st["host_counter"] + 1)
            time.sleep(0.05)
            signed += [f for _, f in port.frames(0.3) if isinstance(f, pr.Frame) and f.signed]
        signed += ch.backlog
    finally:
        port.close()
    assert signed  # the shoe answered: statuses, refusals
    for f in signed:
        for t in targets:
            assert not pr.verify_digest(public, t, f.signature)
    assert board.alive() and os.path.exists(code / "MANIFEST")


def test_an_insider_with_the_command_key_makes_the_shoe_keep_no_byte_the_release_key_did_not_sign(
        tmp_path, built, monkeypatch):
    """The command key alone opens an update session, but the shoe keeps nothing of a stream
    before its element checked the release key's signature over it (chunk 0): a stream of junk
    is refused there; after the genuine chunk 0, a chunk that is not the release's is dropped;
    a session the host stops feeding is abandoned and its staged files removed."""
    monkeypatch.setenv("SABOT_UPDATE_IDLE_MS", "1500")
    key, flash, config, _registry = provision_shoe(tmp_path)
    code = tmp_path / "code"
    shutil.copytree(built / "tree", code)
    board = VirtualBoard(flash, code=code, sign_ms=SIGN_MS)
    board.start()
    shutil.copytree(code, tmp_path / "b2")
    info = variant_of(tmp_path / "b2", built / "release.pem", "second build\n")
    length, head, chunks = channel.prepared(info["dir"])
    port = ShoePort(board.url)

    def progress(index):
        def taken(f):
            return True if f.type == pr.T_UPDATE_PROGRESS and f.payload[:2] == index else None
        return taken

    try:
        ch = channel.ShoeChannel(port, key, config)
        # junk the size of the flash, its own chain, a signature nobody's release key made
        junk = os.urandom(4096) * 64
        jhead, jchunks = channel.chain(junk)
        release = channel.release_chunk(FIRMWARE_VERSION, "virtual", os.urandom(64))
        # (the session opens unrecorded: update_begun only once chunk 0 is checked)
        counter, rec = ch.command(
            pr.C_UPDATE, len(junk).to_bytes(4, "big") + channel.chunk_hash(0, jhead, release)
            + b"mallory", "update",
            after=lambda: ch.send(pr.C_UPDATE_DATA, bytes(2) + jhead + release))
        assert rec["what"] == "update_refused" and rec["reason"] == "not_signed_by_the_release_key"
        for i, nxt, piece in jchunks[:3]:
            ch.send(pr.C_UPDATE_DATA, i.to_bytes(2, "big") + nxt + piece)
        assert ch.wait_for(progress(b"\x00\x01"), 1.0) is None  # no session: dropped
        assert not (code / "update.tmp").exists()
        # the genuine chunk 0, then a chunk of the insider's: dropped, nothing of it kept
        _, nxt0, signed = chunks[0]
        counter, rec = ch.command(pr.C_UPDATE, length.to_bytes(4, "big") + head + b"mallory",
                                  "update", after=lambda: ch.send(pr.C_UPDATE_DATA,
                                                                  bytes(2) + nxt0 + signed))
        assert rec["what"] == "update_begun"
        _, forged, piece = jchunks[0]
        ch.send(pr.C_UPDATE_DATA, (1).to_bytes(2, "big") + forged + piece)
        assert ch.wait_for(progress(b"\x00\x01"), 1.0) is None
        assert [p.name for p in (code / "update.tmp").iterdir()] == ["session.tmp"]
        # the genuine first chunks, then silence: abandoned, its files removed
        for i, nxt, piece in chunks[1:4]:
            ch.send(pr.C_UPDATE_DATA, i.to_bytes(2, "big") + nxt + piece)
            assert ch.wait_for(progress(i.to_bytes(2, "big")), 5.0)
        assert (code / "update.tmp").exists()
        _, rec = ch.answer_to(counter, 6.0)
        assert rec["what"] == "update_refused" and rec["reason"] == "abandoned"
        assert not (code / "update.tmp").exists()
    finally:
        port.close()
        board.stop()
    assert code_digest(code) != info["manifest"]


def test_an_update_the_flash_cannot_hold_beside_its_reserve_is_refused_before_a_byte_is_kept(
        tmp_path, built):
    key, flash, config, _registry = provision_shoe(tmp_path)
    code = tmp_path / "code"
    shutil.copytree(built / "tree", code)
    board = VirtualBoard(flash, code=code, sign_ms=SIGN_MS)
    board.start(flash_bytes=64_000)  # a whole shoe's log and room to recover take 50 KB of it
    shutil.copytree(code, tmp_path / "b2")
    info = variant_of(tmp_path / "b2", built / "release.pem", "second build\n")
    port = ShoePort(board.url)
    try:
        with pytest.raises(SabotError, match=r"before keeping any of it.*no_room_beside_the_log"):
            channel.update(port, key, config, info, "tech", lambda m: None)
    finally:
        port.close()
        board.stop()
    assert not (code / "update.tmp").exists()

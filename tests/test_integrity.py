"""Firmware integrity on the virtual board running a built code tree: the seeded HMAC answer
matches the certified build; one byte altered puts the shoe in tilt (no results, alarm) and
verification fails."""

import json
import os
import shutil
import subprocess

import pytest

from sabot import keys
from sabot.audit.validator import Validator
from sabot.link.host import HostLink
from sabot.release.build import build, code_digest
from sabot.virtual.board import VirtualBoard
from sabot.virtual.dealer_channel import card_bytes

from kit import SABOT, SIGN_MS, provision_shoe

pytestmark = pytest.mark.board  # every test here starts a process


@pytest.fixture
def built(tmp_path):
    """The run's build (kit/run.py) as this test's own certified tree (and its release key), a
    deployed copy of it, and a provisioned shoe."""
    from kit.run import install_build

    certified = tmp_path / "certified"
    info = install_build(certified, tmp_path / "release.pem")
    deployed = tmp_path / "deployed"
    shutil.copytree(certified, deployed)
    provision_shoe(tmp_path)  # flash, element and tmp_path/sabot-shoes.json
    return certified, deployed, tmp_path, info


def verify(port_url, tmp, build_dir, seed):
    """verify-firmware with the registry alone: no key is needed to check a shoe."""
    return subprocess.run([*SABOT, "verify-firmware", "--port", port_url, "--seed", seed,
                           "--registry", tmp / "sabot-shoes.json", "--build", build_dir, "--db",
                           tmp / "audit.db", "--json"], capture_output=True, text=True,
                          timeout=60)


def test_build_manifest_is_the_digest_of_the_code_tree_signed_by_the_release_key(built):
    from sabot import protocol as pr
    from sabot.registry import public_from_xy
    from sabot.release.build import read_manifest

    certified, _, tmp, info = built
    digest, version, board, signature = read_manifest(certified)
    assert digest == code_digest(certified) == info["manifest"]
    assert info["files"]["shoe/table.mpy"] > 1000
    # the release key's public half is in the tree (so under the digest), as X||Y
    release = (certified / "shoe" / "release.py").read_text()
    xy = bytes.fromhex(release.split('bytes.fromhex("')[1].split('")')[0])
    public = keys.load_private(str(tmp / "release.pem"), "release key").public_key()
    assert keys.public_pem(public_from_xy(xy)) == keys.public_pem(public)
    assert "shoe/release.py" in info["files"]
    from sabot.release.build import FIRMWARE_VERSION, manifest_digest

    assert version == FIRMWARE_VERSION == info["version"] and board == "virtual"
    assert pr.verify_digest(public, manifest_digest(version, board, digest),
                            bytes.fromhex(signature))
    assert len(signature) == 128 and oct(os.stat(tmp / "release.pem").st_mode & 0o777) == "0o600"
    # a second build with the same key signs the same tree; another key, another release.py
    again = build("virtual", tmp / "again", release=tmp / "release.pem")
    assert again["manifest"] == digest
    other = build("virtual", tmp / "other", release=tmp / "other.pem")
    assert other["manifest"] != digest


def test_unaltered_shoe_passes_and_deals(built):
    certified, deployed, tmp, _ = built
    board = VirtualBoard(tmp / "flash", code=deployed, sign_ms=SIGN_MS).start()
    try:
        r = verify(board.url, tmp, certified, os.urandom(16).hex())
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        assert out["result"] == "pass" and out["integrity"] == "ok"
        # again at once: the shoe answers one challenge a second, so the tool asks again
        r = verify(board.url, tmp, certified, os.urandom(16).hex())
        assert r.returncode == 0 and json.loads(r.stdout)["result"] == "pass", r.stderr
        board.send(card_bytes("AS"))
        assert board.wait(lambda s: s[2] == 1, 5)  # it deals
    finally:
        board.stop()


def test_one_altered_byte_means_tilt_and_failed_verification(built):
    certified, deployed, tmp, _ = built
    target = deployed / "shoe" / "dealing.mpy"
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x01
    target.write_bytes(bytes(data))
    board = VirtualBoard(tmp / "flash", code=deployed, sign_ms=SIGN_MS).start()
    try:
        assert board.wait(lambda s: s[5] == 15, 5)  # the alarm shows the tilt
        r = verify(board.url, tmp, certified, os.urandom(16).hex())
        assert r.returncode != 0 and json.loads(r.stdout)["result"] == "fail"
        from sabot.registry import Registry

        v = Validator(Registry.load(str(tmp / "sabot-shoes.json")).pick(None), str(tmp / "v.db"))
        link = HostLink(board.url, v, keys.load(str(tmp / "command.pem")))
        board.send(card_bytes("AS"))
        assert board.wait_read(5)
        status = link.ask(5)
        assert status["integrity"] == "tilt" and status["position"] == 0  # no card was dealt
        assert not board.wait(lambda s: s[2] > 0, 0.5)
        link.close()
    finally:
        board.stop()
    import sqlite3

    db = sqlite3.connect(tmp / "audit.db")
    rows = db.execute("SELECT result FROM integrity_checks").fetchall()
    assert rows == [("fail",)]


def test_a_planted_source_file_is_caught_too(built):
    _certified, deployed, tmp, _ = built
    (deployed / "shoe" / "dealing.py").write_text("# would shadow dealing.mpy\n")
    board = VirtualBoard(tmp / "flash", code=deployed, sign_ms=SIGN_MS).start()
    try:
        assert board.wait(lambda s: s[5] == 15, 5)
    finally:
        board.stop()


def test_a_manifest_rewritten_to_match_altered_code_is_caught_by_its_signature(built):
    """The audit's implant rewrote the unsigned MANIFEST to match its code. Now MANIFEST is signed
    by the release key: a digest recomputed for altered code, under the old signature or one by
    any other key, tilts the shoe."""
    from sabot.release.build import sign_manifest

    _certified, deployed, tmp, _ = built
    target = deployed / "shoe" / "dealing.mpy"
    data = bytearray(target.read_bytes())
    data[len(data) // 3] ^= 0x01
    target.write_bytes(bytes(data))
    _, version, board, old_signature = (deployed / "MANIFEST").read_text().split()
    for manifest in (code_digest(deployed) + f"\n{version}\n{board}\n{old_signature}\n",
                     sign_manifest(keys.create(str(tmp / "implant.pem")).private_key,
                                   code_digest(deployed), "virtual")):
        (deployed / "MANIFEST").write_text(manifest)
        board = VirtualBoard(tmp / "flash", code=deployed, sign_ms=SIGN_MS).start()
        try:
            assert board.wait(lambda s: s[5] == 15, 5)  # tilt
        finally:
            board.stop()

"""The transparency log's tree, proofs and notes (sabot/tlog.py, sabot/note.py): RFC 6962's own
tree shapes (the reference leaves and roots every implementation is tested with), every proof of
small trees checked and each tampering refused, and the whole cross-checked against an
independent implementation, Go's golang.org/x/mod/sumdb/tlog and sumdb/note from Debian (built
here from tests/go/tlogcheck, offline, GOPATH mode; `make test` installs golang-go and
golang-golang-x-mod-dev): tree hashes, inclusion and consistency proofs of random trees of up to
5,000 leaves, and signed notes each way."""

import json
import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from sabot import note, tlog
from sabot.errors import SabotError

# RFC 6962's reference tree (the certificate-transparency test leaves) and its roots by size
RFC_LEAVES = [b"", b"\x00", b"\x10", b"\x20\x21", b"\x30\x31", b"\x40\x41\x42\x43",
              bytes(range(0x50, 0x58)), bytes(range(0x60, 0x70))]
RFC_ROOTS = ["6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
             "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
             "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
             "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
             "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
             "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
             "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
             "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"]


def test_the_rfc_reference_tree_has_its_published_roots():
    hashes = [tlog.leaf_hash(leaf) for leaf in RFC_LEAVES]
    assert tlog.root([]).hex() == ("e3b0c44298fc1c149afbf4c8996fb924"
                                   "27ae41e4649b934ca495991b7852b855")
    assert [tlog.root(hashes[:n]).hex() for n in range(1, 9)] == RFC_ROOTS
    edge = tlog.RightEdge()
    for n, leaf in enumerate(RFC_LEAVES, 1):  # what a writer keeps: log2(n) + 1 hashes at most
        edge.append(leaf)
        assert edge.root().hex() == RFC_ROOTS[n - 1] and len(edge.hashes) == bin(n).count("1")


def _flip(h):
    return bytes([h[0] ^ 1]) + h[1:]


def test_every_proof_of_small_trees_holds_and_each_tampering_is_refused():
    hashes = [tlog.leaf_hash(b"frame %d" % i) for i in range(40)]
    for n in range(1, 41):
        r = tlog.root(hashes[:n])
        for i in range(n):
            p = tlog.inclusion_proof(hashes, i, n)
            assert tlog.verify_inclusion(hashes[i], i, n, p, r)
            assert not tlog.verify_inclusion(_flip(hashes[i]), i, n, p, r)
            assert not tlog.verify_inclusion(hashes[i], i, n, p, _flip(r))
            if p:
                assert not tlog.verify_inclusion(hashes[i], i, n, [_flip(p[0]), *p[1:]], r)
                assert not tlog.verify_inclusion(hashes[i], i, n, p[:-1], r)
            assert not tlog.verify_inclusion(hashes[i], (i + 1) % n, n, p, r) or n == 1
        for m in range(n + 1):
            old = tlog.root(hashes[:m])
            p = tlog.consistency_proof(hashes, m, n)
            assert tlog.verify_consistency(m, old, n, r, p)
            if 0 < m < n:
                assert not tlog.verify_consistency(m, _flip(old), n, r, p)
                assert not tlog.verify_consistency(m, old, n, _flip(r), p)
                assert not tlog.verify_consistency(m, old, n, r, [_flip(p[0]), *p[1:]])
                assert not tlog.verify_consistency(m, old, n, r, [])
            if m == n:
                assert not tlog.verify_consistency(m, _flip(old), n, r, p)  # a fork


def test_checkpoints_read_back_and_malformed_ones_are_one_line():
    cp = tlog.Checkpoint("sabot.shoe/0x5ab00001", 12, bytes(range(32)), ["extra"])
    text = cp.text()
    back = tlog.Checkpoint.parse(text)
    assert (back.origin, back.size, back.root, back.extensions) == (cp.origin, 12, cp.root,
                                                                   ["extra"])
    for bad in ("o\n01\n" + text.split("\n")[2] + "\n", "o\n1\nAAAA\n", "o\n1\n", "o\n-1\nx\n",
                text[:-1]):
        with pytest.raises(SabotError):
            tlog.Checkpoint.parse(bad)


def test_notes_sign_verify_and_refuse_what_they_should():
    text = tlog.Checkpoint("sabot.shoe/0x5ab00001", 3, bytes(32)).text()
    log_key = ec.generate_private_key(ec.SECP256R1())
    from cryptography.hazmat.primitives import hashes

    shoe = note.ecdsa_verifier("sabot.shoe/0x5ab00001", log_key.public_key())
    sig = log_key.sign(text.encode(), ec.ECDSA(hashes.SHA256()))
    signed = text + "\n" + note.signature_line(shoe.name, shoe.id, sig)
    witness = note.Ed25519Signer("witness.example/w1", ed25519.Ed25519PrivateKey.generate(),
                                 note.COSIGNATURE)
    cosigned = signed + witness.sign(text, timestamp=1764547200)
    got_text, good = note.open_note(cosigned, [shoe, witness.verifier])
    assert got_text == text and good == {shoe.name: 0, witness.name: 1764547200}
    assert note.Verifier.parse(witness.verifier.vkey()) == witness.verifier
    assert note.Verifier.parse(shoe.vkey()) == shoe
    plus = next(v for v in (note.Ed25519Signer("w.example/x", ed25519.Ed25519PrivateKey.generate(),
                                               note.COSIGNATURE).verifier for _ in range(200))
                if "+" in v.vkey().split("+", 2)[2])  # base64 holding a "+" reads back too
    assert note.Verifier.parse(plus.vkey()) == plus
    stranger = note.Ed25519Signer("witness.example/w2", ed25519.Ed25519PrivateKey.generate())
    assert note.open_note(cosigned + stranger.sign(text), [shoe])[1] == {shoe.name: 0}
    with pytest.raises(SabotError, match="trusted"):
        note.open_note(signed, [stranger.verifier])
    forged = cosigned.replace("\n3\n", "\n4\n", 1)
    with pytest.raises(SabotError, match="does not verify"):
        note.open_note(forged, [shoe])
    name, kid, key = witness.verifier.vkey().split("+", 2)  # the base64 may hold a "+"
    for bad in ("x+1234abcd+AAAA", "x y+00000000+AQ==", witness.verifier.vkey()[:-4] + "AAAA",
                f"{name}+0x{kid[2:]}+{key}", f"{name}+_{kid[1:]}+{key}"):
        with pytest.raises(SabotError):
            note.Verifier.parse(bad)


# ---- against Go's sumdb/tlog and sumdb/note -------------------------------------------------
@pytest.fixture(scope="module")
def go_tlog(tmp_path_factory):  # a process: its tests are marked board
    import time

    end = time.monotonic() + 300  # make test installs it beside the tests when it is missing
    log = Path("/tmp/sabot-go-install.log")  # the Makefile's GO_INSTALL_LOG
    while (go := shutil.which("go")) is None or not Path(
            "/usr/share/gocode/src/golang.org/x/mod/sumdb/tlog/tlog.go").is_file() or (
            log.exists() and not Path(f"{log}.done").exists()):
        if time.monotonic() > end:
            pytest.fail("Go's sumdb/tlog is missing: run `make test` (it installs golang-go "
                        "and golang-golang-x-mod-dev; see /tmp/sabot-go-install.log)")
        time.sleep(1)
    out = tmp_path_factory.mktemp("go") / "tlogcheck"
    env = dict(os.environ, GO111MODULE="off", GOPATH="/usr/share/gocode",
               GOCACHE=str(out.parent / "cache"), GOFLAGS="")
    src = Path(__file__).parent / "go" / "tlogcheck" / "main.go"
    r = subprocess.run([go, "build", "-o", str(out), str(src)], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return str(out)


@pytest.mark.board
def test_tree_hashes_and_proofs_agree_with_gos_sumdb_tlog(go_tlog):
    rng = random.Random(23)
    n = 5000
    sizes = sorted({1, 2, 3, 7, 8, 9, n} | {rng.randint(1, n) for _ in range(40)})
    records = [(i, t) for t in (rng.randint(1, n) for _ in range(60))
               for i in (rng.randrange(t),)]
    trees = [(m, t) for t in (rng.randint(1, n) for _ in range(60))
             for m in (rng.randint(1, t),)]
    tiles = [(0, 0, 256), (0, 3, 17), (0, 18, 256), (0, 19, 136), (1, 0, 19), (1, 0, 1)]
    query = {"n": n, "sizes": sizes, "records": records, "trees": trees, "tiles": tiles}
    r = subprocess.run([go_tlog, "tree"], input=json.dumps(query), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    theirs = json.loads(r.stdout)
    hashes = [tlog.leaf_hash(b"leaf-%d" % i) for i in range(n)]
    assert [tlog.root(hashes[:s]).hex() for s in sizes] == theirs["sizes"]
    for (i, t), proof in zip(records, theirs["records"]):
        ours = tlog.inclusion_proof(hashes, i, t)
        assert [h.hex() for h in ours] == proof, (i, t)
        assert tlog.verify_inclusion(hashes[i], i, t, ours, tlog.root(hashes[:t]))
    for (m, t), proof in zip(trees, theirs["trees"]):
        ours = tlog.consistency_proof(hashes, m, t)
        assert [h.hex() for h in ours] == proof, (m, t)
        assert tlog.verify_consistency(m, tlog.root(hashes[:m]), t, tlog.root(hashes[:t]), ours)
    # C2SP tlog-tiles: Go's height-8 tile paths (less their height) and data
    for (level, index, width), (path, data) in zip(tiles, theirs["tiles"]):
        assert path.replace("tile/8/", "tile/", 1) == tlog.tile_path(level, index, width)
        assert tlog.parse_tile_path(tlog.tile_path(level, index, width)) == (level, index, width)
        assert tlog.tile(hashes, n, level, index, width).hex() == data, (level, index, width)


@pytest.mark.board
def test_signed_notes_verify_each_way_with_gos_sumdb_note(go_tlog):
    text = tlog.Checkpoint("sabot.shoe/0x5ab00001", 70, bytes(range(32))).text()
    ours = note.Ed25519Signer("regulator.example/w1", ed25519.Ed25519PrivateKey.generate())
    signed = text + "\n" + ours.sign(text)
    r = subprocess.run([go_tlog, "open", ours.verifier.vkey()], input=signed,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == text, r.stderr
    r = subprocess.run([go_tlog, "open", ours.verifier.vkey()],
                       input=signed.replace("\n70\n", "\n71\n"), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode != 0  # Go refuses the altered note too
    r = subprocess.run([go_tlog, "sign", "casino.example/log", text], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    vkey, _, theirs = r.stdout.partition("\n")
    got, good = note.open_note(theirs, [note.Verifier.parse(vkey)])
    assert got == text and set(good) == {"casino.example/log"}


def test_tiles_are_what_the_tree_holds_and_tile_paths_are_c2sps():
    """C2SP tlog-tiles: a tile (or entry bundle) the tree of `size` leaves does not yet hold is
    none; a path with a leading zero, a width of 0 or 256, or a level past 63 is none."""
    entries = [b"entry %d" % i for i in range(300)]
    hashes = [tlog.leaf_hash(e) for e in entries]
    assert tlog.tile(hashes, 300, 0, 1, 44) == b"".join(hashes[256:300])
    assert tlog.tile(hashes, 300, 0, 1, 45) is None and tlog.tile(hashes, 300, 0, 1, 256) is None
    assert tlog.tile(hashes, 300, 1, 0, 1) == tlog.root(hashes[:256])
    assert tlog.tile(hashes, 255, 1, 0, 1) is None
    bundle = tlog.entry_bundle(entries, 300, 1, 2)
    assert bundle == b"\x00\x09entry 256\x00\x09entry 257"
    assert tlog.entry_bundle(entries, 300, 1, 45) is None
    assert tlog.tile_path(0, 1234067, 8) == "tile/0/x001/x234/067.p/8"
    for bad in ("tile/0/0001", "tile/0/x000/001", "tile/0/001.p/0", "tile/0/001.p/256",
                "tile/01/001", "tile/64/001", "tile/0/1", "tile/entries/001.p/08", "tiles/0/001"):
        assert tlog.parse_tile_path(bad) is None, bad

"""The witness (sabot/witness/service.py, `sabot witness`): C2SP tlog-witness add-checkpoint over
a registered shoe's log. It cosigns a checkpoint the shoe's key signed, consistent with the last
one it cosigned, and answers each refusal the spec names (404 an unknown log, 403 no trusted
signature or another key than the log's first, 400 a malformed request or an old size past the
new, 409 an old size not its own and a fork, 422 a failed consistency proof), keeping the
evidence of every signed checkpoint it refused; its state survives a restart; `sabot witness`
serves it over HTTP and prints its verifier key."""

import base64
import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from sabot import keys, note, tlog
from sabot.registry import Registry, ShoeEntry
from sabot.witness.service import MAX_BODY, Witness

from kit import SABOT
from kit.procs import free_port_for_tests, wait_until_served

SHOE = 0x5AB0_0001


class Log:
    """A shoe's log as the shoe would head it: frames appended, checkpoints signed by its key."""

    def __init__(self, key, shoe_id=SHOE, tag=b"frame"):
        self.key, self.origin, self.tag = key, tlog.origin(shoe_id), tag
        self.hashes = []
        self.verifier = note.ecdsa_verifier(self.origin, key.public_key())

    def grow(self, n):
        self.hashes += [tlog.leaf_hash(self.tag + b" %d" % i)
                        for i in range(len(self.hashes), len(self.hashes) + n)]

    def checkpoint(self, size=None, key=None):
        size = len(self.hashes) if size is None else size
        text = tlog.Checkpoint(self.origin, size, tlog.root(self.hashes[:size])).text()
        k = key or self.key
        v = note.ecdsa_verifier(self.origin, k.public_key())
        return text + "\n" + note.signature_line(self.origin, v.id, k.sign(
            text.encode(), ec.ECDSA(hashes.SHA256())))

    def request(self, old, size=None, proof=None, key=None):
        size = len(self.hashes) if size is None else size
        proof = tlog.consistency_proof(self.hashes, old, size) if proof is None else proof
        return tlog.add_checkpoint_body(old, proof, self.checkpoint(size, key))


def entry_for(key, shoe_id=SHOE):
    e = ShoeEntry(shoe_id)
    e.add_public_key(1, keys.public_pem(key.public_key()))
    return e


@pytest.fixture
def shoe_key():
    return ec.generate_private_key(ec.SECP256R1())


@pytest.fixture
def witness(tmp_path, shoe_key):
    w = Witness(str(tmp_path / "w.db"), ed25519.Ed25519PrivateKey.generate(),
                {SHOE: entry_for(shoe_key)}, "regulator.example/w1")
    yield w
    w.close()


def cosigned(witness, log, answer):
    """The checkpoint with the witness's answer appended: verified with the witness's key."""
    assert answer.status == 200, answer.body
    text, good = note.open_note(log.checkpoint() + answer.body,
                                [note.Verifier.parse(witness.vkey)])
    assert abs(good["regulator.example/w1"] - time.time()) < 60
    return text


def test_it_cosigns_a_growing_log_and_only_from_its_own_latest_size(witness, shoe_key):
    log = Log(shoe_key)
    log.grow(4)
    cosigned(witness, log, witness.add_checkpoint(log.request(0)))
    log.grow(6)
    text = cosigned(witness, log, witness.add_checkpoint(log.request(4)))
    assert tlog.Checkpoint.parse(text).size == 10 and witness.latest(log.origin)["size"] == 10
    stale = witness.add_checkpoint(log.request(4))  # a client behind the witness is told its size
    assert (stale.status, stale.body, stale.content_type) == (409, "10\n", "text/x.tlog.size")
    again = witness.add_checkpoint(log.request(10))  # the same checkpoint again: cosigned
    assert again.status == 200
    assert witness.evidence() == []


def test_a_fork_a_bad_proof_and_another_key_are_refused_and_kept_as_evidence(witness,
                                                                           shoe_key):
    log = Log(shoe_key)
    log.grow(8)
    assert witness.add_checkpoint(log.request(0)).status == 200
    fork = Log(shoe_key, tag=b"rewritten")  # the same shoe's key, another history of 8
    fork.grow(8)
    forked = fork.request(8)
    a = witness.add_checkpoint(forked)
    assert a.status == 409 and "fork" in a.body
    log.grow(4)
    proof = tlog.consistency_proof(log.hashes, 8, 12)
    bad = witness.add_checkpoint(log.request(8, proof=[bytes(32), *proof[1:]]))
    assert bad.status == 422
    reason = [e["reason"] for e in witness.evidence()]
    assert len(reason) == 2 and "fork" in reason[0] and "consistency" in reason[1]
    assert witness.latest(log.origin)["size"] == 8  # nothing refused moved the log
    assert witness.evidence()[0]["request"] == forked.decode()  # the request as it came


def test_a_substituted_key_is_refused_though_the_registry_now_names_it(tmp_path, shoe_key):
    """An insider replaces the shoe's version-1 key in the registry and re-signs a history: the
    witness, restarted with that registry, trusts the new key's signature but not as this log's
    (its first checkpoint here was signed by the genuine key)."""
    db = str(tmp_path / "w.db")
    wkey = ed25519.Ed25519PrivateKey.generate()
    w = Witness(db, wkey, {SHOE: entry_for(shoe_key)}, "regulator.example/w1")
    log = Log(shoe_key)
    log.grow(5)
    assert w.add_checkpoint(log.request(0)).status == 200
    w.close()
    forged_key = ec.generate_private_key(ec.SECP256R1())
    w = Witness(db, wkey, {SHOE: entry_for(forged_key)}, "regulator.example/w1")
    try:
        held = w.latest(log.origin)  # its state survived the restart
        # the key itself is held, not only its 4-byte ID (a forged key ground to the genuine
        # one's ID, some 2^32 tries, would pass an ID's comparison)
        assert held["size"] == 5 and held["key"] == log.verifier.public
        log.grow(3)
        a = w.add_checkpoint(log.request(5, key=forged_key))
        assert a.status == 403 and "another key" in a.body
        assert len(w.evidence()) == 1
    finally:
        w.close()


def test_each_malformed_or_untrusted_request_gets_its_status(witness, shoe_key):
    log = Log(shoe_key)
    log.grow(3)
    stranger = Log(shoe_key, shoe_id=0x5AB0_0099)
    stranger.grow(3)
    assert witness.add_checkpoint(stranger.request(0)).status == 404
    other = ec.generate_private_key(ec.SECP256R1())
    assert witness.add_checkpoint(log.request(0, key=other)).status == 403
    assert witness.add_checkpoint(log.request(4, size=3, proof=[])).status == 400
    for body in (b"", b"old x\n\n" + log.checkpoint().encode(), b"\xff\xfe",
                 b"old 0\nnot-base64!\n\n" + log.checkpoint().encode(),
                 b"old 0\n\n" + log.checkpoint().replace("\n3\n", "\n03\n").encode()):
        assert witness.add_checkpoint(body).status in (400, 403), body
    assert witness.latest(log.origin) is None and witness.evidence() == []


@pytest.mark.board
def test_sabot_witness_serves_add_checkpoint_and_prints_its_vkey(tmp_path, shoe_key):
    key = tmp_path / "w.key"
    r = subprocess.run([*SABOT, "witness", "--key", str(key), "--vkey"], capture_output=True,
                       text=True)
    assert r.returncode == 0 and oct(os.stat(key).st_mode & 0o777) == "0o600"
    vkey = r.stdout.strip()
    witness_verifier = note.Verifier.parse(vkey)
    assert witness_verifier.kind == note.COSIGNATURE
    reg = Registry(str(tmp_path / "shoes.json"))
    reg.put(entry_for(shoe_key))
    port = free_port_for_tests()
    proc = subprocess.Popen([*SABOT, "witness", "--key", str(key), "--db",
                             str(tmp_path / "w.db"), "--registry", str(tmp_path / "shoes.json"),
                             "--listen", f"127.0.0.1:{port}"], stderr=subprocess.PIPE, text=True)
    try:
        log = Log(shoe_key)
        log.grow(7)
        url = f"http://127.0.0.1:{port}"
        wait_until_served(url + "/logs")
        req = urllib.request.Request(url + "/add-checkpoint", data=log.request(0), method="POST")
        with urllib.request.urlopen(req, timeout=10) as resp:
            cosig = resp.read().decode()
        _, good = note.open_note(log.checkpoint() + cosig, [witness_verifier])
        assert set(good) == {witness_verifier.name}
        with pytest.raises(urllib.error.HTTPError) as stale:
            urllib.request.urlopen(urllib.request.Request(
                url + "/add-checkpoint", data=log.request(3, size=7, proof=tlog.consistency_proof(
                    log.hashes, 3, 7)), method="POST"), timeout=10)
        assert stale.value.code == 409 and stale.value.read() == b"7\n"
        with pytest.raises(urllib.error.HTTPError) as big:  # refused before it is all read
            urllib.request.urlopen(urllib.request.Request(
                url + "/add-checkpoint", data=b"x" * (MAX_BODY + 1), method="POST"), timeout=10)
        assert big.value.code == 413
        held = json.loads(urllib.request.urlopen(url + "/logs", timeout=5).read())
        assert held["witness"] == vkey and held["logs"][0]["size"] == 7
    finally:
        proc.send_signal(2)
        assert proc.wait(20) == 0, proc.stderr.read()
    said = proc.stderr.read()  # its operator sees each request answered, in a line
    assert f"{log.origin} at 7: cosigned" in said and f"{log.origin} at 7: refused 409" in said


def test_sizes_past_what_it_holds_are_refused_in_a_line_and_leave_no_lock(witness, shoe_key):
    """A size of 5000 digits (int() refuses over 4300) before any signature is checked, and a
    signed checkpoint of 2^63 leaves (past SQLite's INTEGER) are 400s, not exceptions; the
    transaction of the one that got that far is not left open for the next request."""
    log = Log(shoe_key)
    log.grow(3)
    assert witness.add_checkpoint(b"old " + b"9" * 5000 + b"\n\n"
                                  + log.checkpoint().encode()).status == 400
    root = base64.b64encode(tlog.root(log.hashes)).decode()
    for size in ("9" * 5000, str(2**63), str(2**64)):
        text = f"{log.origin}\n{size}\n{root}\n"
        a = witness.add_checkpoint(tlog.add_checkpoint_body(0, [], signed(log, text)))
        assert a.status == 400, a.body
    assert witness.add_checkpoint(log.request(0)).status == 200
    assert witness.latest(log.origin)["size"] == 3


def test_a_checkpoint_of_no_leaves_is_cosigned_only_with_the_empty_trees_root(witness,
                                                                            shoe_key):
    log = Log(shoe_key)
    log.grow(3)
    root = base64.b64encode(tlog.root(log.hashes)).decode()
    a = witness.add_checkpoint(tlog.add_checkpoint_body(
        0, [], signed(log, f"{log.origin}\n0\n{root}\n")))
    assert a.status == 422 and witness.latest(log.origin) is None
    assert witness.add_checkpoint(log.request(0, size=0)).status == 200


def test_threads_sharing_one_witness_never_roll_its_log_back(witness, shoe_key):
    """Requests from old = N to N+1..N+4 at once, on one Witness (one SQLite connection): at
    most one is cosigned, and the log then holds the size of the one that was."""
    log = Log(shoe_key)
    log.grow(60)
    assert witness.add_checkpoint(log.request(0, size=1)).status == 200
    while (have := witness.latest(log.origin)["size"]) < 50:
        sizes = [have + 1 + i for i in range(4)]
        bodies = [log.request(have, size=s) for s in sizes]
        with ThreadPoolExecutor(4) as pool:
            got = list(pool.map(lambda b: witness.add_checkpoint(b).status, bodies))
        cosigned_sizes = [s for s, status in zip(sizes, got) if status == 200]
        assert len(cosigned_sizes) == 1 and set(got) <= {200, 409}, got
        assert witness.latest(log.origin)["size"] == cosigned_sizes[0]


def signed(log, text):
    """`text` signed by the log's key, as its checkpoint would be."""
    return text + "\n" + note.signature_line(log.origin, log.verifier.id, log.key.sign(
        text.encode(), ec.ECDSA(hashes.SHA256())))


def test_a_refused_request_sent_again_is_kept_once(witness, shoe_key, monkeypatch):
    """Evidence is kept once per request, and at most EVIDENCE_MAX a log: whoever holds a signed
    checkpoint the witness refuses cannot fill its disk by sending it again."""
    from sabot.witness import service

    log = Log(shoe_key)
    log.grow(6)
    assert witness.add_checkpoint(log.request(0)).status == 200
    log.grow(2)
    proof = tlog.consistency_proof(log.hashes, 6, 8)
    bad = log.request(6, proof=[bytes(32), *proof[1:]])
    for _ in range(20):
        assert witness.add_checkpoint(bad).status == 422
    assert len(witness.evidence()) == 1
    signed = bad.decode().partition("\n\n")[2]
    for i in range(20):  # the same signed checkpoint with made-up proofs: kept once
        made_up = tlog.add_checkpoint_body(6, [bytes([i]) * 32, *proof[1:]], signed)
        assert witness.add_checkpoint(made_up).status == 422
    assert len(witness.evidence()) == 1
    monkeypatch.setattr(service, "EVIDENCE_MAX", 2)
    for _ in range(3):  # each a new signature, so a new request: the third is not kept
        assert witness.add_checkpoint(log.request(6, proof=[bytes(32), *proof[1:]])).status == 422
    assert len(witness.evidence()) == 2


def test_a_rekeyed_shoe_goes_on_being_witnessed_and_a_substituted_element_does_not(tmp_path):
    """A rekey (firmware/shoe/rekey.py) makes result key 2, certified by the element's own
    attestation key: a witness started again with the registry that holds it takes the shoe's
    checkpoints signed by version 2, since the attestation key that came with the log's first
    checkpoint certifies it. A registry whose shoe is another element (another attestation key,
    its own key 1: an insider's substitute) is refused, even with every key certified."""
    import hashlib

    from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

    from sabot.protocol import P256_ORDER
    from sabot.registry import public_from_xy
    from sabot.virtual import factory
    from shoe.store import result_slot

    command_xy = keys.xy(ec.generate_private_key(ec.SECP256R1()).public_key())
    shoe_id = 0x5AB0_0C0D
    origin = tlog.origin(shoe_id)

    def element(name):
        store, flash = tmp_path / f"{name}.el", tmp_path / f"{name}.flash"
        serial, xy, _, attest, cert, _ = factory.provision(store, flash, shoe_id, 2, command_xy)
        entry = ShoeEntry(shoe_id, serial=serial.hex(),
                          attestation_key=keys.public_pem(public_from_xy(attest)))
        assert entry.add_public_key(1, keys.public_pem(public_from_xy(xy)), cert.hex())
        return store, flash, entry

    def checkpoint(store, entry, version, leaves):
        """The shoe's checkpoint of these leaves, its element signing with key `version`."""
        text = tlog.Checkpoint(origin, len(leaves), tlog.root(leaves)).text()
        sig = bytearray(64)
        factory.element(store).sign_digest(result_slot(version), hashlib.sha256(
            text.encode()).digest(), sig)
        r, s = int.from_bytes(sig[:32], "big"), int.from_bytes(sig[32:], "big")
        assert s <= P256_ORDER // 2  # the driver's low form
        v = note.ecdsa_verifier(origin, entry.public_key(version))
        return text + "\n" + note.signature_line(origin, v.id, encode_dss_signature(r, s))

    store, flash, entry = element("genuine")
    leaves = [tlog.leaf_hash(b"frame %d" % i) for i in range(9)]
    key = ed25519.Ed25519PrivateKey.generate()
    w = Witness(str(tmp_path / "w.db"), key, {shoe_id: entry})
    first = checkpoint(store, entry, 1, leaves[:4])
    assert w.add_checkpoint(tlog.add_checkpoint_body(0, [], first)).status == 200
    w.close()
    version, xy2, _, cert2 = factory.rekey(store, flash)
    assert version == 2 and entry.add_public_key(2, keys.public_pem(public_from_xy(xy2)),
                                                 cert2.hex())
    # still running with the registry read before the rekey: it reads it again (the CLI's
    # refresh, once the file changed) when a checkpoint of the shoe is signed by a key it lacks
    w = Witness(str(tmp_path / "w.db"), key, {shoe_id: ShoeEntry(**{
        **entry.__dict__, "public_keys": entry.public_keys[:1]})})
    w.refresh = lambda: {shoe_id: entry}
    proof = tlog.consistency_proof(leaves, 4, 6)
    rekeyed = checkpoint(store, entry, 2, leaves[:6])
    assert w.add_checkpoint(tlog.add_checkpoint_body(4, proof, rekeyed)).status == 200
    # the receipt checker's keys (GET /keys): both versions, the second certified by the
    # attestation key bound with the log's first checkpoint
    served = {k["version"]: k["key"] for k in w.keys()["shoes"][0]["public_keys"]}
    assert served == {v: entry.public_keys[v - 1]["key"] for v in (1, 2)}
    w.close()
    other_store, _, other = element("substitute")
    w = Witness(str(tmp_path / "w.db"), key, {shoe_id: other})
    proof = tlog.consistency_proof(leaves, 6, 9)
    substitute = checkpoint(other_store, other, 1, leaves)
    a = w.add_checkpoint(tlog.add_checkpoint_body(6, proof, substitute))
    assert a.status == 403 and "attestation key" in a.body
    # nor does the checker get the substitute's keys: the genuine key it bound, alone
    assert w.keys()["shoes"][0]["public_keys"] == [{"version": 1,
                                                    "key": entry.public_keys[0]["key"]}]
    w.close()


def test_a_shoe_provisioned_since_the_witness_started_is_found_in_its_registry_again(
        witness, shoe_key):
    """A checkpoint of a shoe the witness's registry lacked: the registry is read again (the
    CLI's refresh: the file, once it changed) and the checkpoint taken; without the shoe there
    either, a 404 as before."""
    newer = ec.generate_private_key(ec.SECP256R1())
    log = Log(newer, shoe_id=SHOE + 1)
    log.grow(3)
    assert witness.add_checkpoint(log.request(0)).status == 404  # no refresh: not known
    asked = []

    def refresh():
        asked.append(1)
        return {SHOE: entry_for(shoe_key), SHOE + 1: entry_for(newer, SHOE + 1)} \
            if len(asked) > 1 else None  # unchanged the first time

    witness.refresh = refresh
    assert witness.add_checkpoint(log.request(0)).status == 404
    assert witness.add_checkpoint(log.request(0)).status == 200 and len(asked) == 2
    # a registry read again with a key that does not load: said, not taken, and the keys
    # trusted before kept whole (no request fails with it)
    third = ec.generate_private_key(ec.SECP256R1())
    broken = entry_for(third, SHOE + 2)
    broken.public_keys[0]["key"] = "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"
    said = []
    witness.say = said.append
    witness.refresh = lambda: {SHOE: entry_for(shoe_key), SHOE + 2: broken}
    other = Log(third, shoe_id=SHOE + 2)
    other.grow(2)
    assert witness.add_checkpoint(other.request(0)).status == 404
    assert any("registry not taken" in line for line in said), said
    log.grow(2)
    assert witness.add_checkpoint(log.request(3)).status == 200  # the shoe it held goes on


@pytest.mark.board
def test_provisioning_binds_key_1_so_a_registry_swapped_before_any_round_is_caught(tmp_path):
    """`sabot provision --witness` hands the witness the shoe's log at size 0, signed by result
    key 1 inside the element as it is made. An insider who swaps key 1 in the registry before the
    shoe deals a round, and heads the log with a key of their own, passes a witness that was not
    given it (the first checkpoint a pit sends binds whatever key signed it) and is refused by
    the one that was; `sabot bind` hands it over later, and says in a line when it cannot."""
    key = tmp_path / "w.key"
    vkey = subprocess.run([*SABOT, "witness", "--key", str(key), "--vkey"], capture_output=True,
                          text=True, check=True).stdout.strip()
    registry = tmp_path / "shoes.json"
    witnesses = []

    def start(name):
        port = free_port_for_tests()
        proc = subprocess.Popen([*SABOT, "witness", "--key", str(key), "--db",
                                 str(tmp_path / f"{name}.db"), "--registry", str(registry),
                                 "--listen", f"127.0.0.1:{port}"], stderr=subprocess.PIPE,
                                text=True)
        witnesses.append(proc)
        url = f"http://127.0.0.1:{port}"
        wait_until_served(url + "/logs")
        return url

    try:
        bound = start("bound")  # before the registry exists: it is read once written
        r = subprocess.run([*SABOT, "provision", "--key", str(tmp_path / "host.pem"), "--flash",
                            str(tmp_path / "shoe"), "--shoe-id", "0x5ab0b1d1", "--registry",
                            str(registry), "--witness", f"{bound}={vkey}"], capture_output=True,
                           text=True)
        assert r.returncode == 0, r.stderr
        assert "holds the shoe's key from its first checkpoint" in r.stderr
        genuine = Registry.load(str(registry)).shoes[0x5AB0B1D1]
        held = json.loads(urllib.request.urlopen(bound + "/logs", timeout=5).read())["logs"]
        assert [(h["origin"], h["size"]) for h in held] == [("sabot.shoe/5ab0b1d1", 0)]
        assert base64.b64decode(held[0]["key"]) == note.ecdsa_verifier(
            "x", genuine.public_key(1)).public
        # the insider's registry: key 1 replaced, the element's attestation key dropped
        forged_key = ec.generate_private_key(ec.SECP256R1())
        swapped = entry_for(forged_key, 0x5AB0B1D1)
        (tmp_path / "genuine.json").write_bytes(registry.read_bytes())
        registry.unlink()
        Registry(str(registry)).put(swapped)
        log = Log(forged_key, shoe_id=0x5AB0B1D1)
        log.grow(12)
        unbound = start("unbound")  # a witness the shoe's first checkpoint never reached
        witnesses[0].send_signal(2)
        witnesses[0].wait(20)
        bound = start("bound")  # started again on its state, given the insider's registry
        for url, status in ((unbound, 200), (bound, 403)):
            req = urllib.request.Request(url + "/add-checkpoint", data=log.request(0),
                                         method="POST")
            try:
                got = urllib.request.urlopen(req, timeout=10).status
            except urllib.error.HTTPError as e:
                got = e.code
                assert "another key" in e.read().decode()
            assert got == status, url
        # sabot bind: the kept first checkpoint to a witness later; one that cannot be reached
        # is said in a line, exit 2
        registry.write_bytes((tmp_path / "genuine.json").read_bytes())
        late = start("late")
        r = subprocess.run([*SABOT, "bind", "--registry", str(registry), "--witness",
                            f"{late}={vkey}"], capture_output=True, text=True)
        assert r.returncode == 0 and "1 of 1 witnesses hold its key" in r.stdout, r.stderr
        gone = f"http://127.0.0.1:{free_port_for_tests()}"
        r = subprocess.run([*SABOT, "bind", "--registry", str(registry), "--witness",
                            f"{gone}={vkey}"], capture_output=True, text=True)
        assert r.returncode == 2 and "could not be reached" in r.stderr
        assert r.stderr.strip().splitlines()[-1].startswith("sabot bind: 0 of 1 witnesses")
    finally:
        for proc in witnesses:
            proc.send_signal(2)
            proc.wait(20)

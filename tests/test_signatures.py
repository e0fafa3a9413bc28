"""Verifiers need no secret (protocol version 2): frames signed by a shoe's result key are verified
with the public keys of the shoe registry alone; a frame signed by anything else, an unsealed
unsigned frame, a forged frame appended to a real capture and a changed signature in the store are
all found. Host only: the frames come from capture_gen's signer (standing in for the element) and
the validator, replay and audit verify never see a private key."""

import hashlib
import json
import shutil
import struct

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from sabot import keys
from sabot import protocol as pr
from sabot.audit.validator import Validator
from sabot.errors import SabotError
from sabot.registry import Registry, ShoeEntry
from sabot.virtual import capture_gen

from kit import flip_a_stored_result, signing_shoe

NATURALS = struct.pack(">HH", 1, 1) + bytes([8 * 4, 7 * 4, 12 * 4, 8 * 4 + 3])  # 9S 8S KS 9C


def frames(capture):
    return [p + b"\x00" for p in capture.split(b"\x00")[:-1]]


@pytest.fixture(scope="module")
def shoe(tmp_path_factory):
    """A capture of one whole shoe and the registry holding its public key; no private key
    left on disk."""
    d = tmp_path_factory.mktemp("sig")
    entry, cap, rounds = capture_gen.generate(str(d), 1, seed=3)
    (d / "result.pem").unlink()
    Registry(str(d / "shoes.json")).put(entry)
    (d / "cap.bin").write_bytes(cap)
    return d, entry, cap, rounds


def test_a_verifier_holding_only_the_registry_verifies_every_frame(cli, shoe, tmp_path):
    d, _, cap, rounds = shoe
    entry = Registry.load(str(d / "shoes.json")).pick(None)  # read back: PEM text only
    assert "PRIVATE" not in (d / "shoes.json").read_text()
    for batch in (True, False):
        v = Validator(entry, str(tmp_path / f"{batch}.db"), batch_verify=batch)
        v.receive(cap)
        v.finish()
        assert v.counts["rejected"] == 0 and v.counts["rounds"] == rounds and not v.alarms
        v.store.close()
    r = cli("replay", d / "cap.bin", "--registry", d / "shoes.json", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["rounds"] == rounds


def test_every_frame_signed_by_another_key_is_bad_signature(shoe, tmp_path):
    _, entry, _, _ = shoe
    forger, _ = signing_shoe(entry.shoe_id)  # same shoe id and key version, another key
    stream = pr.encode_frame(forger.chained(pr.T_SHOE_START, b"\x00\x01\x08\x02"))
    stream += pr.encode_frame(forger.chained(pr.T_BURN, b"\x00\x01\x00\x00\x00\x04"))
    for batch in (True, False):
        v = Validator(entry, str(tmp_path / f"{batch}.db"), batch_verify=batch)
        assert [(x[1], x[2]) for x in v.receive(stream)] == [("rejected", "bad_signature")] * 2
        v.store.close()


def test_an_unknown_key_version_or_shoe_is_unknown_shoe_or_key(shoe, tmp_path):
    _, entry, _, _ = shoe
    signer, _ = signing_shoe(entry.shoe_id)
    signer.key_id = 2  # a version the registry does not hold
    other, _ = signing_shoe(entry.shoe_id + 1)
    v = Validator(entry, str(tmp_path / "a.db"))
    stream = pr.encode_frame(signer.chained(pr.T_SHOE_START, b"\x00\x01\x08\x02"))
    stream += pr.encode_frame(other.chained(pr.T_SHOE_START, b"\x00\x01\x08\x02"))
    assert {x[2] for x in v.receive(stream)} == {"unknown_shoe_or_key"}


def test_initial_cards_wait_for_their_seal_and_go_in_with_it(tmp_path):
    s, entry = signing_shoe()
    v = Validator(entry, str(tmp_path / "a.db"))
    acked = []
    v.receive(pr.encode_frame(s.chained(pr.T_SHOE_START, b"\x00\x01\x08\x02")))
    acked.append(v.state["last_seq"])
    assert v.receive(pr.encode_frame(s.chained(pr.T_INITIAL_CARDS, NATURALS))) == []
    assert v.pending is not None and v.state["last_seq"] == acked[0] == 1  # not stored, not acked
    # the shoe's status (answering a hello) seals it: chain = the digest of the newest frame
    status = s.status(capture_gen.status_payload(unacked_from=2, unacked_to=2))
    verdicts = v.receive(pr.encode_frame(status))
    assert [(f.type, verdict) for f, verdict, _ in verdicts] == [
        (pr.T_INITIAL_CARDS, "accepted"), (pr.T_STATUS, "accepted")]
    assert v.state["last_seq"] == 2 and v.pending is None


def test_an_unsealed_initial_cards_is_rejected_unsealed(tmp_path):
    s, entry = signing_shoe()
    v = Validator(entry, str(tmp_path / "a.db"))
    v.receive(pr.encode_frame(s.chained(pr.T_SHOE_START, b"\x00\x01\x08\x02")))
    forged = pr.build(None, 1, s.shoe_id, 1, 2, s.last_digest, pr.T_INITIAL_CARDS, NATURALS)
    genuine = s.chained(pr.T_INITIAL_CARDS, NATURALS[:4] + bytes([0, 1, 2, 3]))
    result = s.chained(pr.T_IRREGULARITY, b"\x00\x01\x00\x01" + bytes([8, 255, 0, 9]))
    # a forged unsigned frame the next signed frame does not seal: rejected; the genuine one
    # that frame does seal: stored
    verdicts = v.receive(b"".join(pr.encode_frame(f) for f in (forged, genuine, result)))
    assert [(verdict, reason) for _, verdict, reason in verdicts] == [
        ("rejected", "unsealed"), ("accepted", None), ("accepted", None)]
    # and one that nothing ever seals (the end of a capture)
    v.receive(pr.encode_frame(s.chained(pr.T_INITIAL_CARDS, NATURALS)))
    assert [(x[1], x[2]) for x in v.finish()] == [("rejected", "unsealed")]


def test_a_forged_frame_appended_to_a_real_capture_is_rejected(cli, shoe, tmp_path):
    d, entry, cap, _ = shoe
    last = pr.parse(pr.decode_frame(frames(cap)[-1][:-1]))
    forger = capture_gen.ShoeSigner(ec.generate_private_key(ec.SECP256R1()), entry.shoe_id,
                                    seq=last.seq, last_digest=last.digest)
    extra = [forger.chained(pr.T_SHOE_START, b"\x00\x02\x08\x02"),
             forger.chained(pr.T_INITIAL_CARDS, NATURALS),  # unsigned: sealed by a forgery
             forger.chained(pr.T_RESULT, b"\x00\x02\x00\x01\x22\x00"
                            + bytes([32, 48, 28, 35]) + b"\x00\x01\x00")]
    forged = pr.build(None, 1, entry.shoe_id, 1, last.seq + 1, last.digest, pr.T_INITIAL_CARDS,
                      NATURALS)  # an unsigned frame with nothing to seal it
    # a forged signature does not decide a pending frame: nothing authentic ever seals it
    for tail, reasons in (([*extra], ["bad_signature", "bad_signature", "unsealed"]),
                          ([forged], ["unsealed"])):
        (tmp_path / "cap.bin").write_bytes(cap + b"".join(pr.encode_frame(f) for f in tail))
        r = cli("replay", tmp_path / "cap.bin", "--registry", d / "shoes.json", "--json")
        out = json.loads(r.stdout)
        assert r.returncode != 0 and [x["reason"] for x in out["rejections"]] == reasons


def test_audit_verify_checks_every_signature_a_batch_verified_read_took_on_trust(cli, shoe,
                                                                               tmp_path):
    """With batch_verify one signature covers a run of digest-linked frames: a frame whose own
    signature was altered in transit is stored (its body is authentic: the next signature covers
    its digest). audit verify checks every signature and names it."""
    d, entry, cap, _ = shoe
    parts = frames(cap)
    raw = bytearray(pr.decode_frame(parts[1][:-1]))  # the burn: a signed frame mid-run
    raw[-1] ^= 1
    parts[1] = pr.encode_frame(bytes(raw))
    v = Validator(entry, str(tmp_path / "a.db"), batch_verify=True)
    v.receive(b"".join(parts))
    v.finish()
    v.store.close()
    assert v.counts["rejected"] == 0
    r = cli("audit", "verify", "--db", tmp_path / "a.db", "--registry", d / "shoes.json")
    assert r.returncode != 0 and "does not carry a valid signature" in r.stderr, r.stderr
    # frame by frame (the default), the validator rejects it outright
    v = Validator(entry, str(tmp_path / "b.db"))
    assert "bad_signature" in {x[2] for x in v.receive(b"".join(parts))}


def test_audit_verify_finds_a_changed_signature_in_the_store(cli, shoe, tmp_path):
    d, entry, cap, _ = shoe
    v = Validator(entry, str(tmp_path / "a.db"))
    v.receive(cap)
    v.finish()
    v.store.close()
    ok = cli("audit", "verify", "--db", tmp_path / "a.db", "--registry", d / "shoes.json")
    assert ok.returncode == 0 and ok.stdout.startswith("ok: "), ok.stderr
    db = tmp_path / "t.db"
    shutil.copy(tmp_path / "a.db", db)
    fid = flip_a_stored_result(db)
    from test_audit import rechain  # an insider recomputes the row chain too

    rechain(db)
    r = cli("audit", "verify", "--db", db, "--registry", d / "shoes.json")
    assert r.returncode != 0 and f"frame id {fid}" in r.stderr and "signature" in r.stderr


def test_audit_verify_needs_the_registry_not_a_key(cli, shoe, tmp_path):
    _, entry, cap, _ = shoe
    v = Validator(entry, str(tmp_path / "a.db"))
    v.receive(cap)
    v.store.close()
    r = cli("audit", "verify", "--db", tmp_path / "a.db", "--registry", tmp_path / "no.json")
    assert r.returncode != 0 and "no shoe registry at" in r.stderr  # missing: said so
    Registry(str(tmp_path / "other.json")).put(ShoeEntry(entry.shoe_id + 1))
    r = cli("audit", "verify", "--db", tmp_path / "a.db", "--registry",
              tmp_path / "other.json")
    assert r.returncode != 0 and "not in the shoe registry" in r.stderr


SERIAL = bytes.fromhex("0123a1b2c3d4e5f6ee")


def certificate(attesting_key, shoe_id, version, public_key):
    """The attestation key's Sign-internal certificate of a result key (sabot/attestation.py's
    message): here a host key stands in for the element's, so the registry's rule is tested
    alone (tests/test_attestation.py has the element make them)."""
    from sabot.attestation import certificate_message

    digest = hashlib.sha256(certificate_message(SERIAL, shoe_id, version,
                                                keys.xy(public_key))).digest()
    return pr.sign_digest(attesting_key, digest).hex()


def test_registry_public_keys_are_checked_and_old_versions_kept(tmp_path):
    pa, p1, p2, p3 = (ec.generate_private_key(ec.SECP256R1()) for _ in range(4))
    e = ShoeEntry(7, serial=SERIAL.hex(), attestation_key=keys.public_pem(pa.public_key()))
    k1, k2, k3 = (keys.public_pem(p.public_key()) for p in (p1, p2, p3))
    c1 = certificate(pa, 7, 1, p1.public_key())
    assert e.add_public_key(1, k1, c1) and not e.add_public_key(1, k1, c1)
    assert e.add_public_key(2, k2, certificate(pa, 7, 2, p2.public_key()))
    assert e.key_versions == [1, 2]
    assert e.public_key(1) is e.public_key(1) and e.public_key(3) is None  # loaded once
    with pytest.raises(SabotError, match="different public key version 1"):
        e.add_public_key(1, k2)
    # a version listed by whoever writes the file, without the element's certificate: refused
    for cert in (None, certificate(p3, 7, 3, p3.public_key()),
                 certificate(pa, 8, 3, p3.public_key()), certificate(pa, 7, 2, p3.public_key())):
        with pytest.raises(SabotError, match="not certified by the shoe's attestation key"):
            e.add_public_key(3, k3, cert)
    Registry(str(tmp_path / "ok.json")).put(e)
    assert Registry.load(str(tmp_path / "ok.json")).get(7).key_versions == [1, 2]
    forged = json.loads((tmp_path / "ok.json").read_text())
    forged["shoes"][0]["public_keys"].append({"version": 3, "algorithm": "ecdsa-p256", "key": k3})
    (tmp_path / "forged.json").write_text(json.dumps(forged))
    with pytest.raises(SabotError, match="version 3 is not certified"):
        Registry.load(str(tmp_path / "forged.json"))
    # an entry without an attestation key holds version 1 alone (registered at provisioning)
    with pytest.raises(SabotError, match="needs the shoe's attestation key"):
        ShoeEntry(7).add_public_key(2, k2, certificate(pa, 7, 2, p2.public_key()))
    bad = [[{"version": 1, "algorithm": "hmac-sha256", "key": k1}],
           [{"version": 1, "algorithm": "ecdsa-p256"}],
           [{"version": 1, "algorithm": "ecdsa-p256", "key": k1}] * 2]
    for public_keys in bad:
        (tmp_path / "r.json").write_text(json.dumps({"shoes": [{"shoe_id": 7,
                                                               "public_keys": public_keys}]}))
        with pytest.raises(SabotError):
            Registry.load(str(tmp_path / "r.json"))
    garbled = ShoeEntry(7, public_keys=[{"version": 1, "algorithm": "ecdsa-p256", "key": "x"}])
    with pytest.raises(SabotError, match="not a PEM public key"):
        garbled.public_key(1)


def test_a_status_naming_a_newer_frame_leaves_a_pending_frame_to_its_successor(tmp_path):
    s, entry = signing_shoe()
    v = Validator(entry, str(tmp_path / "a.db"))
    v.receive(pr.encode_frame(s.chained(pr.T_SHOE_START, b"\x00\x01\x08\x02")))
    initial = s.chained(pr.T_INITIAL_CARDS, NATURALS)
    after = s.chained(pr.T_IRREGULARITY, b"\x00\x01\x00\x01" + bytes([8, 255, 0, 9]))
    status = s.status(capture_gen.status_payload(unacked_from=2, unacked_to=3))  # seq 3
    verdicts = v.receive(b"".join(pr.encode_frame(f) for f in (initial, status, after)))
    assert [(f.seq, verdict) for f, verdict, _ in verdicts] == [
        (3, "accepted"), (2, "accepted"), (3, "accepted")]  # the status, then the sealed pair
    assert v.counts["rejected"] == 0 and v.state["last_seq"] == 3


def test_a_frame_signed_by_the_command_key_is_no_result(tmp_path):
    """The host's command key signs commands; a shoe frame under it is bad_signature, so the key
    the host holds cannot make a result verify."""
    _, entry = signing_shoe()
    command_key = keys.create(str(tmp_path / "command.pem"))
    forger = capture_gen.ShoeSigner(command_key.private_key, entry.shoe_id)
    v = Validator(entry, str(tmp_path / "a.db"))
    out = v.receive(pr.encode_frame(forger.chained(pr.T_SHOE_START, struct.pack(">HBB", 1, 8, 2))))
    assert [verdict for _, verdict, _ in out] == ["rejected"]
    assert v.rejections[0]["reason"] == "bad_signature"

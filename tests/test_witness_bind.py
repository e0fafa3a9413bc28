"""Binding a shoe's key 1 to the witnesses at provisioning (first_checkpoint, sabot bind), as an
insider with every host file attacked it: a witness bound at
size 0 does not make `audit verify` claim a deletion; an unsigned 409 is no proof a witness holds
the key, only its signed state is; a first_checkpoint that is not the shoe's own is not sent; the
attestation key is bound with the log's first checkpoint only; a fresh element drops the old
one's first checkpoint; malformed input is one line."""

import http.server
import json
import threading

import pytest
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from test_witness import Log
from test_witness_state import SHOE, dealt, entry_of

from sabot import note, tlog
from sabot.audit.cosign import WitnessSpec, bind, load_witness_state
from sabot.audit.verify import verify
from sabot.errors import SabotError
from sabot.registry import ShoeEntry
from sabot.witness.service import Witness


def test_a_witness_holding_a_shoe_bound_at_size_0_does_not_fail_audit_verify(tmp_path):
    """provision --witness leaves the witness holding the log at size 0: nothing has been
    deleted, yet `audit verify --witness-state` must not say so."""
    key = ec.generate_private_key(ec.SECP256R1())
    w = Witness(str(tmp_path / "w.db"), ed25519.Ed25519PrivateKey.generate(),
                {SHOE: entry_of(key)}, "regulator.example/w1")
    # what sabot bind sends: the log at size 0, signed by key 1
    assert w.add_checkpoint(Log(key, SHOE).request(0)).status == 200
    state = tmp_path / "state.json"
    state.write_text(json.dumps(w.state()))
    logs = load_witness_state(str(state), [note.Verifier.parse(w.vkey)])
    assert [(x.shoe_id, x.size) for x in logs] == [(SHOE, 0)]
    # the shoe then deals; the pit's store holds its frames (no checkpoint sent yet)
    dealt(tmp_path / "pit.db", key, 7)
    got = verify(str(tmp_path / "pit.db"), {SHOE: entry_of(key)}, logs)
    assert got["ok"], got["problem"]



class _Junk(http.server.BaseHTTPRequestHandler):
    """Not a witness: answers 409 with a size to every request, signs nothing."""
    answer = (409, b"5\n")

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        status, body = self.answer
        self.send_response(status)
        self.send_header("Content-Type", "text/x.tlog.size")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


@pytest.fixture
def junk():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Junk)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def genuine_entry(key, shoe_id=SHOE):
    e = entry_of(key, shoe_id)
    text = Log(key, shoe_id).checkpoint(0)
    e.first_checkpoint = text
    return e


def test_bind_does_not_count_a_witness_that_signed_nothing(junk):
    """A 409 naming a larger size is no proof the witness holds key 1: a server that signs
    nothing (or a witness bound to another key) must not make the quorum."""
    key = ec.generate_private_key(ec.SECP256R1())
    wkey = ed25519.Ed25519PrivateKey.generate()
    v = note.Ed25519Signer("regulator.example/w1", wkey, note.COSIGNATURE).verifier
    said = []
    with pytest.raises(SabotError):
        bind([WitnessSpec(junk, v)], 1, genuine_entry(key), said.append)
    assert not any("holds the shoe's log already" in s for s in said), said


def test_a_witness_bound_to_another_key_refuses_a_size_0_checkpoint_rather_than_409(tmp_path):
    """A shoe id re-provisioned with a fresh element (or a log an insider headed first): the
    witness holds the log at size 5 bound to the old key. Given the new key 1's first
    checkpoint it answers 409 "5" (its size is checked before its key), which sabot bind takes
    as 'holds the shoe's log already (bound at its first checkpoint)'."""
    old = ec.generate_private_key(ec.SECP256R1())
    new = ec.generate_private_key(ec.SECP256R1())
    wkey = ed25519.Ed25519PrivateKey.generate()
    w = Witness(str(tmp_path / "w.db"), wkey, {SHOE: entry_of(old)}, "regulator.example/w1")
    log = Log(old, SHOE)
    log.grow(5)
    assert w.add_checkpoint(log.request(0)).status == 200
    w.close()
    # restarted with the registry that now holds the fresh element's key 1
    w = Witness(str(tmp_path / "w.db"), wkey, {SHOE: entry_of(new)}, "regulator.example/w1")
    a = w.add_checkpoint(Log(new, SHOE).request(0))
    w.close()
    assert a.status == 403 and "another key" in a.body, (a.status, a.body)


def serve(witness):
    """The witness's add-checkpoint over plain HTTP (as its service answers it)."""

    class H(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            a = witness.add_checkpoint(self.rfile.read(int(self.headers["content-length"])))
            body = a.body.encode()
            self.send_response(a.status)
            self.send_header("Content-Type", a.content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

        def do_GET(self):  # GET /logs: the witness's signed state
            body = json.dumps(witness.state()).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}"


def test_bind_counts_a_witness_that_holds_the_log_already_only_by_its_signed_state(tmp_path):
    """A pit sent the log first (size 5, key 1 bound then): bind's size-0 checkpoint gets a
    409; the witness's signed state, checked with its key, shows key 1 bound: counted."""
    key = ec.generate_private_key(ec.SECP256R1())
    entry = genuine_entry(key)
    w = Witness(str(tmp_path / "w.db"), ed25519.Ed25519PrivateKey.generate(), {SHOE: entry},
                "regulator.example/w1")
    log = Log(key, SHOE)
    log.grow(5)
    assert w.add_checkpoint(log.request(0)).status == 200
    srv, url = serve(w)
    try:
        said = []
        assert bind([WitnessSpec(url, note.Verifier.parse(w.vkey))], 1, entry, said.append) == 1
        assert "bound to its key 1 (its signed state says so)" in said[0]
        other = note.Ed25519Signer("regulator.example/w1", ed25519.Ed25519PrivateKey.generate(),
                                   note.COSIGNATURE).verifier  # not that witness's key
        said = []
        with pytest.raises(SabotError, match="0 of 1 witnesses"):
            bind([WitnessSpec(url, other)], 1, entry, said.append)
        assert "signed state could not be had" in said[0]
    finally:
        srv.shutdown()
        w.close()


def test_bind_refuses_a_first_checkpoint_that_is_not_the_shoes_own(tmp_path):
    """The registry is the insider's file: shoe A's first_checkpoint replaced by shoe B's
    (genuine, signed by B's key 1). sabot bind --shoe-id A must not say A's key is held."""
    ka, kb = (ec.generate_private_key(ec.SECP256R1()) for _ in range(2))
    a, b = genuine_entry(ka, SHOE), genuine_entry(kb, SHOE + 1)
    wkey = ed25519.Ed25519PrivateKey.generate()
    w = Witness(str(tmp_path / "w.db"), wkey, {SHOE: a, SHOE + 1: b}, "regulator.example/w1")
    srv, url = serve(w)
    try:
        a.first_checkpoint = b.first_checkpoint
        said = []
        with pytest.raises(SabotError):
            bind([WitnessSpec(url, note.Verifier.parse(w.vkey))], 1, a, said.append)
        assert w.latest(tlog.origin(SHOE)) is None  # A is not bound at all
    finally:
        srv.shutdown()
        w.close()


def _xy(key):
    n = key.public_key().public_numbers()
    return n.x.to_bytes(32, "big") + n.y.to_bytes(32, "big")


def _certify(att, serial, shoe_id, version, key):
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import utils

    from sabot.attestation import certificate_message

    der = att.sign(certificate_message(serial, shoe_id, version, _xy(key)),
                   ec.ECDSA(hashes.SHA256()))
    r, s = utils.decode_dss_signature(der)
    return (r.to_bytes(32, "big") + s.to_bytes(32, "big")).hex()


def test_a_shoe_bound_without_an_attestation_key_cannot_be_rebound_by_a_later_registry(tmp_path):
    """Bound at size 0 from an entry with no attestation key (as `sabot demo --witness`
    registers its shoe). The insider's registry later adds an attestation key of their own that
    'certifies' key 1 and a key 2 of theirs; one genuine checkpoint later the witness takes the
    insider's key 2: the attestation key is COALESCEd in at any cosignature, not only the
    first."""
    from sabot import keys

    genuine = ec.generate_private_key(ec.SECP256R1())
    wkey = ed25519.Ed25519PrivateKey.generate()
    db = str(tmp_path / "w.db")
    w = Witness(db, wkey, {SHOE: entry_of(genuine)}, "regulator.example/w1")
    log = Log(genuine, SHOE)
    assert w.add_checkpoint(log.request(0)).status == 200  # sabot bind
    w.close()
    # the insider's registry: the genuine key 1 kept, an attestation key and key 2 of theirs
    att, forged = (ec.generate_private_key(ec.SECP256R1()) for _ in range(2))
    serial = bytes(range(9))
    e = ShoeEntry(SHOE, serial=serial.hex(), attestation_key=keys.public_pem(att.public_key()))
    e.add_public_key(1, keys.public_pem(genuine.public_key()),
                     _certify(att, serial, SHOE, 1, genuine))
    e.add_public_key(2, keys.public_pem(forged.public_key()),
                     _certify(att, serial, SHOE, 2, forged))
    w = Witness(db, wkey, {SHOE: e}, "regulator.example/w1")
    log.grow(10)  # the genuine shoe deals; the pit sends its checkpoint
    assert w.add_checkpoint(log.request(0)).status == 200
    log.grow(5)  # the insider's frames after it, signed with their key 2
    got = w.add_checkpoint(log.request(10, key=forged))
    w.close()
    assert got.status == 403, got.body


def test_a_fresh_element_does_not_keep_the_old_elements_first_checkpoint(tmp_path):
    """A shoe id provisioned again with a fresh element whose firmware prints no first
    checkpoint (a 7-word PROVISIONED line: cmd_provision passes none): the entry keeps the old
    element's first_checkpoint, signed by a key it no longer holds, and sabot bind sends it."""
    from sabot import keys
    from sabot.registry import Registry

    old, new = (ec.generate_private_key(ec.SECP256R1()) for _ in range(2))
    reg = Registry(str(tmp_path / "shoes.json"))
    reg.register(SHOE, 1, keys.public_pem(old.public_key()), fresh_element=True,
                 first_checkpoint=Log(old, SHOE).checkpoint(0))
    entry, _ = reg.register(SHOE, 1, keys.public_pem(new.public_key()), fresh_element=True)
    assert entry.first_checkpoint == ""


def test_a_first_checkpoint_that_is_no_utf_8_is_refused_as_the_registry_loads(tmp_path):
    """A registry entry's first_checkpoint with a lone surrogate (JSON "\\ud800"), which
    would end sabot bind in a UnicodeEncodeError: refused in one line as the registry loads."""
    from sabot.registry import Registry

    key = ec.generate_private_key(ec.SECP256R1())
    doc = {"shoes": [{**genuine_entry(key).__dict__, "first_checkpoint": "\ud800\n"}]}
    (tmp_path / "r.json").write_text(json.dumps(doc))
    with pytest.raises(SabotError, match="first_checkpoint must be a signed note"):
        Registry.load(str(tmp_path / "r.json"))


def test_a_witness_url_urllib_cannot_parse_is_refused_in_one_line():
    """--witness "http://[::1=VKEY" passes parse_witness; the POST then raises ValueError
    outside post()'s try (urllib.request.Request), after the shoe was provisioned."""
    from sabot.audit.cosign import parse_witness, post

    v = note.Ed25519Signer("w", ed25519.Ed25519PrivateKey.generate(), note.COSIGNATURE).verifier
    with pytest.raises(SabotError, match="--witness takes URL=VKEY"):
        parse_witness(f"http://[::1={v.vkey()}")
    assert post("http://[::1", b"old 0\n\n")[0] == 0  # and the POST says so, no exception

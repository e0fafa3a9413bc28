"""The transparency log's bench sections: a witness adding checkpoints (witness) and a round's
receipt, its size and offline verification (receipt)."""

import time


def bench_witness(n=1000):
    """A witness's add-checkpoint (sabot/witness/service.py, in this process, its SQLite state
    on disk with synchronous=FULL): a shoe's log growing a frame at a time, each checkpoint
    signed by the shoe's key and sent with its consistency proof from the last."""
    import tempfile

    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519

    from sabot import keys, note, tlog
    from sabot.registry import ShoeEntry
    from sabot.witness.service import Witness

    shoe = ec.generate_private_key(ec.SECP256R1())
    entry = ShoeEntry(0x5AB0_0001)
    entry.add_public_key(1, keys.public_pem(shoe.public_key()))
    origin = tlog.origin(entry.shoe_id)
    signer = note.ecdsa_verifier(origin, shoe.public_key())
    hashes_, bodies = [], []
    for i in range(n):
        hashes_.append(tlog.leaf_hash(b"frame %d" % i))
        text = tlog.Checkpoint(origin, i + 1, tlog.root(hashes_)).text()
        sig = shoe.sign(text.encode(), ec.ECDSA(hashes.SHA256()))
        bodies.append(tlog.add_checkpoint_body(i, tlog.consistency_proof(hashes_, i, i + 1),
                                   text + "\n" + note.signature_line(origin, signer.id, sig)))
    with tempfile.TemporaryDirectory() as tmp:
        w = Witness(f"{tmp}/w.db", ed25519.Ed25519PrivateKey.generate(), {entry.shoe_id: entry})
        t = time.perf_counter()
        for body in bodies:
            assert w.add_checkpoint(body).status == 200
        spent = time.perf_counter() - t
        w.close()
    return {"checkpoints": n, "add_checkpoints_per_s": int(n / spent),
            "add_checkpoint_ms": round(spent / n * 1000, 2)}


def bench_receipt():
    """A round's receipt (sabot/receipt.py) in a shoe's log after its 100th round (an 8-deck
    shoe and the next shoe's first rounds), its checkpoint cosigned by one witness (the real
    add-checkpoint): its size and the time to verify it offline."""
    import tempfile

    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519

    from sabot import keys, note, receipt, tlog
    from sabot import protocol as pr
    from sabot.game.cards import shuffled_shoe
    from sabot.registry import ShoeEntry
    from sabot.virtual import capture_gen
    from sabot.witness.service import Witness

    sid = 0x5AB0_0001
    key = ec.generate_private_key(ec.SECP256R1())
    entry = ShoeEntry(sid)
    entry.add_public_key(1, keys.public_pem(key.public_key()))
    signer = capture_gen.ShoeSigner(key, sid)
    frames, rounds = [], 0
    for n in (1, 2):
        f, r = capture_gen.shoe_frames(signer, shuffled_shoe(8, 40 + n), n)
        frames += f
        rounds += r
    while rounds > 100:  # the log as it stands after its 100th round
        rounds -= frames.pop()[1] == pr.T_RESULT
    leaves = [tlog.leaf_hash(f) for f in frames]
    origin = tlog.origin(sid)
    text = tlog.Checkpoint(origin, len(leaves), tlog.root(leaves)).text()
    v = note.ecdsa_verifier(origin, key.public_key())
    cp = text + "\n" + note.signature_line(origin, v.id, key.sign(text.encode(),
                                                                ec.ECDSA(hashes.SHA256())))
    with tempfile.TemporaryDirectory() as tmp:
        w = Witness(f"{tmp}/w.db", ed25519.Ed25519PrivateKey.generate(), {sid: entry})
        cp += w.add_checkpoint(tlog.add_checkpoint_body(0, [], cp)).body
        witness = note.Verifier.parse(w.vkey)
        w.close()
    at = len(frames) // 2 + 1
    while frames[at][1] != pr.T_RESULT:  # the type byte: a round's result
        at += 1
    text = receipt.make(frames[at - 1], frames[at], at, tlog.inclusion_proof(leaves, at), cp)
    t = time.perf_counter()
    for _ in range(50):
        receipt.verify(text, {sid: entry}, [witness])
    spent = (time.perf_counter() - t) / 50
    return {"log_rounds": rounds, "log_entries": len(frames), "receipt_bytes": len(text.encode()),
            "receipt_verify_ms": round(spent * 1000, 2)}

"""The signed link end to end: the virtual shoe (real MicroPython) -> pyserial socket -> validator
-> SQLite, then tampered captures verified offline. Every tamper is rejected with its own reason,
and no frame after it is accepted out of order."""

import json
import os
import shutil
import stat
import subprocess

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from sabot import keys
from sabot import protocol as pr

from kit import SABOT
from kit.run import shared

pytestmark = pytest.mark.board  # every test here starts a process (the demo's board)


def sabot(*args, **kw):
    return subprocess.run([*SABOT, *map(str, args)], capture_output=True, text=True, timeout=180,
                          **kw)


@pytest.fixture(scope="module")
def demo():
    """One demo for the whole run (kit.run.shared: made by the first worker that needs it, read
    by the others; a test that writes into it works on a copy)."""
    def make(d):
        r = sabot("demo", "--seed", 21, "--db", d / "audit.db", "--key", d / "shoe.key",
                  "--capture", d / "capture.bin", "--registry", d / "shoes.json", "--json")
        assert r.returncode == 0, r.stderr
        (d / "summary.json").write_text(r.stdout)

    d = shared("test_link_demo", make)
    return d, json.loads((d / "summary.json").read_text())


def test_full_shoe_verifies_with_nothing_rejected_or_lost(demo):
    d, s = demo
    assert s["rejected"] == 0 and s["lost"] == 0
    assert s["rounds"] == s["expected_rounds"] > 60
    assert s["verified"] >= 2 * s["rounds"]  # initial-cards event and result per round
    assert stat.S_IMODE(os.stat(d / "shoe.key").st_mode) == 0o600


def test_history_reconstructs_a_hand_from_the_audit_store(demo):
    d, _ = demo
    r = sabot("history", "--db", d / "audit.db", "--round", 7, "--json")
    assert r.returncode == 0, r.stderr
    recs = [json.loads(line) for line in r.stdout.splitlines()]
    initial = next(x for x in recs if x.get("event") == "initial_cards")
    result = next(x for x in recs if "winner" in x)
    assert result["round"] == 7 and result["player"][:2] == initial["player"]
    assert sabot("history", "--db", d / "audit.db", "--round", 999).returncode != 0


def test_audit_log_is_append_only(demo, tmp_path):
    import sqlite3

    d = tmp_path / "demo"
    shutil.copytree(demo[0], d)  # (the run's shared demo is only read)
    db = sqlite3.connect(d / "audit.db")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        db.execute("UPDATE records SET record = '{}' WHERE seq = 3")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        db.execute("DELETE FROM frames")
    db.rollback()
    db.close()


def kind(part):
    """A capture part's frame type; None for the parts of a capture's marks (no frames)."""
    try:
        return pr.parse(pr.decode_frame(part)).type
    except pr.FrameError:
        return None


def split(capture):
    """Encoded frames of a capture (and the parts of its marks, kept in place), and the indexes
    of the chained frames."""
    parts = capture.split(b"\x00")[:-1]
    chained = [i for i, p in enumerate(parts) if kind(p) in pr.CHAINED]
    return parts, chained


def replay(d, parts, path):
    """Replay these capture parts (written to `path`, outside the run's shared demo)."""
    path.write_bytes(b"".join(p + b"\x00" for p in parts))
    r = sabot("replay", path, "--registry", d / "shoes.json", "--json")
    return r, json.loads(r.stdout)


def test_untouched_capture_replays_clean(demo, tmp_path):
    d, s = demo
    r, out = replay(d, split((d / "capture.bin").read_bytes())[0], tmp_path / "clean.bin")
    assert r.returncode == 0 and out["rejected"] == 0 and out["rounds"] == s["rounds"]


def reencode(raw):
    return pr.encode_frame(raw)[:-1]


def tampered(parts, chained, how, k, other_key=None):
    parts = list(parts)
    i, j = chained[k], chained[k + 1]
    if how == "flip":
        raw = bytearray(pr.decode_frame(parts[i]))
        raw[pr.HEADER.size + 1] ^= 0x04  # a payload bit
        parts[i] = reencode(bytes(raw))
    elif how == "delete":
        del parts[i]
    elif how == "replay":
        parts.insert(chained[k + 3], parts[i])
    elif how == "swap":
        parts[i], parts[j] = parts[j], parts[i]
    elif how == "resign":
        f = pr.parse(pr.decode_frame(parts[i]))
        parts[i] = reencode(f.body + pr.sign_digest(other_key, f.digest))
    return parts


@pytest.mark.parametrize("how,reasons,later_accepted", [
    ("flip", {"bad_signature"}, False),
    # a signed frame gone: the unsigned one before it has lost its seal, or the sequence breaks
    ("delete", {"sequence_gap", "unsealed"}, False),
    ("replay", {"replayed"}, True),  # the copy is refused; the genuine frames after it go on
    ("swap", {"sequence_gap", "unsealed"}, False),
    ("resign", {"bad_signature"}, False),
])
def test_tampered_capture_is_rejected_with_its_reason(demo, how, reasons, later_accepted,
                                                       tmp_path):
    d, _ = demo
    parts, chained = split((d / "capture.bin").read_bytes())
    statuses = [i for i, p in enumerate(parts) if kind(p) == pr.T_STATUS]

    def run_after(k):  # chained frames after chained[k] before the next status
        end = next((i for i in statuses if i > chained[k]), len(parts))
        return sum(1 for i in chained if chained[k] < i < end)

    # a signed frame (an unsigned one is sealed by the next: see test_signatures) in the middle
    # of the capture with a long run of frames before the next status (hellos come every 2 s)
    k = max((k for k in range(len(chained) // 4, len(chained) - 4)
             if pr.parse(pr.decode_frame(parts[chained[k]])).signed), key=run_after)
    other = ec.generate_private_key(ec.SECP256R1())
    r, out = replay(d, tampered(parts, chained, how, k, other), tmp_path / f"{how}.bin")
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert out["rejections"][0]["reason"] in reasons
    if later_accepted:
        assert out["rejected"] == 1
    else:
        # Once the chain is broken nothing after it is accepted until an authentic status says
        # what the shoe had acknowledged (the validator re-anchors there, with a sequence_gap
        # alarm): every chained frame in between is refused.
        status_at = next((i for i in range(chained[k], len(parts))
                          if kind(parts[i]) == pr.T_STATUS), len(parts))
        between = sum(1 for i in chained if chained[k] < i < status_at)
        assert out["rejected"] >= between - 1 and between > 20


def test_a_registry_with_another_public_key_rejects_everything(demo, tmp_path):
    d, _ = demo
    from sabot.registry import ALGORITHM, Registry, ShoeEntry

    entry = Registry.load(str(d / "shoes.json")).pick(None)
    other = keys.public_pem(ec.generate_private_key(ec.SECP256R1()).public_key())
    forged = ShoeEntry(entry.shoe_id, public_keys=[{"version": v, "algorithm": ALGORITHM,
                                                    "key": other} for v in entry.key_versions])
    Registry(str(tmp_path / "forged.json")).put(forged)
    r = sabot("replay", d / "capture.bin", "--registry", tmp_path / "forged.json", "--json")
    out = json.loads(r.stdout)
    assert r.returncode != 0 and out["verified"] == 0 and out["resent"] == 0
    # signed frames fail their signature; the unsigned ones are sealed by none of them (one met
    # again before its seal is deferred to its later copy, which is then rejected)
    assert out["rejected"] + out["deferred"] == out["frames"] and out["pending"] == 0
    assert {x["reason"] for x in out["rejections"]} == {"bad_signature", "unsealed"}


def test_key_file_readable_by_others_is_refused(demo, tmp_path):
    d, _ = demo
    loose = tmp_path / "loose.key"
    loose.write_bytes((d / "shoe.key").read_bytes())
    os.chmod(loose, 0o644)
    r = sabot("demo", "--db", tmp_path / "x.db", "--key", loose)
    assert r.returncode != 0 and "readable by others" in r.stderr and "Traceback" not in r.stderr


def test_second_demo_continues_the_chain_with_a_new_shoe(demo, tmp_path):
    d = tmp_path / "demo"
    shutil.copytree(demo[0], d)  # the run's demo is every worker's: this one goes on in a copy
    r = sabot("demo", "--seed", 22, "--db", d / "audit.db", "--key", d / "shoe.key", "--registry",
              d / "shoes.json", "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["shoe"] == 2 and s["rejected"] == 0 and s["lost"] == 0


def test_frame_from_an_earlier_boot_replayed_later_is_rejected(tmp_path):
    """A capture across a power cut (two boots); a genuine boot-1 frame re-inserted among boot-2
    frames."""
    from sabot.audit.validator import Validator
    from sabot.game import cards
    from sabot.link.host import HostLink
    from sabot.virtual.board import VirtualBoard
    from sabot.virtual.dealer import Dealer

    from kit import SIGN_MS, provision_shoe

    key, flash, config, registry = provision_shoe(tmp_path)
    cap = open(tmp_path / "cap.bin", "wb")
    board = VirtualBoard(flash, sign_ms=SIGN_MS).start()
    v = Validator(config, str(tmp_path / "live.db"))
    link = HostLink(board.url, v, key, cap)
    dealer = Dealer(board, cards.shuffled_shoe(8, seed=4))
    try:
        for boot in (1, 2):
            while board.indicator[2] < 30 * boot:
                dealer.step()
                link.pump(wait=0.01)
            assert link.ask_until(lambda st: st["unacked_to"] == 0, 10)  # all in the capture
            if boot == 1:
                board.kill()  # power cut
                board.start()
                link.reconnect()
    finally:
        link.close()
        board.stop()
        cap.close()
    capture = (tmp_path / "cap.bin").read_bytes()
    parts = [p for p in capture.split(b"\x00")[:-1] if kind(p) is not None]
    frames = [pr.parse(pr.decode_frame(p)) for p in parts]
    boots = {f.boot for f in frames if f.type in pr.CHAINED}
    assert boots == {1, 2}
    old = next(p for p, f in zip(parts, frames) if f.type in pr.CHAINED and f.boot == 1)
    (tmp_path / "tampered.bin").write_bytes(capture + old + b"\x00")
    r = sabot("replay", tmp_path / "tampered.bin", "--registry", registry, "--json")
    out = json.loads(r.stdout)
    assert r.returncode != 0 and [x["reason"] for x in out["rejections"]] == ["replayed"]


def test_a_port_that_drops_as_it_is_opened_is_opened_once_more(tmp_path):
    """A tty that vanishes just after it was opened (a board re-enumerating after a reset): the
    host link opens it again and goes on, instead of a "link lost" at its first hello."""
    import socket

    from sabot.audit.validator import Validator
    from sabot.link.host import HostLink

    from kit import signing_shoe
    from kit.ports import PlayedShoe, SocketPairPort, status_answer

    signer, config = signing_shoe(0x5AB0_0003)
    shoes = []

    class ReenumeratingPort(SocketPairPort):
        def __init__(self):
            gone, other = socket.socketpair()
            other.close()  # the first connection's far end is gone already
            super().__init__(gone)
            self.opened = 1

        def reopen(self, timeout):
            self.sock.close()
            self.sock, shoe_end = socket.socketpair()
            shoes.append(PlayedShoe(shoe_end, status_answer(signer)))
            self.opened += 1

    port = ReenumeratingPort()
    v = Validator(config, str(tmp_path / "a.db"))
    try:
        link = HostLink(port, v, None)
        status = link.ask(5)
    finally:
        port.close()
        for s in shoes:
            s.stop()
        v.store.close()
    assert port.opened == 2 and status is not None and status["phase"]

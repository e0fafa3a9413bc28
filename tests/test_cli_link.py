"""The bench path from the README: provision a virtual shoe, run it with `sabot board`, validate
its link with `sabot validate` from another process, then read the audit log back."""

import json
import os
import subprocess
import sys

from sabot import cards, keys, rules
from sabot import protocol as pr
from sabot.validator import Validator
from sabot.virtual import free_port

from conftest import BoardProcess

SABOT = [sys.executable, "-m", "sabot.cli"]


def test_board_and_validate_from_the_command_line_store_what_the_rules_deal(tmp_path):
    key, flash = tmp_path / "shoe.key", tmp_path / "flash"
    db, cap = tmp_path / "audit.db", tmp_path / "cap.bin"
    r = subprocess.run([*SABOT, "provision", "--key", key, "--flash", flash], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    assert oct(os.stat(key).st_mode & 0o777) == "0o600"
    tokens = cards.shuffled_shoe(1, seed=6)
    shoe = tmp_path / "shoe.txt"
    shoe.write_text(cards.format_shoe(tokens))
    port = free_port()
    board = BoardProcess("--listen", f"127.0.0.1:{port}", "--flash", flash, "--shoe", shoe)
    try:
        board.wait_line("listening on")
        v = subprocess.run([*SABOT, "validate", "--port", f"socket://127.0.0.1:{port}", "--key",
                            key, "--db", db, "--capture", cap, "--seconds", "4", "--json"],
                           capture_output=True, text=True, timeout=60)
    finally:
        board.stop()
    assert v.returncode == 0, v.stderr
    printed = [json.loads(line) for line in v.stdout.splitlines()]
    rounds = [x for x in printed if "winner" in x]
    assert rounds == rules.deal_shoe(tokens)
    h = subprocess.run([*SABOT, "history", "--db", db, "--json"], capture_output=True, text=True)
    stored = [json.loads(x) for x in h.stdout.splitlines() if '"winner"' in x]
    shoe_id = keys.load(str(key)).shoe_id
    assert {r.pop("shoe_id") for r in stored} == {shoe_id}  # two tables' round 7 told apart
    assert stored == rounds
    raw_key = keys.load(str(key)).key
    assert raw_key not in db.read_bytes() and raw_key not in cap.read_bytes()
    assert raw_key.hex().encode() not in db.read_bytes()


def test_boot_counter_going_backwards_is_rejected(tmp_path):
    k = keys.create(str(tmp_path / "k"))
    v = Validator(k, str(tmp_path / "a.db"))

    def frame(seq, boot, chain, payload=b"\x00\x01\x08\x02"):  # shoe 1, 8 decks, baccarat
        raw = pr.build(k.key, k.key_id, k.shoe_id, boot, seq, chain, pr.T_SHOE_START, payload)
        return raw, pr.encode_frame(raw)

    raw1, enc1 = frame(1, 5, bytes(8))
    _raw2, enc2 = frame(2, 4, raw1[-32:-24])
    verdicts = v.receive(enc1 + enc2)
    assert [x[1] for x in verdicts] == ["accepted", "rejected"]
    assert verdicts[1][2] == "boot_backwards"


def test_10000_seeded_random_chunks_into_the_validator_accept_nothing(tmp_path):
    import random

    rng = random.Random(7)
    k = keys.create(str(tmp_path / "k"))
    v = Validator(k, str(tmp_path / "a.db"))
    data = bytes(rng.getrandbits(8) for _ in range(400_000))
    chunks = [data[i : i + rng.randint(1, 80)] for i in range(0, len(data), 40)][:10_000]
    accepted = 0
    for c in chunks:
        accepted += sum(1 for _, verdict, _ in v.receive(c) if verdict == "accepted")
    assert len(chunks) == 10_000 and accepted == 0
    assert v.counts["frames"] > 1000  # the noise really did reach the parser as candidate frames

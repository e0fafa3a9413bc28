"""The bench path from the README: provision a virtual shoe, run it with `sabot board`, validate
its link with `sabot validate` from another process, then read the audit log back."""

import json
import os
import subprocess

import pytest

from sabot import keys
from sabot import protocol as pr
from sabot.audit.validator import Validator
from sabot.game import cards, rules
from sabot.registry import Registry

from kit import SABOT, BoardProcess, free_port_for_tests, signing_shoe


@pytest.mark.board
def test_board_and_validate_from_the_command_line_store_what_the_rules_deal(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # ./sabot-shoes.json: this test's shoe alone
    key, flash = tmp_path / "host.pem", tmp_path / "flash"
    db, cap = tmp_path / "audit.db", tmp_path / "cap.bin"
    r = subprocess.run([*SABOT, "provision", "--key", key, "--flash", flash], capture_output=True,
                       text=True)  # registers the shoe in ./sabot-shoes.json
    assert r.returncode == 0, r.stderr
    assert oct(os.stat(key).st_mode & 0o777) == "0o600"
    tokens = cards.shuffled_shoe(1, seed=6)
    shoe = tmp_path / "shoe.txt"
    shoe.write_text(cards.format_shoe(tokens))
    port = free_port_for_tests()
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
    shoe_id = Registry.load().pick(None).shoe_id
    assert {r.pop("shoe_id") for r in stored} == {shoe_id}  # two tables' round 7 told apart
    assert stored == rounds
    # the capture replays as the live validator took it: the shoe dealt before validate
    # connected, so it begins with frames sent then, before the status and the resends
    rp = subprocess.run([*SABOT, "replay", cap, "--json"], capture_output=True, text=True)
    out = json.loads(rp.stdout)
    assert rp.returncode == 0 and out["rejected"] == 0 and out["rounds"] == len(rounds), rp.stderr
    # no private key anywhere the host keeps: not in the flash, not in the store or capture
    secret = keys.private_pem(keys.load(str(key)).private_key)
    from sabot.virtual.element_emulator import KeyStore

    result_key = KeyStore(tmp_path / "flash.element").private_key(0)
    scalar = result_key.private_numbers().private_value.to_bytes(32, "big")
    for path in (db, cap, *flash.iterdir()):
        data = path.read_bytes()
        assert secret not in data and scalar not in data and b"PRIVATE" not in data
        assert scalar.hex().encode() not in data


def test_boot_counter_going_backwards_is_rejected(tmp_path):
    s, entry = signing_shoe()
    v = Validator(entry, str(tmp_path / "a.db"))
    s.boot = 5
    enc1 = pr.encode_frame(s.chained(pr.T_SHOE_START, b"\x00\x01\x08\x02"))  # 8-deck baccarat
    s.boot = 4
    enc2 = pr.encode_frame(s.chained(pr.T_SHOE_START, b"\x00\x01\x08\x02"))
    verdicts = v.receive(enc1 + enc2)
    assert [x[1] for x in verdicts] == ["accepted", "rejected"]
    assert verdicts[1][2] == "boot_backwards"


def test_10000_seeded_random_chunks_into_the_validator_accept_nothing(tmp_path):
    import random

    rng = random.Random(7)
    _, entry = signing_shoe()
    v = Validator(entry, str(tmp_path / "a.db"))
    data = bytes(rng.getrandbits(8) for _ in range(400_000))
    chunks = [data[i : i + rng.randint(1, 80)] for i in range(0, len(data), 40)][:10_000]
    accepted = 0
    for c in chunks:
        accepted += sum(1 for _, verdict, _ in v.receive(c) if verdict == "accepted")
    assert len(chunks) == 10_000 and accepted == 0
    # the noise really did reach the parser as candidate frames (its runs up to a frame's length
    # between zeros: a longer run is line noise, dropped whole however the reads cut it)
    assert v.counts["frames"] > 800

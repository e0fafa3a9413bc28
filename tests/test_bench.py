"""`sabot bench`: a scripted shoe through a shoe, each round judged against the host's rules."""

import json
import os
import shutil
import subprocess

import pytest

from sabot.game import cards
from sabot.release import table_gen

from kit import ROOT, SABOT, BoardProcess, free_port_for_tests, provision_shoe

# burn AS + 9S; round 1: P 2S 3H (5) draws 8D -> 3; B KD 3C (3) must stand on a Player's 8
SCRIPT = ("AS 9S  2S KD 3H 3C 8D  KS 5H 4C 6D 7S 9H 2D TC JH QS 4H 5C 6H 7D 8S 9C QD 2H 3S CUT "
          "4S 5S 6S 7C 8C")


def bench(shoe, *extra, env=None, **kw):
    return subprocess.run([*SABOT, "bench", shoe, "--json", *map(str, extra)], capture_output=True,
                          text=True, timeout=180, env=env, **kw)


@pytest.mark.board
def test_a_good_shoe_passes_every_round(tmp_path):
    shoe = tmp_path / "shoe.txt"
    shoe.write_text(SCRIPT)
    r = bench(shoe)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["verdict"] == "PASS" and len(out["rounds"]) >= 4
    assert all(x["verdict"] == "PASS" for x in out["rounds"])


@pytest.mark.board
def test_firmware_with_a_wrong_table_fails_the_bench(tmp_path):
    fake = tmp_path / "repo"
    shutil.copytree(ROOT / "firmware", fake / "firmware")
    shutil.copytree(ROOT / "boards", fake / "boards")
    wrong = table_gen.THIRD_CARD_RULE.replace("| 3 | any except 8 | 8 |", "| 3 | any | — |")
    table = table_gen.render_module(table_gen.build_tables(wrong))
    (fake / "firmware" / "shoe" / "table.py").write_text(table)
    shoe = tmp_path / "shoe.txt"
    shoe.write_text(SCRIPT)
    r = bench(shoe, env=dict(os.environ, SABOT_ROOT=str(fake)))
    assert r.returncode != 0
    out = json.loads(r.stdout)
    assert out["verdict"] == "FAIL"
    first = out["rounds"][0]
    assert first["round"] == 1 and first["verdict"] in ("FAIL", "MISSING")
    assert any(x["verdict"] == "FAIL" and "rules_mismatch" in x["detail"]
               for x in out["rounds"])


def board_with_a_shoe(tmp_path):
    """A provisioned virtual shoe whose simulated dealer draws a 1-deck shoe file: (board, its
    URL, the shoe file, the command key); the registry is tmp_path/sabot-shoes.json."""
    key, _, _, _ = provision_shoe(tmp_path)
    shoe = tmp_path / "shoe.txt"
    shoe.write_text(cards.format_shoe(cards.shuffled_shoe(1, seed=12)))
    port = free_port_for_tests()
    board = BoardProcess("--listen", f"127.0.0.1:{port}", "--flash", tmp_path / "flash",
                         "--shoe", shoe)
    board.wait_line("listening on")
    return board, f"socket://127.0.0.1:{port}", shoe, key


@pytest.mark.board
def test_bench_over_a_port_with_prompts_passes_a_good_shoe(tmp_path):
    board, url, shoe, key = board_with_a_shoe(tmp_path)
    try:
        r = bench(shoe, "--port", url, "--key", key.path, "--registry",
                  tmp_path / "sabot-shoes.json", "--db", tmp_path / "bench.db", input="\n" * 80)
    finally:
        board.stop()
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["verdict"] == "PASS"


@pytest.mark.board
def test_bench_on_a_shoe_that_has_ended_says_to_start_the_next(tmp_path):
    """The trial: a shoe verified to its end, then benched: not every round MISSING blaming the
    rules, but one line saying what to do."""
    board, url, shoe, key = board_with_a_shoe(tmp_path)
    registry = tmp_path / "sabot-shoes.json"
    try:
        v = subprocess.run([*SABOT, "validate", "--port", url, "--key", key.path,
                            "--db", tmp_path / "a.db", "--until", "shoe-end", "--registry",
                            registry], capture_output=True, text=True, timeout=60)
        assert v.returncode == 0, v.stderr
        r = bench(shoe, "--port", url, "--key", key.path, "--registry", registry, "--db",
                  tmp_path / "b.db")
    finally:
        board.stop()
    assert r.returncode != 0 and "sabot new-shoe" in r.stderr, (v.stderr, r.stderr)


def test_bench_prompts_go_to_stderr_so_json_stdout_stays_clean(capsys, monkeypatch):
    import io

    from sabot.release.bench import ask_on_stderr

    monkeypatch.setattr("sys.stdin", io.StringIO("\n"))
    assert ask_on_stderr("draw card 1: AS ") == "\n"
    out = capsys.readouterr()
    assert out.out == "" and "draw card 1" in out.err
    with pytest.raises(EOFError):  # stdin closed: no technician
        ask_on_stderr("draw card 2: 2H ")


def test_a_game_protection_notice_is_no_fault_of_the_shoes_dealing():
    """A round the players are ahead on after (player_advantage), or a shuffle repeated, stands
    as the shoe signed it; an alarm on the dealing itself fails its round."""
    from sabot.game import rules
    from sabot.release.bench import judge

    expected = rules.deal_shoe(SCRIPT.split())
    records = [("result", dict(r, shoe=1)) for r in expected]
    notice = {"kind": "player_advantage", "round": 1, "detail": "the player has the edge"}
    assert [v for _, v, _ in judge(expected, records, [notice])] == ["PASS"] * len(expected)
    fault = {"kind": "rules_mismatch", "round": 1, "detail": "the rules deal otherwise"}
    assert judge(expected, records, [fault])[0][1] == "FAIL"
    shoe_wide = {"kind": "repeated_sequence", "round": None, "detail": "cards 1..20"}
    assert all(v == "PASS" for _, v, _ in judge(expected, records, [shoe_wide]))

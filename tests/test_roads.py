"""`sabot roads`: every rule of CONTRACTS.md "Roads", with expected roads worked out by hand from
the definition."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sabot.game.roads import ask, big_road, derived_road, roads, streaks

WORD = {"B": "banker", "P": "player", "T": "tie"}


def ws(marks):
    """Winners from a string of B / P / T (spaces ignored)."""
    return [WORD[m] for m in marks.replace(" ", "")]


def columns(*lengths):
    """Winners whose Big Road has columns of these lengths (sides alternate, Banker first)."""
    return ws("".join(("B" if i % 2 == 0 else "P") * n for i, n in enumerate(lengths)))


def cell(w, ties=0):
    return {"winner": w, "ties": ties}


def test_bead_plate_is_every_round_in_order():
    assert roads(ws("TBPPTB"))["bead_plate"] == list("TBPPTB")


def test_ties_before_the_first_win_count_on_the_first_cell():
    assert big_road(ws("TTB")) == [[cell("B", 2)]]
    assert big_road(ws("TTTPPT")) == [[cell("P", 3), cell("P", 1)]]


def test_a_record_of_ties_only_has_no_cells():
    r = roads(ws("TTT"))
    none = {"big_eye_boy": None, "small_road": None, "cockroach_pig": None}
    assert r == {"bead_plate": ["T", "T", "T"], "big_road": [], "big_eye_boy": [],
                 "small_road": [], "cockroach_pig": [],
                 "ask": {"banker": none, "player": none}}
    assert roads([]) == {"bead_plate": [], "big_road": [], "big_eye_boy": [], "small_road": [],
                         "cockroach_pig": [], "ask": {"banker": none, "player": none}}


def test_banker_and_player_ask_worked_by_hand():
    # Big Road columns B B | P | B | P P (lengths 2, 1, 1, 2).
    # Banker next opens column 5: row 1 compares columns 4 and 4 - k: 2 vs 1 (k = 1) blue,
    # 2 vs 1 (k = 2) blue, 2 vs 2 (k = 3) red.
    # Player next is column 4 row 3: L = length of column 4 - k; 1 (k = 1) and 1 (k = 2) are
    # below r - 1 = 2: red; 2 (k = 3) is r - 1: blue.
    r = roads(ws("BBPBPP"))
    assert r["ask"] == {
        "banker": {"big_eye_boy": "blue", "small_road": "blue", "cockroach_pig": "red"},
        "player": {"big_eye_boy": "red", "small_road": "red", "cockroach_pig": "blue"}}
    # B | P: Banker next opens column 3 (columns 2 and 1 alike: red); Player next is column 2
    # row 2, the Big Eye Boy's first entry (L = 1 = r - 1: blue); too early for the others
    assert roads(ws("BP"))["ask"] == {
        "banker": {"big_eye_boy": "red", "small_road": None, "cockroach_pig": None},
        "player": {"big_eye_boy": "blue", "small_road": None, "cockroach_pig": None}}


def test_streaks_from_the_big_road():
    assert streaks(big_road(ws("BBBTPPBPPPPT"))) == {
        "current": {"winner": "P", "length": 4}, "longest_banker": 3, "longest_player": 4}
    assert streaks([]) == {"current": None, "longest_banker": 0, "longest_player": 0}


def test_a_tie_marks_the_last_cell_and_does_not_break_a_column():
    assert big_road(ws("BTBTTPB")) == [[cell("B", 1), cell("B", 2)], [cell("P")], [cell("B")]]


def test_big_road_columns_are_logical_with_no_dragon_tail():
    # a streak of 8 stays one column of 8 cells (a drawn board would turn it at row 6)
    assert [len(c) for c in big_road(ws("BBBBBBBBP"))] == [8, 1]


@pytest.mark.parametrize("k,before,start", [
    # lengths giving no entry yet, then the first entry at column k+1 row 2 / column k+2 row 1
    (1, (1, 1), (1, 2)), (1, (1, 1), (1, 1, 1)),
    (2, (1, 1, 1), (1, 1, 2)), (2, (1, 1, 1), (1, 1, 1, 1)),
    (3, (1, 1, 1, 1), (1, 1, 1, 2)), (3, (1, 1, 1, 1), (1, 1, 1, 1, 1)),
])
def test_start_cell_of_each_derived_road(k, before, start):
    assert derived_road(big_road(columns(*before)), k) == []
    assert len(derived_road(big_road(columns(*start)), k)) == 1
    # column k+1 row 1 never gives an entry, however long the columns before it
    assert len(derived_road(big_road(columns(*([5] * k), 1)), k)) == 0


def test_rows_past_the_first_all_three_cases():
    # Big Eye Boy, column 2 rows 2..4 against column 1 of length 2:
    # row 2: L=2 >= 2 red; row 3: L = r-1 blue; row 4: L=2 < r-1=3 red
    assert derived_road(big_road(columns(2, 4)), 1) == ["red", "blue", "red"]
    assert derived_road(big_road(columns(1, 3)), 1) == ["blue", "red"]
    # Small Road, column 3 rows 2..3 against column 1 (length 3): red, red
    assert derived_road(big_road(columns(3, 1, 3)), 2) == ["red", "red"]
    # Cockroach Pig, column 4 rows 2..4 against column 1 (length 2): red, blue, red
    assert derived_road(big_road(columns(2, 9, 9, 4)), 3) == ["red", "blue", "red"]


def test_first_row_compares_the_two_columns_before():
    # k=1: column 3 row 1 compares columns 2 and 1
    assert derived_road(big_road(columns(2, 2, 1)), 1) == ["red", "red"]  # col2 r2, col3 r1
    assert derived_road(big_road(columns(2, 3, 1)), 1) == ["red", "blue", "blue"]
    # k=2: column 4 row 1 compares columns 3 and 1; k=3: column 5 row 1, columns 4 and 1
    assert derived_road(big_road(columns(1, 5, 1, 1)), 2) == ["red"]
    assert derived_road(big_road(columns(2, 5, 1, 1)), 2) == ["blue"]
    assert derived_road(big_road(columns(1, 5, 5, 1, 1)), 3) == ["red"]
    assert derived_road(big_road(columns(1, 5, 5, 2, 1)), 3) == ["blue", "blue"]


# Worked by hand from the definition (column lengths 2 3 1 2 4 1 3 3 1).
LONG = "T B B T P P P B P P B B B B T P B B B P P P B T"
LONG_BIG = [
    [cell("B", 1), cell("B", 1)],
    [cell("P"), cell("P"), cell("P")],
    [cell("B")],
    [cell("P"), cell("P")],
    [cell("B"), cell("B"), cell("B"), cell("B", 1)],
    [cell("P")],
    [cell("B"), cell("B"), cell("B")],
    [cell("P"), cell("P"), cell("P")],
    [cell("B", 1)],
]
R, U = "red", "blue"
LONG_BIG_EYE = [R, U,  U,  U, U,  U, R, U, R,  U,  U, U, R,  U, R, R,  R]
LONG_SMALL = [U, R,  U, U, R, R,  U,  U, R, R,  U, U, R,  U]
LONG_COCKROACH = [R,  R, R, R, U,  U,  R, R, U,  U, R, R,  U]


def test_long_hand_worked_shoe():
    r = roads(ws(LONG))
    assert r["bead_plate"] == LONG.split()
    assert r["big_road"] == LONG_BIG
    assert r["big_eye_boy"] == LONG_BIG_EYE
    assert r["small_road"] == LONG_SMALL
    assert r["cockroach_pig"] == LONG_COCKROACH


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="BPT", max_size=80))
def test_derived_road_length_is_the_number_of_qualifying_cells(marks):
    r = roads(ws(marks))
    big = r["big_road"]
    assert sum(len(c) for c in big) == marks.count("B") + marks.count("P")
    if big:
        assert sum(c["ties"] for col in big for c in col) == marks.count("T")
    for name, k in (("big_eye_boy", 1), ("small_road", 2), ("cockroach_pig", 3)):
        qualifying = sum(1 for c, col in enumerate(big, 1) for row in range(1, len(col) + 1)
                         if c > k + 1 or (c == k + 1 and row >= 2))
        assert len(r[name]) == qualifying
        assert set(r[name]) <= {"red", "blue"}


def record(i, winner):
    return json.dumps({"shoe": 1, "round": i, "player": ["2H", "3S"], "banker": ["KD", "5C"],
                       "player_total": 5, "banker_total": 5, "winner": winner, "flags": []})


def test_cli_file_and_stdin_skip_events(cli, tmp_path):
    lines = [record(i, w) for i, w in enumerate(ws(LONG), 1)]
    lines.insert(3, json.dumps({"event": "irregularity", "kind": "card_not_due"}))
    text = "\n".join(lines) + "\n"
    f = tmp_path / "rounds.jsonl"
    f.write_text(text)
    expected = {"bead_plate": LONG.split(), "big_road": LONG_BIG, "big_eye_boy": LONG_BIG_EYE,
                "small_road": LONG_SMALL, "cockroach_pig": LONG_COCKROACH,
                "ask": ask(ws(LONG))}
    for r in (cli("roads", str(f), "--json"), cli("roads", "--json", stdin=text)):
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout) == expected
    plain = cli("roads", str(f))
    assert plain.returncode == 0 and "big road" in plain.stdout


@pytest.mark.parametrize("text,needle", [
    ('{"winner": "banker"}\nnot json\n', "stdin:2: not JSON"),
    ('{"winner": "dragon"}\n', "winner must be banker, player or tie"),
    ("[1, 2]\n", "must be a JSON object"),
])
def test_cli_bad_line_is_one_line_and_nonzero(cli, text, needle):
    r = cli("roads", "--json", stdin=text)
    assert r.returncode != 0
    assert needle in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_cli_missing_file(cli):
    r = cli("roads", "/nonexistent/rounds.jsonl", "--json")
    assert r.returncode != 0 and "cannot read" in r.stderr and "Traceback" not in r.stderr

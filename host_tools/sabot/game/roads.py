"""Baccarat scoreboards ("roads") from round records (docs/INTERFACES.md "Roads").

The Big Road is kept as logical columns (no dragon tail): a column holds consecutive wins of one
side, a tie adds 1 to the `ties` of the last cell, and ties before the first Banker or Player win
are counted on the first cell. A record of ties only has no cell, so its Big Road and derived roads
are empty. The derived roads (Big Eye Boy k = 1, Small Road k = 2, Cockroach Pig k = 3) depend only
on column lengths of earlier columns, so computing them from the finished Big Road gives the same
entries as computing them live, one cell at a time. A winner that is none of banker, player or tie
(a record an insider edited) is an unknown bead, `?`, and no cell: the pages still show the other
rounds' roads, and `sabot audit verify` names the edit."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TypedDict

from sabot.errors import SabotError, parse_json

BEAD = {"banker": "B", "player": "P", "tie": "T"}
UNKNOWN = "?"  # the bead of a winner that is none of BEAD's
DERIVED = {"big_eye_boy": 1, "small_road": 2, "cockroach_pig": 3}


class Cell(TypedDict):
    winner: str  # "B" or "P"
    ties: int


def bead(winner: Any) -> str:
    """"B"/"P"/"T" for a round's winner ("banker"/"player"/"tie"), UNKNOWN for anything else."""
    return BEAD.get(winner, UNKNOWN) if isinstance(winner, str) else UNKNOWN


def bead_plate(winners: Iterable[Any]) -> list[str]:
    """Each round's bead, in order."""
    return [bead(w) for w in winners]


def big_road(winners: Iterable[Any]) -> list[list[Cell]]:
    """Logical columns of the Big Road for the rounds' winners, in order."""
    columns: list[list[Cell]] = []
    early_ties = 0
    for w in winners:
        mark = bead(w)
        if mark == UNKNOWN:
            continue
        if mark == "T":
            if columns:
                columns[-1][-1]["ties"] += 1
            else:
                early_ties += 1
            continue
        cell: Cell = {"winner": mark, "ties": 0}
        if not columns:
            cell["ties"], early_ties = early_ties, 0
            columns.append([cell])
        elif columns[-1][0]["winner"] == mark:
            columns[-1].append(cell)
        else:
            columns.append([cell])
    return columns


def qualifies(column: int, row: int, k: int) -> bool:
    """Whether the Big Road cell at `column`, `row` (both from 1) gives an entry in the derived
    road with offset `k`."""
    return column > k + 1 or (column == k + 1 and row >= 2)


def derived_road(columns: Sequence[Sequence[Any]], k: int) -> list[str]:
    """"red"/"blue" entries of the derived road with offset k (1 Big Eye Boy, 2 Small Road,
    3 Cockroach Pig) for Big Road columns (only their lengths matter)."""
    if k < 1:
        raise ValueError(f"derived road offset must be at least 1 (got {k})")
    lengths = [len(col) for col in columns]
    out = []
    for c, length in enumerate(lengths, 1):
        for r in range(1, length + 1):
            if not qualifies(c, r, k):
                continue
            if r == 1:
                out.append("red" if lengths[c - 2] == lengths[c - 2 - k] else "blue")
                continue
            left = lengths[c - k - 1]  # column c - k, counted from 1
            out.append("blue" if left == r - 1 else "red")
    return out


def ask(winners: Sequence[Any]) -> dict[str, dict[str, str | None]]:
    """Banker ask and Player ask: the entry each derived road would get were the next round won
    by Banker, or by Player ("red", "blue", or None where that win gives the road no entry). A
    win adds one Big Road cell, and a cell at most one entry to each derived road."""
    big = big_road(winners)
    out: dict[str, dict[str, str | None]] = {}
    for side in ("banker", "player"):
        after = big_road([*winners, side])
        out[side] = {}
        for name, k in DERIVED.items():
            entries = derived_road(after, k)
            out[side][name] = entries[-1] if len(entries) > len(derived_road(big, k)) else None
    return out


def streaks(columns: Sequence[Sequence[Cell]]) -> dict[str, Any]:
    """From the Big Road: the streak now (its side, "B" or "P", and length; ties do not break
    one) and the longest Banker and Player streaks of the shoe."""
    longest = {"B": 0, "P": 0}
    for col in columns:
        side = col[0]["winner"]
        longest[side] = max(longest[side], len(col))
    now = {"winner": columns[-1][0]["winner"], "length": len(columns[-1])} if columns else None
    return {"current": now, "longest_banker": longest["B"], "longest_player": longest["P"]}


def roads(winners: Iterable[Any]) -> dict[str, Any]:
    """Every road for the rounds' winners, as docs/INTERFACES.md prints them, with the Banker
    and Player asks."""
    ws = list(winners)
    big = big_road(ws)
    result: dict[str, Any] = {"bead_plate": bead_plate(ws), "big_road": big}
    for name, k in DERIVED.items():
        result[name] = derived_road(big, k)
    result["ask"] = ask(ws)
    return result


JSON_KINDS = {"dict": "object", "list": "array", "NoneType": "null", "bool": "boolean"}


def winners_from_lines(lines: Iterable[str], source: str = "input") -> list[str]:
    """The `winner` of each round record (one JSON object a line); records without a winner
    (events) and blank lines are skipped; anything else is a SabotError naming the line."""
    out = []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        rec = parse_json(line, f"{source}:{lineno}")
        if not isinstance(rec, dict):
            raise SabotError(f"{source}:{lineno}: a record must be a JSON object")
        if "winner" not in rec:
            continue
        got = rec["winner"]
        if not isinstance(got, str) or got not in BEAD:
            said = repr(got) if isinstance(got, str) else "a JSON " + JSON_KINDS.get(
                type(got).__name__, "number")
            raise SabotError(f"{source}:{lineno}: winner must be banker, player or tie "
                             f"(got {said})")
        out.append(rec["winner"])
    return out


def format_roads(r: dict[str, Any]) -> str:
    """A plain-text rendering: the bead plate, the Big Road one column a line, the derived
    roads as R (red) and b (blue)."""
    lines = ["bead plate:    " + "".join(r["bead_plate"]), "big road:"]
    for col in r["big_road"]:
        lines.append("  " + " ".join(c["winner"] + ("+" * c["ties"]) for c in col))
    for name in DERIVED:
        marks = "".join("R" if e == "red" else "b" for e in r[name])
        lines.append(f"{name.replace('_', ' ') + ':':<15}{marks}")
    for side in ("banker", "player"):
        asked = " ".join(f"{name.replace('_', ' ')} {_mark(e)}"
                         for name, e in r["ask"][side].items())
        lines.append(f"{side + ' ask:':<15}{asked}")
    return "\n".join(lines)


def _mark(entry: str | None) -> str:
    return "-" if entry is None else "R" if entry == "red" else "b"

"""Generates firmware/shoe/table.py, the shoe's precomputed decision table, from the third-card
rule as written in the regulation (58 Pa. Code 631a.11 / 627a.10, as the regulation summary the
project implements words it: "The third-card rule").

The rule is kept here as the regulation's own words and table, and parsed, so that the table the
shoe decides with is traceable line by line to the text. `sabot table check` regenerates and
compares."""

from __future__ import annotations

import re
from pathlib import Path

from sabot.errors import SabotError
from sabot.paths import B21_TABLE, BLACKJACK_TABLE, DECISION_TABLE

# Quoted from the regulation summary (58 Pa. Code 631a.11 / 627a.10); tests/test_table.py checks it
# still stands there verbatim where the summary is beside the checkout.
THIRD_CARD_RULE = """\
- If either hand's first two cards total 8 or 9 (a Natural), both hands stand.
- Player: two-card total 0–5 draws, 6–7 stands.
- If Player stood: Banker draws on 0–5, stands on 6–7.
- If Player drew a third card of point value v (10, J, Q, K count 0):

| Banker two-card total | Banker draws when v is | Banker stands when v is |
|---|---|---|
| 0, 1, 2 | any | — |
| 3 | any except 8 | 8 |
| 4 | 2–7 | 0, 1, 8, 9 |
| 5 | 4–7 | 0–3, 8, 9 |
| 6 | 6–7 | 0–5, 8, 9 |
| 7 | never | all |
"""

TABLE_PATH = DECISION_TABLE
DIGITS = set(range(10))

# Outcome byte layout shared with firmware/shoe/decision.py (documented in the generated file).
WINNER_PLAYER, WINNER_BANKER, WINNER_TIE = 1, 2, 3
FLAG_BITS = {
    "player_natural": 4, "banker_natural": 8, "dragon7": 16, "panda8": 32, "lucky_six": 64,
}


def _value_set(phrase: str) -> set[int]:
    """The set of point values a table cell names: 'any', 'any except 8', '2–7', '0, 1, 8, 9',
    'never'."""
    phrase = phrase.strip().replace("\u2013", "-")
    if phrase in ("any", "all"):
        return set(DIGITS)
    if phrase in ("never", "\u2014", "-", ""):
        return set()
    m = re.fullmatch(r"any except (.+)", phrase)
    if m:
        return DIGITS - _value_set(m.group(1))
    values: set[int] = set()
    for part in phrase.split(","):
        lo, _, hi = part.strip().partition("-")
        values |= set(range(int(lo), int(hi or lo) + 1))
    return values


def _range_in(sentence: str, word: str) -> set[int]:
    m = re.search(word + r" (?:on )?(\d)\u2013(\d)", sentence)
    if not m:
        raise SabotError(f"cannot read the rule sentence: {sentence!r}")
    return set(range(int(m.group(1)), int(m.group(2)) + 1))


def parse_rule(
    text: str = THIRD_CARD_RULE,
) -> tuple[set[int], set[int], dict[int, set[int]]]:
    """(player_draw_totals, banker_draw_totals_if_player_stood,
    {banker_total: set of v that draw})."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    natural = next(ln for ln in lines if "Natural" in ln)
    if "8 or 9" not in natural or "both hands stand" not in natural:
        raise SabotError("the natural rule is not worded as expected")
    player_line = next(ln for ln in lines if ln.startswith("- Player:"))
    stood_line = next(ln for ln in lines if ln.startswith("- If Player stood"))
    player_draw = _range_in(player_line, "total")
    player_stand = _range_in(player_line, "draws,")
    banker_stood_draw = _range_in(stood_line, "draws")
    banker_stood_stand = _range_in(stood_line, "stands")
    if player_draw & player_stand or banker_stood_draw & banker_stood_stand:
        raise SabotError("the rule text draws and stands on the same total")
    banker: dict[int, set[int]] = {}
    for ln in lines:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        if not ln.startswith("|") or len(cells) != 3 or not cells[0][:1].isdigit():
            continue
        draws, stands = _value_set(cells[1]), _value_set(cells[2])
        if draws & stands or draws | stands != DIGITS:
            raise SabotError(f"table row {cells[0]!r}: draw and stand columns do not split 0-9")
        for total in _value_set(cells[0]):
            banker[total] = draws
    if set(banker) != set(range(8)):
        raise SabotError("the Banker table must cover two-card totals 0-7")
    return player_draw, banker_stood_draw, banker


def build_tables(text: str = THIRD_CARD_RULE) -> dict[str, bytes]:
    """The table constants, as bytes, keyed by their names in the firmware module."""
    player_draw, banker_stood_draw, banker_rows = parse_rule(text)
    point = bytes([1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 0, 0, 0])  # A..K: A = 1, 2-9 face, 10/J/Q/K = 0
    # DRAW[(p2 * 10 + b2) * 11 + k]: k = the Player's third-card value, or 10 when the Player
    # stood. Bit 0: the Player draws (same for every k); bit 1: the Banker draws given k.
    draw = bytearray(1100)
    for p2 in range(10):
        for b2 in range(10):
            natural = p2 >= 8 or b2 >= 8
            for k in range(11):
                bits = 0
                if not natural:
                    if p2 in player_draw:
                        bits |= 1
                    if k == 10:
                        bits |= 2 if b2 in banker_stood_draw else 0
                    else:
                        bits |= 2 if k in banker_rows[b2] else 0
                draw[(p2 * 10 + b2) * 11 + k] = bits
    # OUTCOME[((p * 10 + b) * 2 + p3) * 2 + b3]: p, b final totals; p3/b3 = 1 for a three-card
    # hand.
    outcome = bytearray(400)
    for p in range(10):
        for b in range(10):
            for p3 in (0, 1):
                for b3 in (0, 1):
                    v = WINNER_PLAYER if p > b else WINNER_BANKER if b > p else WINNER_TIE
                    if not p3 and p >= 8:
                        v |= FLAG_BITS["player_natural"]
                    if not b3 and b >= 8:
                        v |= FLAG_BITS["banker_natural"]
                    if b3 and b == 7 and p < 7:
                        v |= FLAG_BITS["dragon7"]
                    if p3 and p == 8 and b < 8:
                        v |= FLAG_BITS["panda8"]
                    if b == 6 and p < 6:
                        v |= FLAG_BITS["lucky_six"]
                    outcome[((p * 10 + b) * 2 + p3) * 2 + b3] = v
    return {"POINT": point, "DRAW": bytes(draw), "OUTCOME": bytes(outcome)}


def render_module(tables: dict[str, bytes] | None = None) -> str:
    tables = tables or build_tables()
    # One string per line of the generated file; the long ones are split only here.
    out = [
        (
            "# GENERATED by `sabot table generate` from the third-card rule"
            " (58 Pa. Code 631a.11 / 627a.10) -- do not edit."
        ),
        (
            '"""The shoe\'s decision table: bytes constants, so compiled or frozen they stay in'
            " flash."
        ),
        "",
        "POINT[rank]: point value of rank A..K (index 0..12).",
        (
            "DRAW[(p2 * 10 + b2) * 11 + k]: two-card totals p2, b2; k = Player's third-card value,"
            " 10 if the"
        ),
        (
            "  Player stood. Bit 0: the Player draws. Bit 1: the Banker draws. Naturals: 0 (both"
            " stand)."
        ),
        (
            "OUTCOME[((p * 10 + b) * 2 + p3) * 2 + b3]: final totals, p3/b3 = 1 for a three-card"
            " hand."
        ),
        (
            "  Bits 0-1: winner (1 player, 2 banker, 3 tie); 4 player_natural; 8 banker_natural;"
            " 16 dragon7;"
        ),
        '  32 panda8; 64 lucky_six."""',
        "",
    ]
    return _with_constants(out, tables)


# The blackjack dealer's rule, as the common rule words it (Chapter 633a leaves it to the
# certificate holder's Rules Submission, § 633a.12; docs/RULES.md "Blackjack"): the two rules a
# table may take, each parsed into the dealer's drawing table.
DEALER_RULE = """\
- s17: the dealer draws to 16 and stands on all 17s.
- h17: the dealer draws to 16 and to a soft 17, and stands on a hard 17 and on 18 and more.
"""
# § 633a.3(e): 2 to 10 their face value, a jack, queen or king 10, an ace 1 (or 11: the totals)
BLACKJACK_VALUES = bytes([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 10, 10, 10])
BLACKJACK_TOTALS = 32  # hard totals 0..31: the largest before a hand stops is 21 + 10


def parse_dealer_rule(text: str = DEALER_RULE) -> dict[str, tuple[int, bool]]:
    """{rule: (the last total drawn to, whether a soft 17 draws)}."""
    rules: dict[str, tuple[int, bool]] = {}
    for ln in (ln.strip() for ln in text.splitlines() if ln.strip()):
        m = re.fullmatch(r"- (s17|h17): the dealer draws to (\d+)( and to a soft 17)?,? and "
                         r"stands on (all 17s|a hard 17 and on 18 and more)\.", ln)
        if not m:
            raise SabotError(f"cannot read the dealer's rule: {ln!r}")
        rules[m.group(1)] = (int(m.group(2)), bool(m.group(3)))
    if set(rules) != {"s17", "h17"}:
        raise SabotError("the dealer's rule must name s17 and h17")
    return rules


def build_blackjack_tables(text: str = DEALER_RULE) -> dict[str, bytes]:
    """VALUE[rank] (A..K); DEALER[total * 2 + soft]: bit 0 the dealer draws under s17, bit 1
    under h17, for a hand's best total (soft: an ace counted 11 in it)."""
    rules = parse_dealer_rule(text)
    dealer = bytearray(BLACKJACK_TOTALS * 2)
    for total in range(BLACKJACK_TOTALS):
        for soft in (0, 1):
            bits = 0
            for bit, name in ((1, "s17"), (2, "h17")):
                upto, soft17 = rules[name]
                if total <= upto or (soft and total == 17 and soft17):
                    bits |= bit
            dealer[total * 2 + soft] = bits
    return {"VALUE": BLACKJACK_VALUES, "DEALER": bytes(dealer)}


def render_blackjack_module(tables: dict[str, bytes] | None = None) -> str:
    tables = tables or build_blackjack_tables()
    out = [
        "# GENERATED by `sabot table generate` from the dealer's rule (release/table_gen.py"
        " DEALER_RULE) -- do not edit.",
        '"""The blackjack dealer\'s drawing table: bytes constants, so compiled or frozen they'
        " stay in flash.",
        "",
        "VALUE[rank]: the value of rank A..K (index 0..12): an ace 1, 2-9 face, 10/J/Q/K 10.",
        "DEALER[total * 2 + soft]: the dealer's hand of this best total (soft: an ace counted 11)."
        " Bit 0:",
        '  the dealer draws under s17 (stands on all 17s); bit 1: under h17 (draws to a soft'
        ' 17)."""',
        "",
    ]
    return _with_constants(out, tables)


def _render_b21() -> str:
    from sabot.release.table21_gen import render_module as render

    return render()


GENERATED = ((TABLE_PATH, render_module), (BLACKJACK_TABLE, render_blackjack_module),
             (B21_TABLE, _render_b21))


def _with_constants(head: list[str], tables: dict[str, bytes]) -> str:
    """A generated module: its head's lines, then each table as a bytes constant, 20 a line."""
    out = list(head)
    for name, data in tables.items():
        out.append(f"{name} = (")
        for i in range(0, len(data), 20):
            chunk = "".join(f"\\x{c:02x}" for c in data[i : i + 20])
            out.append(f"    b'{chunk}'")
        out.append(")")
    return "\n".join(out) + "\n"


def generate(path: Path = TABLE_PATH) -> Path:
    """Writes the decision table (and, beside the default one, the blackjack dealer's and 21
    Baccarat's)."""
    path.write_text(render_module())
    if path == TABLE_PATH:
        for at, render in GENERATED[1:]:
            at.write_text(render())
    return path


def check(path: Path = TABLE_PATH) -> str | None:
    """None when the committed tables equal a fresh generation; otherwise a one-line reason."""
    for at, render in GENERATED if path == TABLE_PATH else ((path, render_module),):
        try:
            committed = at.read_text()
        except OSError:
            return f"{at} is missing: run `sabot table generate`"
        if committed != render():
            return (
                f"{at} differs from a fresh generation: run `sabot table generate`"
                " (never edit it by hand)"
            )
    return None

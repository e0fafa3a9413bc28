"""Generates firmware/shoe/b21table.py, the 21 Baccarat shoe's decision table, from the rule's
words: who wins, as § 681a.6(c) and (d)(1) word it (quoted below) with the reading this project
takes where (c) is silent, and the drawing rule a table's configuration fills in (docs/RULES.md
"21 Baccarat"). The cards' values are blackjack's (shoe/bjtable.py VALUE): § 681a.3 is not at
hand, and the common rule is the one both games use."""

from __future__ import annotations

import re

from sabot.errors import SabotError

# § 681a.6(c)(1), (2) and (d)(1), as the regulation words them (../shared/regs), then the reading
# of what (c) leaves to neither hand
WINNING_RULE = """\
- Player (c)(1)(i): Is 21 or less and is greater than the total value of the cards dealt to the Banker's Hand.
- Player (c)(1)(ii): Is over 21 but is lower than the total value of the cards dealt to the Banker's Hand.
- Banker (c)(2)(i): Is 21 or less and is greater than the total value of the cards dealt to the Player's Hand.
- Banker (c)(2)(ii): Is over 21 but is lower than the total value of the cards dealt to the Player's Hand.
- Tie (d)(1): the Banker's Hand and the Player's Hand are equal in value.
- Reading: a hand of 21 or less wins against a hand over 21.
"""

# Each hand's drawing rule, its numbers the table's configuration (the text at hand gives none):
# a hand's draw total, whether a soft total equal to it draws, and the Banker's rule that follows
# the Player's Hand instead.
DRAWING_RULE = """\
- A hand draws while its total is under its draw total, and on a soft total equal to its draw total where its table draws soft totals; it stands on every other total.
- beat_player: the Banker's Hand draws while its total is under a Player's Hand of 21 or less, and stands on a Player's Hand over 21.
"""

TOTALS = 32  # a hand's best total 0..31: one that draws while under 21 ends at 30 at most
BELOW = 22  # draw totals 0..21 (the Banker's under beat_player: the Player's total, or 0)
DRAWN = 22  # totals 0..21 (a hand over 21 never draws)
WINNERS = {"Player": 1, "Banker": 2, "Tie": 3}


def _condition(text: str) -> tuple[str, str]:
    """(its hand's side of 21, how it compares) from one of (c)'s clauses."""
    m = re.fullmatch(r"Is (21 or less|over 21) (?:and|but) is (greater|lower) than the total "
                     r"value of the cards dealt to the (?:Banker|Player)[’']s Hand\.", text)
    if not m:
        raise SabotError(f"cannot read the winning rule's clause: {text!r}")
    return m.group(1), m.group(2)


def parse_winning_rule(text: str = WINNING_RULE) -> dict[str, list[tuple[str, str]]]:
    """{"Player"|"Banker": its clauses, "Tie": [], "Reading": []}: refused unless every line
    reads."""
    got: dict[str, list[tuple[str, str]]] = {}
    for ln in (ln.strip() for ln in text.splitlines() if ln.strip()):
        m = re.fullmatch(r"- (Player|Banker) \(c\)\((\d)\)\((i+)\): (.+)", ln)
        if m:
            got.setdefault(m.group(1), []).append(_condition(m.group(4)))
        elif ln == ("- Tie (d)(1): the Banker's Hand and the Player's Hand are equal in "
                    "value."):
            got["Tie"] = []
        elif ln == "- Reading: a hand of 21 or less wins against a hand over 21.":
            got["Reading"] = []
        else:
            raise SabotError(f"cannot read the winning rule: {ln!r}")
    if set(got) != {"Player", "Banker", "Tie", "Reading"}:
        raise SabotError("the winning rule must name the Player's, the Banker's, the Tie and "
                         "the reading")
    return got


def _holds(clause: tuple[str, str], mine: int, other: int) -> bool:
    side, compare = clause
    if (mine <= 21) != (side == "21 or less"):
        return False
    return mine > other if compare == "greater" else mine < other


def build_winner_table(text: str = WINNING_RULE) -> bytes:
    """WINNER[i >> 2] >> (i & 3) * 2 & 3, i = player * 32 + banker: 1 the Player's Hand wins, 2
    the Banker's, 3 a Tie (four to a byte: the shoe's RAM)."""
    rule = parse_winning_rule(text)
    out = bytearray(TOTALS * TOTALS // 4)
    for p in range(TOTALS):
        for b in range(TOTALS):
            won = [h for h, mine, other in (("Player", p, b), ("Banker", b, p))
                   if any(_holds(c, mine, other) for c in rule[h])]
            if p == b:
                won = ["Tie"]
            elif not won:  # one hand at 21 or less, the other over: the reading
                won = ["Player" if p <= 21 else "Banker"]
            if len(won) != 1:
                raise SabotError(f"the winning rule names {won} for {p} against {b}")
            i = p * TOTALS + b
            out[i >> 2] |= WINNERS[won[0]] << (i & 3) * 2
    return bytes(out)


def winner_of(table: bytes, player: int, banker: int) -> int:
    i = player * TOTALS + banker
    return table[i >> 2] >> (i & 3) * 2 & 3


def parse_drawing_rule(text: str = DRAWING_RULE) -> bool:
    """Whether a soft total equal to the draw total draws under the `soft` rule, read from the
    words (and that beat_player is stated); refused unless both lines read."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if len(lines) != 2 or not re.fullmatch(
            r"- A hand draws while its total is under its draw total, and on a soft total equal "
            r"to its draw total where its table draws soft totals; it stands on every other "
            r"total\.", lines[0]) or not re.fullmatch(
            r"- beat_player: the Banker's Hand draws while its total is under a Player's Hand "
            r"of 21 or less, and stands on a Player's Hand over 21\.", lines[1]):
        raise SabotError(f"cannot read the drawing rule: {text!r}")
    return True


def build_draw_table(text: str = DRAWING_RULE) -> bytes:
    """DRAW[below * 22 + total] for a hand of 21 or less: bit 0, a hard hand draws; bit 1, a soft
    hand where a soft total equal to `below` stands; bit 2, where it draws. beat_player reads
    the row of the Player's total (0 when it is over 21: never), as a hand standing on a soft
    total."""
    parse_drawing_rule(text)
    out = bytearray(BELOW * DRAWN)
    for below in range(BELOW):
        for t in range(DRAWN):
            under = t < below
            out[below * DRAWN + t] = (under | under << 1 | (under or t == below) << 2)
    return bytes(out)


def render_module() -> str:
    from sabot.release.table_gen import _with_constants

    head = [
        "# GENERATED by `sabot table generate` from the 21 Baccarat rules (58 Pa. Code 681a.6;"
        " release/table21_gen.py) -- do not edit.",
        '"""The 21 Baccarat shoe\'s decision table: bytes constants, so compiled or frozen they'
        " stay in flash.",
        "",
        "VALUE[rank]: the value of rank A..K (index 0..12), as blackjack's (shoe/bjtable.py): an"
        " ace 1, 2-9 face,",
        "  10/J/Q/K 10.",
        "DRAW[below * 22 + total]: a hand of this best total, 21 or less, against its draw total"
        " `below`. Bit 0:",
        "  a hard hand draws; bit 1: a soft one (an ace counted 11) where a soft total equal to"
        " `below` stands;",
        "  bit 2: where it draws. A hand over 21 never draws.",
        "WINNER[i >> 2] >> (i & 3) * 2 & 3, i = player * 32 + banker, the final totals: 1 the"
        " Player's Hand wins,",
        '  2 the Banker\'s, 3 a Tie."""',
        "",
    ]
    from sabot.release.table_gen import BLACKJACK_VALUES

    return _with_constants(head, {"VALUE": BLACKJACK_VALUES, "DRAW": build_draw_table(),
                                  "WINNER": build_winner_table()})

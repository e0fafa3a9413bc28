"""Card notation (docs/INTERFACES.md): two characters, rank then suit, e.g. `TS`; input also takes
`10` and lower case. Cards are also numbered 0..51 as rank_index * 4 + suit_index, the firmware's
encoding."""

from __future__ import annotations

from collections.abc import Sequence

from sabot.errors import SabotError

TYPE_CHECKING = False  # not typing's: importing typing would slow every command's start
if TYPE_CHECKING:
    from _typeshed import StrPath

RANKS = "A23456789TJQK"
SUITS = "SHDC"
CUT = "CUT"
# Burn procedure values (docs/INTERFACES.md: A = 1, 2-9 face value, T/J/Q/K = 10) differ from
# point values.
BURN_VALUES = dict(zip(RANKS, (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 10, 10, 10), strict=True))


def parse_card(token: str) -> str:
    """Canonical two-character code for a card token; SabotError for anything else."""
    t = token.strip().upper()
    if t.startswith("10"):
        t = "T" + t[2:]
    if len(t) != 2 or t[0] not in RANKS or t[1] not in SUITS:
        raise SabotError(
            f"unknown card {token!r} (expected rank A23456789TJQK then suit SHDC, e.g. TS)"
        )
    return t


def card_index(code: str) -> int:
    return RANKS.index(code[0]) * 4 + SUITS.index(code[1])


def card_code(index: int) -> str:
    """The canonical code ("AS") of the card the shoe numbers `index`, 0..51."""
    if not 0 <= index < 52:
        raise SabotError(f"card number {index} out of range 0..51")
    return RANKS[index // 4] + SUITS[index % 4]


def parse_shoe_text(text: str, source: str = "shoe file") -> list[str]:
    """Tokens of a shoe file in dealing order: canonical card codes and `CUT`."""
    tokens = []
    for lineno, line in enumerate(text.splitlines(), 1):
        for word in line.split("#", 1)[0].split():
            if word.upper() == CUT:
                if CUT in tokens:
                    raise SabotError(f"{source}:{lineno}: a second CUT card")
                tokens.append(CUT)
                continue
            try:
                tokens.append(parse_card(word))
            except SabotError as e:
                raise SabotError(f"{source}:{lineno}: {e}") from None
    return tokens


def read_shoe_file(path: StrPath) -> list[str]:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise SabotError(f"cannot read shoe file {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise SabotError(f"shoe file {path} is not UTF-8 text") from None
    return parse_shoe_text(text, str(path))


def shuffled_shoe(
    decks: int = 8, seed: int | None = None, cut_from_end: int | None = None
) -> list[str]:
    """A freshly shuffled N-deck shoe with the cut card placed about 1/6 from the end, as dealt in
    casinos."""
    import random

    rng = random.Random(seed)
    cards = [r + s for _ in range(decks) for r in RANKS for s in SUITS]
    rng.shuffle(cards)
    if cut_from_end is None:
        cut_from_end = max(1, len(cards) // 6 + rng.randint(-4, 4))
    cards.insert(len(cards) - cut_from_end, CUT)
    return cards


def left_in_shoe(decks: int, seen: Sequence[str] = ()) -> dict[str, int]:
    """{card: how many are left} of a shoe of `decks` decks less the cards `seen` (a card seen
    more often than the decks hold: a SabotError, in --seen's words)."""
    left = {r + s: decks for r in RANKS for s in SUITS}
    for token in seen:
        card = parse_card(token)
        if left[card] == 0:
            raise SabotError(f"--seen holds more {card} than {decks} "
                             f"deck{'s' if decks > 1 else ''} have")
        left[card] -= 1
    return left


def format_shoe(tokens: Sequence[str], per_line: int = 13) -> str:
    lines = [" ".join(tokens[i : i + per_line]) for i in range(0, len(tokens), per_line)]
    return "\n".join(lines) + "\n"

"""The host's own implementation of the Baccarat rules, written from the regulation text
(58 Pa. Code 631a.11 / 627a.10 third-card rule; 627a.2 / 631a.2 definitions; 631c.5 Lucky Six).

This is the validator's second opinion on every round. It deliberately does not use the generated
lookup table or any firmware code: if the two ever disagree, the validator rejects the round."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from sabot.errors import SabotError
from sabot.game.cards import BURN_VALUES, CUT

TYPE_CHECKING = False  # not typing's: importing typing would slow every command's start
if TYPE_CHECKING:
    from typing import Any


def point_value(card: str) -> int:
    """Point value of a card (A = 1, 2-9 face value, 10/J/Q/K = 0)."""
    rank = card[0]
    if rank == "A":
        return 1
    if rank in "TJQK":
        return 0
    return int(rank)


_VALUE_OF_RANK = {r: point_value(r + "S") for r in "A23456789TJQK"}


def point_count(cards: Iterable[str]) -> int:
    """A hand's Point Count: the sum of its cards' values, modulo 10."""
    t = 0
    for c in cards:
        t += _VALUE_OF_RANK[c[0]]
    return t % 10


def is_natural(total_of_first_two: int) -> bool:
    return total_of_first_two in (8, 9)


def player_draws(player_total: int) -> bool:
    """Player: two-card total 0-5 draws, 6-7 stands (naturals are handled before this is asked)."""
    return player_total <= 5


def banker_draws(banker_total: int, player_third_value: int | None) -> bool:
    """Banker's decision; player_third_value is None when the Player stood."""
    if player_third_value is None:
        return banker_total <= 5
    v = player_third_value
    if banker_total <= 2:
        return True
    if banker_total == 3:
        return v != 8
    if banker_total == 4:
        return 2 <= v <= 7
    if banker_total == 5:
        return 4 <= v <= 7
    if banker_total == 6:
        return v in (6, 7)
    return False  # 7 stands


def deal_round(draw: Callable[[], str]) -> tuple[list[str], list[str]]:
    """Deal one round from `draw()` (returns the next card code). Returns (player, banker) card
    lists."""
    player = [draw()]
    banker = [draw()]
    player.append(draw())
    banker.append(draw())
    p, b = point_count(player), point_count(banker)
    if is_natural(p) or is_natural(b):
        return player, banker
    third = None
    if player_draws(p):
        player.append(draw())
        third = point_value(player[2])
    if banker_draws(b, third):
        banker.append(draw())
    return player, banker


def dealing_order(player: list[str], banker: list[str]) -> list[str]:
    """A round's cards in the order they left the shoe: P1 B1 P2 B2, then P3, then B3."""
    return player[:1] + banker[:1] + player[1:2] + banker[1:2] + player[2:] + banker[2:]


def redeal(player: list[str], banker: list[str]) -> tuple[list[str], list[str]] | None:
    """The hands the third-card rule deals from these cards in dealing order, or None when it wants
    a card they do not include. Equal to (player, banker) exactly when theirs is a legal round."""
    it = iter(dealing_order(player, banker))
    try:
        return deal_round(lambda: next(it))
    except StopIteration:
        return None


def round_outcome(player: Sequence[str], banker: Sequence[str]) -> dict[str, Any]:
    """Winner, totals and flags of a finished round, as docs/INTERFACES.md names them."""
    p, b = point_count(player), point_count(banker)
    winner = "player" if p > b else "banker" if b > p else "tie"
    flags = []
    if len(player) == 2 and is_natural(p):
        flags.append("player_natural")
    if len(banker) == 2 and is_natural(b):
        flags.append("banker_natural")
    if player[0][0] == player[1][0]:
        flags.append("player_pair")
    if banker[0][0] == banker[1][0]:
        flags.append("banker_pair")
    # Dragon 7: Banker's Hand of three cards totalling 7 against a Player's Hand of less than 7.
    if len(banker) == 3 and b == 7 and p < 7:
        flags.append("dragon7")
    # Panda 8: Player's Hand of three cards totalling 8 against a Banker's Hand of less than 8.
    if len(player) == 3 and p == 8 and b < 8:
        flags.append("panda8")
    # Lucky Six (631c.5(c)(3)): the Banker's Point Count is six and higher than the Player's.
    if b == 6 and p < 6:
        flags.append("lucky_six")
    return {"player_total": p, "banker_total": b, "winner": winner, "flags": sorted(flags)}


def round_record(
    shoe: int, number: int, player: Sequence[str], banker: Sequence[str]
) -> dict[str, Any]:
    rec = {"shoe": shoe, "round": number, "player": list(player), "banker": list(banker)}
    rec.update(round_outcome(player, banker))
    return rec


class ShoeExhausted(Exception):
    pass


def deal_shoe(tokens: Sequence[str], shoe: int = 1,
              deal: Callable[[Callable[[], str]], tuple[list[str], list[str]]] | None = None,
              record: Callable[[int, int, list[str], list[str]], dict[str, Any]] | None = None,
              cut_last: bool = False) -> list[dict[str, Any]]:
    """Round records for a whole shoe file under the default shoe procedure (docs/INTERFACES.md):
    the first card is burned with as many more as its burn value; rounds follow; when CUT comes out
    during a round that round is finished and one more is dealt, when it comes out between rounds
    exactly one more is dealt. A round cut short by the end of the cards is not reported.
    `deal`, `record`: another game's round and its record (21 Baccarat's), baccarat's if None;
    `cut_last`: the round CUT comes out in is the last, and CUT between rounds ends the shoe."""
    deal = deal or deal_round
    record = record or round_record
    state = {"pos": 0, "cut": False}

    def take_cut() -> None:
        while state["pos"] < len(tokens) and tokens[state["pos"]] == CUT:
            state["cut"] = True
            state["pos"] += 1

    def draw() -> str:
        take_cut()
        if state["pos"] >= len(tokens):
            raise ShoeExhausted
        card = tokens[state["pos"]]
        state["pos"] += 1
        return card

    rounds: list[dict[str, Any]] = []
    try:
        first = draw()
        for _ in range(BURN_VALUES[first[0]]):
            draw()
        cut_in_burn = state["cut"]
        last_round = False
        while not last_round:
            take_cut()  # a cut card between rounds: the round about to start is the last
            last_round = bool(state["cut"])
            if last_round and cut_last and (rounds or not cut_in_burn):
                break  # out between rounds: the shoe ends (in the burn: one round is dealt)
            cut_before = state["cut"]
            player, banker = deal(draw)
            rounds.append(record(shoe, len(rounds) + 1, player, banker))
            if not cut_before and state["cut"]:
                if cut_last:
                    break
                # Out during this round: finish it (done) and deal exactly one more.
                player, banker = deal(draw)
                rounds.append(record(shoe, len(rounds) + 1, player, banker))
                last_round = True
    except ShoeExhausted:
        pass
    return rounds


def check_inventory(cards: Iterable[str], decks: int) -> dict[str, int]:
    """SabotError naming the first card that N decks cannot hold."""
    counts: dict[str, int] = {}
    for c in cards:
        counts[c] = counts.get(c, 0) + 1
        if counts[c] > decks:
            copies = "copy" if decks == 1 else "copies"
            raise SabotError(
                f"impossible shoe: more than {decks} {copies} of {c} in a {decks}-deck shoe"
            )
    return counts

"""The host's own rules of 21 Baccarat (58 Pa. Code § 681a), written from the regulation's text
where it speaks and from the table's configuration where the text at hand is silent.

What § 681a.6 gives, exactly:
- every player wagers on the Player's Hand or the Banker's Hand (§ 681a.6(c)); the Tie and the
  two Bonus Wagers are optional, offered only where the Rules Submission says so (§ 681a.6(d));
- a hand wins when its total is 21 or less and greater than the other's (§ 681a.6(c)(1)(i),
  (2)(i)), or when it is over 21 but lower than the other's ((1)(ii), (2)(ii)); the Tie wins when
  the two totals are equal ((d)(1)); a Bonus Wager wins when its hand holds "a pair or better"
  ((d)(2), (3)).

Read literally, (c) leaves a hand of 21 or less against a hand over 21 to neither hand: 18 is not
"greater than" 23, and 18 is not "over 21". This module takes the ordinary reading: **a hand of 21
or less beats a hand over 21** (`winner`, and its test vector in tests/test_baccarat21.py).

What the text at hand does not give (§ 681a.3, the cards and their values and the "pair or better"
hands; § 681a.7 and after, the dealing and drawing procedure), and so what is the table's
configuration, each with a default that is this project's choice, never the regulation's
(`Rules`, docs/RULES.md "21 Baccarat"): the card values, each hand's drawing rule, the bonus
hands and their paytable, the commission on a Banker win, what a tie does to the Player and
Banker wagers, the Tie's odds, and the number of decks."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from sabot.errors import SabotError
from sabot.game.blackjack import card_value, total_of_values

GAME = "21-baccarat"
ACES = ("1_or_11", "1")  # an ace counts 11 when that keeps the hand at 21 or under, or always 1
BANKER_RULES = ("fixed", "beat_player")
TIE_MAIN = ("push", "lose")  # what a tie does to the Player and Banker wagers
COMMISSIONS = ("none", "five_percent")
BONUS_HANDS = ("suited_pair", "pair")
# the cut card: the round it comes out in is finished, then one more is dealt (as the shoe deals
# baccarat), or that round is the shoe's last (as blackjack)
CUT_CARDS = ("one_more", "last_round")  # of the hand's first two cards, best first
MOST_CARDS = 11  # a hand drawing while under 21 can hold no more (four aces, four 2s, three 3s)


@dataclass(frozen=True)
class Rules:
    """A 21 Baccarat table's configuration (its registry entry's, or a request's `table`). Every
    default here is this project's choice where § 681a.6 is silent, said as such: together they
    give every wager a house edge at a full shoe (8 decks: Player 0.99 %, Banker 1.26 %, Tie
    12.7 %, each Bonus 10.1 %; `sabot analyze --game 21-baccarat`), as baccarat's do — the
    Banker's Hand draws as a blackjack dealer's, the Player's stands a total sooner, and a
    Banker win pays its commission."""

    decks: int = 8
    ace: str = "1_or_11"
    # each hand draws while its total is under its `draws_below`; on a soft total of exactly
    # that, it draws too when `draws_soft` (as a blackjack dealer hitting a soft 17)
    player_draws_below: int = 16
    player_draws_soft: bool = False
    banker_draws_below: int = 17
    banker_draws_soft: bool = False
    # "fixed": the Banker's Hand draws by its own rule above; "beat_player": when the Player's
    # Hand is 21 or less the Banker's draws while it is lower than the Player's (and under 21),
    # and stands on a Player's Hand over 21
    banker_rule: str = "fixed"
    tie_main: str = "push"
    tie_odds: int = 7  # a tie comes about one round in nine: 7 to 1 keeps a house edge
    banker_commission: str = "five_percent"
    cut_card: str = "one_more"
    # the Bonus Wagers' "pair or better" (§ 681a.3(e), not at hand): the hand's first two cards,
    # a pair of one rank, suited or not; odds "to 1"
    bonus_paytable: dict[str, int] = field(
        default_factory=lambda: {"suited_pair": 18, "pair": 9})

    @classmethod
    def from_config(cls, cfg: object) -> Rules:
        """The rules a table's configuration gives (its keys as this class's fields, `game`
        and `side_wagers` aside); a SabotError in one line for anything else."""
        if not isinstance(cfg, dict):
            raise SabotError("table: expected an object")
        known = set(cls.__dataclass_fields__)
        fields = {k: v for k, v in cfg.items() if k not in ("game", "side_wagers")}
        for key in fields:
            if key not in known:
                raise SabotError(f"table.{key} is no setting of a 21 Baccarat table (its "
                                 f"settings: {', '.join(sorted(known))})")
        if fields.get("banker_rule") == "beat_player":
            idle = [k for k in ("banker_draws_below", "banker_draws_soft") if k in fields]
            if idle:
                raise SabotError(f"table.{idle[0]} is the fixed Banker's rule's: under "
                                 "beat_player the Banker's Hand draws by the Player's total")
        rules = cls(**fields)
        rules.check()
        return rules

    def settings(self) -> dict[str, Any]:
        """Every setting, a default as what it is (decks first); under beat_player the fixed
        rule's are none."""
        idle = ("banker_draws_below", "banker_draws_soft") if \
            self.banker_rule == "beat_player" else ()
        return {name: getattr(self, name) for name in self.__dataclass_fields__
                if name not in idle}

    def check(self) -> None:
        def whole(name: str, low: int, high: int) -> None:
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or not low <= v <= high:
                raise SabotError(f"table.{name} must be a whole number from {low} to {high}, "
                                 f"not {v!r}")

        whole("decks", 1, 8)
        whole("player_draws_below", 12, 21)
        whole("banker_draws_below", 12, 21)
        whole("tie_odds", 1, 100)
        for name, allowed in (("ace", ACES), ("banker_rule", BANKER_RULES),
                              ("tie_main", TIE_MAIN), ("banker_commission", COMMISSIONS),
                              ("cut_card", CUT_CARDS)):
            if getattr(self, name) not in allowed:
                raise SabotError(f"table.{name} is one of {', '.join(allowed)}, not "
                                 f"{getattr(self, name)!r}")
        for name in ("player_draws_soft", "banker_draws_soft"):
            if not isinstance(getattr(self, name), bool):
                raise SabotError(f"table.{name} is true or false")
        pays = self.bonus_paytable
        if not isinstance(pays, dict) or not pays or any(
                h not in BONUS_HANDS or not isinstance(o, int) or isinstance(o, bool)
                or not 1 <= o <= 1000 for h, o in pays.items()):
            raise SabotError("table.bonus_paytable maps hands (" + ", ".join(BONUS_HANDS)
                             + ") to whole odds from 1 to 1000, e.g. {\"pair\": 11}")


def total(cards: Iterable[str], rules: Rules) -> tuple[int, bool]:
    """(the hand's total, whether it is soft: an ace counted 11). The cards' values are the
    common rule, as blackjack's (§ 681a.3 is not at hand): 2 to 9 their face, a ten, jack, queen
    or king 10, an ace 1, or 11 where the table says so and that keeps the hand at 21 or under."""
    values = [card_value(c) for c in cards]
    if rules.ace == "1_or_11":
        return total_of_values(values)
    return sum(values), False


def winner(player_total: int, banker_total: int) -> str:
    """"player", "banker" or "tie" (§ 681a.6(c), (d)(1)): both at 21 or less, the greater wins;
    both over 21, the lower wins (c)(1)(ii), (2)(ii); equal totals tie; one at 21 or less and the
    other over 21 — which the text's (i) and (ii) both leave out — the hand at 21 or less wins (the
    ordinary reading this project takes)."""
    if player_total == banker_total:
        return "tie"
    p_over, b_over = player_total > 21, banker_total > 21
    if p_over != b_over:  # the reading: 21 or less beats over 21
        return "banker" if p_over else "player"
    if not p_over:  # (c)(1)(i), (2)(i)
        return "player" if player_total > banker_total else "banker"
    return "player" if player_total < banker_total else "banker"  # (c)(1)(ii), (2)(ii)


def _draws(cards: Sequence[str], below: int, soft17: bool, rules: Rules) -> bool:
    t, soft = total(cards, rules)
    return len(cards) < MOST_CARDS and (t < below or (soft and t == below and soft17))


def player_draws(player: Sequence[str], rules: Rules) -> bool:
    return _draws(player, rules.player_draws_below, rules.player_draws_soft, rules)


def banker_draws(banker: Sequence[str], player: Sequence[str], rules: Rules) -> bool:
    """Whether the Banker's Hand takes another card, the Player's Hand complete."""
    if rules.banker_rule == "fixed":
        return _draws(banker, rules.banker_draws_below, rules.banker_draws_soft, rules)
    p, _ = total(player, rules)
    b, _ = total(banker, rules)
    return p <= 21 and b < p and b < 21 and len(banker) < MOST_CARDS


def deal(cards: Iterator[str], rules: Rules) -> tuple[list[str], list[str]]:
    """A round dealt from the shoe's cards in order: the Player's Hand and the Banker's Hand two
    cards each, alternately (Player first, as baccarat deals), then the Player's draws, then the
    Banker's. StopIteration when the cards run out mid-round."""
    player, banker = [next(cards)], [next(cards)]
    player.append(next(cards))
    banker.append(next(cards))
    while player_draws(player, rules):
        player.append(next(cards))
    while banker_draws(banker, player, rules):
        banker.append(next(cards))
    return player, banker


def redeal(player: Sequence[str], banker: Sequence[str], rules: Rules
           ) -> tuple[list[str], list[str]] | None:
    """The hands the rules deal from these cards in the order they were dealt (the first four
    alternately, then the Player's, then the Banker's): equal to the record's when the shoe
    dealt by the rules; None when the rules want a card these hands do not have."""
    if len(player) < 2 or len(banker) < 2:
        return None
    order = [player[0], banker[0], player[1], banker[1], *player[2:], *banker[2:]]
    try:
        return deal(iter(order), rules)
    except StopIteration:
        return None


def bonus_hand(first_two: Sequence[str]) -> str | None:
    """The bonus hand of a hand's first two cards, best first, or None."""
    a, b = first_two[0], first_two[1]
    if a[0] != b[0]:
        return None
    return "suited_pair" if a[1] == b[1] else "pair"


def bonus_odds(hand: str | None, rules: Rules) -> int | None:
    """What a Bonus Wager pays, to 1, on this bonus hand; None: it loses. A suited pair is a
    pair too, where the table pays only pairs."""
    if hand is None:
        return None
    odds = rules.bonus_paytable.get(hand)
    if odds is None and hand == "suited_pair":
        odds = rules.bonus_paytable.get("pair")
    return odds


def outcome(player: Sequence[str], banker: Sequence[str], rules: Rules) -> dict[str, Any]:
    """A dealt round in the record's words: each hand's total and whether it is over 21, the
    winner, and each hand's bonus hand."""
    p, _ = total(player, rules)
    b, _ = total(banker, rules)
    return {"player_total": p, "banker_total": b, "winner": winner(p, b),
            "player_bonus": bonus_hand(player), "banker_bonus": bonus_hand(banker)}


def round_flags(o: dict[str, Any]) -> list[str]:
    """A round's flags (a record's `flags`), from its outcome: each hand's pair, suited or not."""
    out = []
    for hand in ("player", "banker"):
        bonus = o[f"{hand}_bonus"]
        if bonus:
            out.append(f"{hand}_pair")
        if bonus == "suited_pair":
            out.append(f"{hand}_suited_pair")
    return out


def round_record(shoe: int, rnd: int, player: list[str], banker: list[str], rules: Rules
                 ) -> dict[str, Any]:
    """A dealt round as the validator stores it (docs/INTERFACES.md, its contract's keys)."""
    o = outcome(player, banker, rules)
    return {"shoe": shoe, "round": rnd, "game": GAME, "player": player, "banker": banker,
            "player_total": o["player_total"], "banker_total": o["banker_total"],
            "winner": o["winner"], "flags": round_flags(o)}


def deal_shoe(tokens: Sequence[str], rules: Rules, shoe: int = 1) -> list[dict[str, Any]]:
    """Round records for a whole shoe file as the shoe deals 21 Baccarat: baccarat's burn, then
    rounds by these rules until the cut card's (`cut_card`)."""
    from sabot.game import rules as baccarat

    def deal_round(draw: Callable[[], str]) -> tuple[list[str], list[str]]:
        def cards() -> Iterator[str]:
            while True:
                yield draw()

        return deal(cards(), rules)

    return baccarat.deal_shoe(tokens, shoe, deal_round,
                              lambda s, n, p, b: round_record(s, n, p, b, rules),
                              cut_last=rules.cut_card == "last_round")

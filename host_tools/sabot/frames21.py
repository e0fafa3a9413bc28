"""21 Baccarat on the wire: the table's two rule bytes (flash `variant` after the variant byte and
the deck count, announced in every shoe_start and signed in every result: firmware/shoe/b21.py)
and the result frame's payload (firmware/shoe/frames.py result21_into), as docs/PROTOCOL.md gives
them."""

from __future__ import annotations

from typing import Any

from sabot.game import baccarat21 as b21
from sabot.game.cards import card_code

VARIANT = 2 | 128  # the variant byte: game 2 with bit 7
RULE_BELOW, RULE_SOFT, RULE_ACE_ONE, RULE_CUT_LAST = 31, 32, 64, 128
# the outcome byte beside the winner (1 Player, 2 Banker, 3 Tie)
FLAG_BITS = (("player_pair", 4), ("player_suited_pair", 8), ("banker_pair", 16),
             ("banker_suited_pair", 32))
WINNERS = {1: "player", 2: "banker", 3: "tie"}


def rule_bytes(rules: b21.Rules) -> bytes:
    """The two bytes a shoe deals `rules` by."""
    p = rules.player_draws_below | (RULE_SOFT if rules.player_draws_soft else 0) | (
        RULE_ACE_ONE if rules.ace == "1" else 0) | (
        RULE_CUT_LAST if rules.cut_card == "last_round" else 0)
    b = 0 if rules.banker_rule == "beat_player" else (
        rules.banker_draws_below | (RULE_SOFT if rules.banker_draws_soft else 0))
    return bytes((p, b))


def decode_rules(raw: bytes) -> dict[str, Any]:
    """The dealing settings two rule bytes name (those of b21.Rules the shoe deals by); a
    ValueError for bytes no table's settings make."""
    if len(raw) != 2:
        raise ValueError("rules21")
    p, b = raw[0], raw[1]
    if not 12 <= p & RULE_BELOW <= 21 or b & ~(RULE_BELOW | RULE_SOFT) or (
            b and not 12 <= b & RULE_BELOW <= 21):
        raise ValueError("rules21")
    got: dict[str, Any] = {
        "ace": "1" if p & RULE_ACE_ONE else "1_or_11",
        "player_draws_below": p & RULE_BELOW, "player_draws_soft": bool(p & RULE_SOFT),
        "banker_rule": "fixed" if b else "beat_player",
        "cut_card": b21.CUT_CARDS[1] if p & RULE_CUT_LAST else b21.CUT_CARDS[0]}
    if b:
        got.update(banker_draws_below=b & RULE_BELOW, banker_draws_soft=bool(b & RULE_SOFT))
    return got


def dealing(rules: b21.Rules) -> dict[str, Any]:
    """The settings a shoe of these rules announces, as decode_rules reads them: what the
    validator compares with the registry's."""
    return decode_rules(rule_bytes(rules))


def rules_of(settings: dict[str, Any], decks: int) -> b21.Rules:
    """The host's Rules for a round dealt by these announced settings (the rest: defaults, which
    dealing does not depend on)."""
    return b21.Rules(decks=decks, **settings)


def decode_result(shoe: int, rnd: int, body: bytes) -> dict[str, Any]:
    """counts(1: np << 4 | nb) dummy(1) rules(2) the Player's cards, the Banker's, outcome(1).
    Totals are the host's own count of the cards under the signed rules; the winner and flags are
    what the shoe signed (the validator recomputes them: audit/accounts.py)."""
    np, nb, dummy = body[0] >> 4, body[0] & 15, body[1]
    if not (2 <= np <= b21.MOST_CARDS and 2 <= nb <= b21.MOST_CARDS) or len(body) != (
            5 + np + nb) or dummy > 1:
        raise ValueError("result21")
    settings = decode_rules(body[2:4])
    if any(c >= 52 for c in body[4 : 4 + np + nb]):
        raise ValueError("result21")  # a hand holds cards the shoe read, never one it could not
    cards = [card_code(c) for c in body[4 : 4 + np + nb]]
    o = body[4 + np + nb]
    if o & ~63 or not o & 3:
        raise ValueError("result21")
    rules = rules_of(settings, 8)
    rec: dict[str, Any] = {
        "shoe": shoe, "round": rnd, "game": b21.GAME, "rules": settings,
        "player": cards[:np], "banker": cards[np:],
        "player_total": b21.total(cards[:np], rules)[0],
        "banker_total": b21.total(cards[np:], rules)[0],
        "winner": WINNERS[o & 3], "flags": [n for n, bit in FLAG_BITS if o & bit],
        "announcements": ["tie hand"] if o & 3 == 3 else []}
    if dummy:
        rec["dummy"] = True
    return rec

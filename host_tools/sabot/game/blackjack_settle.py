"""Settlement of a blackjack round's side wagers (`sabot settle` with `"game": "blackjack"`):
Hit and Run Progressive (§ 633a.7(o)(2), § 633a.13(l)), Straight Jack Progressive (§ 633a.13(m))
and House Money (§ 633a.13(n)), with the progressive meters and their reset amounts.

What the text gives, and what is configuration or this module's reading where it is silent
(docs/RULES.md, "Blackjack"):
- Hit and Run counts the dealer's cards, the busting card included (§ 633a.7(o)(2)(i)); its
  paytable is "for 1" (the payout includes the wager: `win_cents` is the payout less the wager,
  and with eight or more cards the meter's amount less the wager); several players winning the
  whole meter share it equally (§ 633a.7(o)(2)(ii)(C)), the odd cents one each to the first
  settled.
- Straight Jack and House Money pay "to 1". A straight is cards of consecutive rank (§ 633a.1
  defines a three-card one); here of any length, an ace high or low (A-2, K-A), never wrapping
  (K-A-2), as the Board's poker chapters rank an ace (e.g. § 657a.6(a)). House Money takes the
  player's original two cards. Straight Jack takes the player's hand as dealt: its first N cards
  are an N-card straight, a card that takes the hand over 21 not counting, and a split seat only
  its original two cards (the text is silent: commercial descriptions). Its six-card straight is
  A-2-3-4-5-6 (no other six-card straight stays at 21 or under); 10% of the meter with an ace
  other than spades (paid first, each of the meter as it stands then), the rest of it with the
  ace of spades, each also 200 to 1; the share of several winners as Hit and Run's.
- Wagers are settled seat by seat from the player farthest to the dealer's right (the highest
  seat number) around to the dealer's left (§ 633a.7(o)).
- § 633a.13(o)'s aggregate payout limit applies only to Royal Match 21 and King's Bounty wagers,
  neither of which is offered here: none of these payouts is limited by it."""

from __future__ import annotations

from typing import Any

from sabot.errors import SabotError
from sabot.game import blackjack
from sabot.game.cards import parse_card

SIDE_WAGERS = ("hit_and_run", "straight_jack", "house_money")
SEATS = 7
HIT_AND_RUN_MIN_RESET = 100_000  # § 633a.13(l)(2): at least $1,000
STRAIGHT_JACK_MIN_RESET = 500_000  # § 633a.13(m)(2): at least $5,000
# § 633a.13(l)(1), "for 1", by the dealer's cards; "8+" is the meter's
HIT_AND_RUN_FOR_ONE = {"blackjack": 4, 5: 8, 6: 25, 7: 200}
# § 633a.13(m)(1), "to 1", by the straight's length
STRAIGHT_JACK_TO_ONE = {2: 3, 3: 15, 4: 50, 5: 200, 6: 200}
AGGREGATE_LIMIT = ("633a.13(o) limits only Royal Match 21 and King's Bounty payouts: none of "
                   "these wagers")
_RANK = {r: i + 1 for i, r in enumerate("A23456789TJQK")}


def is_straight(cards: list[str]) -> bool:
    """Cards of consecutive rank, each rank once, an ace low (A-2-3) or high (Q-K-A), never
    both (K-A-2 is not)."""
    ranks = [_RANK[c[0]] for c in cards]
    if len(set(ranks)) != len(ranks):
        return False
    for ace in (1, 14):
        r = [ace if x == 1 else x for x in ranks]
        if max(r) - min(r) == len(r) - 1:
            return True
    return False


def house_money_hand(first_two: list[str], decks: int) -> tuple[str, int] | None:
    """§ 633a.13(n): the best of the player's first two cards' hands, and its odds to 1."""
    a, b = first_two
    suited = a[1] == b[1]
    if suited and {a[0], b[0]} == {"A", "K"}:
        return "ace_king_suited", 9
    if suited and is_straight(first_two):
        return "two_card_straight_flush", 5 if decks == 1 else 4
    if a[0] == b[0]:
        return "pair", 3
    if is_straight(first_two):
        return "two_card_straight", 1
    return None


def straight_length(cards: list[str], split: bool) -> int:
    """How many of the hand's first cards make its straight (0: none): the longest N whose
    first N cards are an N-card straight without taking the hand over 21; a split hand only
    its first two."""
    best = 0
    for n in range(2, (2 if split else min(len(cards), 6)) + 1):
        if not is_straight(cards[:n]) or blackjack.hand_total(cards[:n])[0] > 21:
            break
        best = n
    return best


class BlackjackTable:
    def __init__(self, cfg: dict[str, Any]) -> None:
        self.decks = _int(cfg.get("decks", 6), "table.decks", 1, 8)
        self.dealer = cfg.get("dealer", "s17")
        if self.dealer not in blackjack.DEALER_RULES:
            raise SabotError(f"table.dealer must be one of {', '.join(blackjack.DEALER_RULES)} "
                             "(the Rules Submission's: stand on all 17s, or draw to a soft 17)")
        side = cfg.get("side_wagers", [])
        if not isinstance(side, list) or not all(isinstance(w, str) for w in side):
            raise SabotError('table.side_wagers must be a list of wager names, e.g. '
                             '["hit_and_run"]')
        for w in side:
            if w not in SIDE_WAGERS:
                raise SabotError(f"table.side_wagers: {w!r} is no blackjack wager settled here "
                                 f"(the known ones are {', '.join(SIDE_WAGERS)})")
        self.side_wagers = list(side)
        hole = cfg.get("hole_card", True)
        if not isinstance(hole, bool):
            raise SabotError("table.hole_card must be true or false")
        self.hole_card = hole
        fixed = cfg.get("hit_and_run_wager_cents")
        self.hit_and_run_wager = None if fixed is None else _int(
            fixed, "table.hit_and_run_wager_cents", 1)
        self.reset = {
            "hit_and_run": _int(cfg.get("hit_and_run_reset_cents", HIT_AND_RUN_MIN_RESET),
                                "table.hit_and_run_reset_cents", HIT_AND_RUN_MIN_RESET),
            "straight_jack": _int(cfg.get("straight_jack_reset_cents", STRAIGHT_JACK_MIN_RESET),
                                  "table.straight_jack_reset_cents", STRAIGHT_JACK_MIN_RESET),
        }


def _int(v: object, name: str, low: int, high: int | None = None) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or v < low or (high is not None
                                                                    and v > high):
        span = f"{low} to {high}" if high is not None else f"at least {low}"
        raise SabotError(f"{name} must be a whole number, {span}")
    return v


def _cards(v: object, where: str) -> list[str]:
    if not isinstance(v, list) or not all(isinstance(c, str) for c in v):
        raise SabotError(f"{where} must be a list of cards")
    return [parse_card(c) for c in v]


Seat = tuple[list[str], list[str], bool]  # (its hand's cards, its original two cards, split)


def _round(table: BlackjackTable, rnd: object) -> tuple[list[str], dict[int, Seat]]:
    """The dealer's completed hand, and each seat's: its (first) hand's cards, its original two
    cards, and whether it split. SabotError for a round the dealing cannot make: hands of a seat
    that no split makes, players drawing after a dealer's Blackjack seen in the hole, more copies
    of a card than the decks hold."""
    if not isinstance(rnd, dict):
        raise SabotError("round: expected a blackjack round record with dealer and hands")
    if "events" in rnd:
        rnd = _followed(table, rnd)
    elif "player" in rnd or "banker" in rnd:
        raise SabotError("round: a baccarat round, at a blackjack table: settle it at its own "
                         "table")
    dealer = _cards(rnd.get("dealer"), "round.dealer")
    try:
        done = blackjack.dealer_hand(dealer, table.dealer)
    except SabotError:
        done = 0
    if done != len(dealer):
        raise SabotError(f"round.dealer {' '.join(dealer)} is not the dealer's completed hand "
                         f"under {table.dealer}")
    seen: dict[str, int] = {}
    for c in dealer:
        seen[c] = seen.get(c, 0) + 1
    raw = rnd.get("hands", [])
    if not isinstance(raw, list) or not all(isinstance(h, dict) for h in raw):
        raise SabotError("round.hands must be a list of {seat, cards[, split]}")
    by_seat: dict[int, list[tuple[list[str], bool]]] = {}
    for h in raw:
        seat = _int(h.get("seat"), "round.hands[].seat", 1, SEATS)
        cards = _cards(h.get("cards"), f"round.hands (seat {seat}) cards")
        split = h.get("split", False)
        if not isinstance(split, bool) or len(cards) < (1 if split else 2):
            raise SabotError(f"round.hands: seat {seat}'s hand has fewer than two cards, or a "
                             "split that is not true or false")
        by_seat.setdefault(seat, []).append((cards, split))
        for c in cards:
            seen[c] = seen.get(c, 0) + 1
    over = sorted(c for c, n in seen.items() if n > table.decks)
    if over:
        raise SabotError(f"the round holds {seen[over[0]]} copies of {over[0]}, but the table's "
                         f"{table.decks} deck{'s' if table.decks > 1 else ''} hold only "
                         f"{table.decks}")
    dealer_blackjack = blackjack.is_blackjack(dealer[:2]) and table.hole_card
    seats: dict[int, Seat] = {}
    for seat, hands in by_seat.items():
        split = len(hands) > 1
        if any(s != split for _, s in hands) or (split and blackjack.card_value(
                hands[0][0][0]) != blackjack.card_value(hands[1][0][0])):
            raise SabotError(f"round.hands: seat {seat}'s hands are not what a split of a pair "
                             "makes (one hand, or two or more marked split whose first cards "
                             "are a pair)")
        if dealer_blackjack and (split or len(hands[0][0]) != 2):
            raise SabotError(f"round.hands: seat {seat} drew after the dealer's Blackjack, "
                             "which ends the round with the hole card")
        initial = [hands[0][0][0], hands[1][0][0]] if split else hands[0][0][:2]
        seats[seat] = (hands[0][0], initial, split)
    return dealer, seats


def _followed(table: BlackjackTable, rec: dict[str, Any]) -> dict[str, Any]:
    """A shoe's blackjack_result record (as `sabot history --json` prints it) as the round it
    deals: followed from its seats and events by the host's rules, under the table's."""
    seats, events = rec.get("seats"), rec.get("events")
    if (not isinstance(seats, list) or not seats or not all(
            isinstance(x, int) and not isinstance(x, bool) and 1 <= x <= SEATS for x in seats)
            or not isinstance(events, list) or not all(
                isinstance(e, (list, tuple)) and len(e) == 2 and e[0] in ("card", "press")
                and isinstance(e[1], str) for e in events)):
        raise SabotError("round: a blackjack_result record needs seats (1-7) and events "
                         "([\"card\", \"AS\"] or [\"press\", \"next\"])")
    if rec.get("voided"):
        raise SabotError("round: a voided round settles no wager (its wagers are returned)")
    rule = rec.get("dealer_rule", table.dealer)
    hole = rec.get("hole_card", table.hole_card)
    if rule not in blackjack.DEALER_RULES or not isinstance(hole, bool):
        raise SabotError("round: dealer_rule is s17 or h17, hole_card true or false")
    if (rule, hole) != (table.dealer, table.hole_card):
        raise SabotError(f"round: dealt under {rule}{'' if hole else ', no hole card'}; the "
                         f"table is {table.dealer}{'' if table.hole_card else ', no hole card'}")
    for kind, what in events:
        if kind == "card":
            parse_card(what)
        elif what not in blackjack.PRESSES:
            raise SabotError(f"round: a press is one of {', '.join(blackjack.PRESSES)}, not "
                             f"{what!r}")
    rec = dict(rec, seats=seats, events=[tuple(e) for e in events], dealer_rule=rule,
               hole_card=hole)
    if "placed" in rec:  # the shoe's signed word on each card's hand: the rules' must agree
        _, why = blackjack.check_result(rec)
        if why:
            raise SabotError(f"round: the shoe's hands are not the rules' ({why}): a round the "
                             "validator raised rules_mismatch for settles nothing here")
    got = blackjack.follow_round(seats, rec["events"], rule, hole)
    if not got["complete"] or any(o is None or o is False for o in got["owner"]):
        raise SabotError("round: its events do not make a complete round under the table's "
                         "rules")
    return blackjack.round_of(rec)


def _wagers(table: BlackjackTable, items: object, hands: dict[int, Any],
            seated: bool = False) -> list[dict[str, Any]]:
    """The wagers checked: each of a side wager the table offers, at a seat with a hand (Hit and
    Run, which pays on the dealer's cards, anywhere unless `seated`: the round a shoe dealt names
    its seats), one of a kind a seat."""
    if not isinstance(items, list) or not all(isinstance(w, dict) for w in items):
        raise SabotError("wagers must be a list of {seat, wager, amount_cents}")
    for w in items:
        _int(w.get("seat"), "wagers[].seat", 1, SEATS)
        _int(w.get("amount_cents"), "wagers[].amount_cents", 1)
        if w.get("wager") not in table.side_wagers:
            main = "" if w.get("wager") in SIDE_WAGERS else (
                "; only a blackjack table's side wagers are settled here (the main wager's odds, "
                "§ 633a.13(b), were not in the text found)")
            raise SabotError(f"seat {w.get('seat')}: this table does not offer "
                             f"{w.get('wager')!r} (it offers "
                             f"{', '.join(table.side_wagers) or 'no side wager'}){main}")
        if (w["wager"] != "hit_and_run" or seated) and w["seat"] not in hands:
            raise SabotError(f"seat {w['seat']}: a {w['wager']} wager, but the round has no hand "
                             "at that seat")
        fixed = table.hit_and_run_wager
        if w["wager"] == "hit_and_run" and fixed is not None and w["amount_cents"] != fixed:
            raise SabotError(f"seat {w['seat']}: the table's Hit and Run wager is {fixed} cents, "
                             f"not {w['amount_cents']}")
    pairs = [(w["seat"], w["wager"]) for w in items]
    twice = next((p for p in pairs if pairs.count(p) > 1), None)
    if twice:  # (a meter is shared by players: one wager a seat)
        raise SabotError(f"seat {twice[0]} has two {twice[1]} wagers: one a seat")
    return items


def _meters(table: BlackjackTable, meters: object, items: list[dict[str, Any]]) -> dict[str, int]:
    if not isinstance(meters, dict):
        raise SabotError('meters must be an object: {"hit_and_run": cents, ...}')
    progressive = {w["wager"] for w in items} & {"hit_and_run", "straight_jack"}
    # Hit and Run's meter only grows from its reset amount; Straight Jack's tenths take it lower
    return {name: _int(meters.get(name), f"meters.{name}",
                       table.reset[name] if name == "hit_and_run" else 1)
            for name in sorted(progressive)}


def _hand(table: BlackjackTable, w: dict[str, Any], dealer: list[str],
          hands: dict[int, Seat]) -> tuple[str, int, str | None]:
    """What wager `w` won before any meter: (its hand's name, the win in cents, -1 for a loss;
    the meter it also takes a part of, or None)."""
    amount = w["amount_cents"]
    if w["wager"] == "hit_and_run":
        n = len(dealer)
        if blackjack.is_blackjack(dealer[:2]):
            return "blackjack", amount * (HIT_AND_RUN_FOR_ONE["blackjack"] - 1), None
        if n >= 8:
            return f"{n}_cards", 0, "hit_and_run"
        if n in HIT_AND_RUN_FOR_ONE:
            return f"{n}_cards", amount * (HIT_AND_RUN_FOR_ONE[n] - 1), None
        return f"{n}_cards", -1, None
    cards, initial, split = hands[w["seat"]]
    if w["wager"] == "straight_jack":
        n = straight_length(initial if split else cards, split)
        if n == 6:
            spade = next(c for c in cards[:6] if c[0] == "A")[1] == "S"
            return ("six_card_straight_ace_of_spades" if spade else "six_card_straight",
                    amount * 200, "straight_jack")
        return (f"{n}_card_straight", amount * STRAIGHT_JACK_TO_ONE[n], None) if n else (
            "no_straight", -1, None)
    best = house_money_hand(initial, table.decks)
    return (best[0], amount * best[1], None) if best else ("nothing", -1, None)


def settle(request: dict[str, Any]) -> dict[str, Any]:
    """The `sabot settle` answer for a blackjack table's request: {"settlements", "meters",
    "aggregate_limit"}. Everything is checked before anything is settled."""
    table = BlackjackTable(request.get("table", {}))
    dealer, hands = _round(table, request.get("round"))
    # a shoe's round names its seats: a wager at a seat not in it is none of this round's
    dealt = isinstance(request.get("round"), dict) and "events" in request["round"]
    items = _wagers(table, request.get("wagers", []), hands, dealt)
    meter = _meters(table, request.get("meters", {}), items)
    order = sorted(range(len(items)), key=lambda i: -items[i]["seat"])  # § 633a.7(o)
    plan = {i: _hand(table, items[i], dealer, hands) for i in order}
    # who wins a whole meter: the Hit and Run's with eight cards or more, the Straight Jack's
    # with the ace of spades
    shares = {name: [i for i in order if plan[i][2] == name
                     and (name == "hit_and_run" or plan[i][0].endswith("spades"))]
              for name in ("hit_and_run", "straight_jack")}
    # Straight Jack's tenths first, each 10% of the meter as it stands when paid (to the cent
    # below), in settlement order; then each whole meter shared equally by its winners, and
    # reset: never more than the meter paid in a round
    after = dict(meter)
    tenth: dict[int, int] = {}
    for i in order:
        if plan[i][2] == "straight_jack" and i not in shares["straight_jack"]:
            tenth[i] = after["straight_jack"] // 10
            after["straight_jack"] -= tenth[i]
    whole = {name: _split(after.get(name, 0), len(shares[name])) for name in shares}
    out: dict[int, dict[str, Any]] = {}
    for i in order:
        w = items[i]
        hand, win, from_meter = plan[i]
        paid = None  # Hit and Run's payout, the wager taken ("for 1")
        if from_meter is not None and i in shares[from_meter]:
            won = whole[from_meter][shares[from_meter].index(i)]
            if from_meter == "hit_and_run":
                paid, win = won, won - w["amount_cents"]
            else:
                win += won
        elif i in tenth:
            win += tenth[i]
        if w["wager"] == "hit_and_run" and paid is None:
            paid = win + w["amount_cents"] if win >= 0 else 0
        won_it = win >= 0 or (paid is not None and paid > 0)
        entry: dict[str, Any] = {"seat": w["seat"], "wager": w["wager"],
                                 "result": "win" if won_it else "lose",
                                 "win_cents": max(win, 0), "hand": hand}
        if paid is not None:
            entry["payout_cents"] = paid
        # § 633a.7(o)(2)(ii)(B), (C): a floorperson verifies 200 for 1 or more; a whole meter is
        # not paid from the table inventory container (the cards stay until it is documented)
        if w["wager"] == "hit_and_run" and won_it and (hand == "7_cards" or from_meter):
            entry["verify"] = "floorperson"
        if from_meter is not None and i in shares[from_meter]:
            entry["pay_from"] = "not_table_inventory"
        out[i] = entry
    for name in shares:
        if shares[name]:
            after[name] = table.reset[name]  # the whole meter paid: it starts again
    return {"settlements": [out[i] for i in order], "meters": after,
            "aggregate_limit": AGGREGATE_LIMIT}


def _split(total: int, n: int) -> list[int]:
    """`total` cents shared equally by n winners, the odd cents one each to the first."""
    if n == 0:
        return []
    each, odd = divmod(total, n)
    return [each + (1 if k < odd else 0) for k in range(n)]

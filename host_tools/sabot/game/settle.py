"""Settlement of a round's wagers (`sabot settle`), as the regulation says: 627a.11 / 631a.12
(order of collection and payment), 627a.12 / 631a.13 (odds, vigorish), 627a.7 (Dragon Bonus,
Dragon 7, Panda 8, House Money), 631a.9(e) (House Money settled before any third card,
let-it-ride), 631c.5 (commission-free).

Wager outcomes come from `wagers.resolve`, the same definition the analyzer uses. Money is integer
cents. Everything is checked before anything is settled: a refusal settles nothing."""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any, cast

from sabot.errors import SabotError
from sabot.game import rules, wagers
from sabot.game.cards import parse_card

GAMES = {"minibaccarat": 9, "midibaccarat": 9, "baccarat": 14}  # most seats (627a.2(a), 631a.2(a))
MAIN_WAGERS = ("banker", "player", "tie")
SIDE_WAGERS = (
    "dragon7", "panda8", "lucky_six", "player_pair", "banker_pair", "house_money",
    "dragon_bonus_player", "dragon_bonus_banker",
)
VIGORISH_STEP = 25  # 627a.12(c): rounded up to 25 cents or the next multiple of 25 cents


class Table:
    def __init__(self, cfg: object) -> None:
        if not isinstance(cfg, dict):
            raise SabotError("table: expected an object")
        self.game: str = cfg.get("game", "baccarat")
        if self.game not in GAMES:
            raise SabotError(f"table.game must be one of {', '.join(GAMES)} (got {self.game!r})")
        self.seats = GAMES[self.game]
        self.ez = _flag(cfg, "ez")
        self.commission_free = _flag(cfg, "commission_free")
        if self.ez and self.commission_free:
            raise SabotError(
                "table: EZ Baccarat and commission-free Baccarat are different games; pick one"
            )
        self.tie_odds: int = cfg.get("tie_odds", 8)
        if (
            not isinstance(self.tie_odds, int)
            or isinstance(self.tie_odds, bool)
            or self.tie_odds < 8
        ):
            raise SabotError("table.tie_odds must be a whole number of at least 8 (627a.12(b))")
        if self.commission_free and self.tie_odds != 8:
            raise SabotError("table.tie_odds: a commission-free table pays a tie at 8 to 1 "
                             "(631c.5(j))")
        side = cfg.get("side_wagers", [])
        if not isinstance(side, list) or not all(isinstance(w, str) for w in side):
            raise SabotError('table.side_wagers must be a list of wager names, e.g. '
                             '["house_money"]')
        self.side_wagers: list[str] = list(side)
        for w in self.side_wagers:
            if w not in SIDE_WAGERS:
                raise SabotError(f"table.side_wagers: unknown wager {w!r}")
        if ("dragon7" in self.side_wagers or "panda8" in self.side_wagers) and not self.ez:
            raise SabotError("table: Dragon 7 and Panda 8 are offered only on EZ Baccarat tables")
        if "lucky_six" in self.side_wagers and not self.commission_free:
            raise SabotError("table: Lucky Six is offered only on commission-free tables (631c.5)")
        self.paytable: str | None = cfg.get("dragon_bonus_paytable")
        offers_dragon_bonus = any(w.startswith("dragon_bonus") for w in self.side_wagers)
        if offers_dragon_bonus and self.paytable not in ("A", "B", "C"):
            raise SabotError(
                "table.dragon_bonus_paytable must be A, B or C when Dragon Bonus is offered"
            )
        self.vigorish: str = cfg.get("vigorish", "at_payout")
        if self.vigorish not in ("at_payout", "deferred"):
            raise SabotError("table.vigorish must be at_payout or deferred")

    def offers(self, wager: str) -> bool:
        return wager in MAIN_WAGERS or wager in self.side_wagers

    def rule_name(self, wager: str) -> str:
        """The analyzer's name for a wager under this table's rules."""
        if wager == "banker":
            if self.ez:
                return "ez_banker"
            return "nocomm_banker" if self.commission_free else "banker"
        if wager.startswith("dragon_bonus_"):
            assert self.paytable is not None  # __init__ refuses Dragon Bonus without a paytable
            return f"dragon_bonus_{self.paytable.lower()}_{wager.rsplit('_', 1)[1]}"
        return wager


# What a shoe registry holds of a table (registry.ShoeEntry.table_config); the rest (vigorish)
# is the request's.
REGISTERED = ("game", "ez", "commission_free", "tie_odds", "side_wagers",
              "dragon_bonus_paytable")
BLACKJACK_REGISTERED = ("game", "decks", "dealer", "hole_card", "side_wagers",
                        "hit_and_run_reset_cents", "straight_jack_reset_cents")


def _said(value: Any) -> str:
    """A request's or registry's value as an error line quotes it: a list as its items, in JSON
    words, cut short."""
    if isinstance(value, list):
        text = "[" + ", ".join(_said(v) for v in value) + "]" if value else "none"
    else:
        text = json.dumps(value)
    return text if len(text) <= 60 else text[:60] + "..."


def registered_table(request_table: object, registered: dict[str, Any], name: str
                     ) -> dict[str, Any]:
    """The table a request is settled with at a registered table: the registry's configuration
    (`registered`), and what the registry does not hold from the request. A field the request
    names otherwise than the registry is refused (SabotError): the request was written for
    another table, and settling it by either would pay someone wrongly."""
    if request_table is None:
        request_table = {}
    if not isinstance(request_table, dict):
        raise SabotError("table: expected an object")
    fields = (BLACKJACK_REGISTERED if registered.get("game") == "blackjack" else registered
              if registered.get("game") == "21-baccarat" else REGISTERED)  # its every setting
    for key, said in request_table.items():
        if key not in fields:
            continue
        want = registered.get(key)
        if key == "side_wagers" and isinstance(said, list) and all(
                isinstance(w, str) for w in said):
            same = sorted(said) == sorted(want or [])
        else:
            same = said == want and type(said) is type(want)
        if not same:
            shown = _said(said)
            raise SabotError(f"table.{key} {shown} disagrees with table {name} in the shoe "
                             f"registry ({_said(want)}): drop it from the request or settle at "
                             "the table it names")
    return dict(request_table, **registered)


def vigorish(win_cents: int) -> int:
    """5% of the amount won, rounded up to the next multiple of 25 cents (627a.12(c))."""
    five_percent = Fraction(win_cents * 5, 100)
    steps = -(-five_percent // VIGORISH_STEP)
    return int(steps * VIGORISH_STEP)


def _summary(round_rec: object) -> tuple[wagers.Summary, bool]:
    """A wagers.Summary from a round record, after checking the record against the host's own
    rules."""
    if not isinstance(round_rec, dict):
        raise SabotError("round: expected a round record object")
    if "events" in round_rec or "dealer" in round_rec:
        raise SabotError("round: a blackjack round, at a baccarat table: settle it at a "
                         "blackjack table (table.game \"blackjack\", or --table of one)")
    try:
        player = [parse_card(c) for c in round_rec["player"]]
        banker = [parse_card(c) for c in round_rec["banker"]]
    except (KeyError, TypeError):
        raise SabotError("round: needs player and banker card lists") from None
    initial = round_rec.get("event") == "initial_cards"
    if initial:
        if len(player) != 2 or len(banker) != 2:
            raise SabotError("round: an initial_cards event has two cards per hand")
    else:
        if not (2 <= len(player) <= 3 and 2 <= len(banker) <= 3):
            raise SabotError("round: each hand has two or three cards")
        dealt = rules.redeal(player, banker)
        if dealt is None:
            raise SabotError("round: the third-card rule wants a card these hands do not have")
        if dealt != (player, banker):
            wanted = f"player {' '.join(dealt[0])}, banker {' '.join(dealt[1])}"
            raise SabotError(
                f"round: not a round the third-card rule deals; from these cards it deals {wanted}"
            )
        want = rules.round_outcome(player, banker)
        for k in ("player_total", "banker_total", "winner"):
            if k in round_rec and round_rec[k] != want[k]:
                raise SabotError(
                    f"round: {k} {_said(round_rec[k])} disagrees with the cards ({_said(want[k])})"
                )
    s = wagers.Summary(
        rules.point_count(player),
        rules.point_count(banker),
        len(player),
        len(banker),
        player[0][0] == player[1][0],
        banker[0][0] == banker[1][0],
    )
    return s, initial


def _check_wagers(table: Table, items: object, initial: bool) -> dict[tuple[int, str], int]:
    if not isinstance(items, list):
        raise SabotError("wagers: expected a list")
    main_by_seat: dict[tuple[int, str], int] = {}
    for i, w in enumerate(items):
        where = f"wagers[{i}]"
        if not isinstance(w, dict):
            raise SabotError(f"{where}: expected an object")
        seat, name, amount = w.get("seat"), w.get("wager"), w.get("amount_cents")
        if not isinstance(seat, int) or isinstance(seat, bool) or not 1 <= seat <= table.seats:
            raise SabotError(
                f"{where}: seat {seat!r} does not exist at a {table.game} table (1-{table.seats})"
            )
        if name not in MAIN_WAGERS + SIDE_WAGERS:
            raise SabotError(f"{where}: unknown wager {name!r}")
        if not table.offers(name):
            raise SabotError(f"{where}: this table does not offer {name}")
        if not isinstance(amount, int) or isinstance(amount, bool) or amount <= 0:
            raise SabotError(
                f"{where}: amount_cents must be a positive whole number of cents (got {amount!r})"
            )
        if w.get("placed_after_cards", 0):
            raise SabotError(
                f"{where}: placed after no more bets (the round's first card was out)"
            )
        if initial and name not in wagers.PAIR_WAGERS:
            raise SabotError(
                f"{where}: {name} is settled when the round is complete, not at the initial cards"
            )
        if name in ("banker", "player"):
            main_by_seat[(seat, name)] = i
    for i, w in enumerate(items):
        ride = w.get("let_it_ride")
        if ride:
            if w["wager"] != "house_money":
                raise SabotError(
                    f"wagers[{i}]: let_it_ride applies only to House Money (631a.9(e))"
                )
            if ride not in ("banker", "player") or (w["seat"], ride) not in main_by_seat:
                raise SabotError(
                    f"wagers[{i}]: let_it_ride must name the seat's own banker or player wager"
                )
    return main_by_seat


def settle(request: object) -> dict[str, Any]:
    """The docs/INTERFACES.md `sabot settle` answer for one request object."""
    if not isinstance(request, dict):
        raise SabotError("expected a JSON object with table, round and wagers")
    cfg = request.get("table", {})
    if isinstance(cfg, dict) and cfg.get("game") == "blackjack":
        from sabot.game.blackjack_settle import settle as settle_blackjack

        return settle_blackjack(request)
    if isinstance(cfg, dict) and cfg.get("game") == "21-baccarat":
        from sabot.game.baccarat21_settle import settle as settle_21

        return settle_21(request)
    table = Table(cfg)
    summary, initial = _summary(request.get("round"))
    items = request.get("wagers", [])
    main_by_seat = _check_wagers(table, items, initial)
    markers = _markers(request.get("markers"), table.seats)
    collect_markers = request.get("collect_markers", [])
    if collect_markers != "all" and not (
            isinstance(collect_markers, list)
            and all(isinstance(x, int) and not isinstance(x, bool) for x in collect_markers)):
        raise SabotError('collect_markers must be "all" or a list of seat numbers')

    amounts = [w["amount_cents"] for w in items]
    # Every slot is filled below: `order` is a permutation of the indices.
    results = cast(list[dict[str, Any]], [None] * len(items))
    # House Money settles first, before any third card (631a.9(e));
    # a let-it-ride payout joins the wager.
    order = sorted(range(len(items)), key=lambda i: items[i]["wager"] != "house_money")
    for i in order:
        w = items[i]
        result, odds, vig_rate = wagers.resolve(table.rule_name(w["wager"]), summary)
        if w["wager"] == "tie" and result == wagers.WIN:
            odds = table.tie_odds
        # int() of the Fraction: a 1:2 payout pays down to the cent.
        win = int(amounts[i] * Fraction(odds)) if result == wagers.WIN else 0
        vig = vigorish(win) if vig_rate else 0
        entry: dict[str, Any] = {
            "seat": w["seat"],
            "wager": w["wager"],
            "result": result,
            "win_cents": win,
            "vigorish_cents": vig,
        }
        if amounts[i] != w["amount_cents"]:
            entry["amount_cents"] = amounts[i]  # includes a House Money payout let ride
        if w.get("let_it_ride") and win:
            j = main_by_seat[(w["seat"], w["let_it_ride"])]
            amounts[j] += win
            entry["let_ride_on"] = w["let_it_ride"]
        results[i] = entry
    # Losing wagers first, then seat by seat from the highest number down (627a.11(b), 631a.12(b)).
    losing = [e for e in results if e["result"] == "lose"]
    others = sorted((e for e in results if e["result"] != "lose"), key=lambda e: -e["seat"])
    out: dict[str, Any] = {"settlements": losing + others}
    if table.vigorish == "deferred":
        for e in results:
            if e["vigorish_cents"]:
                markers[e["seat"]] = markers.get(e["seat"], 0) + e["vigorish_cents"]
        collect = collect_markers
        if collect == "all":  # before a new shoe (627a.12(d)(2)(i))
            collect = list(markers)
        collected = {str(s): markers.pop(s) for s in list(collect) if s in markers}
        out["markers"] = {str(s): v for s, v in sorted(markers.items()) if v}
        out["markers_total_cents"] = sum(markers.values())
        if collected:
            out["collected"] = collected
    return out


def _flag(cfg: dict[str, Any], name: str) -> bool:
    value = cfg.get(name, False)
    if not isinstance(value, bool):
        raise SabotError(f"table.{name} must be true or false (got {value!r})")
    return value


def _markers(raw: object, seats: int) -> dict[int, int]:
    """Deferred vigorish carried over: {"seat": cents owed}, seats as strings, cents whole and
    not negative."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise SabotError('markers must be an object of seat: cents owed, e.g. {"3": 25}')
    out = {}
    for k, v in raw.items():
        if not (isinstance(k, str) and k.isdigit() and 1 <= int(k) <= seats):
            raise SabotError(f"markers: {k!r} is not a seat of this game (1 to {seats})")
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise SabotError(f"markers: seat {k} owes {v!r}: expected whole cents, not negative")
        out[int(k)] = v
    return out

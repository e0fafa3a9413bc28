"""The host's accounting of a shoe's content: every card that left the shoe, as its frames say,
and every round dealt again with the host's own rules. It holds no store and verifies no frame:
the Validator hands it each authentic record in sequence, and `sabot audit verify` hands it the
stored frames again to derive the same alarms.

Where the content disagrees with the host — a round the rules deal otherwise, a card beyond the
decks, a missing burn, a configuration other than the registry's, an inventory at shoe_end other
than the cards counted — it raises an alarm through the function it was given."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sabot import frames21
from sabot import protocol as pr
from sabot.game import baccarat21 as b21
from sabot.game import blackjack, rules
from sabot.game.cards import BURN_VALUES
from sabot.registry import ShoeEntry

AlarmFn = Callable[..., None]  # alarm(kind, detail, shoe=..., round=...)


def expected_announcements(rec: dict[str, Any], variant: dict[str, Any]) -> list[str]:
    """627a.11(a) / 631a.12(a): "tie hand"; "Dragon 7" / "Panda 8" on EZ tables; 631c.5(e): "Lucky
    Six"."""
    out = ["tie hand"] if rec["winner"] == "tie" else []
    if variant.get("ez"):
        out += [n for f, n in (("dragon7", "Dragon 7"), ("panda8", "Panda 8"))
                if f in rec["flags"]]
    if variant.get("commission_free") and "lucky_six" in rec["flags"]:
        out.append("Lucky Six")
    return out


def _listed(items: Sequence[str | None]) -> str:
    """Cards, flags or announcements in an alarm's detail: "AS, 2H" ("--" a card not read)."""
    return ", ".join("--" if i is None else i for i in items) or "none"


def new_shoe_accounts(shoe: int | None, partial: bool = False) -> dict[str, Any]:
    """The host's accounting of one shoe: every card that left it, as the shoe's frames say."""
    return {"shoe": shoe, "round": 0, "counts": {}, "unknown": 0, "initial": None, "burned": False,
            "held": None, "dummy": None, "ended": False,
            "partial": partial}  # partial: met mid-shoe, its earlier cards were never seen here


class ShoeAccounts:
    """One shoe device's accounting. `state["inventory"]` is the current shoe's accounts
    (new_shoe_accounts' shape, {} before any record): the Validator keeps it in the link state it
    stores after every read, so a restarted validator goes on from the stored accounts."""

    def __init__(self, config: ShoeEntry, state: dict[str, Any], alarm: AlarmFn) -> None:
        self.config = config
        self.state = state
        self.alarm = alarm

    def mark_partial(self) -> None:
        """Frames of this shoe were never seen here: its accounting cannot be complete."""
        if not self.state["inventory"]:
            self.state["inventory"] = new_shoe_accounts(None, partial=True)
        self.state["inventory"]["partial"] = True

    def account(self, kind: str, rec: dict[str, Any]) -> None:
        """One authentic record, in sequence: count its cards and check it."""
        if kind == "maintenance":  # no card: what runs or signs changed (or a try failed)
            self._on_maintenance(rec)
            return
        inv = self.state["inventory"]
        if kind == "shoe_start":
            if inv and inv.get("shoe") is not None and not inv.get("ended"):
                self.alarm("missing_shoe_end", f"shoe {inv['shoe']} never ended; shoe "
                           f"{rec['shoe']} starts", shoe=inv["shoe"])
            self.state["inventory"] = inv = new_shoe_accounts(rec["shoe"])
            self._check_config(rec)
        elif not inv:
            self.state["inventory"] = inv = new_shoe_accounts(rec.get("shoe"), partial=True)
        elif inv["shoe"] is None:
            inv["shoe"] = rec.get("shoe")
        if inv.get("ended") and kind in ("burn", "initial_cards", "result", "blackjack_result"):
            self.alarm("round_after_shoe_end", f"a {kind} after shoe {inv['shoe']} ended, with "
                       "no new shoe started", shoe=inv["shoe"])
        handler = getattr(self, f"_on_{kind}", None)
        if handler is not None:
            handler(rec, inv)

    def _on_maintenance(self, rec: dict[str, Any]) -> None:
        """Every change of the shoe's code or keys is an alarm for the pit to see, and so is an
        update the shoe refused (someone tried to install what the release key did not sign, or
        an update broke off). They belong to the shoe device, not to the shoe of cards dealt
        (shoe None): updates come between shoes, and the dashboard keeps them in view."""
        what, by = rec["what"], rec["by"] or "nobody named"
        if what == "update_applied":
            self.alarm("firmware_update", f"the shoe switched to firmware version "
                       f"{rec['version']}, MANIFEST {rec['manifest'][:16]}... (asked by {by}, "
                       f"command {rec['counter']})", shoe=None)
        elif what == "update_refused":
            version = f" of version {rec['version']}" if rec["version"] else ""
            self.alarm("update_refused", f"the shoe refused an update{version}: "
                       f"{rec['reason']} (asked by {by}, command {rec['counter']})", shoe=None)
        elif what == "rekey":
            self.alarm("rekey", f"the shoe's element made result key version {rec['version']} "
                       f"(asked by {by}, command {rec['counter']})", shoe=None)

    def _check_config(self, rec: dict[str, Any]) -> None:
        cfg = self.config
        said = dict(rec["variant"], decks=rec["decks"])
        want = dict(cfg.variant, decks=cfg.decks)
        if said != want:  # (a game's settings differ in their keys too: 21 Baccarat's rules)
            diff = ", ".join(f"{k} {said.get(k)!r} (registry: {want.get(k)!r})"
                             for k in [*want, *(k for k in said if k not in want)]
                             if said.get(k) != want.get(k))
            self.alarm("config_mismatch", f"the shoe announces {diff}", shoe=rec["shoe"])

    def _on_burn(self, rec: dict[str, Any], inv: dict[str, Any]) -> None:
        cards = rec["cards"]
        first = cards[0] if cards else None
        held = inv.get("held") or {}
        cut_short = held.get("kind") == "cards_exhausted"  # the shoe ran out during the burn
        burn = 0 if first is None or self.config.game == "blackjack" else BURN_VALUES[first[0]]
        if (first is None or "CUT" in cards or len(cards) > 1 + burn
                or (len(cards) < 1 + burn and not cut_short)):
            self.alarm("burn_mismatch", f"burn {_listed(cards)} does not follow the burn "
                       "procedure",
                       shoe=rec["shoe"])
        self._count([c for c in cards if c != "CUT"], inv, rec)  # the cut card is no card
        inv["burned"] = True

    def _on_irregularity(self, rec: dict[str, Any], inv: dict[str, Any]) -> None:
        kind = rec["kind"]
        if kind in pr.COUNTS_ITS_CARD:
            self._count([rec["card"]], inv, rec)
        elif kind in pr.COUNTS_UNKNOWN:
            inv["unknown"] += 1
        if kind in pr.HOLDS:
            inv["held"] = {"kind": kind, "card": rec["card"]}

    def _on_resolution(self, rec: dict[str, Any], inv: dict[str, Any]) -> None:
        held = inv.get("held")
        if held is None or held != {"kind": rec["kind"], "card": rec["card"]}:
            named = f"{rec['kind']}" + (f" {rec['card']}" if rec["card"] else "")
            was = f"{held['kind']}" + (f" {held['card']}" if held and held["card"] else "") \
                if held else "nothing"
            self.alarm("resolution_mismatch", f"{rec['resolution']} of {named} resolves no "
                       f"such held irregularity (held: {was})",
                       shoe=rec["shoe"], round=rec["round"] + 1)
        inv["held"] = None
        voided = rec["voided_cards"]
        if voided:
            if inv.get("dummy") and voided[0] == inv["dummy"]:
                voided = voided[1:]  # the kept dummy card was counted when it came out
            self._count(voided, inv, rec)
            inv["dummy"] = None
            inv["initial"] = None
        if rec["resolution"] == "keep_dummy":
            inv["dummy"] = rec["card"]

    def _on_initial_cards(self, rec: dict[str, Any], inv: dict[str, Any]) -> None:
        p, b = rec["player"], rec["banker"]
        inv["initial"] = [p[0], b[0], p[1], b[1]]

    def _on_result(self, rec: dict[str, Any], inv: dict[str, Any]) -> None:
        player, banker = rec["player"], rec["banker"]
        where = {"shoe": rec["shoe"], "round": rec["round"]}
        if not inv["burned"] and not inv["partial"]:
            inv["burned"] = True  # one alarm per shoe
            self.alarm("missing_burn", "a round was dealt before the burn", **where)
        if None in player or None in banker or "CUT" in player + banker:
            self.alarm("rules_mismatch", "a round with a card that is no card", **where)
            return
        if rec.get("game") == b21.GAME:
            order = self._rules21(rec, where)
        else:
            if self.config.game == b21.GAME:
                self.alarm("config_mismatch", "a baccarat round; the registry's table is "
                           f"{b21.GAME}", **where)
            order = self._baccarat_rules(rec, where)
        if not inv["partial"] and rec["round"] != inv["round"] + 1:
            self.alarm("round_out_of_order", f"round {rec['round']} after {inv['round']}",
                       **where)
        if inv.get("initial") and inv["initial"] != order[:4]:
            self.alarm("initial_cards_mismatch", "the result's first four cards are not the "
                       "initial cards signed before", **where)
        elif not inv.get("initial") and not inv["partial"]:
            self.alarm("missing_initial_cards", "a result with no initial_cards frame before "
                       "it: pair and House Money wagers had no settle point", **where)
        dummy = inv.get("dummy")
        if bool(rec.get("dummy")) != bool(dummy) or (dummy and order[0] != dummy):
            self.alarm("dummy_mismatch", "a dummy hand without a keep-dummy resolution, or "
                       "the other way round", **where)
        self._count(order[1:] if dummy and order[0] == dummy else order, inv, rec)
        inv["round"], inv["initial"], inv["dummy"] = rec["round"], None, None

    def _baccarat_rules(self, rec: dict[str, Any], where: dict[str, Any]) -> list[str]:
        """A baccarat round held to the third-card rule; its cards in the order dealt."""
        player, banker = rec["player"], rec["banker"]
        want = rules.round_outcome(player, banker)
        if rules.redeal(player, banker) != (player, banker):
            self.alarm("rules_mismatch", "the third-card rule deals these cards otherwise",
                       **where)
        elif any(rec[k] != want[k] for k in ("player_total", "banker_total", "winner", "flags")):
            self.alarm("rules_mismatch", f"the shoe says {rec['winner']} "
                       f"({_listed(rec['flags'])}); the rules say {want['winner']} "
                       f"({_listed(want['flags'])})", **where)
        elif rec["announcements"] != expected_announcements(want, self.config.variant):
            self.alarm("announcement_mismatch", f"announced {_listed(rec['announcements'])}",
                       **where)
        return rules.dealing_order(player, banker)

    def _rules21(self, rec: dict[str, Any], where: dict[str, Any]) -> list[str]:
        """A 21 Baccarat round held to the host's own rules (game/baccarat21.py) under the
        settings it was signed with, which must be the registry's; its cards in the order
        dealt."""
        player, banker = rec["player"], rec["banker"]
        cfg = self.config
        if cfg.game != b21.GAME or rec["rules"] != frames21.dealing(cfg.rules21_rules):
            self.alarm("config_mismatch", "a 21 Baccarat round dealt under settings the "
                       f"registry's table ({cfg.game}) does not have", **where)
        table = frames21.rules_of(rec["rules"], cfg.decks)
        want = b21.round_record(rec["shoe"], rec["round"], player, banker, table)
        if b21.redeal(player, banker, table) != (player, banker):
            self.alarm("rules_mismatch", "the table's drawing rules deal these cards otherwise",
                       **where)
        elif any(rec[k] != want[k] for k in ("player_total", "banker_total", "winner", "flags")):
            self.alarm("rules_mismatch", f"the shoe says {rec['winner']} "
                       f"({_listed(rec['flags'])}); the rules say {want['winner']} "
                       f"({_listed(want['flags'])})", **where)
        return [player[0], banker[0], player[1], banker[1], *player[2:], *banker[2:]]

    def _on_blackjack_result(self, rec: dict[str, Any], inv: dict[str, Any]) -> None:
        """A blackjack round (or a voided one's cards): followed again by the host's own rules
        (game/blackjack.py), every card in the hand the shoe says, under the registry's dealer
        rule."""
        where = {"shoe": rec["shoe"], "round": rec["round"]}
        if not inv["burned"] and not inv["partial"]:
            inv["burned"] = True
            self.alarm("missing_burn", "a round was dealt before the burn", **where)
        cfg = self.config
        if cfg.game != "blackjack" or (rec["dealer_rule"], rec["hole_card"]) != (
                cfg.dealer, cfg.hole_card):
            self.alarm("config_mismatch", f"a blackjack round dealt under {rec['dealer_rule']}"
                       f"{'' if rec['hole_card'] else ', no hole card'}; the registry's table "
                       f"is {cfg.game}" + (f" {cfg.dealer}" if cfg.game == "blackjack" else ""),
                       **where)
        elif not rec["voided"]:
            _, why = blackjack.check_result(rec)
            if why:
                self.alarm("rules_mismatch", f"the blackjack round as the rules follow it: {why}",
                           **where)
        if not inv["partial"] and rec["round"] != inv["round"] + 1:
            self.alarm("round_out_of_order", f"round {rec['round']} after {inv['round']}",
                       **where)
        self._count([c for kind, c in rec["events"] if kind == "card"], inv, rec)
        inv["round"] = rec["round"]

    def _on_shoe_end(self, rec: dict[str, Any], inv: dict[str, Any]) -> None:
        inv["ended"] = True
        if inv["partial"]:
            return  # its earlier cards were never seen here: the sequence_gap alarm says so
        counted = {c: n for c, n in inv["counts"].items() if n}
        if rec["inventory"] != counted or rec["unknown"] != inv["unknown"]:
            diff = sorted(c for c in set(counted) | set(rec["inventory"])
                          if counted.get(c, 0) != rec["inventory"].get(c, 0))
            self.alarm("inventory_mismatch", f"the shoe's inventory and the frames differ in "
                       f"{_listed(diff) if diff else 'unknown cards'}", shoe=rec["shoe"])

    def _count(self, cards: Sequence[str | None], inv: dict[str, Any],
               rec: dict[str, Any]) -> None:
        counts, decks = inv["counts"], self.config.decks
        for c in cards:
            if c is None:
                inv["unknown"] += 1
                continue
            counts[c] = counts.get(c, 0) + 1
            if counts[c] > decks:
                self.alarm("inventory_exceeded", f"copy {counts[c]} of {c} in a {decks}-deck "
                           "shoe", shoe=rec.get("shoe"), round=rec.get("round"))

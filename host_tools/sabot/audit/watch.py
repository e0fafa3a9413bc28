"""Alarms on what a shoe deals, beyond the rules: the validator calls `Watch.after`
after every record it has accounted, so `validate`, `demo`, `serve` and `replay` raise the same
alarms.

* `player_advantage`: after every round, the exact house edge (edges.RemainingShoe, a few ms) of
  every wager the table offers — Banker, Player, Tie and the registry's side wagers, under the
  table's rules (settle.Table.rule_name) — for the cards still in the shoe. The shoe's remaining
  cards are the validator's own per-shoe accounting (`inventory["counts"]`: burn, dealt,
  irregularity and voided cards), so every card the shoe has read is out. A wager whose edge drops
  below 0 raises one alarm per shoe while it stays favourable (again if it turns favourable again).
* `repeated_sequence`: 20 or more consecutive cards (rank and suit) dealt in the same order as in
  an earlier shoe of the audit store: a shuffle that was not one. Each 20-card window's rolling
  hash is looked up in an index of every earlier shoe's windows (built from the store once,
  extended as cards arrive): constant work per card, whatever the store holds. A hit is confirmed
  on the cards themselves; one alarm per run of matching cards.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar

from sabot.audit.store import AuditStore
from sabot.errors import SabotError
from sabot.game import rules
from sabot.game.cards import RANKS, SUITS
from sabot.game.edges import RemainingShoe
from sabot.game.settle import Table
from sabot.game.wagers import ANALYZED_WAGERS
from sabot.registry import ShoeEntry

WINDOW = 20  # consecutive cards in the same order that name a repeated shuffle
MIN_CARDS = 6  # a round needs six cards in the shoe to be counted (analyze's convention)
MAIN = ("banker", "player", "tie")
BASE = 1_000_003
MOD = (1 << 61) - 1
TOP = pow(BASE, WINDOW - 1, MOD)  # weight of a window's oldest card
ShoeKey = tuple[int, int]  # (shoe_id, shoe number)
AlarmFn = Callable[..., None]  # the validator's alarm(kind, detail, **where)


def offered_wagers(config: ShoeEntry) -> dict[str, str]:
    """The table's wagers -> the analyzer's names under its rules (EZ Banker, 631c.5 Banker,
    Dragon Bonus paytable A when the registry names none)."""
    side = list(config.side_wagers)
    cfg: dict[str, Any] = {"game": config.game, "ez": config.ez,
                           "commission_free": config.commission_free, "side_wagers": side}
    if any(w.startswith("dragon_bonus") for w in side):
        cfg["dragon_bonus_paytable"] = "A"
    try:
        table = Table(cfg)
        names = {w: table.rule_name(w) for w in (*MAIN, *side)}
    except SabotError:  # a registry entry settle would refuse: its plain names
        names = {w: w for w in (*MAIN, *side)}
    return {w: n for w, n in names.items() if n in ANALYZED_WAGERS}


class LiveEdges:
    """A shoe's remaining cards and exact house edges, kept in step with a counts map (card ->
    copies out), recomputing only what changed."""

    # CPU seconds taken by the latest recomputes in this process: `sabot serve`
    # reports them at /api/stats and `make bench` checks them against the 5 ms budget.
    timings: ClassVar[deque[float]] = deque(maxlen=4096)

    def __init__(self, decks: int = 8, tie_odds: int = 8) -> None:
        self.decks = decks
        self.tie_odds = tie_odds
        self.shoe: Any = None
        self.applied: dict[str, int] = {}
        self.remaining: RemainingShoe | None = RemainingShoe(decks, tie_odds=tie_odds)

    def update(self, shoe: Any, counts: Mapping[str, int]) -> None:
        """Bring the remaining shoe to `counts` (a new shoe, or fewer cards out: start over)."""
        if shoe != self.shoe or any(counts.get(c, 0) < n for c, n in self.applied.items()):
            self.shoe, self.applied = shoe, {}
            self.remaining = RemainingShoe(self.decks, tie_odds=self.tie_odds)
        for card, n in counts.items():
            more = n - self.applied.get(card, 0)
            if more <= 0:
                continue
            self.applied[card] = n
            if self.remaining is None:
                continue
            try:
                for _ in range(more):
                    self.remaining.remove(card)
            except SabotError:  # more copies than the decks hold: inventory_exceeded says so
                self.remaining = None

    @property
    def cards(self) -> int | None:
        return self.remaining.cards if self.remaining is not None else None

    def edges(self) -> dict[str, float] | None:
        """Every analyzed wager's house edge; None when the shoe cannot deal a round any more or
        its accounting is broken."""
        if self.remaining is None or self.remaining.cards < MIN_CARDS:
            return None
        t = time.thread_time()  # this thread's CPU: the cost, not the wait for the GIL
        edges = self.remaining.house_edges()
        LiveEdges.timings.append(time.thread_time() - t)
        return edges


def card_code(card: Any) -> int | None:
    """1..52 for a canonical card code, None for anything else (an unread card, the cut card)."""
    if not isinstance(card, str) or len(card) != 2 or card[0] not in RANKS or card[1] not in SUITS:
        return None
    return RANKS.index(card[0]) * 4 + SUITS.index(card[1]) + 1


def record_cards(kind: str, rec: Mapping[str, Any]) -> list[int]:
    """The cards a record says left the shoe, in the order they did (burn and rounds)."""
    if kind == "burn":
        cards: Iterable[Any] = rec.get("cards") or ()
    elif kind == "result":
        cards = rules.dealing_order(list(rec["player"]), list(rec["banker"]))
    else:
        return []
    return [c for c in map(card_code, cards) if c is not None]


class SequenceIndex:
    """Every shoe's dealt cards in order, and each 20-card window's hash -> where it was dealt
    (one int per window: shoe number here << 16 | position; a list only on a hash collision)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.cards: list[bytearray] = []  # by shoe number here
        self.keys: list[ShoeKey] = []
        self.number: dict[ShoeKey, int] = {}
        self.hashes: list[int] = []  # rolling state: the hash of each shoe's last window
        self.windows: dict[int, int | list[int]] = {}

    @classmethod
    def from_store(cls, store: AuditStore) -> SequenceIndex:
        index = cls()
        for kind, rec in store.records(("burn", "result")):
            if rec.get("shoe") is not None:
                index.add((rec["shoe_id"], rec["shoe"]), record_cards(kind, rec))
        return index

    def add(self, shoe: ShoeKey, codes: Iterable[int]) -> list[tuple[int, ShoeKey, int]]:
        """Append cards to a shoe's sequence; for each new window that another shoe dealt too:
        (its start here, that shoe, its start there)."""
        hits: list[tuple[int, ShoeKey, int]] = []
        with self.lock:
            me = self.number.get(shoe)
            if me is None:
                me = self.number[shoe] = len(self.keys)
                self.keys.append(shoe)
                self.cards.append(bytearray())
                self.hashes.append(0)
            seq = self.cards[me]
            for code in codes:
                h = self.hashes[me]
                if len(seq) >= WINDOW:
                    h = (h - seq[-WINDOW] * TOP) % MOD
                h = (h * BASE + code) % MOD
                self.hashes[me] = h
                seq.append(code)
                if len(seq) < WINDOW:
                    continue
                start = len(seq) - WINDOW
                window = seq[start:]
                here = me << 16 | start
                places = self.windows.get(h)
                if places is None:
                    self.windows[h] = here
                    continue
                if isinstance(places, int):
                    places = self.windows[h] = [places]
                for place in places:
                    other, pos = place >> 16, place & 0xFFFF
                    if other != me and self.cards[other][pos:pos + WINDOW] == window:
                        hits.append((start, self.keys[other], pos))
                places.append(here)
        return hits


_INDEXES: weakref.WeakKeyDictionary[AuditStore, SequenceIndex] = weakref.WeakKeyDictionary()
_INDEXES_LOCK = threading.Lock()


def sequence_index(store: AuditStore) -> SequenceIndex:
    """The index of a store's shoes, shared by every validator writing through this store."""
    with _INDEXES_LOCK:
        index = _INDEXES.get(store)
        if index is None:
            index = _INDEXES[store] = SequenceIndex.from_store(store)
        return index


class Watch:
    """The player_advantage and repeated_sequence alarms for one validator (one shoe device)."""

    def __init__(self, store: AuditStore, shoe_id: int, config: ShoeEntry, state: dict[str, Any],
                 alarm: AlarmFn) -> None:
        self.shoe_id = shoe_id
        self.alarm = alarm
        self.offered = offered_wagers(config)
        self.edges = LiveEdges(config.decks)
        self.store = store  # its sequence index is built when the first card arrives: a
        # validator that only asks the shoe something (status, verify-firmware) never reads it
        self.last_seq = state.get("last_seq", 0)  # records up to here are in the index already
        self.favourable: set[str] = set()
        self.runs: set[tuple[ShoeKey, ShoeKey, int]] = set()  # (this, other, offset) alarmed
        self.latest: dict[str, float] | None = None  # the edges after the last round
        inv = state.get("inventory") or {}
        if inv.get("shoe") is not None and not inv.get("ended"):  # restarted mid-shoe
            for a in store.alarms(shoe_id, inv["shoe"]):
                if a["kind"] == "player_advantage":
                    self.favourable.add(a["detail"].split(" ", 1)[0])

    def after(self, seq: int, kind: str, rec: dict[str, Any], inv: dict[str, Any]) -> None:
        """One accounted record of frame `seq`: extend the sequence index, and after a round check
        the edges. A frame seen again (a batch the store rolled back) adds no cards twice."""
        shoe = inv.get("shoe")
        if kind == "shoe_start":
            self.favourable.clear()
        if shoe is not None and seq > self.last_seq:
            self._sequence((self.shoe_id, shoe), record_cards(kind, rec), rec)
        self.last_seq = max(self.last_seq, seq)
        if kind == "result" and not inv.get("partial"):
            self._edges(shoe, rec, inv)

    def _sequence(self, me: ShoeKey, codes: list[int], rec: dict[str, Any]) -> None:
        if not codes:
            return
        for start, other, pos in sequence_index(self.store).add(me, codes):
            run = (me, other, pos - start)
            if run in self.runs:
                continue  # the same repeated run, one card further
            self.runs.add(run)
            self.alarm("repeated_sequence",
                       f"cards {start + 1}..{start + WINDOW} of this shoe were dealt in the same "
                       f"order as cards {pos + 1}..{pos + WINDOW} of shoe_id {other[0]} shoe "
                       f"{other[1]}", shoe=me[1], round=rec.get("round"))

    def _edges(self, shoe: Any, rec: dict[str, Any], inv: dict[str, Any]) -> None:
        self.edges.update(shoe, inv.get("counts") or {})
        edges = self.edges.edges()
        self.latest = edges
        if edges is None:
            return
        for wager, name in self.offered.items():
            edge = edges[name]
            if edge >= 0:
                self.favourable.discard(wager)
                continue
            if wager in self.favourable:
                continue
            self.favourable.add(wager)
            self.alarm("player_advantage",
                       f"{wager} ({name}) house edge {edge:.6%} with {self.edges.cards} cards "
                       f"left: the player has the edge", shoe=shoe, round=rec.get("round"))

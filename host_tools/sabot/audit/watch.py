"""Alarms on what a shoe deals, beyond the rules: the validator calls `Watch.after`
after every record it has accounted, so `validate`, `demo`, `serve` and `replay` raise the same
alarms.

* `player_advantage`: after every round, the exact house edge of every wager the table offers —
  Banker, Player, Tie and the registry's side wagers, under the table's rules
  (settle.Table.rule_name) — for the cards still in the shoe. The shoe's remaining cards are the
  validator's own per-shoe accounting (`inventory["counts"]`: burn, dealt, irregularity and
  voided cards), so every card the shoe has read is out. A wager whose edge drops below 0 raises
  one alarm per shoe while it stays favourable (again if it turns favourable again). Nothing is
  skipped or estimated: each round the offered wagers' expected returns are worked out exactly
  (edges.RemainingShoe.expected, the compiled kernel's integers: tens of µs, so the watch keeps
  up with the validator at full speed), and an edge is the exact fraction's nearest float.
* `repeated_sequence`: 20 or more consecutive cards (rank and suit) dealt in the same order as in
  an earlier shoe of the audit store: a shuffle that was not one. Each 20-card window's rolling
  hash is looked up in an index of every earlier shoe's windows (built from the store once,
  extended as cards arrive): constant work per card, whatever the store holds. A hit is confirmed
  on the cards themselves. One alarm per run of matching cards, raised when the run ends (the
  next card differs, the shoe ends, or what was received ends: Validator.finish), stating the
  whole run: its first and last card here and in each earlier shoe (and table) it repeats. So a
  whole repeated shoe is one alarm at its end, not one at its 20th card; a validator started in
  the middle of a run finds where the run began from the cards.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from itertools import chain, compress, repeat
from operator import ne
from typing import Any, ClassVar

from sabot.audit.store import AuditStore
from sabot.errors import SabotError
from sabot.game import baccarat21 as b21
from sabot.game import rules
from sabot.game.baccarat21_analyze import of_left
from sabot.game.cards import RANKS, SUITS, left_in_shoe
from sabot.game.edges import RemainingShoe
from sabot.game.settle import GAMES, Table
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


B21 = b21.GAME


def offered_wagers(config: ShoeEntry) -> dict[str, str]:
    """The table's wagers -> the analyzer's names under its rules (EZ Banker, 631c.5 Banker, the
    registry's Dragon Bonus paytable; A for an old entry that names none). A 21 Baccarat table's
    are its own names (LiveEdges21)."""
    if config.game == B21:
        return {w: w for w in ("player", "banker", *config.side_wagers)}
    if config.game not in GAMES:
        return {}  # the edges watched are baccarat's and 21 Baccarat's (blackjack's: analyze)
    side = list(config.side_wagers)
    cfg: dict[str, Any] = config.table_config()
    if any(w.startswith("dragon_bonus") for w in side) and not cfg.get("dragon_bonus_paytable"):
        cfg["dragon_bonus_paytable"] = "A"
    try:
        table = Table(cfg)
        names = {w: table.rule_name(w) for w in (*MAIN, *side)}
    except SabotError:  # a registry entry settle would refuse: its plain names
        names = {w: w for w in (*MAIN, *side)}
    return {w: n for w, n in names.items() if n in ANALYZED_WAGERS}


def live_edges(config: ShoeEntry) -> LiveEdges | LiveEdges21:
    """The live edges of this table's game."""
    if config.game == B21:
        try:
            return LiveEdges21(config.decks, config.rules21_rules)
        except SabotError:  # a registry entry settle would refuse: its defaults
            return LiveEdges21(config.decks, b21.Rules(decks=config.decks))
    return LiveEdges(config.decks, config.tie_odds)


class LiveEdges21:
    """A 21 Baccarat shoe's exact house edges for its remaining cards (game/baccarat21_analyze.py:
    every final hand of each side, summed by the compiled kernel in tens of ms), as LiveEdges
    for baccarat: kept in step with the validator's counts map, worked out once per change."""

    MIN_CARDS = 22  # a round of 21 Baccarat may take 22 cards
    # an edge nearer 0 than this is none: the sum is in doubles (a table whose hands draw alike
    # gives the main wagers an edge of exactly 0, which rounding makes -1e-15 as often as not)
    ZERO = 1e-12

    def __init__(self, decks: int, rules: b21.Rules) -> None:
        self.decks, self.rules = decks, rules
        self.shoe: Any = None
        self.counts: dict[str, int] = {}
        self.left: dict[str, int] | None = {}
        self._edges: tuple[Any, dict[str, float] | None] | None = None

    def update(self, shoe: Any, counts: Mapping[str, int]) -> None:
        if shoe == self.shoe and counts == self.counts:
            return
        self.shoe, self.counts = shoe, dict(counts)
        seen = [c for c, n in counts.items() for _ in range(n)]
        try:
            self.left = left_in_shoe(self.decks, seen)
        except SabotError:  # more copies than the decks hold: inventory_exceeded says so
            self.left = None

    @property
    def cards(self) -> int | None:
        return None if self.left is None else sum(self.left.values())

    def edges(self) -> dict[str, float] | None:
        if self.left is None or sum(self.left.values()) < self.MIN_CARDS:
            return None
        key = (self.shoe, tuple(sorted(self.counts.items())))
        if self._edges is None or self._edges[0] != key:
            got = of_left(self.left, self.rules, ("tie", "player_bonus", "banker_bonus"))
            self._edges = (key, got["house_edges"])
        return self._edges[1]

    def favourable(self, names: tuple[str, ...]) -> dict[str, float] | None:
        every = self.edges()
        if every is None:
            return None
        return {n: e for n, e in every.items() if n in names and e < -self.ZERO}


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
        # the counts map as last applied: its cards in the map's order, and their copies out
        self._cards: list[str] = []
        self._copies: list[int] = []
        self.remaining: RemainingShoe | None = RemainingShoe(decks, tie_odds=tie_odds)

    def update(self, shoe: Any, counts: Mapping[str, int]) -> None:
        """Bring the remaining shoe to `counts` (a new shoe, or fewer cards out: start over).
        The validator's counts map only grows within a shoe, a card's copies and new cards at
        its end, so the cards that changed are found by comparing in C (compress, map), not by
        a Python loop over the 52 cards."""
        cards, copies = list(counts), list(counts.values())
        known = len(self._cards)
        fresh = shoe != self.shoe or cards[:known] != self._cards
        if not fresh:
            before = self._copies
            changed: Iterable[int] = list(compress(range(len(cards)), chain(
                map(ne, copies, before), repeat(True, len(cards) - known))))
            more = [copies[i] - (before[i] if i < known else 0) for i in changed]
            fresh = any(m < 0 for m in more)  # fewer out than before: count again
        if fresh:
            self.shoe = shoe
            self.remaining = RemainingShoe(self.decks, tie_odds=self.tie_odds)
            changed, more = range(len(cards)), copies
        self._cards, self._copies = cards, copies
        for i, m in zip(changed, more):
            if m <= 0 or self.remaining is None:
                continue
            try:
                self.remaining.remove(cards[i], m)
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

    def favourable(self, names: tuple[str, ...]) -> dict[str, float] | None:
        """Of these analyzed wagers, those whose exact house edge is below 0, with that edge;
        None as edges() is. The same exact integers as edges(), only for these wagers."""
        if self.remaining is None or self.remaining.cards < MIN_CARDS:
            return None
        expected = self.remaining.expected(names)
        out = {name: e for name, e in expected.items() if e > 0}
        if not out:
            return {}
        d = self.remaining.denominator()
        return {name: -e / d for name, e in out.items()}  # the float edges() has


_CODES = {r + s: i * 4 + j + 1 for i, r in enumerate(RANKS) for j, s in enumerate(SUITS)}


def card_number(card: Any) -> int | None:
    """A card's number, 1..52, from its canonical code; None for anything else (an unread card,
    the cut card)."""
    return _CODES.get(card) if isinstance(card, str) else None


def record_cards(kind: str, rec: Mapping[str, Any]) -> list[int]:
    """The cards a record says left the shoe, in the order they did (burn and rounds)."""
    if kind == "burn":
        cards: Iterable[Any] = rec.get("cards") or ()
    elif kind == "result":
        cards = rules.dealing_order(list(rec["player"]), list(rec["banker"]))
    elif kind == "blackjack_result":
        cards = [c for k, c in rec["events"] if k == "card"]
    else:
        return []
    return [c for c in map(card_number, cards) if c is not None]


def _window_hash(cards: bytes | bytearray) -> int:
    """The rolling hash SequenceIndex.add keeps, of these (at most WINDOW) cards."""
    h = 0
    for code in cards:
        h = (h * BASE + code) % MOD
    return h


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
        self.tables: dict[int, str] = {}  # shoe id -> table, of the shoes validated here

    def _matches(self, me: int, start: int, h: int) -> list[tuple[int, ShoeKey, int]]:
        """Other shoes' windows with hash h holding the same cards as this shoe's at start."""
        places = self.windows.get(h)
        if places is None:
            return []
        window = self.cards[me][start:start + WINDOW]
        return [(start, self.keys[other], pos)
                for other, pos in ((p >> 16, p & 0xFFFF)
                                   for p in ([places] if isinstance(places, int) else places))
                if other != me and self.cards[other][pos:pos + WINDOW] == window]

    def tail(self, shoe: ShoeKey) -> list[tuple[int, ShoeKey, int]]:
        """add's hits for the shoe's last window, already added (a run under way when a
        validator starts)."""
        with self.lock:
            me = self.number.get(shoe)
            if me is None or len(self.cards[me]) < WINDOW:
                return []
            return self._matches(me, len(self.cards[me]) - WINDOW, self.hashes[me])

    def first_of_run(self, shoe: ShoeKey, other: ShoeKey, start: int, pos: int) -> int:
        """Where the run of cards dealt in the same order here (from start) and there (from pos)
        begins here: the cards before are compared back to the first that differs."""
        with self.lock:
            here, there = self.cards[self.number[shoe]], self.cards[self.number[other]]
            while start > 0 and pos > 0 and here[start - 1] == there[pos - 1]:
                start, pos = start - 1, pos - 1
            return start

    def length(self, shoe: ShoeKey) -> int:
        with self.lock:
            me = self.number.get(shoe)
            return 0 if me is None else len(self.cards[me])

    @classmethod
    def from_store(cls, store: AuditStore) -> SequenceIndex:
        index = cls()
        for kind, rec in store.records(("burn", "result", "blackjack_result")):
            if rec.get("shoe") is not None:
                index.add((rec["shoe_id"], rec["shoe"]), record_cards(kind, rec))
        return index

    def cut(self, shoe: ShoeKey, n: int) -> None:
        """The shoe's sequence back to its first n cards, its windows past them gone (what a read
        the store did not keep added)."""
        with self.lock:
            me = self.number.get(shoe)
            if me is None or len(self.cards[me]) <= n:
                return
            seq = self.cards[me]
            for start in range(max(0, n - WINDOW + 1), len(seq) - WINDOW + 1):
                h, here = _window_hash(seq[start:start + WINDOW]), me << 16 | start
                places = self.windows.get(h)
                if places == here:
                    del self.windows[h]
                elif isinstance(places, list) and here in places:
                    places.remove(here)
            del seq[n:]
            self.hashes[me] = _window_hash(seq[-WINDOW:])

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
                here = me << 16 | start
                places = self.windows.get(h)
                if places is None:
                    self.windows[h] = here
                    continue
                hits += self._matches(me, start, h)
                if isinstance(places, int):
                    self.windows[h] = [places, here]
                else:
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
        self.analyzed = tuple(dict.fromkeys(self.offered.values()))  # the edges to work out
        self.edges = live_edges(config)
        self.store = store  # its sequence index is built when the first card arrives: a
        # validator that only asks the shoe something (status, verify-firmware) never reads it
        self.last_seq = state.get("last_seq", 0)  # records up to here are in the index already
        self.favourable: set[str] = set()
        self.table = config.table
        # repeated runs under way in this shoe (run_shoe): (other shoe, its position minus
        # ours) -> [first window here, last window here, the round it was first seen in]
        self.runs: dict[tuple[ShoeKey, int], list[Any]] = {}
        self.run_shoe: ShoeKey | None = None
        self._index: SequenceIndex | None = None  # the store's, looked up at the first card
        self._grown: dict[ShoeKey, int] = {}  # shoe -> its cards in the index before this read
        inv = state.get("inventory") or {}
        if inv.get("shoe") is not None and not inv.get("ended"):  # restarted mid-shoe
            for a in store.alarms(shoe_id, inv["shoe"]):
                if a["kind"] == "player_advantage":
                    self.favourable.add(a["detail"].split(" ", 1)[0])

    def snapshot(self) -> tuple[set[str], dict[tuple[ShoeKey, int], list[Any]], Any, int]:
        """What a read may change here, to go back to (restore) if the store keeps nothing of
        it; from now on the index's growth is noted too."""
        self._grown = {}
        return (set(self.favourable), {k: list(run) for k, run in self.runs.items()},
                self.run_shoe, self.last_seq)

    def restore(self, snap: tuple[set[str], dict[tuple[ShoeKey, int], list[Any]], Any, int]
                ) -> None:
        self.favourable, self.runs, self.run_shoe, self.last_seq = snap
        if self._index is not None:
            for shoe, n in self._grown.items():
                self._index.cut(shoe, n)
        self._grown = {}

    def after(self, seq: int, kind: str, rec: dict[str, Any], inv: dict[str, Any]) -> None:
        """One accounted record of frame `seq`: extend the sequence index, and after a round check
        the edges. A frame seen again (a batch the store rolled back) adds no cards twice."""
        shoe = inv.get("shoe")
        me = (self.shoe_id, shoe) if shoe is not None else None
        if kind == "shoe_start" or (me is not None and me != self.run_shoe):
            self.finish()  # the shoe the runs were in has ended
        if kind == "shoe_start":
            self.favourable.clear()
        if me is not None and seq > self.last_seq:
            self._sequence(me, record_cards(kind, rec), rec)
        self.last_seq = max(self.last_seq, seq)
        if kind == "result" and not inv.get("partial"):
            self._edges(shoe, rec, inv)
        elif kind == "shoe_end":
            self.finish()

    def finish(self) -> None:
        """The shoe ended (or what was received did): every repeated run under way is
        reported."""
        ended, self.runs = self.runs, {}
        self._report(ended)

    def _sequence(self, me: ShoeKey, codes: list[int], rec: dict[str, Any]) -> None:
        index = self._index
        if index is None:
            index = self._index = sequence_index(self.store)
        if me != self.run_shoe:
            self.run_shoe = me
            index.tables[self.shoe_id] = self.table
            for start, other, pos in index.tail(me):  # a run under way when we started
                self._extend(index, me, start, other, pos, rec)
        if not codes:
            return
        self._grown.setdefault(me, index.length(me))
        for start, other, pos in index.add(me, codes):
            self._extend(index, me, start, other, pos, rec)
        if not self.runs:
            return
        newest = index.length(me) - WINDOW
        ended = {key: run for key, run in self.runs.items() if run[1] < newest}
        if ended:  # the cards that came since differ: those runs are over
            for key in ended:
                del self.runs[key]
            self._report(ended)

    def _extend(self, index: SequenceIndex, me: ShoeKey, start: int, other: ShoeKey, pos: int,
                rec: dict[str, Any]) -> None:
        key = (other, pos - start)
        run = self.runs.get(key)
        if run is not None and run[1] == start - 1:
            run[1] = start  # the same run, one card further
        elif run is None:
            self.runs[key] = [index.first_of_run(me, other, start, pos), start, rec.get("round")]

    def _report(self, ended: dict[tuple[ShoeKey, int], list[Any]]) -> None:
        """One alarm per repeated run: the cards here, first to last, and where each earlier
        shoe dealt them (runs of the same cards here against several shoes are one run)."""
        if not ended or self.run_shoe is None:
            return
        spans: dict[tuple[int, int], list[Any]] = {}
        for (other, offset), (first, last, rnd) in sorted(
                ended.items(), key=lambda kv: (kv[1][0], kv[1][1], kv[0][0], kv[0][1])):
            spans.setdefault((first, last + WINDOW), [rnd]).append((other, offset))
        tables = sequence_index(self.store).tables  # every table validated into this store
        for (first, end), (rnd, *others) in spans.items():
            where = "; and as ".join(
                f"cards {first + off + 1}..{end + off} of shoe {o[1]} of shoe id 0x{o[0]:08x}"
                + (f" (table {tables[o[0]]})" if o[0] in tables else "")
                for o, off in others)
            self.alarm("repeated_sequence",
                       f"cards {first + 1}..{end} of this shoe ({end - first} cards, table "
                       f"{self.table}) were dealt in the same order as {where}",
                       shoe=self.run_shoe[1], round=rnd)

    def _edges(self, shoe: Any, rec: dict[str, Any], inv: dict[str, Any]) -> None:
        self.edges.update(shoe, inv.get("counts") or {})
        below = self.edges.favourable(self.analyzed)
        if below is None:
            return
        for wager, name in self.offered.items():
            if name not in below:
                self.favourable.discard(wager)
                continue
            if wager in self.favourable:
                continue
            self.favourable.add(wager)
            self.alarm("player_advantage", advantage_detail(wager, name, below[name],
                                                            self.edges.cards),
                       shoe=shoe, round=rec.get("round"))


def advantage_detail(wager: str, name: str, edge: float, cards: Any) -> str:
    """A player_advantage alarm's detail: the offered wager, the analyzed one it is, its house
    edge and the cards left (stored as it is; the pit says it in words, pit/words.py)."""
    return (f"{wager} ({name}) house edge {edge:.6%} with {cards} cards left: the player has "
            "the edge")

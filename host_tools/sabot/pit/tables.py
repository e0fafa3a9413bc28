"""What the pit knows of its tables, followed from the audit store's new rows (the validators
are its only writers): each table's current shoe, rounds and roads, the shoe's remaining cards
and exact edges (watch.LiveEdges over the validator's own accounting), when its newest frame was
stored, its dealer, its alarms and who acknowledged them, and since when it is in its state.

Reading is split from applying: `fetch` only reads the store (the pages run it on a thread of
its own, so a database that does not answer never stops the web server), `apply` takes what was
read into the tables (on the pages' own thread). A value of a shape no validator stores (a
winner that is none, a round that is a string) is kept as it is and shown as it is or as
unknown, never a server error: finding the edit is `sabot audit verify`'s."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sabot.audit.records import contract_round
from sabot.audit.store import AuditStore, StoredRecord, open_store
from sabot.audit.store_queries import UnreadableRow
from sabot.audit.watch import LiveEdges, LiveEdges21, live_edges, offered_wagers
from sabot.errors import SabotError
from sabot.game.roads import BEAD, UNKNOWN, roads
from sabot.pit.recording import serve_line
from sabot.pit.serve import pit_of
from sabot.pit.words import iso, iso_text
from sabot.protocol import HOLDS
from sabot.registry import ShoeEntry

CLAIMS_EVERY = 1.0  # seconds between asking which shoes live writers validate (the floor)
FLOOR_ALARMS = 50  # the floor's newest alarms listed
STALE = 10.0  # seconds without a stored frame after which a table that should speak is silent
KEPT = 26 * 3600  # seconds of round and shoe times kept per table (a shift's and an hour's)
SHIFTS = ("06:00", "14:00", "22:00")  # when the pit's shifts begin (serve --shifts)


@dataclass
class TableView:
    """What the pit knows of one table, from the store."""

    shoe_id: int
    config: ShoeEntry
    shoe: int | None = None
    rounds: list[dict[str, Any]] = field(default_factory=list)
    round_stored: list[float] = field(default_factory=list)  # each round's frame's storage time
    held: str | None = None
    held_at: float | None = None
    ended: bool = False
    ended_at: float | None = None
    started_at: float | None = None  # when the current shoe's start was stored
    tilted: bool = False
    tilted_at: float | None = None
    alarms: list[dict[str, Any]] = field(default_factory=list)  # of the current shoe
    # a blackjack table's rounds of the current shoe (blackjack_hands): its hands, by seat
    hands: list[dict[str, Any]] = field(default_factory=list)
    stored_at: float | None = None  # when the frame of the latest change was stored
    frame_at: float | None = None  # when the shoe's newest frame (a status too) was stored
    version: int = 0
    edges: dict[str, float] | None = None
    remaining: int | None = None
    dealer: str | None = None  # signed on at the table (the operator log), and since when
    dealer_since: float | None = None
    results_at: list[float] = field(default_factory=list)  # rounds stored in the last KEPT s
    shoes_at: list[float] = field(default_factory=list)  # shoe starts stored in the last KEPT s
    unclaimed_since: float | None = None  # the floor: since when no writer validates it
    round_open: int | None = None  # baccarat: the round whose first cards are out, no result yet
    live: LiveEdges | LiveEdges21 = field(init=False)

    def __post_init__(self) -> None:
        self.live = live_edges(self.config)

    @property
    def table(self) -> str:
        return self.config.table

    @property
    def blackjack(self) -> bool:
        return self.config.game == "blackjack"


@dataclass
class Rows:
    """One fetch's rows, and what could not be read."""

    records: list[StoredRecord] = field(default_factory=list)
    alarms: list[dict[str, Any]] = field(default_factory=list)
    frames: tuple[int, dict[int, tuple[float, int | None]]] | None = None
    operations: list[dict[str, Any]] = field(default_factory=list)
    inventories: dict[int, Any] = field(default_factory=dict)  # shoe id -> latest, or an error
    claims: dict[int, str] | bool | None = False  # False: not asked this time
    stalls: dict[str, tuple[float, str]] = field(default_factory=dict)
    problem: str | None = None
    unreadable: bool = False  # the database itself refused a read (not an edited row)
    bad_rows: list[UnreadableRow] = field(default_factory=list)  # records, entries: gone past


class Pit:
    """Every table served, followed from the audit store's new rows. `link(shoe_id)`: the link
    of a shoe this process validates ({"state", "reason", "since"}); `recording`: this serve's
    watch over its store and links (pit/recording.py), None where nothing is validated here."""

    def __init__(self, db: str, configs: list[ShoeEntry],
                 link: Callable[[int], dict[str, Any] | None] | None = None,
                 name: str = "", floor: Sequence[ShoeEntry] = (), recording: Any = None,
                 store_alarm: float = 5.0, shifts: Sequence[str] = SHIFTS) -> None:
        self.db = db
        self.name = name  # this pit's (serve --pit)
        self.store: AuditStore | None = None
        # each of this pit's shoes' link: {"state": connecting | up | lost, "reason": why lost,
        # "since": time}; None for a shoe this process does not validate (another pit's)
        self.link = link or (lambda shoe_id: {"state": "up", "reason": "", "since": None})
        self.recording = recording
        self.store_alarm = store_alarm  # seconds: unanswered reads, a writer's stall
        self.shifts = list(shifts)
        self.own = {c.shoe_id for c in configs}  # this pit's tables: none for serve --floor
        self.by_id: dict[int, TableView] = {c.shoe_id: TableView(c.shoe_id, c)
                                            for c in (*floor, *configs)}
        # the floor: which shoes a live writer validates, and whose (store.validators());
        # None where the store cannot tell. A pit seen once is remembered for its tables.
        self.claims: dict[int, str] | None = None
        self.stalls: dict[str, tuple[float, str]] = {}  # writer -> (since, why): not recording
        self.last_pit: dict[int, str] = {}
        self._claims_at = 0.0
        self.last_record = self.last_alarm = self.last_frame = self.last_op = 0
        self.problem: str | None = None  # why the newest rows could not be read, if they could not
        self.unanswered_since: float | None = None  # a read the database has not answered
        self.unreadable_since: float | None = None  # since when every read is refused
        self.skipped = 0  # rows naming no shoe id (an edited store): counted, shown on no table
        self.unreadable_rows = 0  # records and entries that are no JSON object (edited): skipped
        self.notes = 0  # moves when what the dashboard says of the store itself changes
        # acknowledgements from the operator log: alarm key (alarm_key) -> the entry
        self.acks: dict[tuple[Any, ...], dict[str, Any]] = {}
        self.logged_alarms: dict[int, list[dict[str, Any]]] = {}  # serve_alarm entries, by shoe
        # the receipt checker the scoreboard's QR code sends players to (serve --checker): the
        # regulator's copy of verify.html; None: this server's own /verify
        self.checker: str | None = None
        # this server's address as players' phones reach it (serve --public-url), for the QR
        # codes; None: the address each display asked by
        self.public_url: str | None = None

    def _store(self) -> AuditStore:
        if self.store is None:
            self.store = open_store(self.db, writer=False)
        return self.store

    def _view(self, shoe_id: Any) -> TableView | None:
        """The table of a row's shoe id; None (the row skipped) for a value no shoe id can be."""
        if shoe_id not in self.by_id:
            if (not isinstance(shoe_id, int) or isinstance(shoe_id, bool)
                    or not 0 <= shoe_id < 1 << 32):
                self.skipped += 1
                return None
            self.by_id[shoe_id] = TableView(shoe_id, ShoeEntry(shoe_id))
        return self.by_id[shoe_id]

    # ---- reading (any thread; one fetch at a time) ---------------------------------------------
    def fetch(self) -> Rows:
        """The rows stored since the last apply(); only reads the store."""
        rows = Rows()
        try:
            store = self._store()
        except SabotError as e:  # no server there, no store: said, as a refused read is
            rows.problem, rows.unreadable = f"{e}: these pages show what they read last", True
            return rows

        def read(what: str, get: Callable[[], Any], default: Any) -> Any:
            if rows.problem is not None:
                return default
            try:
                return get()
            except SabotError as e:  # the database itself (its server lost, a damaged file)
                rows.problem = f"{e}: these pages show what they read last"
                rows.unreadable = True
            except (ValueError, TypeError, RecursionError) as e:
                # a row the validators never wrote (not JSON, not an object): the pages keep
                # what they showed and say so; which row it is, audit verify says
                rows.problem = (f"the store's {what} after the last one shown cannot be read "
                                f"({type(e).__name__}): run sabot audit verify")
            return default

        rows.records = read("records", lambda: store.records_since(self.last_record,
                                                                   unreadable=rows.bad_rows), [])
        rows.alarms = read("alarms", lambda: store.alarms_since(self.last_alarm), [])
        rows.frames = read("frames", lambda: store.frames_since(self.last_frame), None)
        rows.operations = read("operator log", lambda: store.operations_since(
            self.last_op, unreadable=rows.bad_rows), [])
        for sid in {r.shoe_id for r in rows.records}:
            try:
                rows.inventories[sid] = store.latest_inventory(sid)
            except (SabotError, ValueError, RecursionError) as e:
                rows.inventories[sid] = e  # accounting that is not JSON: no edges shown
        now = time.monotonic()
        if now - self._claims_at >= CLAIMS_EVERY:
            self._claims_at = now
            try:
                rows.claims = store.validators(sorted(self.by_id))
                rows.stalls = store.stalled_writers(self.store_alarm)
            except SabotError:
                rows.claims = False  # the server is away: the floor shows what it last knew
        return rows

    def refresh(self) -> set[int]:
        """fetch() and apply() at once: the shoe ids whose tables changed."""
        return self.apply(self.fetch())

    # ---- applying (the pages' thread) --------------------------------------------------------
    def apply(self, rows: Rows) -> set[int]:
        changed: set[int] = set()
        said = (self.problem, self.skipped, self.unreadable_rows)
        self.problem = rows.problem
        self._skip(rows.bad_rows)
        if not rows.unreadable:
            self.unreadable_since = None
        elif self.unreadable_since is None:
            self.unreadable_since = time.time()
        for r in rows.records:
            self.last_record = max(self.last_record, r.id)  # a skipped row may be later
            t = self._view(r.shoe_id)
            if t is None:
                continue
            self._apply(t, r.kind, r.record, _time(r.received_at))
            t.stored_at = r.received_at
            if r.kind == "result":
                t.round_stored.append(r.received_at)
            changed.add(r.shoe_id)
        for a in rows.alarms:
            self.last_alarm = a["id"]
            shoe_id, shoe = a["shoe_id"], a["shoe"]
            if shoe_id is None:
                continue
            t = self._view(shoe_id)
            if t is None:
                continue
            if a["kind"] == "tilt":
                t.tilted, t.tilted_at = True, _time(a.get("raised_at"))
            if shoe is None or t.shoe is None or shoe == t.shoe:
                t.alarms.append({**{k: a.get(k) for k in ("id", "kind", "shoe_id", "shoe",
                                                          "round", "detail", "seq")},
                                 "raised_at": _time(a.get("raised_at"))})
            changed.add(shoe_id)
        if rows.frames is not None:
            self.last_frame, newest = int(rows.frames[0]), rows.frames[1]
            for sid, (at, _) in newest.items():
                t = self._view(sid)
                if t is not None and _time(at) is not None:
                    t.frame_at = _time(at)
        for op in rows.operations:
            self.last_op = max(self.last_op, op["id"]) if isinstance(op.get("id"), int) \
                else self.last_op
            named = op.get("shoe_id")
            if self._operation(op) and isinstance(named, int) and named in self.by_id:
                changed.add(named)
        for sid in changed:
            if sid in rows.inventories:  # new records: the shoe's accounting moved
                self._edges(self.by_id[sid], rows.inventories[sid])
            self.by_id[sid].version += 1
        if (self.problem, self.skipped, self.unreadable_rows) != said:
            self.notes += 1
        if rows.claims is not False:
            self._claimed(rows.claims if isinstance(rows.claims, dict) else None, rows.stalls)
        return changed

    def _skip(self, bad_rows: list[UnreadableRow]) -> None:
        """Records and operator entries that are no JSON object: gone past, each said once in
        serve's log and counted, so the tables follow the rows stored after them."""
        for bad in bad_rows:
            if bad.table == "records" and isinstance(bad.row_id, int):
                self.last_record = max(self.last_record, bad.row_id)
            elif bad.table == "operations" and isinstance(bad.row_id, int):
                self.last_op = max(self.last_op, bad.row_id)
            self.unreadable_rows += 1
            serve_line(f"skipped: {bad}", "error")

    def _claimed(self, claims: dict[int, str] | None, stalls: dict[str, tuple[float, str]]
                 ) -> None:
        """Which shoes live writers validate, and which writers the database holds up."""
        now = time.time()
        if claims is not None:
            for t in self.by_id.values():
                if t.shoe_id in claims or t.shoe_id in self.own:
                    t.unclaimed_since = None
                elif t.unclaimed_since is None:
                    t.unclaimed_since = now
        if claims != self.claims or stalls != self.stalls:
            self.claims, self.stalls = claims, stalls
            for sid, writer in (claims or {}).items():
                self.last_pit[sid] = pit_of(writer)
            self.notes += 1

    def _apply(self, t: TableView, kind: str, rec: dict[str, Any], at: float | None) -> None:
        """One record into its table; `at`: when its frame was stored (None: a value no
        validator stores, in an edited store: no time is kept of it)."""
        shoe = rec.get("shoe")
        if kind == "shoe_start" or (shoe is not None and shoe != t.shoe):
            t.shoe, t.rounds, t.held, t.ended, t.tilted = shoe, [], None, False, False
            t.round_stored, t.hands, t.round_open = [], [], None
            t.started_at, t.held_at, t.ended_at, t.tilted_at = at, None, None, None
            t.shoes_at = _kept(t.shoes_at, at)
            # the shoe device's own alarms (an update, a rekey: shoe None) stay in view, and so
            # does every alarm nobody acknowledged yet
            t.alarms = [a for a in t.alarms if a["shoe"] in (None, t.shoe)
                        or alarm_key(a, t.shoe_id) not in self.acks][-20:]
        if kind == "initial_cards":  # the round's first cards are out: no more bets
            rnd = rec.get("round")
            t.round_open = rnd if isinstance(rnd, int) and not isinstance(rnd, bool) else 0
        if kind == "result":
            t.rounds.append(contract_round(rec))
            t.results_at = _kept(t.results_at, at)
            t.round_open = None
        elif kind == "blackjack_result":
            t.hands.append(blackjack_hands(rec))
            if not rec.get("voided"):
                t.results_at = _kept(t.results_at, at)
        elif kind == "irregularity" and isinstance(rec.get("kind"), str) and rec["kind"] in HOLDS:
            t.held, t.held_at = rec["kind"], at
        elif kind == "resolution":
            t.held, t.held_at = None, None
        elif kind == "shoe_end":
            t.ended, t.ended_at = True, at

    def apply_operation(self, op: dict[str, Any]) -> None:
        """An entry this process has just logged, shown before the store's reader follows it
        (taking it again then changes nothing)."""
        sid = op.get("shoe_id")
        if self._operation(op) and isinstance(sid, int) and sid in self.by_id:
            self.by_id[sid].version += 1

    def _operation(self, op: dict[str, Any]) -> bool:
        """An operator-log entry the pages show: a dealer signing on or off, an acknowledged
        alarm, an alarm of serve's own that cleared. Whether a table changed."""
        kind, sid = op.get("operation"), op.get("shoe_id")
        t = self.by_id.get(sid) if isinstance(sid, int) else None
        if kind == "sign_on" and t is not None:
            t.dealer, t.dealer_since = _text(op.get("dealer")), _time(op.get("logged_at"))
        elif kind == "sign_off" and t is not None:
            t.dealer, t.dealer_since = None, _time(op.get("logged_at"))
        elif kind == "acknowledge" and isinstance(op.get("alarm"), dict):
            self.acks[alarm_key(op["alarm"], sid)] = op
        elif kind == "serve_alarm" and isinstance(sid, int):
            # its times as the pages take them, once; `logged` as the entry wrote it
            self.logged_alarms.setdefault(sid, []).append(
                {"kind": op.get("kind"), "shoe_id": sid, "logged": op.get("raised_at"),
                 "raised_at": _from_iso(op.get("raised_at")),
                 "cleared_at": _from_iso(op.get("cleared_at")), "detail": op.get("detail"),
                 "serve": True})
        else:
            return False
        return True

    def _edges(self, t: TableView, inv: Any) -> None:
        t.edges, t.remaining = None, None
        if isinstance(inv, Exception):
            return
        inv = inv or {}
        counts = (inv.get("counts") or {}) if isinstance(inv, dict) else None
        if (not isinstance(inv, dict) or inv.get("partial") or inv.get("shoe") is None
                or not isinstance(counts, dict)
                or not all(isinstance(n, int) and not isinstance(n, bool)
                           for n in counts.values())):
            return
        try:
            t.live.update(inv["shoe"], counts)
        except (SabotError, ValueError, TypeError):  # cards no shoe holds
            t.live = live_edges(t.config)
            return
        every = t.live.edges()
        t.remaining = t.live.cards
        offered = offered_wagers(t.config)
        t.edges = None if every is None else {w: every[n] for w, n in offered.items()}

    # ---- views -----------------------------------------------------------------------------
    def _own_link(self, t: TableView) -> dict[str, Any] | None:
        """The table's link when this pit validates it; None for another pit's."""
        return self.link(t.shoe_id) if t.shoe_id in self.own else None

    def status(self, t: TableView, now: float | None = None) -> tuple[str, float | None, str]:
        """(the table's state, since when, why in words where it is an alarm's)."""
        now = time.time() if now is None else now
        link = self._own_link(t)
        stalled = self.recording.not_recording() if (
            self.recording is not None and t.shoe_id in self.own) else None
        if stalled is not None:
            return "not recording", stalled.since, stalled.detail
        writer = (self.claims or {}).get(t.shoe_id)
        if writer is not None and writer in self.stalls:
            at, why = self.stalls[writer]
            return "not recording", at, f"{writer}: {why}"
        refused = (link or {}).get("store_refused_since")
        if refused is not None and now - refused >= self.store_alarm:  # this table's reads only
            return "not recording", refused, (link or {}).get("store_refusal", "")
        if self.unanswered_since is not None and now - self.unanswered_since >= \
                self.store_alarm:
            return ("not recording", self.unanswered_since,
                    "the audit database has not answered the pages' reads since then")
        if self.unreadable_since is not None and now - self.unreadable_since >= \
                self.store_alarm:
            return ("not recording", self.unreadable_since,
                    f"the audit database cannot be read: {self.problem}")
        if link is not None and link["state"] in ("lost", "wrong shoe"):
            return f"link {link['state']}" if link["state"] == "lost" else "wrong shoe", \
                link["since"], link["reason"]
        if link is None and self.claims is not None and t.shoe_id not in self.claims:
            return "no validator", t.unclaimed_since, ""
        if t.tilted:
            return "tilted", t.tilted_at, ""
        speaks = (link["state"] == "up" if link is not None
                  else self.claims is not None and t.shoe_id in self.claims)
        # this pit's own shoe: when its session last heard it (what the store holds may be a
        # recording played on the line); another pit's: its newest authentic frame stored
        heard = link.get("heard") if link is not None else t.frame_at
        if speaks and heard is not None and now - heard >= STALE:
            return "silent", heard, "no frame stored since then"
        if t.ended:
            return "ended", t.ended_at, ""
        if t.held:
            return "held", t.held_at, ""
        return ("dealing", t.started_at, "") if t.shoe is not None else ("waiting", None, "")

    def state(self, t: TableView) -> str:
        return self.status(t)[0]

    def table(self, name: str) -> TableView | None:
        return next((t for t in self.by_id.values() if t.table == name), None)

    def tables(self) -> list[TableView]:
        """This pit's tables (all of the store's for serve --floor, which has none)."""
        return sorted((t for t in self.by_id.values() if not self.own or t.shoe_id in self.own),
                      key=lambda t: t.table)

    def pit_of(self, t: TableView) -> str:
        """The pit a table is in: this one's, the one whose writer validates it now, or the
        one seen last ("" when none was)."""
        if t.shoe_id in self.own:
            return self.name
        if self.claims and t.shoe_id in self.claims:
            return pit_of(self.claims[t.shoe_id])
        return self.last_pit.get(t.shoe_id, "")

    def floor(self, only: str | None = None) -> list[tuple[str, list[TableView]]]:
        """Every table of the store, by pit (pits by name, "" last); `only`: one pit's."""
        pits: dict[str, list[TableView]] = {}
        for t in sorted(self.by_id.values(), key=lambda t: t.table):
            pits.setdefault(self.pit_of(t), []).append(t)
        return [(p, pits[p]) for p in sorted(pits, key=lambda p: (p == "", p))
                if only is None or p == only]

    # ---- shift figures ---------------------------------------------------------------------
    def shift_start(self, now: float | None = None) -> float:
        return shift_bounds(self.shifts, time.time() if now is None else now)[0]

    def figures(self, t: TableView, now: float | None = None) -> dict[str, Any]:
        """Per table: rounds in the last hour, this shoe's rounds and minutes, shoes this
        shift."""
        now = time.time() if now is None else now
        start = self.shift_start(now)
        shoe_end = t.ended_at if t.ended and t.ended_at is not None else now
        return {"hands_last_hour": sum(1 for s in t.results_at if s > now - 3600),
                "shoe_rounds": len(t.hands if t.blackjack else t.rounds),
                "shoe_minutes": None if t.started_at is None
                else round((shoe_end - t.started_at) / 60, 1),
                "shoes_this_shift": sum(1 for s in t.shoes_at if s >= start)}

    # ---- alarms ------------------------------------------------------------------------------
    def alarms_of(self, t: TableView) -> list[dict[str, Any]]:
        """The table's alarms, oldest first: its current shoe's stored ones and serve's own
        (not recording, a silent link), each with `raised_at` (epoch seconds), `serve` (serve's
        own), `cleared_at` (serve's, once cleared) and `ack` (the acknowledgement, or None)."""
        out = [dict(a, serve=False, cleared_at=None) for a in t.alarms]
        seen: set[tuple[Any, ...]] = set()
        if self.recording is not None and t.shoe_id in self.own:
            for a in self.recording.of_shoe(t.shoe_id):
                out.append({"kind": a.kind, "shoe_id": t.shoe_id, "shoe": t.shoe,
                            "round": None, "detail": a.detail, "raised_at": a.raised_at,
                            "cleared_at": a.cleared_at, "serve": True, "id": None,
                            "pit_wide": a.shoe_id is None})
                seen.add((a.kind, iso(a.raised_at)))
        for a in self.logged_alarms.get(t.shoe_id, []):
            if (a["kind"], a["logged"]) not in seen:
                out.append(dict(a, shoe=None, round=None, id=None))
        for a in out:
            a["ack"] = self.acks.get(alarm_key(a, t.shoe_id))
        return sorted(out, key=lambda a: a["raised_at"] if isinstance(
            a["raised_at"], (int, float)) else 0.0)


def alarm_key(alarm: dict[str, Any], shoe_id: Any) -> tuple[Any, ...]:
    """What names an alarm to acknowledge: a stored one by its row id; one of serve's own by
    its kind, the time it was raised and the table's shoe."""
    if alarm.get("id") is not None:
        return ("stored", alarm["id"])
    return ("serve", alarm.get("kind"), iso_text(alarm.get("raised_at")), shoe_id)


def shift_bounds(shifts: Sequence[str], now: float) -> tuple[float, float]:
    """The shift `now` is in: (its start, the next shift's start), from the day's starting
    times ("06:00", "14:00", "22:00")."""
    day = time.localtime(now)
    starts = []
    for back in (-1, 0, 1):
        for hhmm in shifts:
            h, m = (int(x) for x in hhmm.split(":"))
            starts.append(time.mktime((day.tm_year, day.tm_mon, day.tm_mday + back, h, m, 0,
                                       0, 0, -1)))
    starts.sort()
    begun = max(s for s in starts if s <= now)
    return begun, min(s for s in starts if s > now)


def _kept(times: list[float], at: float | None) -> list[float]:
    """`times` of the last KEPT seconds, and `at`."""
    if at is None:
        return times
    return [s for s in times if s > at - KEPT] + [at]


def _time(value: Any) -> float | None:
    """A stored time (epoch seconds); None for a value no validator stores there."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < 1e11:
        return float(value)
    return None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _from_iso(value: Any) -> float | None:
    from datetime import datetime

    try:
        return datetime.fromisoformat(value).timestamp() if isinstance(value, str) else None
    except ValueError:
        return None


def flag_list(rec: dict[str, Any]) -> list[Any]:
    flags = rec.get("flags")
    return flags if isinstance(flags, list) else []


SIDE_COUNTED = ("player_pair", "banker_pair", "dragon7", "panda8", "lucky_six")


def counts(rounds: list[dict[str, Any]]) -> dict[str, int]:
    out = {"banker": 0, "player": 0, "tie": 0, "natural": 0, **dict.fromkeys(SIDE_COUNTED, 0)}
    for r in rounds:
        w = r.get("winner")
        if isinstance(w, str) and w in BEAD:
            out[w] += 1
        flags = flag_list(r)
        for f in SIDE_COUNTED:
            out[f] += f in flags
        out["natural"] += "player_natural" in flags or "banker_natural" in flags
    return out


def blackjack_hands(rec: dict[str, Any]) -> dict[str, Any]:
    """A blackjack_result record as the pages show it: the round, whether it was voided, the
    dealer's cards and total, and each hand's seat, cards, total, doubled and split (the host's
    own rules following the signed seats and events); a record no validator stores (an edited
    store) is shown as unknown."""
    from sabot.game.blackjack import round_of, total_text

    rnd = rec.get("round")
    try:
        if rec.get("voided"):
            return {"round": rnd, "voided": True, "dealer": [], "hands": []}
        r = round_of(rec)
        return {"round": rnd, "voided": False, "dealer": r["dealer"],
                "dealer_total": total_text(r["dealer"], True),
                "hands": [dict(h, total=total_text(h["cards"], not h["split"]))
                          for h in r["hands"]]}
    except (KeyError, TypeError, ValueError, IndexError, SabotError):
        return {"round": rnd, "voided": False, "dealer": [], "dealer_total": UNKNOWN,
                "hands": []}


def roads_of(t: TableView) -> dict[str, Any]:
    return roads(r.get("winner") for r in t.rounds)

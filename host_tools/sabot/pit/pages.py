"""The pages of `sabot serve`: the pit dashboard, each table's scoreboard and the JSON API, all
read from the audit store through a read-only connection (the validators are its only writers).

`Pit` follows the store's new rows (records and alarms by id) and keeps, per table, the current
shoe's rounds, roads, the shoe's remaining cards and exact edges (watch.LiveEdges over the
validator's own accounting, as stored after its latest read). Pages are rendered here, on the
server, with pit/markup.py's builders, which escape every value they are given: an insider who
can write the store or the registry can put markup in any column or name, and it is shown as
text. Every response carries a Content-Security-Policy that runs no inline script or style; the
pages' one script and stylesheet are files (pit/static/), and the script only swaps in the fresh
fragment each server-sent event brings. A value of a shape no validator stores (a winner that is
none, a round that is a string) is shown as it is or as unknown, never a server error: finding
the edit is `sabot audit verify`'s."""

from __future__ import annotations

import asyncio
import json
import math
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from importlib import resources
from typing import Any
from urllib.parse import quote

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sabot.audit.store import AuditStore
from sabot.audit.validator import contract_round
from sabot.audit.watch import LiveEdges, offered_wagers
from sabot.errors import SabotError
from sabot.game.roads import BEAD, DERIVED, UNKNOWN, bead, roads, streaks
from sabot.pit.console import Console
from sabot.pit.markup import Html, document, el, join
from sabot.pit.serve import pit_of
from sabot.protocol import HOLDS
from sabot.registry import ShoeEntry

POLL = 0.25  # seconds: the longest a page waits for a row nobody announced
CLAIMS_EVERY = 1.0  # seconds between asking which shoes live writers validate (the floor)
FLOOR_ALARMS = 50  # the floor's newest alarms listed
LAST_RESULTS = 12
BEAD_ROWS = 6


@dataclass
class TableView:
    """What the pit knows of one table, from the store."""

    shoe_id: int
    config: ShoeEntry
    shoe: int | None = None
    rounds: list[dict[str, Any]] = field(default_factory=list)
    round_stored: list[float] = field(default_factory=list)  # each round's frame's storage time
    held: str | None = None
    ended: bool = False
    tilted: bool = False
    alarms: list[dict[str, Any]] = field(default_factory=list)  # of the current shoe
    # a blackjack table's rounds of the current shoe (blackjack_hands): its hands, by seat
    hands: list[dict[str, Any]] = field(default_factory=list)
    stored_at: float | None = None  # when the frame of the latest change was stored
    version: int = 0
    edges: dict[str, float] | None = None
    remaining: int | None = None
    live: LiveEdges = field(init=False)

    def __post_init__(self) -> None:
        self.live = LiveEdges(self.config.decks, self.config.tie_odds)

    @property
    def table(self) -> str:
        return self.config.table


class Pit:
    """Every table served, followed from the audit store's new rows."""

    def __init__(self, db: str, configs: list[ShoeEntry],
                 link: Callable[[int], dict[str, Any] | None] | None = None,
                 name: str = "", floor: Sequence[ShoeEntry] = ()) -> None:
        self.db = db
        self.name = name  # this pit's (serve --pit)
        self.store: AuditStore | None = None
        # each of this pit's shoes' link: {"state": connecting | up | lost, "reason": why lost,
        # "since": time}; None for a shoe this process does not validate (another pit's)
        self.link = link or (lambda shoe_id: {"state": "up", "reason": "", "since": None})
        self.own = {c.shoe_id for c in configs}  # this pit's tables: none for serve --floor
        self.by_id: dict[int, TableView] = {c.shoe_id: TableView(c.shoe_id, c)
                                            for c in (*floor, *configs)}
        # the floor: which shoes a live writer validates, and whose (store.validators());
        # None where the store cannot tell. A pit seen once is remembered for its tables.
        self.claims: dict[int, str] | None = None
        self.last_pit: dict[int, str] = {}
        self._claims_at = 0.0
        self.last_record = 0
        self.last_alarm = 0
        self.problem: str | None = None  # why the newest rows could not be read, if they could not
        self.skipped = 0  # rows naming no shoe id (an edited store): counted, shown on no table
        self.notes = 0  # moves when what the dashboard says of the store itself changes
        # the receipt checker the scoreboard's QR code sends players to (serve --checker): the
        # regulator's copy of verify.html; None: this server's own /verify
        self.checker: str | None = None
        # this server's address as players' phones reach it (serve --public-url), for the QR
        # codes; None: the address each display asked by
        self.public_url: str | None = None

    def _store(self) -> AuditStore:
        if self.store is None:
            self.store = AuditStore(self.db, writer=False)
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

    def _read(self, what: str, read: Callable[[], list[Any]]) -> list[Any]:
        try:
            return read()
        except SabotError as e:  # the database itself (its server lost, a damaged file)
            self.problem = f"{e}: these pages show what they read last"
            return []
        except (ValueError, TypeError, RecursionError) as e:
            # a row the validators never wrote (not JSON, not an object): the pages keep what
            # they showed and say so; which row it is, audit verify says
            self.problem = (f"the store's {what} after the last one shown cannot be read "
                            f"({type(e).__name__}): run sabot audit verify")
            return []

    def refresh(self) -> set[int]:
        """Take the rows stored since the last call; the shoe ids whose tables changed."""
        try:
            store = self._store()
        except Exception:
            return set()  # the validators have not created the store yet
        changed: set[int] = set()
        said, self.problem = (self.problem, self.skipped), None
        for r in self._read("records", lambda: store.records_since(self.last_record)):
            self.last_record = r.id
            t = self._view(r.shoe_id)
            if t is None:
                continue
            self._apply(t, r.kind, r.record)
            t.stored_at = r.received_at
            if r.kind == "result":
                t.round_stored.append(r.received_at)
            changed.add(r.shoe_id)
        for a in self._read("alarms", lambda: store.alarms_since(self.last_alarm)):
            self.last_alarm = a["id"]
            shoe_id, shoe = a["shoe_id"], a["shoe"]
            if shoe_id is None:
                continue
            t = self._view(shoe_id)
            if t is None:
                continue
            if a["kind"] == "tilt":
                t.tilted = True
            if shoe is None or t.shoe is None or shoe == t.shoe:
                t.alarms.append({k: a[k] for k in ("kind", "shoe_id", "shoe", "round",
                                                    "detail")})
            changed.add(shoe_id)
        for shoe_id in changed:
            self._edges(self.by_id[shoe_id], store)
            self.by_id[shoe_id].version += 1
        if (self.problem, self.skipped) != said:
            self.notes += 1
        self._claimed(store)
        return changed

    def _claimed(self, store: AuditStore) -> None:
        """Which shoes live writers validate, asked every CLAIMS_EVERY (the floor's states)."""
        now = time.monotonic()
        if now - self._claims_at < CLAIMS_EVERY:
            return
        self._claims_at = now
        try:
            claims = store.validators(sorted(self.by_id))
        except SabotError:
            return  # the server is away: the floor shows what it last knew
        if claims != self.claims:
            self.claims = claims
            for sid, writer in (claims or {}).items():
                self.last_pit[sid] = pit_of(writer)
            self.notes += 1

    def _apply(self, t: TableView, kind: str, rec: dict[str, Any]) -> None:
        shoe = rec.get("shoe")
        if kind == "shoe_start" or (shoe is not None and shoe != t.shoe):
            t.shoe, t.rounds, t.held, t.ended, t.tilted = shoe, [], None, False, False
            t.round_stored, t.hands = [], []
            # the shoe device's own alarms (an update, a rekey: shoe None) stay in view
            t.alarms = [a for a in t.alarms if a["shoe"] in (None, t.shoe)][-20:]
        if kind == "result":
            t.rounds.append(contract_round(rec))
        elif kind == "blackjack_result":
            t.hands.append(blackjack_hands(rec))
        elif kind == "irregularity" and isinstance(rec.get("kind"), str) and rec["kind"] in HOLDS:
            t.held = rec["kind"]
        elif kind == "resolution":
            t.held = None
        elif kind == "shoe_end":
            t.ended = True

    def _edges(self, t: TableView, store: AuditStore) -> None:
        t.edges, t.remaining = None, None
        try:
            inv = store.latest_inventory(t.shoe_id) or {}
        except (SabotError, ValueError, RecursionError):
            return  # accounting that is not JSON: no edges shown
        counts = (inv.get("counts") or {}) if isinstance(inv, dict) else None
        if (not isinstance(inv, dict) or inv.get("partial") or inv.get("shoe") is None
                or not isinstance(counts, dict)
                or not all(isinstance(n, int) and not isinstance(n, bool)
                           for n in counts.values())):
            return
        try:
            t.live.update(inv["shoe"], counts)
        except (SabotError, ValueError, TypeError):  # cards no shoe holds
            t.live = LiveEdges(t.config.decks, t.config.tie_odds)
            return
        every = t.live.edges()
        t.remaining = t.live.cards
        offered = offered_wagers(t.config)
        t.edges = None if every is None else {w: every[n] for w, n in offered.items()}

    # ---- views -----------------------------------------------------------------------------
    def _own_link(self, t: TableView) -> dict[str, Any] | None:
        """The table's link when this pit validates it; None for another pit's."""
        return self.link(t.shoe_id) if t.shoe_id in self.own else None

    def state(self, t: TableView) -> str:
        link = self._own_link(t)
        if link is None and self.claims is not None and t.shoe_id not in self.claims:
            return "no validator"  # another pit's table, and no pit validates it now
        if link is not None and link["state"] == "lost":
            return "link lost"
        if t.tilted:
            return "tilted"
        if t.ended:
            return "ended"
        if t.held:
            return "held"
        return "dealing" if t.shoe is not None else "waiting"

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

    def floor_json(self, only: str | None = None) -> dict[str, Any]:
        pits = self.floor(only)
        alarms = [{"pit": p, "table": t.table, **a} for p, ts in pits for t in ts
                  for a in t.alarms]
        return {"pits": [{"pit": p, "tables": [{**self.summary(t), "pit": p,
                                                "alarms": len(t.alarms)} for t in ts]}
                         for p, ts in pits],
                "tables": sum(len(ts) for _, ts in pits), "alarms": alarms[-FLOOR_ALARMS:]}

    def link_json(self, t: TableView) -> dict[str, Any] | None:
        """The table's link for the API: its state, why it is lost ("" when up), and since when
        (UTC, ISO 8601; null before the first try); null for another pit's table."""
        link = self._own_link(t)
        if link is None:
            return None
        since = link["since"]
        return {"state": link["state"], "reason": link["reason"],
                "since": None if since is None else time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                  time.gmtime(since))}

    def summary(self, t: TableView) -> dict[str, Any]:
        newest = t.hands or t.rounds
        return {"table": t.table, "shoe_id": t.shoe_id, "shoe": t.shoe,
                "round": newest[-1].get("round", 0) if newest else 0,
                "state": self.state(t), "link": self.link_json(t)}

    def detail(self, t: TableView) -> dict[str, Any]:
        return {"table": t.table, "shoe_id": t.shoe_id, "shoe": t.shoe, "rounds": t.rounds,
                "roads": roads(r.get("winner") for r in t.rounds),
                "remaining_cards": t.remaining, "edges": t.edges, "alarms": t.alarms,
                "state": self.state(t), "link": self.link_json(t), "counts": counts(t.rounds),
                "stored_at": t.stored_at, **({"hands": t.hands} if t.hands else {})}


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


# ---- HTML ------------------------------------------------------------------------------------
LONGEST = 1000  # characters of one stored value shown: an edited store's megabyte is cut
STYLESHEET, SCRIPT = "/static/pages.css", "/static/pages.js"
DASHBOARD_HEADINGS = ("table", "state", "shoe", "round", "last result", "cards left",
                      "house edge (remaining shoe)", "alarms")


def shown(value: Any) -> str:
    """Any stored value as page text (the builders escape it), whatever its type."""
    try:
        text = value if isinstance(value, str) else str(value)
    except (RecursionError, ValueError):  # nested past repr's depth, or an int too long to print
        text = "…"
    return text if len(text) <= LONGEST else text[:LONGEST] + "…"


def cards_text(cards: Any) -> str:
    return " ".join(map(shown, cards)) if isinstance(cards, list) else shown(cards)


def flags_text(flags: Any) -> str:
    if isinstance(flags, list):
        return ", ".join(map(shown, flags))
    return shown(flags) if flags else ""


def table_path(table: str) -> str:
    """The scoreboard's path: the name percent-encoded whole (a `/` too), so any name is one
    path segment of this server."""
    return "/table/" + quote(table, safe="", errors="replace")


def fmt_edge(edge: float) -> str:
    return f"{edge:+.4%}"


def page(title: str, body: Html, events: str, kind: str = "pit") -> Html:
    """A whole page: `kind` "pit" (the dashboard) or "scoreboard" (a table's display, laid out
    to fill the screen it is shown on)."""
    return document(
        [el("meta", charset="utf-8"), el("title", title),
         el("meta", name="viewport", content="width=device-width, initial-scale=1"),
         el("link", rel="stylesheet", href=STYLESHEET)],
        el("body", el("h1", title), el("div", body, id="live"), el("script", src=SCRIPT),
           data_version=0, data_events=events, class_=kind))


def last_result(last: dict[str, Any] | None) -> str:
    if last is None:
        return "-"
    flags = flags_text(last.get("flags"))
    return (f"{shown(last.get('winner', UNKNOWN))} {shown(last.get('player_total', UNKNOWN))}-"
            f"{shown(last.get('banker_total', UNKNOWN))}" + (f" ({flags})" if flags else ""))


Controls = Callable[[str, str], "Html | None"]  # (table, state) -> an operator's buttons


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


def blackjack_last(last: dict[str, Any] | None) -> str:
    if last is None:
        return "-"
    if last.get("voided"):
        return "voided"
    return (f"dealer {shown(last.get('dealer_total'))} ({len(last.get('dealer') or [])} "
            "cards)")


def dashboard_row(pit: Pit, t: TableView, controls: Controls | None = None) -> Html:
    """A table's row: its name, state (with the operator's buttons), shoe, round, last result,
    cards left, edges and newest alarms; a blackjack table's last round is its dealer's total,
    and it has no baccarat edges."""
    state = pit.state(t)
    blackjack = t.config.game == "blackjack"
    newest = t.hands if blackjack else t.rounds
    last = newest[-1] if newest else None
    edges = [el("div", f"{w} {fmt_edge(e)}", class_="fav" if e < 0 else None)
             for w, e in (t.edges or {}).items()] or "-"
    alarms = [el("div", shown(a["kind"]), f" round {shown(a['round'])}" if a["round"] else "",
                 ": ", shown(a["detail"]), class_="alarm") for a in t.alarms[-5:]] or "none"
    return el(
        "tr",
        el("td", el("a", shown(t.table), href=table_path(t.table)), el("br"),
           el("small", f"shoe id {t.shoe_id:#010x}" + (" · blackjack" if blackjack else ""))),
        el("td", state, f" ({shown(t.held)})" if t.held and state == "held" else "",
           link_lost(pit.link_json(t) or {}) if state == "link lost" else None,
           controls(t.table, state) if controls else None,
           class_=f"state state-{state.replace(' ', '-')}"),
        el("td", "-" if t.shoe is None else shown(t.shoe)),
        el("td", shown(last.get("round", UNKNOWN)) if last else 0),
        el("td", blackjack_last(last) if blackjack else last_result(last)),
        el("td", "-" if t.remaining is None or blackjack else t.remaining),
        el("td", "-" if blackjack else edges), el("td", alarms), data_table=t.table)


def link_lost(link: dict[str, Any]) -> Html:
    """Since when and why a table's link is lost, under its state (the pit's eyes only)."""
    return join(el("br"), el("small", f"since {shown(link['since'])}: {shown(link['reason'])}"))


def problem(pit: Pit) -> Html | None:
    said = [pit.problem] if pit.problem else []
    if pit.skipped:
        said.append(f"{pit.skipped} stored rows name no shoe id and are shown on no table: run "
                    "sabot audit verify")
    return el("p", "; ".join(said), class_="alarm", id="problem") if said else None


def dashboard(pit: Pit, controls: Controls | None = None, bar: Html | None = None) -> Html:
    """The pit's tables; `controls`: an operator's buttons for each (pit/console.py), `bar`: who
    is logged in."""
    return join(bar, problem(pit),
                el("table", el("tr", [el("th", h) for h in DASHBOARD_HEADINGS]),
                   [dashboard_row(pit, t, controls) for t in pit.tables()], class_="pit"))


def dashboard_html(pit: Pit, controls: Controls | None = None, bar: Html | None = None) -> str:
    return str(dashboard(pit, controls, bar))


FLOOR_HEADINGS = ("pit", "table", "state", "shoe", "round", "last result", "alarms")


def floor_path(only: str | None = None, events: bool = False) -> str:
    path = "/floor/events" if events else "/floor"
    return path + (f"?pit={quote(only, safe='', errors='replace')}" if only is not None else "")


def floor_row(pit: Pit, name: str, t: TableView) -> Html:
    state = pit.state(t)
    last = t.rounds[-1] if t.rounds else None
    return el(
        "tr",
        el("td", shown(name) if name else "-"),
        el("td", el("a", shown(t.table), href=table_path(t.table)), el("br"),
           el("small", f"shoe id {t.shoe_id:#010x}")),
        el("td", state, f" ({shown(t.held)})" if t.held and state == "held" else "",
           class_=f"state state-{state.replace(' ', '-')}"),
        el("td", "-" if t.shoe is None else shown(t.shoe)),
        el("td", shown(last.get("round", UNKNOWN)) if last else 0),
        el("td", last_result(last)),
        el("td", len(t.alarms) or "none", class_="alarm" if t.alarms else None),
        data_table=t.table, data_pit=name)


def floor_view(pit: Pit, only: str | None = None) -> Html:
    """Every pit's tables (or one pit's: `only`), their states, and the floor's newest alarms."""
    every = pit.floor()
    shown_pits = [(p, ts) for p, ts in every if only is None or p == only]
    choose = [el("a", "every pit", href=floor_path(), class_="on" if only is None else None)]
    choose += [el("a", shown(p) or "no pit", href=floor_path(p),
                  class_="on" if p == only else None) for p, _ in every]
    alarms = [(p, t, a) for p, ts in shown_pits for t in ts for a in t.alarms][-FLOOR_ALARMS:]
    states: dict[str, int] = {}
    for _, ts in shown_pits:
        for t in ts:
            state = pit.state(t)
            states[state] = states.get(state, 0) + 1
    return join(
        problem(pit),
        el("nav", join(*[join(a, " ") for a in choose]), class_="pits"),
        el("p", f"{sum(len(ts) for _, ts in shown_pits)} tables in {len(shown_pits)} pit"
           f"{'' if len(shown_pits) == 1 else 's'}: "
           + (", ".join(f"{n} {state}" for state, n in sorted(states.items())) or "none"),
           id="floor-counts"),
        el("table", el("tr", [el("th", h) for h in FLOOR_HEADINGS]),
           [floor_row(pit, p, t) for p, ts in shown_pits for t in ts], class_="pit floor"),
        el("h2", "Alarms across the floor"),
        el("ul", [el("li", f"{shown(p) or 'no pit'} {shown(t.table)}: {shown(a['kind'])}",
                     f" round {shown(a['round'])}" if a["round"] else "", ": ",
                     shown(a["detail"]), class_="alarm") for p, t, a in reversed(alarms)]
           or el("li", "none"), id="floor-alarms"))


def derived_cells(entries: list[str]) -> list[tuple[int, int, str]]:
    """Derived-road entries laid out as players read them: a new column when the colour
    changes, down the column while it repeats."""
    out: list[tuple[int, int, str]] = []
    col, row = 0, 0
    for i, e in enumerate(entries):
        if i == 0 or e != entries[i - 1]:
            col, row = col + 1, 1
        else:
            row += 1
        out.append((col, row, e))
    return out


def bead_plate(t: TableView, marks: list[str]) -> Html:
    beads = []
    for i, (rec, v) in enumerate(zip(t.rounds, marks)):
        flags = flag_list(rec)
        pairs = [c for c, f in (("pp", "player_pair"), ("bp", "banker_pair")) if f in flags]
        beads.append(el("span", v, class_=" ".join(["bead", "U" if v == UNKNOWN else v, *pairs]),
                        data_i=i, data_v=v, title=f"round {shown(rec.get('round', UNKNOWN))}"))
    return el("div", beads, class_="grid", id="bead_plate")


def big_road(columns: list[list[dict[str, Any]]]) -> Html:
    return el("div", [
        el("div", [el("span", el("i", cell["ties"], class_="ties") if cell["ties"] else None,
                      class_=f"big {cell['winner']}", data_col=c, data_row=row,
                      data_v=cell["winner"], data_ties=cell["ties"])
                   for row, cell in enumerate(column, 1)], class_="col")
        for c, column in enumerate(columns, 1)], class_="road", id="big_road")


def derived_road(name: str, entries: list[str]) -> Html:
    columns: list[list[Html]] = []
    for i, (_, row, e) in enumerate(derived_cells(entries)):
        if row == 1:
            columns.append([])
        columns[-1].append(el("span", class_=e, data_i=i, data_v=e))
    return el("div", el("h2", name.replace("_", " ").title()),
              el("div", [el("div", col, class_="col") for col in columns],
                 class_=f"road derived {name}", id=name))


def last_results(rounds: list[dict[str, Any]], offered: Sequence[str] = ()) -> Html:
    """The newest rounds, each with the flags players are told of: naturals and pairs, and the
    side wagers the table offers (`offered`); not a Lucky Six on a table with no such wager."""
    told = {"player_natural", "banker_natural", "player_pair", "banker_pair", *offered}
    items = []
    for rec in rounds[-LAST_RESULTS:][::-1]:
        flags = flags_text([f for f in flag_list(rec) if isinstance(f, str) and f in told])
        rnd, winner = rec.get("round"), rec.get("winner")
        mark = bead(winner)
        items.append(el(
            "li", f"P {cards_text(rec.get('player'))} ({shown(rec.get('player_total'))}) "
            f"B {cards_text(rec.get('banker'))} ({shown(rec.get('banker_total'))}) → ",
            el("b", shown(winner), class_="unknown-t" if mark == UNKNOWN else f"{mark}-t"),
            f" {flags}" if flags else None,
            value=rnd if isinstance(rnd, int) and not isinstance(rnd, bool) else None))
    return el("ol", items, class_="last", reversed=True)


# What players are told of a table's state: nothing of the pit's own (a lost link, a tilt, a
# held irregularity are the pit's to handle; the table is paused for the players).
PLAYER_STATE = {"dealing": "dealing", "waiting": "waiting for the next shoe",
                "ended": "shoe ended", "held": "paused", "tilted": "paused",
                "link lost": "paused"}
SIDE_NAMES = {"dragon7": "Dragon 7", "panda8": "Panda 8", "lucky_six": "Lucky Six"}


def money(cents: int) -> str:
    """$25, $2.50, $5,000: whole dollars without cents."""
    dollars, rest = divmod(cents, 100)
    return f"${dollars:,}" + (f".{rest:02d}" if rest else "")


def percent(n: int, total: int) -> str:
    return f"{100 * n / total:.0f}%" if total else "-"


def ask_panel(asked: dict[str, dict[str, str | None]]) -> Html:
    """Banker ask and Player ask: each derived road's entry were the next round won by that
    side, drawn as the road draws it (an empty place where it gives none)."""
    rows = []
    for side, label in (("banker", "Banker ask"), ("player", "Player ask")):
        marks = [el("span", el("span", class_=e) if e else None, class_=f"askmark {name}",
                    data_road=name, data_v=e or "none", title=name.replace("_", " "))
                 for name, e in asked[side].items()]
        rows.append(el("div", el("b", label, class_="B-t" if side == "banker" else "P-t"),
                       marks, class_="ask", id=f"ask_{side}"))
    return el("div", rows, class_="asks")


def blackjack_board(pit: Pit, t: TableView) -> Html:
    """A blackjack table's scoreboard: the newest round's hands, the dealer's and each seat's
    from the dealer's left, then the rounds before it."""
    c = t.config
    last = t.hands[-1] if t.hands else None
    head = [el("span", f"shoe {shown(t.shoe)}" if t.shoe is not None else "no shoe yet"),
            el("span", f"round {shown(last['round']) if last else 0}"),
            el("span", PLAYER_STATE.get(pit.state(t), "paused"), class_="state"),
            el("span", f"dealer {'draws to soft 17' if c.dealer == 'h17' else 'stands on 17'}"
               f"{'' if c.hole_card else ' · no hole card'}")]
    if c.min_bet_cents is not None and c.max_bet_cents is not None:
        head.append(el("span", f"Min {money(c.min_bet_cents)} · Max {money(c.max_bet_cents)}",
                       class_="limits", id="limits"))

    def hands(h: dict[str, Any]) -> Html:
        if h.get("voided"):
            return el("p", "voided by the supervisor: no wager settled", class_="voided")
        rows = [el("tr", el("th", "Dealer"), el("td", cards_text(h.get("dealer"))),
                   el("td", shown(h.get("dealer_total")),
                      f" · {len(h.get('dealer') or [])} cards"), class_="dealer")]
        rows += [el("tr", el("th", f"Seat {shown(x.get('seat'))}"),
                    el("td", cards_text(x.get("cards"))),
                    el("td", shown(x.get("total")), " · doubled" if x.get("doubled") else None,
                       " · split" if x.get("split") else None), data_seat=shown(x.get("seat")))
                 for x in h.get("hands") or []]
        return el("table", rows, class_="hands")

    newest = el("div", el("h2", f"Round {shown(last['round'])}" if last else "No round yet"),
                hands(last) if last else None, class_="lastbox", id="hands")
    # (the list's own numbers are the rounds')
    before = [el("li", "voided" if h.get("voided") else join(
        el("b", f"dealer {cards_text(h.get('dealer'))} ({shown(h.get('dealer_total'))})"),
        *(f" · seat {shown(x.get('seat'))} {shown(x.get('total'))}"
          for x in h.get("hands") or [])),
        value=h.get("round") if isinstance(h.get("round"), int) else None)
        for h in t.hands[-LAST_RESULTS - 1:-1][::-1]]
    return join(
        el("div", head, id="where", class_="where", data_shoe=shown(t.shoe),
           data_round=shown(last["round"]) if last else 0),
        newest,
        el("div", el("h2", "Rounds before"), el("ol", before, class_="last", reversed=True),
           class_="lastbox"),
        receipt_qr(t))


def scoreboard(pit: Pit, t: TableView) -> Html:
    if t.config.game == "blackjack":
        return blackjack_board(pit, t)
    d = pit.detail(t)
    r, n = d["roads"], d["counts"]
    c = t.config
    decided = n["banker"] + n["player"] + n["tie"]
    streak = streaks(r["big_road"])
    now = streak["current"]
    in_shoe = c.decks * 52
    dealt = None if t.remaining is None else in_shoe - t.remaining
    head = [el("span", f"shoe {shown(t.shoe)}" if t.shoe is not None else "no shoe yet"),
            el("span", f"round {len(t.rounds)}"),
            el("span", PLAYER_STATE.get(pit.state(t), "paused"), class_="state")]
    if c.min_bet_cents is not None and c.max_bet_cents is not None:
        head.append(el("span", f"Min {money(c.min_bet_cents)} · Max {money(c.max_bet_cents)}",
                       class_="limits", id="limits"))
    progress = el("label", el("progress", value=dealt or 0, max=in_shoe),
                  "cards dealt -" if dealt is None else f"cards dealt {dealt} of {in_shoe}",
                  class_="progress", id="progress")
    stats = [el("span", f"Banker {n['banker']} · {percent(n['banker'], decided)}",
                class_="B-t"),
             el("span", f"Player {n['player']} · {percent(n['player'], decided)}",
                class_="P-t"),
             el("span", f"Tie {n['tie']} · {percent(n['tie'], decided)}", class_="T-t"),
             el("span", f"Banker pair {n['banker_pair']}"),
             el("span", f"Player pair {n['player_pair']}"),
             el("span", f"Naturals {n['natural']}")]
    stats += [el("span", f"{SIDE_NAMES[w]} {n[w]}", data_side=w)
              for w in SIDE_NAMES if w in c.side_wagers]
    streak_line = [el("span", "streak " + ("-" if now is None else
                                          f"{'Banker' if now['winner'] == 'B' else 'Player'} "
                                          f"{now['length']}"), id="streak"),
                   el("span", f"longest Banker {streak['longest_banker']}"),
                   el("span", f"longest Player {streak['longest_player']}")]
    return join(
        el("div", head, progress, id="where", class_="where", data_shoe=shown(t.shoe),
           data_round=len(t.rounds)),
        el("div", el("div", el("h2", "Bead Plate"), bead_plate(t, r["bead_plate"]),
                     class_="beads"),
           el("div", el("h2", "Big Road"), big_road(r["big_road"]), class_="bigroad"),
           class_="roads top"),
        el("div", [derived_road(name, r[name]) for name in DERIVED], ask_panel(r["ask"]),
           class_="roads derived-row"),
        el("div", el("p", stats, class_="counts", id="counts"),
           el("p", streak_line, class_="counts streaks"), class_="stats"),
        el("div", el("h2", "Last results"), last_results(t.rounds, c.side_wagers),
           class_="lastbox"),
        receipt_qr(t))


def receipt_path(table: str, shoe: int, round_no: int) -> str:
    return f"/receipt/{quote(table, safe='', errors='replace')}/{shoe}/{round_no}"


def receipt_qr(t: TableView) -> Html:
    """The last round's receipt as a QR code: a link to this server's checker page, which loads
    the receipt and checks it in the player's browser against keys the player trusts."""
    played = [h for h in t.hands if not h.get("voided")] if t.config.game == "blackjack" \
        else t.rounds
    last = played[-1] if played else None
    rnd = last.get("round") if isinstance(last, dict) else None
    # (an edited store may give anything: no number, no code)
    shoe = t.shoe
    if not (isinstance(shoe, int) and isinstance(rnd, int) and not isinstance(rnd, bool)
            and 0 < shoe < 1 << 16 and 0 < rnd < 1 << 16):
        return join()
    src = receipt_path(t.table, shoe, rnd).replace("/receipt/", "/qr/", 1)
    return el("figure", el("img", src=src, alt=f"QR code: the receipt of round {rnd}"),
              el("figcaption", f"Round {rnd}: scan to check its receipt"),
              class_="receipt-qr", id="receipt-qr")


def scoreboard_html(pit: Pit, t: TableView) -> str:
    return str(scoreboard(pit, t))


# ---- the app -----------------------------------------------------------------------------------
class Hub:
    """Wakes the pages' streams when the validators stored something (or every POLL seconds)."""

    def __init__(self, pit: Pit) -> None:
        self.pit = pit
        self.loop: asyncio.AbstractEventLoop | None = None
        self.wake: asyncio.Event | None = None
        self.changed: asyncio.Condition | None = None
        self.task: asyncio.Task[None] | None = None
        self.closing = False  # the server is stopping: every stream ends

    def notify(self) -> None:
        """Thread-safe: called by a validator thread after a stored read."""
        loop, wake = self.loop, self.wake
        if loop is not None and wake is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(wake.set)
            except RuntimeError:  # the web side shut down between the check and the call
                pass

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.wake = asyncio.Event()
        self.changed = asyncio.Condition()
        self.pit.refresh()
        self.task = asyncio.create_task(self._follow())

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()

    async def end_streams(self) -> None:
        """Every page's stream ends now, so a stopping server has no response left to wait
        for (its pages reconnect to the next one)."""
        self.closing = True
        if self.changed is not None:
            async with self.changed:
                self.changed.notify_all()

    async def _follow(self) -> None:
        assert self.wake is not None and self.changed is not None
        while True:
            try:
                await asyncio.wait_for(self.wake.wait(), POLL)
            except TimeoutError:
                pass
            self.wake.clear()
            notes = self.pit.notes
            if self.pit.refresh() or self.pit.notes != notes:
                async with self.changed:
                    self.changed.notify_all()

    async def stream(self, request: Request, version: Callable[[], int],
                     render: Callable[[], dict[str, Any]]) -> AsyncIterator[str]:
        """Server-sent events: the page's fresh fragment each time its version moves."""
        assert self.changed is not None
        yield "retry: 1000\n\n"
        last = None
        while not self.closing:
            if version() != last:
                last = version()
                yield f"data: {to_json(render())}\n\n"
            async with self.changed:
                if version() == last and not self.closing:
                    try:
                        await asyncio.wait_for(self.changed.wait(), 15)
                    except TimeoutError:
                        yield ": keep-alive\n\n"
            if await request.is_disconnected():
                return


# Every response: scripts and styles from this server's files only (none inline, no event
# handler attribute), nothing framed, fetched or posted elsewhere; the browser never guesses a
# type, and no page's address is sent on.
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
    "img-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "same-origin",  # none off this server; its own forms keep their Origin
}
STATIC_TYPES = {"verify.html": "text/html; charset=utf-8",  # a receipt checked in the browser
                "verify.js": "text/javascript; charset=utf-8",
                "pages.css": "text/css; charset=utf-8",
                "pages.js": "text/javascript; charset=utf-8"}


class SecurityHeaders:
    """ASGI middleware: SECURITY_HEADERS on every HTTP response, streams included."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def with_headers(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers[name] = value
            await send(message)

        try:
            await self.app(scope, receive, with_headers)
        except Exception as e:  # a fault of ours: one line in serve's log, a 500 with headers
            print(f"sabot serve: internal error on {scope.get('method')} {scope.get('path')}: "
                  f"{type(e).__name__}: {e}", file=sys.stderr, flush=True)
            if not started:
                await PlainTextResponse("internal error", status_code=500)(scope, receive,
                                                                          with_headers)


def finite(value: Any) -> Any:
    """`value` with NaN and infinities (JSON has no such number) as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def _text_of(value: Any) -> str:
    """A column value JSON has no type for (a BLOB an insider wrote where text belongs)."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def to_json(value: Any, ascii_only: bool = True) -> str:
    """Strict JSON, whatever an edited store holds (a NaN is null, a BLOB its text)."""
    try:
        return json.dumps(value, ensure_ascii=ascii_only, allow_nan=False,
                          separators=(",", ":"), default=_text_of)
    except ValueError:
        return json.dumps(finite(value), ensure_ascii=ascii_only, allow_nan=False,
                          separators=(",", ":"), default=_text_of)


class StoredJSON(JSONResponse):
    """Starlette's JSON, also for values a validator never stores (a NaN, a lone surrogate)."""

    def render(self, content: Any) -> bytes:
        return to_json(content, ascii_only=False).encode("utf-8", "replace")


def html_response(markup: Html, status_code: int = 200) -> Response:
    return HTMLResponse(str(markup).encode("utf-8", "replace"), status_code=status_code)


def static_files() -> dict[str, bytes]:
    folder = resources.files("sabot.pit").joinpath("static")
    return {name: folder.joinpath(name).read_bytes() for name in STATIC_TYPES}


def web_server(app: Starlette, hub: Hub, host: str, port: int) -> Any:
    """The uvicorn server of the pages. Stopping, it first ends the pages' streams: an open page
    would otherwise hold its response until the graceful timeout, then be cancelled with a
    traceback."""
    import uvicorn

    class Server(uvicorn.Server):
        async def shutdown(self, sockets: Any = None) -> None:
            await hub.end_streams()
            await super().shutdown(sockets)

    # proxy_headers off: uvicorn would otherwise take X-Forwarded-For from any local process as
    # the client's address (the operator log's `from`, the login limit's per-address count)
    return Server(uvicorn.Config(app, host=host, port=port, log_level="warning",
                                 lifespan="on", timeout_graceful_shutdown=1,
                                 proxy_headers=False))


def operator_view(console: Console | None, request: Request
                  ) -> tuple[Controls | None, Html | None]:
    """The dashboard as this request's session sees it: its buttons for each table, and who is
    logged in (nothing of either without a console)."""
    if console is None:
        return None, None
    s = console.session(request)
    return (lambda table, state: console.controls(s, table, state)), console.bar(s)


def event_stream(gen: AsyncIterator[str]) -> Response:
    return StreamingResponse(gen, media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache"})


def floor_routes(pit: Pit, hub: Hub) -> list[Route]:
    """/floor (every pit's tables, or ?pit=NAME's), its stream, and /api/floor."""
    def only_pit(request: Request) -> tuple[str | None, Response | None]:
        """?pit=NAME: one pit of the floor, or a 404 when the floor has no such pit."""
        only = request.query_params.get("pit")
        if only is not None and only not in {p for p, _ in pit.floor()}:
            return only, StoredJSON({"error": f"no pit {only}"}, status_code=404)
        return only, None

    async def floor_page(request: Request) -> Response:
        only, missing = only_pit(request)
        if missing is not None:
            return html_response(join("no pit ", only or ""), status_code=404)
        return html_response(page("Floor" if only is None else f"Floor: pit {only}",
                                  floor_view(pit, only), floor_path(only, events=True)))

    async def api_floor(request: Request) -> Response:
        only, missing = only_pit(request)
        return missing or StoredJSON(pit.floor_json(only))

    async def floor_events(request: Request) -> Response:
        only = request.query_params.get("pit")

        def version() -> int:
            return sum(t.version for t in pit.by_id.values()) + pit.notes

        def render() -> dict[str, Any]:
            return {"version": version(), "html": str(floor_view(pit, only)),
                    "sent_at": time.time()}
        return event_stream(hub.stream(request, version, render))

    return [Route("/floor", floor_page), Route("/floor/events", floor_events),
            Route("/api/floor", api_floor)]


def qr_svg(link: str) -> bytes:
    """The QR code of `link` as an SVG document of its own (its namespace declared: an <img>
    shows nothing without it)."""
    import io

    import segno

    out = io.BytesIO()
    segno.make(link, error="m").save(out, kind="svg", xmldecl=False, scale=6, border=2)
    return out.getvalue()


def receipt_routes(pit: Pit) -> list[Route]:
    """/receipt/TABLE/SHOE/ROUND (a round's receipt, made from the store once its checkpoint is
    cosigned) and /qr/TABLE/SHOE/ROUND (the QR code of the checker page's link to it)."""

    def receipt_of(request: Request) -> tuple[int, str]:
        """(status, the receipt or one line why not) of the round a /receipt or /qr path
        names."""
        from sabot.audit.receipts import make_receipt

        p = request.path_params
        t = pit.table(p["table"])
        if t is None:
            return 404, f"no table {p['table']}\n"
        if not (0 < p["shoe"] < 1 << 16 and 0 < p["round"] < 1 << 16):
            return 404, "no such round: shoes and rounds are numbered 1 to 65535\n"
        store = AuditStore(pit.db, writer=False)
        try:
            return 200, make_receipt(store, t.config, p["shoe"], p["round"])
        except SabotError as e:
            return 404, f"{e}\n"
        finally:
            store.close()

    async def receipt_route(request: Request) -> Response:
        status, text = await run_in_threadpool(receipt_of, request)
        return Response(text, status_code=status, media_type="text/plain; charset=utf-8",
                        headers={"Cache-Control": "no-cache",
                                 "Access-Control-Allow-Origin": "*"})

    async def qr_route(request: Request) -> Response:
        """The QR code (SVG) of the checker page's link to a round's receipt on this server:
        built from serve --public-url, else from the address the scoreboard's display asked by
        (a display opened by the pit's network name gives players a link their phones can
        open)."""
        p = request.path_params
        if pit.table(p["table"]) is None or not (0 < p["shoe"] < 1 << 16
                                                  and 0 < p["round"] < 1 << 16):
            return Response(f"no round {p['round']} of shoe {p['shoe']} at table "
                            f"{p['table']}\n", status_code=404,
                            media_type="text/plain; charset=utf-8")
        here = pit.public_url or str(request.base_url).rstrip("/")
        path = receipt_path(p["table"], p["shoe"], p["round"])
        # another origin's checker (the regulator's) fetches the receipt from here by its
        # whole address (/receipt answers any origin: a receipt is public and proves itself)
        link = (f"{pit.checker}#{here}{path}" if pit.checker else f"{here}/verify#{path}")
        return Response(qr_svg(link), media_type="image/svg+xml",
                        headers={"Cache-Control": "max-age=3600"})

    return [Route("/receipt/{table}/{shoe:int}/{round:int}", receipt_route),
            Route("/qr/{table}/{shoe:int}/{round:int}", qr_route)]


def log_routes(pit: Pit) -> list[Route]:
    """Each served shoe's log as C2SP tlog-tiles, from the audit store: /log/<8 hex digits of
    the shoe id>/checkpoint (the newest checkpoint the shoe signed, with the witnesses'
    cosignatures stored for it; the most cosigned size first) and /log/<id>/tile/... (hash
    tiles and entry bundles, up to that checkpoint's size)."""
    from sabot import tlog
    from sabot.audit.receipts import published_note
    from sabot.audit.validator import stored_log

    def text(body: str | bytes, status: int = 200, kind: str = "text/plain; charset=utf-8"
             ) -> Response:
        return Response(body, status_code=status, media_type=kind,
                        headers={"Cache-Control": "no-cache" if kind.startswith("text")
                                 else "max-age=31536000, immutable"})

    def head(store: AuditStore, shoe: str) -> tuple[Any, dict[str, Any] | None]:
        """(the shoe's table, its newest checkpoint with the most cosignatures) or Nones."""
        digits = shoe.lower().removeprefix("0x")
        if not 1 <= len(digits) <= 8 or any(c not in "0123456789abcdef" for c in digits):
            return None, None
        t = next((v for v in pit.tables() if v.shoe_id == int(digits, 16)), None)
        if t is None:
            return None, None
        cps = store.checkpoints(t.shoe_id)
        best = max(cps, key=lambda c: (len(c["cosignatures"]) > 0, c["size"]), default=None)
        return t, best

    def reading(answer: Callable[[AuditStore], Response]) -> Response:
        store = AuditStore(pit.db, writer=False)  # one reader a request
        try:
            return answer(store)
        finally:
            store.close()

    def checkpoint_of(store: AuditStore, shoe: str) -> Response:
        t, cp = head(store, shoe)
        if t is None:
            return text(f"no shoe {shoe} is served here\n", 404)
        if cp is None:
            return text(f"shoe {shoe} has signed no checkpoint of its log yet\n", 404)
        try:
            return text(published_note(t.config, cp))
        except SabotError as e:
            return text(f"{e}\n", 404)

    def tile_of(store: AuditStore, shoe: str, path: str) -> Response:
        where = tlog.parse_tile_path("tile/" + path)
        t, cp = head(store, shoe)
        if t is None or where is None or cp is None:
            return text("no such tile\n", 404)
        level, index, width = where
        log, leaves = stored_log(store, t.shoe_id)
        size = min(cp["size"], len(log.hashes))
        data = (tlog.entry_bundle(leaves, size, index, width) if level is None
                else tlog.tile(log.hashes, size, level, index, width))
        if data is None:
            return text("no such tile in the log's published size\n", 404)
        return text(data, kind="application/octet-stream")

    async def checkpoint_route(request: Request) -> Response:
        shoe = request.path_params["shoe"]
        return await run_in_threadpool(reading, lambda store: checkpoint_of(store, shoe))

    async def tile_route(request: Request) -> Response:
        p = request.path_params
        return await run_in_threadpool(reading, lambda store: tile_of(store, p["shoe"],
                                                                      p["path"]))

    return [Route("/log/{shoe}/checkpoint", checkpoint_route),
            Route("/log/{shoe}/tile/{path:path}", tile_route)]


def build_app(pit: Pit, console: Console | None = None) -> tuple[Starlette, Hub]:
    """The pages, the API and (with a `console`) the pit's operations."""
    hub = Hub(pit)
    files = static_files()

    def operator(request: Request) -> tuple[Controls | None, Html | None]:
        return operator_view(console, request)

    def not_found(name: str) -> Response:
        return StoredJSON({"error": f"no table {name}"}, status_code=404)

    async def dashboard_page(request: Request) -> Response:
        return html_response(page("Pit dashboard", dashboard(pit, *operator(request)),
                                  "/events"))

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in files:
            return Response(f"no file {name}", status_code=404, media_type="text/plain")
        return Response(files[name], media_type=STATIC_TYPES[name],
                        headers={"Cache-Control": "no-cache"})

    async def table_route(request: Request) -> Response:
        """/table/NAME and its stream /table/NAME/events. A name is one path segment (its `/`
        percent-encoded, table_path), so the stream is told by the undecoded path's end."""
        name = request.path_params["name"]
        raw = request.scope.get("raw_path") or request.url.path.encode()
        if raw.endswith(b"/events"):
            return await table_events(request, name[: -len("/events")])
        t = pit.table(name)
        if t is None:
            return html_response(join("no table ", name), status_code=404)
        return html_response(page(f"Table {t.table}", scoreboard(pit, t),
                                  table_path(t.table) + "/events", "scoreboard"))

    async def api_tables(request: Request) -> Response:
        return StoredJSON([pit.summary(t) for t in pit.tables()])

    async def api_stats(request: Request) -> Response:
        """How long the live edge recomputes take in this process (validators and pages)."""
        ms = sorted(x * 1000 for x in LiveEdges.timings)
        pick = (lambda q: round(ms[min(len(ms) - 1, int(q * len(ms)))], 3)) if ms else (
            lambda q: None)
        return StoredJSON({"edges_recomputes": len(ms), "edges_median_ms": pick(0.5),
                           "edges_p99_ms": pick(0.99), "edges_max_ms": pick(1.0)})

    async def api_table(request: Request) -> Response:
        t = pit.table(request.path_params["table"])
        if t is None:
            return not_found(request.path_params["table"])
        return StoredJSON(pit.detail(t))

    async def dashboard_events(request: Request) -> Response:
        controls, bar = operator(request)  # the stream's page is this session's

        def version() -> int:
            return sum(t.version for t in pit.tables()) + pit.notes

        def render() -> dict[str, Any]:
            return {"version": version(), "html": dashboard_html(pit, controls, bar),
                    "sent_at": time.time()}
        return event_stream(hub.stream(request, version, render))

    async def table_events(request: Request, name: str) -> Response:
        t = pit.table(name)
        if t is None:
            return not_found(name)
        view = t

        def render() -> dict[str, Any]:
            return {"version": view.version, "html": scoreboard_html(pit, view),
                    "table": view.table, "shoe": view.shoe, "round": len(view.rounds),
                    "stored_at": view.stored_at, "round_stored": view.round_stored,
                    "sent_at": time.time()}
        return event_stream(hub.stream(request, lambda: view.version, render))

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await hub.start()
        yield
        await hub.stop()

    app = Starlette(routes=[
        Route("/", dashboard_page), Route("/events", dashboard_events),
        Route("/static/{name}", static), Route("/table/{name:path}", table_route),
        Route("/api/tables", api_tables), Route("/api/tables/{table:path}", api_table),
        Route("/api/stats", api_stats),
        Route("/verify", lambda request: RedirectResponse("/static/verify.html")),
        *receipt_routes(pit), *log_routes(pit),
        *floor_routes(pit, hub),
        *(console.routes() if console else []),
    ], lifespan=lifespan)
    app.add_middleware(SecurityHeaders)
    return app, hub

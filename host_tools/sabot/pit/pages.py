"""The pages of `sabot serve`: the pit dashboard, each table's scoreboard and the JSON API, all
read from the audit store through a read-only connection (the validators are its only writers).

`Pit` follows the store's new rows (records and alarms by id) and keeps, per table, the current
shoe's rounds, roads, the shoe's remaining cards and exact edges (watch.LiveEdges over the
validator's own accounting, as stored after its latest read). Pages are rendered here, on the
server; a few lines of JS swap in the fresh fragment each server-sent event brings."""

from __future__ import annotations

import asyncio
import html
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from sabot.audit.store import AuditStore
from sabot.audit.validator import contract_round
from sabot.audit.watch import LiveEdges, offered_wagers
from sabot.game.roads import DERIVED, roads
from sabot.protocol import HOLDS
from sabot.registry import ShoeEntry

POLL = 0.25  # seconds: the longest a page waits for a row nobody announced
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
    stored_at: float | None = None  # when the frame of the latest change was stored
    version: int = 0
    edges: dict[str, float] | None = None
    remaining: int | None = None
    live: LiveEdges = field(init=False)

    def __post_init__(self) -> None:
        self.live = LiveEdges(self.config.decks)

    @property
    def table(self) -> str:
        return self.config.table


class Pit:
    """Every table served, followed from the audit store's new rows."""

    def __init__(self, db: str, configs: list[ShoeEntry],
                 link_state: Callable[[int], str] | None = None) -> None:
        self.db = db
        self.store: AuditStore | None = None
        self.link_state = link_state or (lambda shoe_id: "up")
        self.by_id: dict[int, TableView] = {c.shoe_id: TableView(c.shoe_id, c) for c in configs}
        self.last_record = 0
        self.last_alarm = 0

    def _store(self) -> AuditStore:
        if self.store is None:
            self.store = AuditStore(self.db, writer=False)
        return self.store

    def _view(self, shoe_id: int) -> TableView:
        if shoe_id not in self.by_id:
            self.by_id[shoe_id] = TableView(shoe_id, ShoeEntry(shoe_id))
        return self.by_id[shoe_id]

    def refresh(self) -> set[int]:
        """Take the rows stored since the last call; the shoe ids whose tables changed."""
        try:
            store = self._store()
        except Exception:
            return set()  # the validators have not created the store yet
        changed: set[int] = set()
        for r in store.records_since(self.last_record):
            self.last_record = r.id
            t = self._view(r.shoe_id)
            self._apply(t, r.kind, r.record)
            t.stored_at = r.received_at
            if r.kind == "result":
                t.round_stored.append(r.received_at)
            changed.add(r.shoe_id)
        for a in store.alarms_since(self.last_alarm):
            self.last_alarm = a["id"]
            shoe_id, shoe = a["shoe_id"], a["shoe"]
            if shoe_id is None:
                continue
            t = self._view(shoe_id)
            if a["kind"] == "tilt":
                t.tilted = True
            if shoe is None or t.shoe is None or shoe == t.shoe:
                t.alarms.append({k: a[k] for k in ("kind", "shoe_id", "shoe", "round",
                                                    "detail")})
            changed.add(shoe_id)
        for shoe_id in changed:
            self._edges(self.by_id[shoe_id], store)
            self.by_id[shoe_id].version += 1
        return changed

    def _apply(self, t: TableView, kind: str, rec: dict[str, Any]) -> None:
        if kind == "shoe_start" or (rec.get("shoe") is not None and rec["shoe"] != t.shoe):
            t.shoe, t.rounds, t.held, t.ended, t.tilted = rec.get("shoe"), [], None, False, False
            t.round_stored = []
            # the shoe device's own alarms (an update, a rekey: shoe None) stay in view
            t.alarms = [a for a in t.alarms if a["shoe"] in (None, t.shoe)][-20:]
        if kind == "result":
            t.rounds.append(contract_round(rec))
        elif kind == "irregularity" and rec.get("kind") in HOLDS:
            t.held = rec["kind"]
        elif kind == "resolution":
            t.held = None
        elif kind == "shoe_end":
            t.ended = True

    def _edges(self, t: TableView, store: AuditStore) -> None:
        inv = store.latest_inventory(t.shoe_id) or {}
        if inv.get("partial") or inv.get("shoe") is None:
            t.edges, t.remaining = None, None
            return
        t.live.update(inv["shoe"], inv.get("counts") or {})
        every = t.live.edges()
        t.remaining = t.live.cards
        offered = offered_wagers(t.config)
        t.edges = None if every is None else {w: every[n] for w, n in offered.items()}

    # ---- views -----------------------------------------------------------------------------
    def state(self, t: TableView) -> str:
        if self.link_state(t.shoe_id) == "lost":
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
        return sorted(self.by_id.values(), key=lambda t: t.table)

    def summary(self, t: TableView) -> dict[str, Any]:
        return {"table": t.table, "shoe_id": t.shoe_id, "shoe": t.shoe,
                "round": t.rounds[-1]["round"] if t.rounds else 0, "state": self.state(t)}

    def detail(self, t: TableView) -> dict[str, Any]:
        return {"table": t.table, "shoe_id": t.shoe_id, "shoe": t.shoe, "rounds": t.rounds,
                "roads": roads(r["winner"] for r in t.rounds),
                "remaining_cards": t.remaining, "edges": t.edges, "alarms": t.alarms,
                "state": self.state(t), "counts": counts(t.rounds), "stored_at": t.stored_at}


def counts(rounds: list[dict[str, Any]]) -> dict[str, int]:
    out = {"banker": 0, "player": 0, "tie": 0, "player_pair": 0, "banker_pair": 0,
           "natural": 0}
    for r in rounds:
        out[r["winner"]] += 1
        for f in ("player_pair", "banker_pair"):
            out[f] += f in r["flags"]
        out["natural"] += "player_natural" in r["flags"] or "banker_natural" in r["flags"]
    return out


# ---- HTML ------------------------------------------------------------------------------------
E = html.escape


def S(value: Any) -> str:
    """Any stored value as page text, escaped: a store an insider edited may hold markup in any
    column (a round, a card, a shoe number), not only in the text ones."""
    return html.escape(str(value), quote=True)
CSS = """
body{font-family:system-ui,sans-serif;margin:1rem;background:#f6f4ee;color:#222}
h1{font-size:1.4rem;margin:.2rem 0 .8rem} h2{font-size:1rem;margin:.8rem 0 .3rem}
table.pit{border-collapse:collapse;width:100%;background:#fff}
.pit th,.pit td{border:1px solid #ccc;padding:.3rem .5rem;text-align:left;vertical-align:top}
.state{font-weight:bold} .state-dealing{color:#176b2c} .state-held{color:#b36b00}
.state-tilted,.state-link-lost{color:#b00020} .state-ended{color:#555}
.fav{color:#b00020;font-weight:bold} .alarm{color:#b00020}
.grid{display:grid;grid-auto-flow:column;grid-template-rows:repeat(6,22px);
 grid-auto-columns:22px;gap:1px;background:#ddd;border:1px solid #bbb;width:max-content;
 min-height:138px;min-width:200px;padding:1px}
.grid>span{width:22px;height:22px;display:flex;align-items:center;justify-content:center;
 box-sizing:border-box;font-size:12px;font-weight:bold;position:relative}
.bead{border-radius:50%;color:#fff} .bead.B{background:#c8102e} .bead.P{background:#1f4fc4}
.bead.T{background:#1b8a3a}
.big{border-radius:50%;border:3px solid;background:#fff} .big.B{border-color:#c8102e}
.big.P{border-color:#1f4fc4}
.big .ties{position:absolute;font-size:10px;color:#1b8a3a}
.pp::after,.bp::before{content:"";position:absolute;width:6px;height:6px;border-radius:50%}
.bp::before{background:#c8102e;top:0;left:0} .pp::after{background:#1f4fc4;bottom:0;right:0}
.derived{grid-template-rows:repeat(6,12px);grid-auto-columns:12px;min-height:78px}
.derived>span{width:12px;height:12px}
.big_eye_boy .red{border:2px solid #c8102e;border-radius:50%}
.big_eye_boy .blue{border:2px solid #1f4fc4;border-radius:50%}
.small_road .red{background:#c8102e;border-radius:50%} .small_road .blue{background:#1f4fc4;
 border-radius:50%}
.cockroach_pig .red{background:linear-gradient(135deg,transparent 40%,#c8102e 40%,#c8102e 60%,
 transparent 60%)} .cockroach_pig .blue{background:linear-gradient(135deg,transparent 40%,
 #1f4fc4 40%,#1f4fc4 60%,transparent 60%)}
.roads{display:flex;flex-wrap:wrap;gap:1rem} .counts span{margin-right:1rem;font-weight:bold}
.B-t{color:#c8102e} .P-t{color:#1f4fc4} .T-t{color:#1b8a3a}
ol.last{padding-left:1.5rem;font-family:monospace}
"""

JS = """
const src = new EventSource(%s);
src.onmessage = (e) => {
  const m = JSON.parse(e.data);
  document.getElementById("live").innerHTML = m.html;
  document.body.dataset.version = m.version;
};
"""


def page(title: str, body: str, events: str) -> str:
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{E(title)}"
            f"</title><style>{CSS}</style></head><body data-version='0'><h1>{E(title)}</h1>"
            f"<div id='live'>{body}</div><script>{JS % json.dumps(events)}</script>"
            "</body></html>")


def fmt_edge(edge: float) -> str:
    return f"{edge:+.4%}"


def dashboard_html(pit: Pit) -> str:
    rows = []
    for t in pit.tables():
        d = pit.detail(t)
        last = t.rounds[-1] if t.rounds else None
        result = (f"{last['winner']} {last['player_total']}-{last['banker_total']}"
                  + (f" ({', '.join(map(str, last['flags']))})" if last["flags"] else "")
                  ) if last else "-"
        edges = "".join(
            f"<div class='{'fav' if e < 0 else ''}'>{E(w)} {fmt_edge(e)}</div>"
            for w, e in (t.edges or {}).items()) or "-"
        alarms = "".join(f"<div class='alarm'>{E(a['kind'])}"
                         f"{' round ' + S(a['round']) if a['round'] else ''}: "
                         f"{E(a['detail'])}</div>" for a in t.alarms[-5:]) or "none"
        state = d["state"]
        rows.append(
            f"<tr data-table='{E(t.table)}'><td><a href='/table/{E(t.table)}'>{E(t.table)}</a>"
            f"<br><small>shoe id {t.shoe_id:#010x}</small></td>"
            f"<td class='state state-{state.replace(' ', '-')}'>{E(state)}"
            f"{' (' + E(t.held) + ')' if t.held and state == 'held' else ''}</td>"
            f"<td>{S(t.shoe) if t.shoe is not None else '-'}</td>"
            f"<td>{S(last['round']) if last else 0}</td><td>{E(result)}</td>"
            f"<td>{S(t.remaining) if t.remaining is not None else '-'}</td>"
            f"<td>{edges}</td><td>{alarms}</td></tr>")
    return ("<table class='pit'><tr><th>table</th><th>state</th><th>shoe</th><th>round</th>"
            "<th>last result</th><th>cards left</th><th>house edge (remaining shoe)</th>"
            "<th>alarms</th></tr>" + "".join(rows) + "</table>")


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


def scoreboard_html(pit: Pit, t: TableView) -> str:
    d = pit.detail(t)
    r = d["roads"]
    beads = []
    for i, (rec, v) in enumerate(zip(t.rounds, r["bead_plate"])):
        pairs = " ".join(c for c, f in (("pp", "player_pair"), ("bp", "banker_pair"))
                         if f in rec["flags"])
        beads.append(f"<span class='bead {S(v)} {pairs}' data-i='{i}' data-v='{S(v)}' "
                     f"title='round {S(rec['round'])}'>{S(v)}</span>")
    big = []
    for c, column in enumerate(r["big_road"], 1):
        for row, cell in enumerate(column, 1):
            ties = cell["ties"]
            big.append(f"<span class='big {S(cell['winner'])}' style='grid-column:{c};"
                       f"grid-row:{row}' data-col='{c}' data-row='{row}' "
                       f"data-v='{S(cell['winner'])}' data-ties='{S(ties)}'>"
                       f"{'<i class=ties>' + S(ties) + '</i>' if ties else ''}</span>")
    derived = []
    for name in DERIVED:
        marks = "".join(f"<span class='{e}' style='grid-column:{c};grid-row:{row}' "
                        f"data-i='{i}' data-v='{e}'></span>"
                        for i, (c, row, e) in enumerate(derived_cells(r[name])))
        derived.append(f"<div><h2>{name.replace('_', ' ').title()}</h2>"
                       f"<div class='grid derived {name}' id='{name}'>{marks}</div></div>")
    n = d["counts"]
    last = "".join(
        f"<li value='{S(rec['round'])}'>P {S(' '.join(map(str, rec['player'])))} "
        f"({S(rec['player_total'])}) B {S(' '.join(map(str, rec['banker'])))} "
        f"({S(rec['banker_total'])}) &rarr; "
        f"<b class='{S(str(rec['winner'])[:1].upper())}-t'>{S(rec['winner'])}</b>"
        f"{' ' + S(', '.join(map(str, rec['flags']))) if rec['flags'] else ''}</li>"
        for rec in t.rounds[-LAST_RESULTS:][::-1])
    shoe = f"shoe {S(t.shoe)}" if t.shoe is not None else "waiting for a shoe"
    return (f"<p id='where' data-shoe='{S(t.shoe)}' data-round='{len(t.rounds)}'>{shoe}, "
            f"{len(t.rounds)} rounds &middot; <span class='state'>{E(d['state'])}</span></p>"
            f"<p class='counts' id='counts'><span class='B-t'>Banker {n['banker']}</span>"
            f"<span class='P-t'>Player {n['player']}</span><span class='T-t'>Tie {n['tie']}"
            f"</span><span>Banker pair {n['banker_pair']}</span><span>Player pair "
            f"{n['player_pair']}</span><span>Naturals {n['natural']}</span></p>"
            "<div class='roads'>"
            f"<div><h2>Bead Plate</h2><div class='grid' id='bead_plate'>{''.join(beads)}"
            "</div></div>"
            f"<div><h2>Big Road</h2><div class='grid' id='big_road'>{''.join(big)}</div></div>"
            "</div><div class='roads'>" + "".join(derived) + "</div>"
            f"<h2>Last results</h2><ol class='last' reversed>{last}</ol>")


# ---- the app -----------------------------------------------------------------------------------
class Hub:
    """Wakes the pages' streams when the validators stored something (or every POLL seconds)."""

    def __init__(self, pit: Pit) -> None:
        self.pit = pit
        self.loop: asyncio.AbstractEventLoop | None = None
        self.wake: asyncio.Event | None = None
        self.changed: asyncio.Condition | None = None
        self.task: asyncio.Task[None] | None = None

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

    async def _follow(self) -> None:
        assert self.wake is not None and self.changed is not None
        while True:
            try:
                await asyncio.wait_for(self.wake.wait(), POLL)
            except TimeoutError:
                pass
            self.wake.clear()
            if self.pit.refresh():
                async with self.changed:
                    self.changed.notify_all()

    async def stream(self, request: Request, version: Callable[[], int],
                     render: Callable[[], dict[str, Any]]) -> AsyncIterator[str]:
        """Server-sent events: the page's fresh fragment each time its version moves."""
        assert self.changed is not None
        yield "retry: 1000\n\n"
        last = None
        while True:
            if version() != last:
                last = version()
                yield f"data: {json.dumps(render())}\n\n"
            async with self.changed:
                if version() == last:
                    try:
                        await asyncio.wait_for(self.changed.wait(), 15)
                    except TimeoutError:
                        yield ": keep-alive\n\n"
            if await request.is_disconnected():
                return


def build_app(pit: Pit) -> tuple[Starlette, Hub]:
    hub = Hub(pit)

    def not_found(name: str) -> Response:
        return JSONResponse({"error": f"no table {name}"}, status_code=404)

    async def dashboard(request: Request) -> Response:
        return HTMLResponse(page("Pit dashboard", dashboard_html(pit), "/events"))

    async def scoreboard(request: Request) -> Response:
        name = request.path_params["table"]
        t = pit.table(name)
        if t is None:
            return HTMLResponse(f"no table {E(name)}", status_code=404)
        return HTMLResponse(page(f"Table {t.table}", scoreboard_html(pit, t),
                                 f"/table/{t.table}/events"))

    async def api_tables(request: Request) -> Response:
        return JSONResponse([pit.summary(t) for t in pit.tables()])

    async def api_stats(request: Request) -> Response:
        """How long the live edge recomputes take in this process (validators and pages)."""
        ms = sorted(x * 1000 for x in LiveEdges.timings)
        pick = (lambda q: round(ms[min(len(ms) - 1, int(q * len(ms)))], 3)) if ms else (
            lambda q: None)
        return JSONResponse({"edges_recomputes": len(ms), "edges_median_ms": pick(0.5),
                             "edges_p99_ms": pick(0.99), "edges_max_ms": pick(1.0)})

    async def api_table(request: Request) -> Response:
        t = pit.table(request.path_params["table"])
        if t is None:
            return not_found(request.path_params["table"])
        return JSONResponse(pit.detail(t))

    def sse(gen: AsyncIterator[str]) -> Response:
        return StreamingResponse(gen, media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"})

    async def dashboard_events(request: Request) -> Response:
        def version() -> int:
            return sum(t.version for t in pit.tables())

        def render() -> dict[str, Any]:
            return {"version": version(), "html": dashboard_html(pit), "sent_at": time.time()}
        return sse(hub.stream(request, version, render))

    async def table_events(request: Request) -> Response:
        t = pit.table(request.path_params["table"])
        if t is None:
            return not_found(request.path_params["table"])
        view = t

        def render() -> dict[str, Any]:
            return {"version": view.version, "html": scoreboard_html(pit, view),
                    "table": view.table, "shoe": view.shoe, "round": len(view.rounds),
                    "stored_at": view.stored_at, "round_stored": view.round_stored,
                    "sent_at": time.time()}
        return sse(hub.stream(request, lambda: view.version, render))

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await hub.start()
        yield
        await hub.stop()

    app = Starlette(routes=[
        Route("/", dashboard), Route("/events", dashboard_events),
        Route("/table/{table}", scoreboard), Route("/table/{table}/events", table_events),
        Route("/api/tables", api_tables), Route("/api/tables/{table}", api_table),
        Route("/api/stats", api_stats),
    ], lifespan=lifespan)
    return app, hub

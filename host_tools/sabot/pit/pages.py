"""The pages of `sabot serve`: the pit dashboard, the floor, each table's scoreboard and the
JSON API, all read from the audit store through a read-only connection (the validators are its
only writers).

Every page carries a Content-Security-Policy that runs no inline script or style; the pages' one
script and stylesheet are files (pit/static/), and the script only swaps in the fresh fragment
each server-sent event brings. The store is read on a thread of its own (Hub): a database that
does not answer (a server stopped, a commit held for a standby) never stops the web server,
which goes on answering its pages and SIGTERM and says, after READ_WAIT seconds, that the
database does not answer. Every second each open page gets its fragment again, with the
server's time and every table's ages, so a page whose server has gone quiet shows it (its
script says so after a few seconds without one)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import math
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any

from starlette.applications import Starlette
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

from sabot.audit.watch import LiveEdges
from sabot.pit import api
from sabot.pit.console import Console
from sabot.pit.dashboard import (
    Operator,
    dashboard,
    dashboard_html,
    floor_path,
    floor_view,
    page,
    table_path,
)
from sabot.pit.duties import Duties
from sabot.pit.markup import Html, join
from sabot.pit.proofs import in_time, log_routes, receipt_routes
from sabot.pit.recording import serve_line
from sabot.pit.scoreboard import round_page, scoreboard, scoreboard_html
from sabot.pit.tables import Pit, Rows

POLL = 0.25  # seconds: the longest a page waits for a row nobody announced
TICK = 1.0  # seconds between the pages' fragments when nothing changed: their clocks
READ_WAIT = 3.0  # seconds a read of the store may take before the pages say it does not answer

__all__ = ["SECURITY_HEADERS", "Hub", "Pit", "build_app", "dashboard_html", "html_response",
           "page", "scoreboard_html", "table_path", "web_server"]


class Hub:
    """Follows the store for the pages (on a thread of its own) and wakes their streams: when
    the validators stored something, every POLL seconds, and every TICK."""

    def __init__(self, pit: Pit) -> None:
        self.pit = pit
        self.loop: asyncio.AbstractEventLoop | None = None
        self.wake: asyncio.Event | None = None
        self.changed = asyncio.Event()  # replaced at each change: its waiters are woken
        self.task: asyncio.Task[None] | None = None
        self.closing = False  # the server is stopping: every stream ends
        self.tick = 0
        self._reader = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="pit-read")
        self._reading: asyncio.Future[Rows] | None = None
        self._read_began = 0.0

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
        self.changed = asyncio.Event()
        await self._read(READ_WAIT)
        self.task = asyncio.create_task(self._follow())

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
        self._reader.shutdown(wait=False, cancel_futures=True)

    def _announce(self) -> None:
        old, self.changed = self.changed, asyncio.Event()
        old.set()

    async def end_streams(self) -> None:
        """Every page's stream ends now, so a stopping server has no response left to wait
        for (its pages reconnect to the next one)."""
        self.closing = True
        self._announce()

    async def _follow(self) -> None:
        assert self.wake is not None
        next_tick = time.monotonic() + TICK
        while True:
            try:
                await asyncio.wait_for(self.wake.wait(), POLL)
            except TimeoutError:
                pass
            self.wake.clear()
            changed = await self._read(POLL)
            if time.monotonic() >= next_tick:
                self.tick += 1
                next_tick = time.monotonic() + TICK
                changed = True
            if changed:
                self._announce()

    async def _read(self, wait: float) -> bool:
        """Take what the store holds new (a read already on its way is waited for, never a
        second one begun); whether anything the pages show changed."""
        pit = self.pit
        if self._reading is None:
            self._read_began = time.time()
            self._reading = asyncio.wrap_future(self._reader.submit(pit.fetch))
        try:
            rows = await asyncio.wait_for(asyncio.shield(self._reading), wait)
        except TimeoutError:
            if pit.unanswered_since is None and time.time() - self._read_began >= READ_WAIT:
                pit.unanswered_since = self._read_began
                serve_line(f"the audit database has not answered the pages' reads for "
                           f"{READ_WAIT:g} s", "error")
                return True
            return False
        except Exception as e:  # a fault of ours: said, and the next read tried
            self._reading = None
            serve_line(f"internal error reading the store: {type(e).__name__}: {e}", "error")
            return False
        self._reading = None
        notes, was = pit.notes, pit.unanswered_since
        pit.unanswered_since = None
        if was is not None:
            serve_line(f"the audit database answers the pages' reads again, after "
                       f"{time.time() - was:.1f} s", "notice")
        changed = pit.apply(rows)
        return bool(changed) or pit.notes != notes or was is not None

    async def stream(self, request: Request, version: Callable[[], int],
                     render: Callable[[], dict[str, Any]]) -> AsyncIterator[str]:
        """Server-sent events: the page's fresh fragment each time its version moves."""
        yield "retry: 1000\n\n"
        last = None
        while not self.closing:
            if version() != last:
                last = version()
                yield f"data: {to_json(render())}\n\n"
            changed = self.changed
            if version() == last and not self.closing:
                try:
                    await asyncio.wait_for(changed.wait(), 15)
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
            serve_line(f"internal error on {scope.get('method')} {scope.get('path')}: "
                       f"{type(e).__name__}: {e}", "error")
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


def web_server(app: Starlette, hub: Hub, host: str, port: int, status: str = "serving",
               alive: Callable[[], bool] | None = None) -> Any:
    """The uvicorn server of the pages, ready and watched as a service (sabot.service). Stopping,
    it first ends the pages' streams: an open page would otherwise hold its response until the
    graceful timeout, then be cancelled with a traceback. Its proxy_headers are off (there):
    uvicorn would otherwise take X-Forwarded-For from any local process as the client's address
    (the operator log's `from`, the login limit's per-address count)."""
    from sabot.service import uvicorn_server

    return uvicorn_server(app, host, port, status, alive, hub.end_streams, lifespan="on",
                          timeout_graceful_shutdown=1)


def operator_view(console: Console | None, request: Request
                  ) -> tuple[Operator | None, Html | None]:
    """The dashboard as this request's session sees it: its controls for each table, and who
    is logged in (nothing of either without a console)."""
    if console is None:
        return None, None
    s = console.session(request)
    return console.operator(s), console.bar(s)


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
        return missing or StoredJSON(api.floor_json(pit, only))

    async def floor_events(request: Request) -> Response:
        only = request.query_params.get("pit")

        def version() -> int:
            return sum(t.version for t in pit.by_id.values()) + pit.notes + hub.tick

        def render() -> dict[str, Any]:
            return {"version": version(), "html": str(floor_view(pit, only)),
                    "sent_at": time.time()}
        return event_stream(hub.stream(request, version, render))

    return [Route("/floor", floor_page), Route("/floor/events", floor_events),
            Route("/api/floor", api_floor)]


def no_table(name: str) -> Response:
    return StoredJSON({"error": f"no table {name}"}, status_code=404)


def api_routes(pit: Pit) -> list[Route]:
    """/api/tables, /api/tables/NAME, /api/health and /api/stats."""
    async def api_tables(request: Request) -> Response:
        return StoredJSON([api.summary(pit, t) for t in pit.tables()])

    async def api_health(request: Request) -> Response:
        status, body = api.health(pit)
        return StoredJSON(body, status_code=status)

    async def api_stats(request: Request) -> Response:
        """How long the live edge recomputes take in this process (validators and pages), and
        the group commits of its validators: how many, and the reads they stored."""
        ms = sorted(x * 1000 for x in LiveEdges.timings)
        pick = (lambda q: round(ms[min(len(ms) - 1, int(q * len(ms)))], 3)) if ms else (
            lambda q: None)
        group = getattr(pit.recording, "lock", None)  # this serve's commits (none: a floor)
        return StoredJSON({"edges_recomputes": len(ms), "edges_median_ms": pick(0.5),
                           "edges_p99_ms": pick(0.99), "edges_max_ms": pick(1.0),
                           "commits": group.commits if group else 0,
                           "reads_committed": group.reads if group else 0})

    async def api_table(request: Request) -> Response:
        t = pit.table(request.path_params["table"])
        if t is None:
            return no_table(request.path_params["table"])
        return StoredJSON(api.detail(pit, t))

    return [Route("/api/tables", api_tables), Route("/api/tables/{table:path}", api_table),
            Route("/api/health", api_health), Route("/api/stats", api_stats)]


def shift_routes(pit: Pit, console: Console | None) -> list[Route]:
    """The shift report: for supervisors and IT where serve has accounts (it names its
    operators), for everyone on a read-only serve and the floor."""
    duties = console.duties if console is not None and console.duties is not None else \
        Duties(pit, None, list)
    guarded = console is not None and console.accounts is not None
    return duties.routes(console.session if console else lambda request: None, guarded,
                         lambda title, body: html_response(page(title, body, "")), in_time)


def build_app(pit: Pit, console: Console | None = None) -> tuple[Starlette, Hub]:
    """The pages, the API, the shift report and (with a `console`) the pit's operations."""
    hub = Hub(pit)
    files = static_files()

    def operator(request: Request) -> tuple[Operator | None, Html | None]:
        return operator_view(console, request)

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
        parts = raw.split(b"/")  # /table/NAME/round/SHOE/ROUND: one earlier round, its QR code
        if len(parts) == 6 and parts[3] == b"round" and parts[4].isdigit() and \
                parts[5].isdigit() and len(parts[4]) <= 5 and len(parts[5]) <= 5:
            t = pit.table(name.rsplit("/round/", 1)[0])
            shown = None if t is None else round_page(pit, t, int(parts[4]), int(parts[5]))
            if t is None or shown is None:
                return html_response(join("no such round shown here"), status_code=404)
            return html_response(page(f"Table {t.table}", shown, ""))  # a page to read
        t = pit.table(name)
        if t is None:
            return html_response(join("no table ", name), status_code=404)
        return html_response(page(f"Table {t.table}", scoreboard(pit, t),
                                  table_path(t.table) + "/events", "scoreboard"))

    async def dashboard_events(request: Request) -> Response:
        # the stream's page is this session's, logged out once its account changes
        s = console.session(request) if console is not None else None

        def version() -> int:
            return sum(t.version for t in pit.tables()) + pit.notes + hub.tick

        def render() -> dict[str, Any]:
            if console is None:
                controls, bar = None, None
            else:
                live = s if s is not None and console.holds(s) else None
                controls, bar = console.operator(live), console.bar(live)
            return {"version": version(), "html": dashboard_html(pit, controls, bar),
                    "sent_at": time.time()}
        return event_stream(hub.stream(request, version, render))

    async def table_events(request: Request, name: str) -> Response:
        t = pit.table(name)
        if t is None:
            return no_table(name)
        view = t

        def version() -> int:
            return view.version + hub.tick

        def render() -> dict[str, Any]:
            return {"version": version(), "html": scoreboard_html(pit, view),
                    "table": view.table, "shoe": view.shoe, "round": len(view.rounds),
                    "stored_at": view.stored_at, "round_stored": view.round_stored,
                    "sent_at": time.time()}
        return event_stream(hub.stream(request, version, render))

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await hub.start()
        yield
        await hub.stop()

    app = Starlette(routes=[
        Route("/", dashboard_page), Route("/events", dashboard_events),
        Route("/static/{name}", static), Route("/table/{name:path}", table_route),
        *api_routes(pit),
        Route("/verify", lambda request: RedirectResponse("/static/verify.html")),
        *receipt_routes(pit), *log_routes(pit),
        *floor_routes(pit, hub),
        *(console.routes() if console else []), *shift_routes(pit, console),
    ], lifespan=lifespan)
    app.add_middleware(SecurityHeaders)
    return app, hub

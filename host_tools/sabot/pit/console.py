"""The pit operating from `sabot serve`: operators log in (pit/accounts.py) and a supervisor
resolves a held table's irregularity or starts its next shoe, from the dashboard or through the
API; serve's own session on that shoe sends the command (signed with serve's command key) and
the chained operator log records who gave it and from where.

Nothing read-only changes anything: every change is a POST, and a POST is taken only with a live
session's cookie (HttpOnly, SameSite=Strict) and that session's CSRF token (a form's hidden
field, or the API's X-CSRF-Token header), from this server's own origin when the browser names
one. A role that may not do a thing is refused (403) before the shoe is asked."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from sabot.errors import SabotError, parse_json
from sabot.pit.accounts import (
    HASHING,
    OPERATE,
    SEE_LOG,
    Accounts,
    Session,
    Sessions,
    name_problem,
)
from sabot.pit.duties import ACTIONS, Duties
from sabot.pit.markup import Html, el, join
from sabot.pit.proofs import in_time

ROLE_NAMES = {"dealer": "dealer", "supervisor": "supervisor", "it": "IT"}
COOKIE = "sabot_session"
LOGIN_COOKIE = "sabot_login"  # the login form's own token (a login CSRF is refused too)
RESOLUTIONS = ("void-card", "keep-dummy", "void-round", "end-shoe")
# what a supervisor confirms on a second page before the dashboard sends it (a slip of the mouse
# must not end a shoe); the API takes its caller at its word
CONFIRM = {"end-shoe": "ends the shoe here: a round in progress is voided and the shoe is "
                       "reshuffled",
           "void-round": "voids the round in progress: its cards are set aside and it is dealt "
                         "again"}
BODY_MAX = 4096  # bytes of a form or API request: a login or a command is small
PHASE_WORDS = {"burn_first": "burning its first card", "burn": "burning", "dealing": "dealing",
               "held": "held", "ended": "ended", "tilt": "out of play (tilt)"}

# operate(shoe_id, action, resolution, by, logged) -> what the shoe reported, or SabotError
Operate = Callable[[int, str, "str | None", str, dict[str, Any]], dict[str, Any]]


class Console:
    def __init__(self, accounts: Accounts | None, operate: Operate | None,
                 tables: Callable[[str], Any], operations: Callable[[], list[dict[str, Any]]],
                 page: Callable[[str, Html], Response],
                 table_of: Callable[[int], str | None] = lambda shoe_id: None,
                 fits: Callable[[str], list[str] | None] = lambda table: None,
                 duties: Duties | None = None) -> None:
        self.accounts = accounts
        self.duties = duties  # dealers signing on, alarms acknowledged, the shift report
        self.sessions = Sessions()
        self.operate = operate
        self.tables = tables  # table name -> its TableView (or None)
        self.operations = operations  # the operator log, oldest first
        self.table_of = table_of  # a shoe id's table name, where serve has it
        self.fits = fits  # a held table's resolutions that apply (None: serve cannot tell)
        self.page = page  # a titled page of this server (its headers, stylesheet)
        # the tables' commands on a thread of their own: a burst of logins cannot delay them
        from concurrent.futures import ThreadPoolExecutor

        self._operating = ThreadPoolExecutor(max_workers=4, thread_name_prefix="operate")
        self._hashing = asyncio.Semaphore(HASHING)

    # ---- who is asking -------------------------------------------------------------------
    @staticmethod
    def client(request: Request) -> str:
        return request.client.host if request.client else "unknown"

    def session(self, request: Request) -> Session | None:
        """This request's session; one whose account has changed (role or password) or gone
        since its login is ended here, at its first request since."""
        token = request.cookies.get(COOKIE)
        s = self.sessions.get(token)
        if s is not None and not self.holds(s):
            self.sessions.end(token)
            return None
        return s

    def holds(self, s: Session) -> bool:
        """Whether the session's account is still as it was at its login."""
        return self.accounts is not None and self.accounts.holds(s.name, s.role, s.hash)

    def _same_origin(self, request: Request) -> bool:
        origin = request.headers.get("origin")
        if origin is None:  # a script, or a browser that names none: the token decides
            return True
        host = request.headers.get("host", "")
        return origin in (f"http://{host}", f"https://{host}")

    async def _body(self, request: Request) -> bytes:
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > BODY_MAX:
                raise SabotError("request too large")
        return body

    async def _form(self, request: Request) -> dict[str, str]:
        fields = parse_qs((await self._body(request)).decode("utf-8", "replace"))
        return {k: v[0] for k, v in fields.items()}

    # ---- the dashboard's part ------------------------------------------------------------
    def bar(self, s: Session | None) -> Html:
        """Who is logged in, above the dashboard; or the way to log in."""
        if self.accounts is None:
            return el("p", "read-only: serve was started without --accounts", class_="who")
        if s is None:
            return el("p", el("a", "log in", href="/login"), " to operate the pit",
                      class_="who")
        return el("form", f"{s.name} ({ROLE_NAMES[s.role]}) ",
                  el("input", type="hidden", name="csrf", value=s.csrf),
                  el("button", "log out", type="submit"),
                  join(" · ", el("a", "operator log", href="/operations"))
                  if s.role in SEE_LOG else None,
                  (" · a dealer signs themself on and off at a table; a supervisor operates "
                   "the tables" if s.role == "dealer" else
                   " · this account sees the pit and operates no table")
                  if s.role not in OPERATE else None,
                  method="post", action="/logout", class_="who")

    def operator(self, s: Session | None) -> OperatorView | None:
        """This session's controls on the dashboard (None when nobody is logged in)."""
        return None if s is None else OperatorView(self, s)

    def controls(self, s: Session | None, table: str, state: str) -> Html | None:
        """A supervisor's buttons for one table: the resolutions that apply to a held one (all
        four where serve cannot tell: the shoe still decides, and refuses one that does not fit
        with what does), the next shoe of an ended one."""
        if s is None or s.role not in OPERATE:
            return None
        if state == "held":
            choices = [("resolve", r) for r in (self.fits(table) or RESOLUTIONS)]
        elif state == "ended":
            choices = [("new-shoe", "")]
        else:
            return None
        return join(el("br"), *[el("form", el("input", type="hidden", name="csrf", value=s.csrf),
                         el("input", type="hidden", name="table", value=table),
                         el("input", type="hidden", name="action", value=action),
                         el("input", type="hidden", name="resolution", value=r)
                         if r else None,
                         el("button", r or "start the next shoe", type="submit",
                            data_action=action, data_resolution=r or None),
                         method="post", action="/operate", class_="operate")
                      for action, r in choices])

    # ---- routes --------------------------------------------------------------------------
    def routes(self) -> list[Route]:
        return [Route("/login", self.login_page, methods=["GET"]),
                Route("/login", self.login_form, methods=["POST"]),
                Route("/logout", self.logout, methods=["POST"]),
                Route("/operate", self.operate_form, methods=["POST"]),
                Route("/operations", self.operations_page, methods=["GET"]),
                Route("/api/login", self.api_login, methods=["POST"]),
                Route("/api/logout", self.api_logout, methods=["POST"]),
                Route("/api/operate", self.api_operate, methods=["POST"])]

    def _login_form(self, said: str = "", status: int = 200) -> Response:
        import secrets

        token = secrets.token_urlsafe(16)
        body = join(el("p", said, class_="alarm") if said else None, el(
            "form", el("label", "name ", el("input", name="name", autocomplete="username",
                                             required=True)), el("br"),
            el("label", "password ", el("input", name="password", type="password",
                                        autocomplete="current-password", required=True)),
            el("br"), el("input", type="hidden", name="login", value=token),
            el("button", "log in", type="submit"), method="post", action="/login"))
        response = self.page("Log in to the pit", body)
        response.status_code = status
        response.set_cookie(LOGIN_COOKIE, token, httponly=True, samesite="strict", path="/login")
        return response

    async def login_page(self, request: Request) -> Response:
        if self.accounts is None:
            return self.page("Log in to the pit",
                             el("p", "serve was started without --accounts: nobody operates "
                                "the pit from here"))
        return self._login_form()

    async def _check_login(self, name: str, password: str, client: str
                           ) -> tuple[dict[str, str] | None, str]:
        """(the account, "") for a good login; (None, why) otherwise."""
        if self.accounts is None:
            return None, "serve was started without --accounts"
        if name_problem(name) or not password:
            return None, "wrong name or password"
        wait, mark = self.sessions.attempt(name, client)
        if wait:
            return None, f"too many failed logins: try again in {int(wait) + 1} s"
        async with self._hashing:
            user = await asyncio.to_thread(self.accounts.check, name, password)
        if user is None:
            return None, "wrong name or password"
        self.sessions.succeeded(name, client, mark)
        return user, ""

    async def login_form(self, request: Request) -> Response:
        try:
            form = await self._form(request)
        except SabotError as e:
            return self._login_form(str(e), 413)
        if not form.get("login") or form.get("login") != request.cookies.get(LOGIN_COOKIE):
            return self._login_form("the login form expired: log in again", 403)
        name, client = form.get("name", ""), self.client(request)
        user, why = await self._check_login(name, form.get("password", ""), client)
        if user is None:
            return self._login_form(why, 429 if why.startswith("too many") else 401)
        token, _ = self.sessions.start(name, user, client)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/")
        response.delete_cookie(LOGIN_COOKIE, path="/login")
        return response

    async def logout(self, request: Request) -> Response:
        """Only with the session's token: another site's form cannot log an operator out."""
        s = self.session(request)
        try:
            form = await self._form(request)
        except SabotError:
            form = {}
        response = RedirectResponse("/", status_code=303)
        if s is not None and form.get("csrf") == s.csrf and self._same_origin(request):
            self.sessions.end(request.cookies.get(COOKIE))
            response.delete_cookie(COOKIE, path="/")
        return response

    def _allowed(self, request: Request, s: Session | None, csrf: str | None,
                 fields: dict[str, Any]) -> tuple[int, str]:
        """(0, "") when this request may do what `fields` ask; else its status and why."""
        if s is None:
            return 401, "log in first (POST /api/login, or /login in a browser)"
        if not csrf or csrf != s.csrf or not self._same_origin(request):
            return 403, "the request does not carry this session's CSRF token"
        if fields.get("action") in ACTIONS and self.duties is not None:
            why = self.duties.allowed(s, fields["action"], fields)
            return (403, why) if why else (0, "")
        if s.role not in OPERATE:
            return 403, (f"{s.name}'s account ({ROLE_NAMES[s.role]}) may not operate a table; "
                         "a supervisor's may")
        return 0, ""

    async def _do(self, request: Request, s: Session, fields: dict[str, Any]
                  ) -> tuple[int, dict[str, Any]]:
        table, action = fields.get("table"), fields.get("action")
        resolution = fields.get("resolution") or None
        if not all(isinstance(v, str) for v in (table, action)) or not isinstance(
                resolution, str | None):
            return 400, {"error": "table, action and resolution are strings"}
        t = self.tables(table) if isinstance(table, str) else None
        if t is None:
            return 404, {"error": f"no table {table!r}"}
        who = {"account": s.name, "role": s.role, "from": self.client(request), "via": "serve",
               "user_agent": request.headers.get("user-agent", "")[:120]}
        if action in ACTIONS and self.duties is not None:
            return await self.duties.do(t, s, action, fields, who)
        if action not in ("resolve", "new-shoe"):
            return 400, {"error": "action must be resolve, new-shoe, sign-on, sign-off or "
                                  "acknowledge"}
        if action == "resolve" and resolution not in RESOLUTIONS:
            return 400, {"error": f"resolution must be one of {', '.join(RESOLUTIONS)}"}
        if self.operate is None:
            return 409, {"error": "serve holds no shoe link to operate"}
        recording = self.duties.pit.recording if self.duties is not None else None
        refused = recording.refusal() if recording is not None else None
        if refused is not None:  # the shoe would do it, and its frame wait unstored
            return 409, {"error": refused}
        try:
            done = await asyncio.get_running_loop().run_in_executor(
                self._operating, self.operate, t.shoe_id, action, resolution, s.name, who)
        except SabotError as e:
            return 409, {"error": str(e)}
        except (ConnectionError, OSError) as e:
            return 409, {"error": f"link lost: {e}"}
        return 200, {"table": t.table, "action": action, "resolution": resolution,
                     "by": s.name, "shoe": done}

    async def operate_form(self, request: Request) -> Response:
        s = self.session(request)
        try:
            form = await self._form(request)
        except SabotError as e:
            response = self.page("Not done", el("p", str(e), class_="alarm"))
            response.status_code = 413
            return response
        status, why = self._allowed(request, s, form.get("csrf"), form)
        if status:
            response = self.page("Not done", join(el("p", why, class_="alarm"),
                                                  el("a", "back to the pit", href="/")))
            response.status_code = status
            return response
        assert s is not None
        resolution = form.get("resolution") or ""
        if (form.get("action") == "resolve" and resolution in CONFIRM
                and form.get("confirm") != "yes"):
            return self._confirm(s, form.get("table", ""), resolution)
        status, out = await self._do(request, s, form)
        if status != 200:
            body = el("p", f"{form.get('table', '')}: {out['error']}", class_="alarm")
        elif out["action"] in ACTIONS:
            body = el("p", Duties.said(out), id="done")
        else:
            sh = out["shoe"]
            what = (f"resolved {out['resolution']}" if out["action"] == "resolve" else
                    "started the next shoe" if sh.get("started", True) else
                    "the next shoe was already started")
            body = el("p", f"{out['table']}: {what} — the shoe is now "
                      f"{PHASE_WORDS.get(sh.get('phase'), sh.get('phase'))} (shoe "
                      f"{sh.get('shoe')}, round {sh.get('round')}; logged as {s.name})",
                      id="done")
        response = self.page("Done" if status == 200 else "Not done",
                             join(body, el("a", "back to the pit", href="/")))
        response.status_code = status
        return response

    def _confirm(self, s: Session, table: str, resolution: str) -> Response:
        """The second page of a resolution that cannot be taken back."""
        from sabot.pit.words import hold_words

        t = self.tables(table)
        held = (f", held by {hold_words(t.held)} in shoe {t.shoe}" if t is not None and t.held
                else "")
        return self.page(f"Confirm {resolution}", join(
            el("p", f"{table}{held}: {resolution} {CONFIRM[resolution]}. It cannot be taken "
                    f"back, and is logged as given by {s.name}."),
            el("form", el("input", type="hidden", name="csrf", value=s.csrf),
               el("input", type="hidden", name="table", value=table),
               el("input", type="hidden", name="action", value="resolve"),
               el("input", type="hidden", name="resolution", value=resolution),
               el("input", type="hidden", name="confirm", value="yes"),
               el("button", f"confirm {resolution}", type="submit", data_confirm=resolution),
               " ", el("a", "cancel: back to the pit", href="/"),
               method="post", action="/operate", class_="operate")))

    async def operations_page(self, request: Request) -> Response:
        s = self.session(request)
        if s is None or s.role not in SEE_LOG:
            response = self.page("Operator log", el("p", "log in as a supervisor or IT to read "
                                                     "the operator log", class_="alarm"))
            response.status_code = 401 if s is None else 403
            return response
        try:
            ops = await in_time(self.operations)
        except TimeoutError:
            response = self.page("Operator log", el("p", "the audit database does not answer: "
                                                     "try again shortly", class_="alarm"))
            response.status_code = 503
            return response
        rows = [el("tr", [el("td", cell) for cell in log_row(op, self.table_of)])
                for op in reversed(ops[-500:])]
        return self.page("Operator log", join(
            el("p", el("a", "back to the pit", href="/"), " · the newest 500, newest first; all "
               "of them: sabot history --db DB --operations"),
            el("table", el("tr", [el("th", h) for h in LOG_HEADINGS]), rows, class_="pit")))

    # ---- the API, for scripts ------------------------------------------------------------
    async def _json(self, request: Request) -> dict[str, Any] | None:
        try:
            doc = parse_json(await self._body(request), "the request")
        except SabotError:
            return None
        return doc if isinstance(doc, dict) else None

    async def api_login(self, request: Request) -> Response:
        """JSON only, from this origin when the browser names one: another site's form (which
        can send text/plain, never application/json) cannot log a browser in as its own."""
        if (request.headers.get("content-type", "").split(";")[0].strip() != "application/json"
                or not self._same_origin(request)):
            return JSONResponse({"error": "POST JSON with Content-Type: application/json, from "
                                          "this server's origin"}, 415)
        doc = await self._json(request)
        if doc is None:
            return JSONResponse({"error": "want {\"name\": ..., \"password\": ...}"}, 400)
        name, client = str(doc.get("name", "")), self.client(request)
        user, why = await self._check_login(name, str(doc.get("password", "")), client)
        if user is None:
            return JSONResponse({"error": why}, 429 if why.startswith("too many") else 401)
        token, s = self.sessions.start(name, user, client)
        response = JSONResponse({"name": name, "role": s.role, "csrf": s.csrf,
                                 "expires": int(s.started + 8 * 3600)})
        response.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/")
        return response

    async def api_logout(self, request: Request) -> Response:
        s = self.session(request)
        if s is None or request.headers.get("x-csrf-token") != s.csrf:
            return JSONResponse({"error": "no session, or not its CSRF token"}, 403)
        self.sessions.end(request.cookies.get(COOKIE))
        response = JSONResponse({"logged_out": True})
        response.delete_cookie(COOKIE, path="/")
        return response

    async def api_operate(self, request: Request) -> Response:
        s = self.session(request)
        doc = await self._json(request)
        status, why = self._allowed(request, s, request.headers.get("x-csrf-token"), doc or {})
        if status:
            return JSONResponse({"error": why}, status)
        assert s is not None
        if doc is None:
            return JSONResponse({"error": "want {\"table\", \"action\": resolve | new-shoe | "
                                          "sign-on | sign-off | acknowledge, \"resolution\", "
                                          "\"dealer\", \"alarm\", \"note\"}"}, 400)
        status, out = await self._do(request, s, doc)
        return JSONResponse(out, status)


LOG_HEADINGS = ("at", "table", "operation", "what", "shoe id", "shoe", "round", "account",
                "role", "from", "frame (seq)")


def log_row(op: dict[str, Any], table_of: Callable[[int], str | None]) -> list[str]:
    """An operator-log entry as the page's cells: plain text ("" where the entry has none; an
    entry from the command line has no account: its OS user stands in)."""
    def text(v: Any) -> str:
        return "" if v is None else str(v)[:200]

    sid = op.get("shoe_id")
    shoe_id = f"{sid:#010x}" if isinstance(sid, int) and not isinstance(sid, bool) else text(sid)
    return [when(op.get("logged_at"), op.get("at")),
            text(op.get("table") or (table_of(sid) if isinstance(sid, int) else None)),
            text(op.get("operation")).replace("_", "-"), entry_words(op), shoe_id,
            text(op.get("shoe")), text(op.get("round")), text(op.get("account") or op.get("by")
                                                                or op.get("user")),
            text(op.get("role") or ("command line" if op.get("user") else None)),
            text(op.get("from") or op.get("host")), text(op.get("seq"))]


def when(logged_at: Any, at: Any) -> str:
    """An entry's time as the server's local date and time (the stored time; its `at` text if
    that is all it has)."""
    if isinstance(logged_at, (int, float)) and not isinstance(logged_at, bool):
        try:
            return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(logged_at))
        except (OverflowError, OSError, ValueError):
            pass
    return "" if at is None else str(at)[:40]


def entry_words(op: dict[str, Any]) -> str:
    """What an entry did, in words: the resolution, the dealer, the alarm and its note."""
    from sabot.pit.words import (
        alarm_detail_words,
        alarm_words,
        resolution_words,
        shift_time,
        shown,
    )

    kind = op.get("operation")
    if kind == "resolve":
        return (f"{shown(op.get('resolution')).replace('_', '-')}: "
                f"{resolution_words(op.get('resolution'))}")
    if kind == "new_shoe":
        return f"shoe {shown(op.get('shoe'))} started"
    if kind in ("sign_on", "sign_off"):
        why = (f" (moved to {shown(op['moved_to'])})" if op.get("moved_to") else
               f" (in place of them: {shown(op['replaced_by'])})" if op.get("replaced_by")
               else "")
        return f"{shown(op.get('dealer'))} signed {'on' if kind == 'sign_on' else 'off'}{why}"
    if kind == "acknowledge":
        alarm: dict[str, Any] = op["alarm"] if isinstance(op.get("alarm"), dict) else {}
        note = op.get("note")
        detail = alarm.get("detail")
        return (f"{alarm_words(alarm.get('kind'))} raised {shift_time(alarm.get('raised_at'))}"
                + (f" ({alarm_detail_words(alarm.get('kind'), detail)})" if detail else "")
                + (f": {shown(note)}" if note else ""))
    if kind == "serve_alarm":
        cleared = op.get("cleared_at")
        return (f"{alarm_words(op.get('kind'))}, {shift_time(op.get('raised_at'))} to "
                f"{shift_time(cleared) if cleared else 'serve stopping'}")
    return ""


def operations_of(store_path: str) -> Callable[[], list[dict[str, Any]]]:
    """The operator log as a page reads it (its own read-only connection each time)."""
    def read() -> list[dict[str, Any]]:
        from sabot.audit.store import open_store

        try:
            store = open_store(store_path, writer=False)
        except SabotError:
            return []
        try:
            return store.operations_since(0, unreadable=[])  # an edited entry: skipped
        finally:
            store.close()

    return read


class OperatorView:
    """A logged-in operator's controls on the dashboard (pit/dashboard.py Operator)."""

    def __init__(self, console: Console, s: Session) -> None:
        self.console, self.s = console, s

    def buttons(self, table: str, state: str) -> Html | None:
        return self.console.controls(self.s, table, state)

    def dealer(self, table: str, dealer: str | None) -> Html | None:
        duties = self.console.duties
        return duties.dealer_controls(self.s, table, dealer) if duties else None

    def acknowledge(self, table: str, alarm: dict[str, Any]) -> Html | None:
        duties = self.console.duties
        return duties.ack_control(self.s, table, alarm) if duties else None

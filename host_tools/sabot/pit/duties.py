"""The pit's shift, run from the dashboard: dealers sign on and off at tables, supervisors
acknowledge alarms with a note, and the shift report is read as a printable page or CSV.

Signing on and acknowledging are entries of the chained operator log (the audit store), each
naming the shoe's newest stored frame (an acknowledgement: its alarm's), so every round that
follows is attributed to the dealer on duty; `sabot audit verify` finds an entry that names
another frame than serve wrote, an acknowledgement of an alarm stored after it, of another
kind or shoe, or twice — not one inserted as serve would have written it, nor one deleted (who
signed on is the host's word, not the shoe's: docs/SECURITY.md). A dealer signs themself on and
off, never over another dealer; a supervisor signs any dealer on or off and acknowledges
alarms; a dealer's table changes only while its shoe has delivered every round dealt. Nothing
is said done that the store has not confirmed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from contextlib import closing
from datetime import datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from sabot.audit.operator_log import NOTE_MAX
from sabot.audit.store import open_store
from sabot.errors import SabotError
from sabot.pit import shift
from sabot.pit.accounts import OPERATE, SEE_LOG, Session, name_problem
from sabot.pit.markup import Html, el, join
from sabot.pit.tables import Pit, TableView, alarm_key, shift_bounds
from sabot.pit.words import alarm_words, iso, shift_time

SIGN = frozenset({"dealer", "supervisor"})  # the roles that sign dealers on and off
ACTIONS = ("sign-on", "sign-off", "acknowledge")
LOG_WAIT = 5.0  # seconds an entry may take to be confirmed before the request is answered

# log(shoe_id, entry, seq or None for the shoe's newest stored frame): the entry written and
# confirmed, or a one-line SabotError
Log = Callable[[int, dict[str, Any], "int | None"], None]
Planned = tuple[TableView, dict[str, Any], "int | None"]  # a table, its entry, the seq it names


def alarm_ref(alarm: dict[str, Any]) -> str:
    """An alarm as a form names it: a stored one by its row id, serve's own by kind and time."""
    return ":".join(map(str, alarm_key(alarm, None)[:3]))


class Duties:
    def __init__(self, pit: Pit, log: Log | None, dealers: Callable[[], list[str]],
                 ready: Callable[[int], str | None] = lambda shoe_id: None) -> None:
        self.pit = pit
        self.log = log
        self.dealers = dealers  # the dealer accounts' names
        # why a table's dealer may not change now (its shoe not caught up), or None
        self.ready = ready

    # ---- the dashboard's controls ------------------------------------------------------------
    def dealer_controls(self, s: Session | None, table: str, dealer: str | None) -> Html | None:
        if s is None or s.role not in SIGN or self.log is None:
            return None

        def form(action: str, label: str, *fields: Any) -> Html:
            return el("form", el("input", type="hidden", name="csrf", value=s.csrf),
                      el("input", type="hidden", name="table", value=table),
                      el("input", type="hidden", name="action", value=action), *fields,
                      el("button", label, type="submit", data_action=action),
                      method="post", action="/operate", class_="operate duty",
                      data_key=f"{table}|{action}")

        out = []
        if s.role == "dealer":
            if dealer is None:
                out.append(form("sign-on", "sign on here"))
            elif dealer == s.name:
                out.append(form("sign-off", "sign off"))
            # (another dealer's table: they sign off first, or a supervisor moves them)
        else:
            names = [n for n in self.dealers() if n != dealer]
            at = {o.dealer: o.table for o in self.pit.tables() if o.dealer}
            if names:  # a dealer at another table is moved here (said in the option)
                out.append(form("sign-on", f"sign on{' in place of ' + dealer if dealer else ''}",
                                el("select", [el("option", n + (f" (now at {at[n]})"
                                                                 if n in at else ""), value=n)
                                              for n in names], name="dealer")))
            if dealer:
                out.append(form("sign-off", f"sign {dealer} off",
                                el("input", type="hidden", name="dealer", value=dealer)))
        return join(el("br"), *out)

    def ack_control(self, s: Session | None, table: str, alarm: dict[str, Any]) -> Html | None:
        if s is None or s.role not in OPERATE or self.log is None:
            return None
        return el("form", el("input", type="hidden", name="csrf", value=s.csrf),
                  el("input", type="hidden", name="table", value=table),
                  el("input", type="hidden", name="action", value="acknowledge"),
                  el("input", type="hidden", name="alarm", value=alarm_ref(alarm)),
                  el("input", name="note", maxlength=NOTE_MAX, placeholder="what was done",
                     required=True, aria_label="note"),
                  el("button", "acknowledge", type="submit", data_action="acknowledge"),
                  method="post", action="/operate", class_="operate ack",
                  data_key=f"{table}|acknowledge|{alarm_ref(alarm)}")

    # ---- doing it ----------------------------------------------------------------------------
    def allowed(self, s: Session, action: str, fields: dict[str, Any]) -> str | None:
        """Why this account may not do it (None: it may)."""
        if action == "acknowledge" and s.role not in OPERATE:
            return f"{s.name}'s account may not acknowledge alarms; a supervisor's may"
        if action in ("sign-on", "sign-off"):
            if s.role not in SIGN:
                return f"{s.name}'s account may not sign dealers on or off"
            dealer = fields.get("dealer") or s.name
            if s.role == "dealer" and dealer != s.name:
                return "a dealer signs only themself on or off"
        return None

    async def do(self, t: TableView, s: Session, action: str, fields: dict[str, Any],
                 who: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """A sign-on, sign-off or acknowledgement: every entry it takes checked first, then
        each logged and confirmed (a sign-on may sign others off; a pit-wide alarm is
        acknowledged at every table it stands at)."""
        if self.log is None:
            return 409, {"error": "serve validates no shoe here: nothing is logged"}
        refused = self.pit.recording.refusal() if self.pit.recording else None
        if refused is not None:
            return 409, {"error": refused}
        entry: dict[str, Any] = {"shoe_id": t.shoe_id, "table": t.table, "by": s.name,
                                 **who, "at": iso(time.time())}
        plan = (self._signing(t, s, action, fields, entry) if action in ("sign-on", "sign-off")
                else self._acknowledging(t, fields, entry))
        if isinstance(plan, tuple):
            return plan  # refused: nothing logged
        for table, one, seq in plan:
            status, out = await self._log(table, one, seq)
            if status != 200:
                return status, out
        return 200, {"table": t.table, "action": action, "by": s.name,
                     **({"dealer": entry["dealer"]} if "dealer" in entry else {}),
                     **({"alarm": entry["alarm"], "note": entry["note"]}
                        if "alarm" in entry else {})}

    def _signing(self, t: TableView, s: Session, action: str, fields: dict[str, Any],
                 entry: dict[str, Any]) -> list[Planned] | tuple[int, dict[str, Any]]:
        """A sign-on's or sign-off's entries (one dealer a table, one table a dealer: whoever
        it replaces is signed off there, and the dealer off the table they leave), or why not."""
        dealer = fields.get("dealer") or s.name
        if not isinstance(dealer, str) or name_problem(dealer):
            return 400, {"error": "dealer: an account name, 1-16 printable characters"}
        if action == "sign-on" and s.role != "dealer" and dealer not in self.dealers():
            return 400, {"error": f"no dealer account {dealer!r}"}
        if action == "sign-off" and t.dealer != dealer:
            return 409, {"error": f"{dealer} is not signed on at {t.table}"}
        if action == "sign-on" and t.dealer == dealer:
            return 409, {"error": f"{dealer} is signed on at {t.table} already"}
        if action == "sign-on" and t.dealer and s.role == "dealer":
            return 409, {"error": f"{t.dealer} is signed on at {t.table}: they sign off first, "
                                  "or a supervisor signs you on there"}
        entry.update(operation=action.replace("-", "_"), dealer=dealer)
        plan: list[Planned] = []
        if action == "sign-on":
            leaving = [(o, dealer) for o in self.pit.tables() if o.dealer == dealer
                       and o is not t]
            if t.dealer:
                leaving.append((t, t.dealer))
            for other, who_left in leaving:
                why = {"moved_to": t.table} if who_left == dealer else {"replaced_by": dealer}
                plan.append((other, dict(entry, shoe_id=other.shoe_id, table=other.table,
                                         dealer=who_left, operation="sign_off", **why), None))
        plan.append((t, entry, None))
        for table, _, _ in plan:  # a table whose rounds would be counted wrongly: none logged
            why_not = self.ready(table.shoe_id)
            if why_not:
                return 409, {"error": f"not done: {table.table}: {why_not}"}
        return plan

    def _acknowledging(self, t: TableView, fields: dict[str, Any], entry: dict[str, Any]
                       ) -> list[Planned] | tuple[int, dict[str, Any]]:
        """An acknowledgement's entries (a pit-wide alarm's at every table it stands at), or
        why not."""
        ref, note = fields.get("alarm"), fields.get("note") or ""
        if not isinstance(note, str) or not note.strip() or len(note) > NOTE_MAX \
                or not note.isprintable():
            return 400, {"error": f"note: write what was done, in 1 to {NOTE_MAX} printable "
                                  "characters"}
        alarm = next((a for a in self.pit.alarms_of(t) if alarm_ref(a) == ref), None)
        if alarm is None:
            return 404, {"error": f"no alarm {ref!r} at {t.table}"}
        if alarm.get("ack"):
            return 409, {"error": f"that alarm was acknowledged by {alarm['ack'].get('by')}"}
        raised = alarm.get("raised_at")
        if not isinstance(raised, float) or not isinstance(alarm.get("detail"), str):
            return 409, {"error": "that alarm's stored row is none a validator writes (no time, "
                                  "or no detail): run sabot audit verify"}
        entry.update(operation="acknowledge", note=note, alarm={
            "id": alarm.get("id"), "kind": alarm.get("kind"), "raised_at": iso(raised),
            "detail": alarm.get("detail")})
        plan: list[Planned] = [(t, entry, alarm.get("seq") if alarm.get("id") is not None
                                else None)]
        if alarm.get("pit_wide"):
            for other in self.pit.tables():
                if other is not t and any(alarm_ref(a) == ref and not a.get("ack")
                                          for a in self.pit.alarms_of(other)):
                    plan.append((other, dict(entry, shoe_id=other.shoe_id, table=other.table),
                                 None))
        return plan

    async def _log(self, t: TableView, entry: dict[str, Any], seq: int | None
                   ) -> tuple[int, dict[str, Any]]:
        """The entry into the operator log, confirmed; shown at once on this server's pages."""
        log = self.log
        assert log is not None
        try:
            await asyncio.wait_for(asyncio.to_thread(log, t.shoe_id, entry, seq), LOG_WAIT)
        except TimeoutError:
            return 409, {"error": f"the audit database has not confirmed it within {LOG_WAIT:g}"
                                  " s: it is logged when the database answers (check the "
                                  "operator log)"}
        except SabotError as e:
            return 409, {"error": f"not logged: {e}"}
        self.pit.apply_operation(dict(entry, logged_at=time.time(), seq=seq))
        return 200, {}

    @staticmethod
    def said(out: dict[str, Any]) -> str:
        """What was done, for the page after the form."""
        if out["action"] == "sign-on":
            return f"{out['table']}: {out['dealer']} signed on (logged as {out['by']})"
        if out["action"] == "sign-off":
            return f"{out['table']}: {out['dealer']} signed off (logged as {out['by']})"
        a = out["alarm"]
        return (f"{out['table']}: acknowledged {alarm_words(a['kind'])} raised "
                f"{shift_time(a['raised_at'])} (logged as {out['by']})")

    # ---- the shift report ------------------------------------------------------------------
    def routes(self, session: Callable[[Request], Session | None], guarded: bool,
               page: Callable[[str, Html], Response],
               read: Callable[[Callable[[], Any]], Any]) -> list[Route]:
        """/shift (printable), /shift.csv and /api/shift, for ?start=&end= (ISO 8601; default
        the current shift so far). `guarded`: only supervisors and IT read it (serve with
        --accounts: the report names operators)."""

        def span(request: Request) -> tuple[float, float] | str:
            q = request.query_params
            try:
                start = _when(q.get("start"))
                end = _when(q.get("end"))
            except ValueError:
                return "start and end are ISO 8601 times, e.g. 2026-12-05T06:00:00+00:00"
            if start is None:
                start, _ = shift_bounds(self.pit.shifts, time.time() if end is None
                                        else end - 1)
            if end is None:
                end = shift_bounds(self.pit.shifts, start)[1]
            return (start, end) if end > start else "end must come after start"

        async def report(request: Request) -> tuple[int, Any]:
            s = session(request)
            if guarded and (s is None or s.role not in SEE_LOG):
                return (401 if s is None else 403), ("log in as a supervisor or IT to read "
                                                     "the shift report")
            bounds = span(request)
            if isinstance(bounds, str):
                return 400, bounds
            start, end = bounds
            names = {t.shoe_id: t.table for t in self.pit.by_id.values()}
            opened = self._open_alarms()

            def build() -> list[shift.TableShift]:
                with closing(open_store(self.pit.db, writer=False)) as store:
                    return shift.build(store, names, start, end, opened)
            try:
                built = await read(build)
            except TimeoutError:
                return 503, "the audit database does not answer: try again shortly"
            except SabotError as e:
                return 503, str(e)
            return 200, (built, start, end)

        def nav(start: float, end: float) -> Html:
            before = shift_bounds(self.pit.shifts, start - 1)
            after = shift_bounds(self.pit.shifts, end)
            q = f"?start={_q(iso(start))}&end={_q(iso(end))}"
            return el("p", el("a", "back to the pit", href="/"), " · ",
                      el("a", "previous shift", href=f"/shift?start={_q(iso(before[0]))}"),
                      " · " if after[0] <= time.time() else None,
                      el("a", "next shift", href=f"/shift?start={_q(iso(after[0]))}")
                      if after[0] <= time.time() else None, " · ",
                      el("a", "as CSV", href=f"/shift.csv{q}", id="csv"), class_="nav")

        async def html_route(request: Request) -> Response:
            status, out = await report(request)
            if status != 200:
                r = page("Shift report", el("p", out, class_="alarm"))
                r.status_code = status
                return r
            built, start, end = out
            return page("Shift report", shift.as_html(built, start, end, self.pit.name,
                                                      nav(start, end)))

        async def csv_route(request: Request) -> Response:
            status, out = await report(request)
            if status != 200:
                return Response(f"{out}\n", status_code=status, media_type="text/plain")
            built, start, end = out
            name = f"shift-{time.strftime('%Y%m%d-%H%M', time.localtime(start))}.csv"
            return Response(shift.as_csv(built, start, end), media_type="text/csv; charset=utf-8",
                            headers={"Content-Disposition": f'attachment; filename="{name}"'})

        async def api_route(request: Request) -> Response:
            from sabot.pit.pages import StoredJSON

            status, out = await report(request)
            if status != 200:
                return StoredJSON({"error": out}, status_code=status)
            built, start, end = out
            return StoredJSON({"start": iso(start), "end": iso(end), "pit": self.pit.name,
                               "tables": [t.json() for t in built]})

        return [Route("/shift", html_route), Route("/shift.csv", csv_route),
                Route("/api/shift", api_route)]

    def _open_alarms(self) -> list[dict[str, Any]]:
        """serve's own alarms that no operator entry carries yet (still open, or cleared and
        not yet logged), each as the report takes it."""
        rec = self.pit.recording
        if rec is None:
            return []
        out = []
        for t in self.pit.tables():
            for a in rec.of_shoe(t.shoe_id):
                if t.shoe_id not in a.logged:
                    out.append({"kind": a.kind, "shoe_id": t.shoe_id, "raised_at": a.raised_at,
                                "cleared_at": a.cleared_at, "detail": a.detail})
        return out


def _when(text: str | None) -> float | None:
    if not text:
        return None
    at = datetime.fromisoformat(text)
    if at.tzinfo is None:
        at = at.astimezone()
    return at.timestamp()


def _q(text: str | None) -> str:
    from urllib.parse import quote

    return quote(text or "", safe="")


__all__ = ["ACTIONS", "Duties", "alarm_key", "alarm_ref"]

"""The pit's human pages as HTML: the dashboard (a pit's tables), the floor (every pit's), and
the page around each. Rendered on the server with pit/markup.py's builders, which escape every
value they are given; in plain words (pit/words.py), with the server's time on every page and,
for every table, since when it is in its state and how old its newest stored frame is: a floor
that is not recording, or a table gone quiet, never looks like one that is dealing."""

from __future__ import annotations

import time
from typing import Any, Protocol
from urllib.parse import quote

from sabot.pit.markup import Html, document, el, join
from sabot.pit.tables import FLOOR_ALARMS, Pit, TableView
from sabot.pit.words import (
    ago,
    alarm_detail_words,
    alarm_words,
    clock,
    edge_words,
    plural,
    result_words,
    shown,
    since,
    state_words,
    told,
    zone,
)

STYLESHEET, SCRIPT = "/static/pages.css", "/static/pages.js"
DASHBOARD_HEADINGS = ("table", "dealer", "state", "shoe · round", "last result", "this shoe",
                      "hands in the last hour", "cards left", "edge (remaining shoe)", "alarms")
FLOOR_HEADINGS = ("pit", "table", "dealer", "state", "newest frame stored", "shoe · round",
                  "last result", "alarms")


class Operator(Protocol):
    """A logged-in operator's controls on the dashboard (pit/console.py)."""

    def buttons(self, table: str, state: str) -> Html | None: ...

    def dealer(self, table: str, dealer: str | None) -> Html | None: ...

    def acknowledge(self, table: str, alarm: dict[str, Any]) -> Html | None: ...


def table_path(table: str) -> str:
    """The scoreboard's path: the name percent-encoded whole (a `/` too), so any name is one
    path segment of this server."""
    return "/table/" + quote(table, safe="", errors="replace")


def floor_path(only: str | None = None, events: bool = False) -> str:
    path = "/floor/events" if events else "/floor"
    return path + (f"?pit={quote(only, safe='', errors='replace')}" if only is not None else "")


def page(title: str, body: Html, events: str, kind: str = "pit") -> Html:
    """A whole page: `kind` "pit" (the dashboard and every page of the pit's staff) or
    "scoreboard" (a table's display, laid out to fill the screen it is shown on)."""
    # a page with no stream of its own says when the server made it (a live one's fragment
    # carries the server's time, every second)
    made = None if events else el("p", f"server time {clock(time.time())} {zone()}",
                                  class_="now", id="made")
    return document(
        [el("meta", charset="utf-8"), el("title", title),
         el("meta", name="viewport", content="width=device-width, initial-scale=1"),
         el("link", rel="stylesheet", href=STYLESHEET)],
        el("body", el("h1", title), made, el("div", body, id="live"), el("script", src=SCRIPT),
           data_version=0, data_events=events, class_=kind))


def now_line(pit: Pit, now: float, links: bool = True) -> Html:
    """The server's time, the pit and its shift, and where to go next."""
    shift = pit.shift_start(now)
    return el("p", el("b", clock(now), id="clock", data_now=f"{now:.0f}"), f" {zone()}",
              f" · pit {pit.name}" if pit.name else None,
              f" · shift since {clock(shift)[:5]}",
              join(" · ", el("a", "shift report", href="/shift"), " · ",
                   el("a", "floor", href="/floor")) if links else None,
              class_="now")


def recording_banner(pit: Pit, now: float) -> Html | None:
    """NOT RECORDING, in red across the page, while serve's store confirms no commit, or the
    pages' reads get no answer."""
    stalled = pit.recording.not_recording() if pit.recording is not None else None
    said = []
    if stalled is not None:
        said.append(el("p", el("b", "NOT RECORDING "), since(stalled.since, now), ": rounds "
                       "dealt now are not stored yet (the shoes keep them); call IT (for them: ",
                       shown(stalled.detail), ")", class_="alarm banner", id="not-recording"))
    if pit.unanswered_since is not None and now - pit.unanswered_since >= pit.store_alarm:
        said.append(el("p", el("b", "NO ANSWER FROM THE AUDIT DATABASE "),
                       since(pit.unanswered_since, now), ": what these pages show may be out of "
                       "date; call IT", class_="alarm banner", id="no-answer"))
    return join(*said) if said else None


def problem(pit: Pit) -> Html | None:
    said = [pit.problem] if pit.problem else []
    if pit.skipped:
        said.append(f"{pit.skipped} stored rows name no shoe id and are shown on no table: run "
                    "sabot audit verify")
    if pit.unreadable_rows:
        said.append(f"{pit.unreadable_rows} stored records or operator entries are no JSON a "
                    "validator writes and are skipped: run sabot audit verify")
    return el("p", "; ".join(said), class_="alarm", id="problem") if said else None


def state_cell(pit: Pit, t: TableView, now: float, buttons: Html | None = None,
               status: tuple[str, float | None, str] | None = None) -> Html:
    state, at, why = status or pit.status(t, now)
    return el("td", el("span", state_words(state, t.held), class_="word"),
              join(el("br"), el("small", since(at, now), class_="since")) if at else None,
              join(el("br"), el("small", shown(why))) if why else None,
              buttons, class_=f"state state-{state.replace(' ', '-')}", data_state=state,
              data_since=f"{at:.0f}" if at else None)


def frame_age(t: TableView, now: float) -> Html:
    if t.frame_at is None:
        return el("small", "no frame stored yet")
    return el("small", f"newest frame stored {ago(now - t.frame_at)} ago",
              class_="age", data_frame_at=f"{t.frame_at:.0f}")


def last_result(t: TableView) -> str:
    if t.blackjack:
        last = t.hands[-1] if t.hands else None
        if last is None:
            return "-"
        if last.get("voided"):
            return "voided"
        return (f"dealer {shown(last.get('dealer_total'))} ({len(last.get('dealer') or [])} "
                "cards)")
    if not t.rounds:
        return "-"
    return result_words(t.rounds[-1], told(t.config.side_wagers))


def newest_round(t: TableView) -> Any:
    newest = t.hands if t.blackjack else t.rounds
    return newest[-1].get("round", "?") if newest else 0


def shoe_round(t: TableView) -> str:
    return "-" if t.shoe is None else f"shoe {shown(t.shoe)} · round {shown(newest_round(t))}"


def alarm_item(pit: Pit, t: TableView, a: dict[str, Any], now: float,
               operator: Operator | None) -> Html:
    raised = a.get("raised_at")
    when = clock(raised) if isinstance(raised, (int, float)) else "?"
    ack = a.get("ack")
    return el(
        "li", el("b", when), " ", alarm_words(a.get("kind")),
        f" (round {shown(a['round'])})" if a.get("round") else None,
        join(": ", el("small", alarm_detail_words(a.get("kind"), a.get("detail"))))
        if a.get("detail") else None,
        join(el("br"), el("small", f"cleared {clock(a['cleared_at'])}"))
        if isinstance(a.get("cleared_at"), (int, float)) else None,
        ack_line(ack) if ack else (operator.acknowledge(t.table, a) if operator else None),
        class_="alarm" + (" acked" if ack else ""), data_kind=shown(a.get("kind")))


def ack_line(ack: dict[str, Any]) -> Html:
    at = ack.get("logged_at")
    return join(el("br"), el("small", f"acknowledged by {shown(ack.get('by'))} at "
                             f"{clock(at) if isinstance(at, (int, float)) else '?'}"
                             + (f": {shown(ack.get('note'))}" if ack.get("note") else ""),
                             class_="ack"))


# states in which serve refuses a dealer's sign-on or sign-off: no such buttons are offered
REFUSING = ("link lost", "not recording")


def dashboard_row(pit: Pit, t: TableView, now: float, operator: Operator | None = None
                  ) -> Html:
    """A table's row: name, dealer, state and since when, shoe and round, last result in
    words, this shoe's rounds and time, hands in the last hour, cards left, edges, alarms."""
    status = pit.status(t, now)
    state = status[0]
    f = pit.figures(t, now)
    edges = [el("div", edge_words(w, e), class_="fav" if e < 0 else None)
             for w, e in (t.edges or {}).items()] or "-"
    every = pit.alarms_of(t)
    # every alarm nobody acknowledged stays in view, however many came since; of the others
    # the newest three, and a count
    open_ = [a for a in every if not a.get("ack")]
    done = [a for a in every if a.get("ack")]
    alarms = sorted(open_ + done[-3:], key=lambda a: a["raised_at"] or 0.0)
    more = len(done) - min(3, len(done))
    shoe_time = (f"{plural(f['shoe_rounds'], 'round')} in {ago(f['shoe_minutes'] * 60)}"
                 if f["shoe_minutes"] is not None else "-")
    return el(
        "tr",
        el("td", el("a", shown(t.table), href=table_path(t.table)), el("br"),
           el("small", f"shoe id {t.shoe_id:#010x}" + (" · blackjack" if t.blackjack else "")),
           el("br"), frame_age(t, now)),
        el("td", el("span", shown(t.dealer) if t.dealer else "no dealer signed on",
                    class_="dealer"),
           join(el("br"), el("small", since(t.dealer_since, now)))
           if t.dealer and t.dealer_since else None,
           operator.dealer(t.table, t.dealer) if operator and state not in REFUSING else None),
        state_cell(pit, t, now, operator.buttons(t.table, state) if operator else None, status),
        el("td", shoe_round(t), class_="shoe-round", data_shoe=shown(t.shoe),
           data_round=shown(newest_round(t))),
        el("td", last_result(t), class_="last-result"),
        el("td", shoe_time, el("br"), el("small", plural(f["shoes_this_shift"], "shoe")
                                         + " this shift")),
        el("td", f["hands_last_hour"], class_="hands-hour"),
        el("td", "-" if t.remaining is None or t.blackjack else t.remaining),
        el("td", "-" if t.blackjack else edges),
        el("td", el("ul", [alarm_item(pit, t, a, now,
                                      operator if state != "not recording" else None)
                           for a in reversed(alarms)],
                    class_="alarms") if alarms else "none",
           el("small", f"and {plural(more, 'acknowledged alarm')} before: the shift report "
                       "has them") if more else None),
        data_table=t.table)


def dashboard(pit: Pit, operator: Operator | None = None, bar: Html | None = None,
              now: float | None = None) -> Html:
    """The pit's tables; `operator`: a logged-in operator's controls (pit/console.py), `bar`:
    who is logged in."""
    now = time.time() if now is None else now
    return join(now_line(pit, now), recording_banner(pit, now), bar, problem(pit),
                el("table", el("tr", [el("th", h) for h in DASHBOARD_HEADINGS]),
                   [dashboard_row(pit, t, now, operator) for t in pit.tables()], class_="pit"))


def dashboard_html(pit: Pit, operator: Operator | None = None, bar: Html | None = None) -> str:
    return str(dashboard(pit, operator, bar))


def floor_row(pit: Pit, name: str, t: TableView, now: float,
              status: tuple[str, float | None, str], every: list[dict[str, Any]]) -> Html:
    alarms = [a for a in every if not a.get("ack")]  # what someone must look at
    return el(
        "tr",
        el("td", shown(name) if name else "-"),
        el("td", el("a", shown(t.table), href=table_path(t.table)), el("br"),
           el("small", f"shoe id {t.shoe_id:#010x}")),
        el("td", shown(t.dealer) if t.dealer else "-"),
        state_cell(pit, t, now, None, status),
        el("td", frame_age(t, now)),
        el("td", shoe_round(t), class_="shoe-round", data_shoe=shown(t.shoe),
           data_round=shown(newest_round(t))),
        el("td", last_result(t), class_="last-result"),
        el("td", f"{len(alarms)} not acknowledged" if alarms else "none",
           class_="alarm" if alarms else None),
        data_table=t.table, data_pit=name)


def floor_view(pit: Pit, only: str | None = None, now: float | None = None) -> Html:
    """Every pit's tables (or one pit's: `only`), their states, and the floor's newest alarms."""
    now = time.time() if now is None else now
    every = pit.floor()
    shown_pits = [(p, ts) for p, ts in every if only is None or p == only]
    choose = [el("a", "every pit", href=floor_path(), class_="on" if only is None else None)]
    choose += [el("a", shown(p) or "no pit", href=floor_path(p),
                  class_="on" if p == only else None) for p, _ in every]
    looked = {t.shoe_id: (pit.status(t, now), pit.alarms_of(t)) for _, ts in shown_pits
              for t in ts}
    seen: set[tuple[Any, ...]] = set()
    alarms = []
    for p, ts in shown_pits:
        for t in ts:
            for a in looked[t.shoe_id][1]:
                if a.get("serve"):  # a pit-wide alarm of serve's own: once for the pit
                    key = (p, a["kind"], a["raised_at"], t.table if not a.get("pit_wide")
                           else None)
                    if key in seen:
                        continue
                    seen.add(key)
                alarms.append((p, t, a))
    alarms.sort(key=lambda x: x[2]["raised_at"] if isinstance(x[2]["raised_at"],
                                                              (int, float)) else 0.0)
    states: dict[str, int] = {}
    for status, _ in looked.values():
        word = state_words(status[0])
        states[word] = states.get(word, 0) + 1
    return join(
        now_line(pit, now), recording_banner(pit, now), problem(pit),
        el("nav", join(*[join(a, " ") for a in choose]), class_="pits"),
        el("p", f"{sum(len(ts) for _, ts in shown_pits)} tables in {len(shown_pits)} pit"
           f"{'' if len(shown_pits) == 1 else 's'}: "
           + (", ".join(f"{n} {state}" for state, n in sorted(states.items())) or "none"),
           id="floor-counts"),
        el("table", el("tr", [el("th", h) for h in FLOOR_HEADINGS]),
           [floor_row(pit, p, t, now, *looked[t.shoe_id]) for p, ts in shown_pits for t in ts],
           class_="pit floor"),
        el("h2", "Alarms across the floor"),
        el("ul", [el("li", el("b", clock(a["raised_at"]) if isinstance(
            a["raised_at"], (int, float)) else "?"), f" {shown(p) or 'no pit'} "
            f"{'every table' if a.get('pit_wide') else shown(t.table)}: "
            f"{alarm_words(a['kind'])}",
            f" (round {shown(a['round'])})" if a.get("round") else "", ": ",
            shown(a["detail"]), ack_line(a["ack"]) if a.get("ack") else None,
            class_="alarm" + (" acked" if a.get("ack") else ""), data_kind=shown(a["kind"]))
            for p, t, a in reversed(alarms[-FLOOR_ALARMS:])]
           or el("li", "none"), id="floor-alarms"))

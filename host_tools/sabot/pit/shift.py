"""The shift report: for every table, over one shift (or any span), its rounds and shoes, who
dealt them, every irregularity and how it was resolved (and by whom), every alarm and who
acknowledged it — read from the audit store alone (the shoe's signed records, the alarms, the
chained operator log), as a printable page and as CSV.

Rounds are a dealer's when their frames come after that dealer's sign-on at the table (the
operator log names the shoe's newest frame when the dealer signed on) and before the next
sign-on or sign-off there. A table's hands per hour are its rounds over the time its shoes were
dealing within the span; a dealer's, that dealer's rounds over the time signed on."""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sabot.audit.store import AuditStore
from sabot.pit.markup import Html, el, join
from sabot.pit.tables import alarm_key
from sabot.pit.words import (
    alarm_detail_words,
    alarm_words,
    clock,
    hold_words,
    iso,
    iso_text,
    plural,
    resolution_words,
    shown,
)

CSV_COLUMNS = ("section", "table", "shoe_id", "shoe", "round", "start", "end", "name", "what",
               "detail", "rounds", "per_hour", "resolved", "by", "acknowledged_by",
               "acknowledged_at", "note", "code")


@dataclass
class TableShift:
    table: str
    shoe_id: int
    rounds: int = 0
    dealing_s: float = 0.0
    shoes: list[dict[str, Any]] = field(default_factory=list)
    dealers: list[dict[str, Any]] = field(default_factory=list)
    irregularities: list[dict[str, Any]] = field(default_factory=list)
    alarms: list[dict[str, Any]] = field(default_factory=list)

    @property
    def per_hour(self) -> float | None:
        return round(self.rounds * 3600 / self.dealing_s, 1) if self.dealing_s >= 60 else None

    @property
    def undealt(self) -> int:
        """Rounds no dealer was signed on for."""
        return self.rounds - sum(d["rounds"] for d in self.dealers)

    def json(self) -> dict[str, Any]:
        """As /api/shift gives it: every time ISO 8601 with the offset."""
        def times(item: dict[str, Any]) -> dict[str, Any]:
            return {k: iso(v) if k in ("start", "end", "at", "resolved_at")
                    and isinstance(v, (int, float)) else v for k, v in item.items()}
        return {"table": self.table, "shoe_id": self.shoe_id, "rounds": self.rounds,
                "per_hour": self.per_hour, "rounds_with_no_dealer": self.undealt,
                "shoes": [times(x) for x in self.shoes],
                "dealers": [times(x) for x in self.dealers],
                "irregularities": [times(x) for x in self.irregularities],
                "alarms": self.alarms}


def build(store: AuditStore, tables: dict[int, str], start: float, end: float,
          open_alarms: Sequence[dict[str, Any]] = ()) -> list[TableShift]:
    """The report of [start, end) from `store`; `tables`: shoe id -> table name (a shoe not
    named is shown as its id); `open_alarms`: alarms serve holds that no store row carries yet
    (each with shoe_id, kind, raised_at, detail, ack)."""
    now = time.time()
    until = min(end, now)
    records = store.records_between(start, end)
    alarms = store.alarms_between(start, end)
    ops = store.operations_since(0, until=end)
    out: dict[int, TableShift] = {}

    def of(sid: int) -> TableShift:
        if sid not in out:
            out[sid] = TableShift(tables.get(sid, f"shoe {sid:#010x}"), sid)
        return out[sid]

    acks = {alarm_key(op["alarm"], op.get("shoe_id")): op for op in ops
            if op.get("operation") == "acknowledge" and isinstance(op.get("alarm"), dict)}
    resolved_by = {(op.get("shoe_id"), op.get("seq")): op for op in ops
                   if op.get("operation") == "resolve"}
    _shoes_and_rounds(records, of, start, until)
    _irregularities(records, of, resolved_by)
    _dealers(ops, records, of, start, until)
    for a in alarms:
        if isinstance(a.get("shoe_id"), int):
            of(a["shoe_id"]).alarms.append(_alarm(a, acks))
    for op in ops:
        if op.get("operation") == "serve_alarm" and isinstance(op.get("shoe_id"), int) \
                and (op.get("logged_at") or 0) >= start:
            of(op["shoe_id"]).alarms.append(_alarm(
                {"kind": op.get("kind"), "raised_at": op.get("raised_at"),
                 "cleared_at": op.get("cleared_at"), "detail": op.get("detail"),
                 "shoe_id": op["shoe_id"]}, acks))
    for a in open_alarms:
        if isinstance(a.get("shoe_id"), int):
            of(a["shoe_id"]).alarms.append(_alarm(a, acks))
    for t in out.values():
        t.alarms.sort(key=lambda a: a["raised"] or "")
    return sorted(out.values(), key=lambda t: t.table)


def _shoes_and_rounds(records: Iterable[Any], of: Any, start: float, until: float) -> None:
    current: dict[int, dict[str, Any]] = {}
    for r in records:
        t = of(r.shoe_id)
        rec, at = r.record, r.received_at
        shoe = rec.get("shoe")
        s = current.get(r.shoe_id)
        if s is None or (shoe is not None and s["shoe"] != shoe) or r.kind == "shoe_start":
            s = current[r.shoe_id] = {"shoe": shoe, "start": at if r.kind == "shoe_start"
                                      else None, "end": None, "rounds": 0, "first": at}
            t.shoes.append(s)
        if r.kind == "result" or (r.kind == "blackjack_result" and not rec.get("voided")):
            s["rounds"] += 1
            t.rounds += 1
        elif r.kind == "shoe_end":
            s["end"] = at
    for t in (of(sid) for sid in current):
        for s in t.shoes:
            began = s["start"] if s["start"] is not None else start
            t.dealing_s += max(0.0, (s["end"] if s["end"] is not None else until) - began)


def _irregularities(records: Iterable[Any], of: Any,
                    resolved_by: dict[tuple[Any, Any], dict[str, Any]]) -> None:
    open_: dict[int, list[dict[str, Any]]] = {}
    for r in records:
        rec = r.record
        if r.kind == "irregularity":
            item = {"at": r.received_at, "shoe": rec.get("shoe"), "round": rec.get("round"),
                    "kind": rec.get("kind"), "card": rec.get("card"), "resolution": None,
                    "resolved_at": None, "by": None}
            of(r.shoe_id).irregularities.append(item)
            open_.setdefault(r.shoe_id, []).append(item)
        elif r.kind == "resolution":
            pending = open_.get(r.shoe_id) or []
            found: dict[str, Any] | None = next(
                (i for i in pending if i["kind"] == rec.get("kind")
                 and i["card"] == rec.get("card")), pending[0] if pending else None)
            if found is None:  # resolved in this span, raised before it
                item = {"at": None, "shoe": rec.get("shoe"), "round": rec.get("round"),
                        "kind": rec.get("kind"), "card": rec.get("card")}
                of(r.shoe_id).irregularities.append(item)
            else:
                item = found
                pending.remove(item)
            op = resolved_by.get((r.shoe_id, rec.get("seq")))
            item.update(resolution=rec.get("resolution"), resolved_at=r.received_at,
                        by=(op.get("by") if op else None)
                        or ("the supervisor's key on the shoe" if rec.get("source") ==
                            "supervisor" else None))


def _dealers(ops: Sequence[dict[str, Any]], records: Sequence[Any], of: Any, start: float,
             until: float) -> None:
    signs: dict[int, list[dict[str, Any]]] = {}
    for op in ops:
        if op.get("operation") in ("sign_on", "sign_off") and isinstance(op.get("shoe_id"), int):
            signs.setdefault(op["shoe_id"], []).append(op)
    rounds: dict[int, list[int]] = {}
    for r in records:
        if r.kind == "result" or (r.kind == "blackjack_result" and not r.record.get("voided")):
            rounds.setdefault(r.shoe_id, []).append(r.record.get("seq") or 0)
    for sid, entries in signs.items():
        stints: list[dict[str, Any]] = []
        on: dict[str, Any] | None = None
        for op in entries:
            at = op.get("logged_at") or 0.0
            if on is not None:
                on["end"], on["end_seq"] = at, op.get("seq") or 0
                stints.append(on)
                on = None
            if op["operation"] == "sign_on":
                on = {"dealer": op.get("dealer"), "start": at, "seq": op.get("seq") or 0,
                      "end": None, "end_seq": None, "by": op.get("by")}
        if on is not None:
            stints.append(on)
        for s in stints:
            if (s["end"] if s["end"] is not None else until) <= start:
                continue
            began, ended = max(s["start"], start), min(s["end"] or until, until)
            n = len([q for q in rounds.get(sid, [])
                     if q > s["seq"] and (s["end_seq"] is None or q <= s["end_seq"])])
            span = max(0.0, ended - began)
            of(sid).dealers.append({"dealer": s["dealer"], "start": began, "end": s["end"],
                                    "rounds": n, "per_hour": round(n * 3600 / span, 1)
                                    if span >= 60 else None, "by": s["by"]})


def _alarm(a: dict[str, Any], acks: dict[tuple[Any, ...], dict[str, Any]]) -> dict[str, Any]:
    ack = acks.get(alarm_key(a, a.get("shoe_id")))
    return {"raised": iso_text(a.get("raised_at")), "cleared": iso_text(a.get("cleared_at")),
            "kind": a.get("kind"), "shoe": a.get("shoe"), "round": a.get("round"),
            "detail": a.get("detail"), "by": ack.get("by") if ack else None,
            "at": iso_text(ack.get("logged_at")) if ack else None,
            "note": ack.get("note") if ack else None}


# ---- as CSV --------------------------------------------------------------------------------
class _Cells(csv.DictWriter):  # type: ignore[type-arg,unused-ignore]
    """Every cell quoted, and a text cell a spreadsheet could take for a formula (=, +, -, @)
    given a `'` first: a table, dealer or note named by whoever edits a file stays text when the
    report is opened (in a locale whose list separator is `;` too)."""

    def writerow(self, row: Mapping[str, Any]) -> Any:
        return super().writerow({k: "'" + v if isinstance(v, str) and v[:1] in "=+-@\t\r"
                                 and v else v for k, v in row.items()})


def as_csv(report: list[TableShift], start: float, end: float) -> str:
    out = io.StringIO()
    w = _Cells(out, CSV_COLUMNS, lineterminator="\r\n", quoting=csv.QUOTE_ALL)
    w.writeheader()
    for t in report:
        sid = f"{t.shoe_id:#010x}"
        w.writerow({"section": "table", "table": t.table, "shoe_id": sid, "start": iso(start),
                    "end": iso(end), "rounds": t.rounds, "per_hour": t.per_hour,
                    "what": ", ".join((plural(len(t.shoes), "shoe"),
                                       plural(len(t.dealers), "dealer stint"),
                                       plural(len(t.irregularities), "irregularity",
                                              "irregularities"),
                                       plural(len(t.alarms), "alarm")))})
        for s in t.shoes:
            w.writerow({"section": "shoe", "table": t.table, "shoe_id": sid, "shoe": s["shoe"],
                        "start": iso(s["start"]), "end": iso(s["end"]),
                        "rounds": s["rounds"]})
        for d in t.dealers:
            w.writerow({"section": "dealer", "table": t.table, "shoe_id": sid,
                        "name": d["dealer"], "start": iso(d["start"]), "end": iso(d["end"]),
                        "rounds": d["rounds"], "per_hour": d["per_hour"], "by": d["by"]})
        if t.undealt:
            w.writerow({"section": "dealer", "table": t.table, "shoe_id": sid,
                        "what": "no dealer signed on", "rounds": t.undealt})
        for i in t.irregularities:
            w.writerow({"section": "irregularity", "table": t.table, "shoe_id": sid,
                        "shoe": i["shoe"], "round": i["round"], "start": iso(i["at"]),
                        "what": hold_words(i["kind"]), "detail": i.get("card"),
                        "resolved": resolution_words(i["resolution"]) if i.get("resolution")
                        else "not resolved", "end": iso(i.get("resolved_at")),
                        "by": i.get("by"), "code": i["kind"]})
        for a in t.alarms:
            w.writerow({"section": "alarm", "table": t.table, "shoe_id": sid,
                        "shoe": a["shoe"], "round": a["round"], "start": a["raised"],
                        "end": a["cleared"], "what": alarm_words(a["kind"]),
                        "detail": a["detail"], "code": a["kind"],
                        "acknowledged_by": a["by"], "acknowledged_at": a["at"],
                        "note": a["note"]})
    return out.getvalue()


# ---- as a page -------------------------------------------------------------------------------
def _t(at: Any) -> str:
    return clock(at) if isinstance(at, (int, float)) else (shown(at)[11:19] if at else "-")


def as_html(report: list[TableShift], start: float, end: float, pit: str,
            links: Html | None = None) -> Html:
    """The printable report: a summary table, then each table's shoes, dealers,
    irregularities and alarms."""
    day = time.strftime("%A %d %B %Y", time.localtime(start))
    summary = el("table", el("tr", [el("th", h) for h in (
        "table", "rounds", "hands per hour", "shoes", "dealers", "irregularities",
        "alarms", "not acknowledged")]),
        [el("tr", el("td", t.table), el("td", t.rounds), el("td", t.per_hour or "-"),
            el("td", len(t.shoes)), el("td", ", ".join(sorted({shown(d["dealer"])
                                                                for d in t.dealers})) or "-"),
            el("td", len(t.irregularities)), el("td", len(t.alarms)),
            el("td", sum(1 for a in t.alarms if not a["by"]),
               class_="alarm" if any(not a["by"] for a in t.alarms) else None))
         for t in report], class_="pit", id="shift-summary")
    parts = [el("p", f"{'pit ' + pit + ' · ' if pit else ''}{day}, {clock(start)[:5]} to "
             f"{clock(end)[:5]}" + (f" (as of {clock(time.time())})" if end > time.time()
                                    else ""), class_="now"),
             links, summary]
    for t in report:
        parts.append(el("section", el("h2", f"{t.table} — {t.rounds} rounds"
                                      + (f", {t.per_hour} hands per hour" if t.per_hour
                                         else "")),
                        _rows("Shoes", ("shoe", "started", "ended", "rounds"),
                              [(s["shoe"], _t(s["start"]), _t(s["end"]), s["rounds"])
                               for s in t.shoes]),
                        _rows("Dealers", ("dealer", "from", "to", "rounds", "hands per hour",
                                          "signed on by"),
                              [(d["dealer"], _t(d["start"]), _t(d["end"]), d["rounds"],
                                "-" if d["per_hour"] is None else d["per_hour"], d["by"])
                               for d in t.dealers]
                              + ([("no dealer signed on", "-", "-", t.undealt, "-", "-")]
                                 if t.undealt else [])),
                        _rows("Irregularities", ("at", "shoe", "round", "what", "resolved",
                                                 "at", "by"),
                              [(_t(i["at"]), i["shoe"], i["round"], hold_words(i["kind"])
                                + (f" ({i['card']})" if i.get("card") else ""),
                                resolution_words(i["resolution"]) if i.get("resolution")
                                else "not resolved", _t(i.get("resolved_at")),
                                i.get("by") or "-") for i in t.irregularities]),
                        _rows("Alarms", ("raised", "what", "detail", "cleared",
                                         "acknowledged by", "at", "note"),
                              [(_t(a["raised"]), alarm_words(a["kind"]),
                                alarm_detail_words(a["kind"], a["detail"] or ""),
                                _t(a["cleared"]) if a["cleared"] else "-",
                                a["by"] or "not acknowledged", _t(a["at"]) if a["at"] else "-",
                                a["note"] or "") for a in t.alarms]),
                        class_="shift-table", data_table=t.table))
    if not report:
        parts.append(el("p", "nothing was dealt in this span"))
    return join(*parts)


def _rows(title: str, headings: Sequence[str], rows: Sequence[Sequence[Any]]) -> Html:
    if not rows:
        return el("p", el("b", title), ": none")
    return join(el("h3", title), el("table", el("tr", [el("th", h) for h in headings]),
                                    [el("tr", [el("td", shown(c) if c is not None else "-")
                                               for c in r]) for r in rows], class_="pit"))

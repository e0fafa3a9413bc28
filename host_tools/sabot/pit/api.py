"""The pit's JSON (`/api/tables`, `/api/tables/NAME`, `/api/floor`, `/api/health`): the same
facts as the human pages, under keys scripts rely on (docs/INTERFACES.md), with every time in
ISO 8601 with the server's offset and every age in seconds."""

from __future__ import annotations

import time
from typing import Any

from sabot.pit.tables import FLOOR_ALARMS, Pit, TableView, counts, roads_of
from sabot.pit.words import iso, iso_text


def link_json(pit: Pit, t: TableView) -> dict[str, Any] | None:
    """The table's link: its state, why it is lost ("" when up), and since when (null before
    the first try); null for another pit's table."""
    link = pit._own_link(t)
    if link is None:
        return None
    return {"state": link["state"], "reason": link["reason"], "since": iso(link["since"])}


def alarm_json(a: dict[str, Any]) -> dict[str, Any]:
    """A table's alarm (Pit.alarms_of): its stored keys, when it was raised and cleared, whether
    serve itself raised it, and its acknowledgement."""
    ack = a.get("ack")
    return {"kind": a.get("kind"), "shoe_id": a.get("shoe_id"), "shoe": a.get("shoe"),
            "round": a.get("round"), "detail": a.get("detail"), "id": a.get("id"),
            "raised_at": iso_text(a.get("raised_at")),
            "cleared_at": iso_text(a.get("cleared_at")),
            "serve": bool(a.get("serve")),
            "acknowledged": None if not ack else {
                "by": ack.get("by"), "at": iso_text(ack.get("logged_at")),
                "note": ack.get("note")}}


def summary(pit: Pit, t: TableView, now: float | None = None,
            looked: tuple[tuple[str, float | None, str], list[dict[str, Any]]] | None = None
            ) -> dict[str, Any]:
    """A table's row; `looked`: its status and alarms, when the caller has them already."""
    now = time.time() if now is None else now
    newest = t.hands or t.rounds
    (state, at, why), alarms = looked or (pit.status(t, now), pit.alarms_of(t))
    return {"table": t.table, "shoe_id": t.shoe_id, "shoe": t.shoe,
            "round": newest[-1].get("round", 0) if newest else 0,
            "state": state, "link": link_json(pit, t), "as_of": iso(now),
            "state_since": iso(at), "state_detail": why,
            "last_frame_at": iso(t.frame_at),
            "last_frame_age_s": None if t.frame_at is None else round(now - t.frame_at, 1),
            "dealer": t.dealer, "dealer_since": iso(t.dealer_since), **pit.figures(t, now),
            "alarms_open": sum(1 for a in alarms if not a.get("ack")
                               and a.get("cleared_at") is None)}


def detail(pit: Pit, t: TableView) -> dict[str, Any]:
    now = time.time()
    alarms = pit.alarms_of(t)
    return {**summary(pit, t, now, (pit.status(t, now), alarms)), "rounds": t.rounds,
            "roads": roads_of(t), "remaining_cards": t.remaining, "edges": t.edges,
            "alarms": [alarm_json(a) for a in alarms], "counts": counts(t.rounds),
            "stored_at": t.stored_at, **({"hands": t.hands} if t.hands else {})}


def floor_json(pit: Pit, only: str | None = None) -> dict[str, Any]:
    now = time.time()
    pits = pit.floor(only)
    looked = {t.shoe_id: (pit.status(t, now), pit.alarms_of(t)) for _, ts in pits for t in ts}
    alarms = sorted(({"pit": p, "table": t.table, **alarm_json(a)} for p, ts in pits
                     for t in ts for a in looked[t.shoe_id][1]),
                    key=lambda a: a["raised_at"] or "")
    return {"now": iso(now), "problem": pit.problem,
            "recording": not any(s[0] == "not recording" for s, _ in looked.values()),
            "pits": [{"pit": p, "tables": [{**summary(pit, t, now, looked[t.shoe_id]), "pit": p,
                                            "alarms": len(looked[t.shoe_id][1])} for t in ts]}
                     for p, ts in pits],
            "tables": sum(len(ts) for _, ts in pits), "alarms": alarms[-FLOOR_ALARMS:]}


def health(pit: Pit) -> tuple[int, dict[str, Any]]:
    """For monitoring: 200 while the pit records (its store confirms commits in time and its
    pages' reads are answered), 503 while it does not. `attention` names each table a person
    should look at (its link lost, silent, not the registered shoe, tilted, no validator, or an
    alarm nobody acknowledged), whatever the status."""
    now = time.time()
    tables = pit.tables()
    states = {t.table: pit.status(t, now) for t in tables}
    unacked = {t.table: sum(1 for a in pit.alarms_of(t) if not a.get("ack")) for t in tables}
    attention = {name: {"state": s, "since": iso(at), "detail": why,
                        "alarms_unacknowledged": unacked[name]}
                 for name, (s, at, why) in states.items()
                 if s not in ("dealing", "held", "ended", "waiting") or unacked[name]}
    stalled = pit.recording.not_recording() if pit.recording is not None else None
    recording = stalled is None and pit.problem is None and not any(
        v["state"] == "not recording" for v in attention.values())
    return (200 if recording else 503), {
        "recording": recording, "now": iso(now),
        "not_recording": None if stalled is None else stalled.json(),
        "problem": pit.problem, "tables": len(states), "attention": attention}


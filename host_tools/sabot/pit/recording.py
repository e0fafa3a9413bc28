"""Whether `sabot serve` is recording, watched from a thread of its own: a floor that is not
recording must never look healthy.

The validators' threads write through one store (pit/serve.py); a read is acknowledged to its
shoe only once its commit is confirmed. When the store confirms no commit for `bound` seconds
(a synchronous standby gone, a server stopped, a disk that does not answer) or refuses them (a
full disk), that is the alarm `not_recording`: said at once in one line on serve's log with the
cause as the database tells it, shown on every page of the pit with the time it began, and
cleared — with another line — by the next confirmed commit. A shoe that has sent nothing for
SILENT_ALARM seconds, its link lost or up (the host link hellos every 2 s, and a live shoe
answers each), is the alarm `link_silent`. Neither alarm is carried by any frame: when one
clears it is written to the operator log (`serve_alarm`), where the shift report and audit
verify find it.
Meanwhile the shoes keep every frame they have not had acknowledged, as always."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sabot.audit.group_commit import GroupCommit
from sabot.errors import SabotError
from sabot.pit.words import clock, iso
from sabot.service import log

STORE_ALARM = 5.0  # seconds a commit may wait before serve says it is not recording
# seconds a witnessed table may stay past its bound before not_witnessed: the pit asks for a
# checkpoint at most once a second, and a witness answers over the network
WITNESS_GRACE = 5.0
SILENT_ALARM = 30.0  # seconds of nothing from a shoe whose link is up before its alarm
TICK = 0.25  # seconds between looks
KEEPALIVE = 2.0  # seconds a read may wait on the store before its shoe gets a keepalive byte
DIAGNOSE_EVERY = 15.0  # seconds between asking the database again while it does not commit
KEPT = 24 * 3600.0  # seconds a cleared, logged alarm stays in serve's memory


@dataclass
class ServeAlarm:
    """An alarm serve itself raised: `kind` not_recording (every shoe of this serve: shoe_id
    None), link_silent or not_witnessed (one shoe)."""

    kind: str
    shoe_id: int | None
    raised_at: float
    detail: str
    since: float  # since when: the first commit unconfirmed, the shoe's last word
    cleared_at: float | None = None
    logged: set[int] = field(default_factory=set)  # the shoes whose operator entry is written

    def json(self) -> dict[str, Any]:
        return {"kind": self.kind, "shoe_id": self.shoe_id, "since": iso(self.since),
                "raised_at": iso(self.raised_at),
                "cleared_at": iso(self.cleared_at), "detail": self.detail}


class Recording:
    """The watch over one serve's store and links. `shoes`: its ServedShoe objects (pit/serve.py);
    `lock`: the serve lock over the store; `say`: serve's log (a line and its severity);
    `notify`: the pages."""

    def __init__(self, store: Any, lock: GroupCommit, shoes: Sequence[Any],
                 bound: float = STORE_ALARM, say: Callable[[str, str], None] | None = None,
                 notify: Callable[[], None] | None = None,
                 silent_after: float = SILENT_ALARM) -> None:
        self.store = store
        self.lock = lock
        self.shoes = list(shoes)
        self.bound = bound
        self.silent_after = silent_after
        self.say = say or serve_line
        self.notify = notify or (lambda: None)
        self.stalled: ServeAlarm | None = None
        self.alarms: list[ServeAlarm] = []  # raised while serve runs, oldest first
        self.silent: dict[int, ServeAlarm] = {}
        self.unwitnessed: dict[int, ServeAlarm] = {}  # a witnessed table's, past its bound
        self._over_since: dict[int, float] = {}  # since when a witnessed table is past it
        self._diagnosed = 0.0
        self._kept: dict[int, float] = {}  # when each shoe last got a keepalive
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ---- what the pages read ----------------------------------------------------------------
    def not_recording(self) -> ServeAlarm | None:
        """The open not_recording alarm, or None while every commit is confirmed in time."""
        return self.stalled

    def refusal(self) -> str | None:
        """Why a person's action is not done now (what it wrote would wait unstored), or None."""
        stalled = self.stalled
        return None if stalled is None else (f"not done: serve is not recording (since "
                                             f"{clock(stalled.since)}); try again once it "
                                             "records")

    def of_shoe(self, shoe_id: int) -> list[ServeAlarm]:
        """This serve's alarms of a shoe (those of every shoe included), oldest first."""
        return [a for a in self.alarms if a.shoe_id in (None, shoe_id)]

    # ---- watching -----------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="recording-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        while not self._stop.wait(TICK):
            try:
                self.check(time.time())
            except Exception as e:  # a fault of ours must not end the watch: said, and on
                self.say(f"the recording watch met {type(e).__name__}: {e}", "error")

    def check(self, now: float) -> None:
        """One look: the store's commits, then each shoe's link."""
        self._keep_alive(now)
        since = self.store.unconfirmed_since
        if since is not None and now - since >= self.bound:
            if self.stalled is None:
                self.stalled = ServeAlarm("not_recording", None, now, self._detail(since), since)
                self.alarms.append(self.stalled)
                self._diagnosed = now
                self.say(f"ALARM not_recording: {self.stalled.detail}", "critical")
                self.notify()
            elif now - self._diagnosed >= DIAGNOSE_EVERY:
                self._diagnosed = now
                detail = self._detail(since)
                if detail != self.stalled.detail:
                    self.stalled.detail = detail
                    self.say(f"still not recording: {detail}", "critical")
                    self.notify()
        elif self.stalled is not None and since is None:
            self.stalled.cleared_at = now
            self.say(f"recording again: the audit database confirmed a commit after "
                     f"{now - self.stalled.since:.1f} s without one", "notice")
            self.stalled = None
            self.notify()
        if self.stalled is None:
            self._links(now)
            self._witnesses(now)
            self._log_cleared()
            # alarms cleared and logged a day ago live on in the operator log, not here
            self.alarms = [a for a in self.alarms if a.cleared_at is None
                           or now - a.cleared_at < KEPT or len(a.logged) < len(self.shoes)]

    def _keep_alive(self, now: float) -> None:
        """A shoe whose read waits on the store hears from this host all the same (a zero byte
        every KEEPALIVE s): its networked link stays this host's, not taken by another after
        its idle time."""
        for shoe in self.shoes:
            s = shoe.session
            sid = shoe.config.shoe_id
            if (s is not None and s.pumping_since is not None
                    and now - s.pumping_since >= KEEPALIVE
                    and now - self._kept.get(sid, 0.0) >= KEEPALIVE):
                self._kept[sid] = now
                s.keep_alive()

    def _detail(self, since: float) -> str:
        cause = self.store.refusal or self.store.stall_cause()
        return (f"the audit database has confirmed no commit since {clock(since)}"
                + (f": {cause}" if cause else "")
                + "; the shoes keep every frame until it is stored")

    def _witnesses(self, now: float) -> None:
        """A witnessed table (its registry entry's witness_bound) whose rounds go uncosigned past
        its bound: serve runs without --witness, or no witness answers. Its rounds are stored,
        but no witness has seen them, and `audit verify --witness` will fail on them."""
        for shoe in self.shoes:
            sid, bound, v = shoe.config.shoe_id, shoe.config.witness_bound, shoe.validator
            beyond = 0 if bound is None or v is None else v.rounds_beyond_witnesses()
            alarm = self.unwitnessed.get(sid)
            over = bound is not None and beyond > bound
            since = self._over_since.setdefault(sid, now) if over else \
                self._over_since.pop(sid, None)
            if over and alarm is None and now - (since or now) >= WITNESS_GRACE:
                why = ("serve was started without --witness" if v.cosigner is None else
                       "no witness has cosigned its checkpoints")
                alarm = self.unwitnessed[sid] = ServeAlarm(
                    "not_witnessed", sid, now, f"{beyond} rounds of this witnessed table lie "
                    f"beyond its last cosigned checkpoint, more than its {bound}: {why}; "
                    "start serve with the table's witnesses, or check they answer", now)
                self.alarms.append(alarm)
                self.say(f"ALARM not_witnessed ({shoe.config.table}): {alarm.detail}", "error")
                self.notify()
            elif alarm is not None and beyond <= (bound or 0):
                alarm.cleared_at = now
                del self.unwitnessed[sid]
                self.say(f"{shoe.config.table}: its rounds are cosigned again", "notice")
                self.notify()

    def _links(self, now: float) -> None:
        for shoe in self.shoes:
            session = shoe.session
            sid = shoe.config.shoe_id
            heard = 0.0 if session is None else session.heard
            quiet = (session is not None and session.link_state in ("up", "lost")
                     and now - heard >= self.silent_after
                     and session.store_refused_since is None)  # (it speaks: not stored)
            alarm = self.silent.get(sid)
            if quiet and alarm is None:
                why = (f", its link lost ({session.link_reason or 'no reason given'})"
                       if session.link_state == "lost" else " although its link is up")
                alarm = self.silent[sid] = ServeAlarm(
                    "link_silent", sid, now, f"the shoe has sent nothing since {clock(heard)}"
                    f"{why}: check the shoe, its power and its cable", heard)
                self.alarms.append(alarm)
                self.say(f"ALARM link_silent ({shoe.config.table}): {alarm.detail}", "error")
                self.notify()
            elif not quiet and alarm is not None:
                alarm.cleared_at = now
                del self.silent[sid]
                self.say(f"{shoe.config.table}: the shoe speaks again", "notice")
                self.notify()

    def _log_cleared(self) -> None:
        """Each cleared alarm into the operator log, once per shoe, while the store commits."""
        for alarm in self.alarms:
            if alarm.cleared_at is not None and not self._log(alarm, locked=False):
                return

    def log_open(self) -> list[str]:
        """serve stopping (the caller holds the store's lock): each alarm still open into the
        operator log as open (`cleared_at` null), where the store records; the lines saying
        what could not be logged."""
        said = []
        for alarm in self.alarms:
            if alarm.cleared_at is None and (alarm is self.stalled
                                             or not self._log(alarm, locked=True)):
                said.append(f"the alarm {alarm.kind} raised {clock(alarm.raised_at)} was open "
                            "when serve stopped and is not in the operator log (the store "
                            "did not record): serve's log above has it")
        return said

    def _log(self, alarm: ServeAlarm, locked: bool) -> bool:
        """The alarm's serve_alarm entry for each shoe it concerns not yet logged; whether all
        are."""
        for shoe in self.shoes:
            sid = shoe.config.shoe_id
            if alarm.shoe_id not in (None, sid) or sid in alarm.logged:
                continue
            if not locked and not self.lock.acquire(timeout=1.0):
                return False
            try:
                seq = shoe.validator.state["last_seq"] if shoe.validator else 0
                self.store.log_operation({
                    "operation": "serve_alarm", "shoe_id": sid, "table": shoe.config.table,
                    "kind": alarm.kind, "raised_at": iso(alarm.raised_at),
                    "cleared_at": iso(alarm.cleared_at), "detail": alarm.detail,
                    "by": "sabot serve", "role": "serve", "from": "serve", "via": "serve",
                    "at": iso(time.time())}, sid, seq)
            except SabotError:
                return False  # not recording again: written at a later look
            finally:
                if not locked:
                    self.lock.release()
            alarm.logged.add(sid)
        return True


def serve_line(text: str, level: str = "info") -> None:
    """One line of serve's log (standard error: a service's journal), with its time and
    severity (sabot.service: in the format --log-format chose)."""
    log(text, level, "serve")

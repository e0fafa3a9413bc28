"""`sabot serve`: every shoe given validated in one process, and the pit's pages served from the
same audit store (docs/INTERFACES.md "`sabot serve`").

Writing: one thread per shoe, each a validation session (link/session.py) as `sabot validate`
runs it, all writing through ONE AuditStore guarded by one lock. One store, because the contract
promises one audit log (`--db PATH`), with one row chain that `sabot audit verify` checks whole,
and because AuditStore admits one writer per database file (its lock file); one lock, because a
Validator's read is staged in the store's one batch and made durable by one commit on the store's
single connection: the reads of other shoes that arrive while a commit is being made wait for the
lock, and the next commit stores them all (audit/group_commit.py, --commit-wait). Reading ports and
acknowledging happen outside the lock, so a slow shoe holds up no other; the lock covers only the
verification and the commits.

Reading: the web side (pit/pages.py) opens its own read-only connection and follows the store's
new rows; the validator threads wake it after each stored read, so a page sees a round within
milliseconds of its frame's commit (and within 0.25 s at worst, by polling)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sabot.audit.cosign import Cosigner
from sabot.audit.group_commit import COMMIT_WAIT, GroupCommit
from sabot.audit.store import AuditStore, open_store
from sabot.audit.validator import Validator, Verdict
from sabot.errors import SabotError
from sabot.keys import CommandKey
from sabot.link.session import COSIGN_WAIT, ValidationSession
from sabot.pit.recording import SILENT_ALARM, STORE_ALARM, Recording, serve_line
from sabot.registry import ShoeEntry

RECONNECT_WAIT = 2.0  # seconds of each attempt to reach a shoe whose link is lost
OPERATION_WAIT = 45.0  # seconds an operator's command may take: its status, effect and frame
STOP_WAIT = 5.0  # seconds serve's validators have to finish their reads when it stops
LOCK_WAIT = 0.2  # seconds a page waits for the store's lock (held by a stalled commit: skipped)


def parse_shoe(text: str) -> tuple[str, int | None]:
    """`--shoe URL=SHOE_ID` (decimal or 0x hex), or `--shoe URL` (the registry's only shoe): the
    shoe's port and which registered shoe it is."""
    url, sep, ident = text.rpartition("=")
    if sep and url:
        try:
            return url, int(ident, 0)
        except ValueError:
            pass
    if not text or text.endswith("="):
        raise SabotError(f"--shoe wants URL=SHOE_ID (the shoe's port and its registered id) or "
                         f"URL; got {text!r}")
    return text, None


def shared_writer(path: str, pit: str = "") -> AuditStore:
    """The one writer store, usable from every validator thread (each use under the serve
    lock); on a floor's database its connection says which pit writes (the floor page's)."""
    return open_store(path, threads=True, name=writer_name(pit))


def writer_name(pit: str) -> str:
    return f"sabot serve {pit}" if pit else "sabot serve"


def pit_of(writer: str) -> str:
    """The pit a writer's name (writer_name) says; "" for a writer that is no pit's serve."""
    return writer[len("sabot serve "):] if writer.startswith("sabot serve ") else ""


class LockedValidator(Validator):
    """A Validator whose every read is verified under the store's shared lock and committed
    with the other shoes' reads that came meanwhile (audit/group_commit.py)."""

    def __init__(self, lock: GroupCommit, *args: Any, **kwargs: Any) -> None:
        self.lock = lock
        with lock:
            super().__init__(*args, **kwargs)

    def receive(self, data: bytes) -> list[Verdict]:
        return self.lock.receive(self, data)

    def store_cosignatures(self, wait: float = 0.0) -> None:
        if wait and self.cosigner is not None:
            self.cosigner.wait(wait)  # (outside the lock: other shoes' reads go on)
        with self.lock:
            super().store_cosignatures()


@dataclass
class ServedShoe:
    """A shoe as serve validates it: its link, its registry entry and, once started, its
    validator and session."""

    url: str
    key: CommandKey | None  # the host command key: signs the acknowledgements
    config: ShoeEntry
    baud: int = 115200
    validator: Validator | None = None
    session: ValidationSession | None = None

    @property
    def link_state(self) -> str:
        """connecting, up or lost."""
        return self.session.link_state if self.session else "connecting"

    @property
    def link(self) -> dict[str, Any]:
        """The link as the dashboard shows it: its state (connecting, up, lost, or wrong shoe:
        what answers is not the registered shoe), why, since when, and when the shoe itself was
        last heard (a status replayed on the line is not the shoe)."""
        s = self.session
        if s is None:
            return {"state": "connecting", "reason": "", "since": None}
        if s.wrong is not None and s.link_state == "up":
            return {"state": "wrong shoe", "reason": s.wrong, "since": s.wrong_since,
                    "heard": s.heard}
        return {"state": s.link_state, "reason": s.link_reason, "since": s.link_since,
                "heard": s.heard, "round_open": self.round_open(),
                "store_refused_since": s.store_refused_since, "store_refusal": s.store_refusal}

    def round_open(self) -> int | None:
        """The round whose first cards the shoe has sent and whose result it has not: its
        initial_cards frame, unsigned, waits in the validator for the result that seals it
        (and is stored with it). A hint for the players' display (no more bets), never a
        record."""
        from sabot import protocol as pr

        f = self.validator.pending if self.validator is not None else None
        if f is None or f.type != pr.T_INITIAL_CARDS:
            return None
        try:
            rnd = pr.decode_payload(f)[1].get("round")
        except (pr.FrameError, ValueError):
            return None
        return rnd if isinstance(rnd, int) and not isinstance(rnd, bool) else None

    @property
    def refused(self) -> list[dict[str, Any]]:
        return self.session.refused if self.session else []


class Validation:
    """The validating side of `sabot serve`: a validation session per shoe, each in its own
    thread, over one shared writer store."""

    def __init__(self, db: str, shoes: list[ServedShoe],
                 notify: Callable[[], None] | None = None,
                 on_alarm: Callable[[dict[str, Any]], None] | None = None,
                 pit: str = "", cosigner: Callable[[], Cosigner | None] = lambda: None,
                 store_alarm: float = STORE_ALARM, silent_alarm: float = SILENT_ALARM,
                 commit_wait: float = COMMIT_WAIT) -> None:
        self.store = shared_writer(db, pit)
        self.lock = GroupCommit(self.store, commit_wait)  # the store's lock, and its commits
        self.shoes = shoes
        self.notify = notify or (lambda: None)  # the pages; set later by a serve's Hub
        self.stop_event = threading.Event()
        self.store.wait_only_until(self.stop_event)  # a stop is not held up by a lost server
        self.threads: list[threading.Thread] = []
        for s in shoes:
            s.validator = LockedValidator(self.lock, s.config, self.store,
                                          on_alarm=on_alarm, cosigner=cosigner())
        self.recording = Recording(self.store, self.lock, shoes, store_alarm, serve_line,
                                   lambda: self.notify(), silent_alarm)

    def start(self) -> None:
        self.recording.start()
        for s in self.shoes:
            assert s.validator is not None
            s.session = ValidationSession(
                s.validator, s.url, s.key, baud=s.baud, reconnect_wait=RECONNECT_WAIT,
                pump_wait=0.1, stopping=self.stop_event, on_change=self.notify,
                say=_said(s.config.table, s.url), on_store_error=_told(s.config.table))
            t = threading.Thread(target=self._run, args=(s.session,), daemon=True,
                                 name=f"validate-{s.config.table}")
            t.start()
            self.threads.append(t)

    def alive(self) -> bool:
        """Whether every shoe's validating thread and the recording watch still run (a
        service manager's watchdog is pinged only while they do)."""
        return self.recording.alive() and all(t.is_alive() for t in self.threads)

    def taken(self, wait: float = RECONNECT_WAIT + 1.0) -> list[str]:
        """After start(): the shoes whose link another host held at the first try (each shoe
        waited for up to `wait` seconds), one line each naming the table and the holder: serve
        refuses to start over them (one validator per shoe) rather than take turns."""
        end = time.monotonic() + wait
        out = []
        for s in self.shoes:
            if s.session is None:
                continue
            s.session.first_tried.wait(max(0.0, end - time.monotonic()))
            if s.session.taken is not None:
                out.append(f"{s.config.table} ({s.config.shoe_id:#010x}) on {s.session.taken}")
        return out

    @staticmethod
    def _run(session: ValidationSession) -> None:
        try:
            session.run()
        finally:
            session.close()

    def stop(self) -> bool:
        """Stop every session within STOP_WAIT seconds whatever the database does; whether all
        ended cleanly. A read still held by a commit the database has not confirmed is named
        in serve's log: its shoe keeps it and sends it to the next validator."""
        self.stop_event.set()
        self.recording.stop()
        end = time.monotonic() + STOP_WAIT
        for t in self.threads:
            t.join(timeout=max(0.0, end - time.monotonic()))
        stuck = [s for s, t in zip(self.shoes, self.threads) if t.is_alive()]
        unstored = [  # what the stop left unstored, one line each
            f"{s.config.table}: a read was not stored when serve stopped (the audit database "
            "had not confirmed its commit): the shoe keeps it and sends it again to the next "
            "validator" for s in stuck]
        if stuck or not self.lock.acquire(timeout=max(0.1, end - time.monotonic())):
            if not stuck:
                unstored.append("the audit database did not confirm the last commit before "
                                "serve stopped: the shoes keep what it held")
            if any(s.validator is not None and s.validator.cosigner is not None
                   for s in self.shoes):
                unstored.append("the witnesses' last cosignatures were not stored: they are "
                                "asked for again at the shoes' next checkpoints")
            for line in unstored:
                serve_line(line, "error")
            return False
        try:
            for s in self.shoes:
                if s.validator is not None:
                    with contextlib.suppress(SabotError):  # (said by the store's own line)
                        Validator.store_cosignatures(s.validator, wait=COSIGN_WAIT)
            for line in self.recording.log_open():
                serve_line(line)
            self.store.close()
        finally:
            self.lock.release()
        return True

    def _shoe(self, shoe_id: int) -> ServedShoe | None:
        return next((s for s in self.shoes if s.config.shoe_id == shoe_id), None)

    def log(self, shoe_id: int, entry: dict[str, Any], seq: int | None = None) -> None:
        """An operator entry (a dealer signing on, an acknowledgement) into the operator log,
        naming frame `seq` of the shoe (None: its newest stored chained frame); confirmed when
        this returns, else a one-line SabotError."""
        from sabot.link.operate import log_operation

        shoe = self._shoe(shoe_id)
        if shoe is None or shoe.validator is None:
            raise SabotError("no such shoe is served here")
        if not self.lock.acquire(timeout=OPERATION_WAIT):
            raise SabotError("the audit database is busy: try again shortly")
        try:
            newest = shoe.validator.state["last_seq"] or 0
            log_operation(self.store, entry, newest if seq is None else seq)
        finally:
            self.lock.release()
        self.notify()

    def operate(self, shoe_id: int, action: str, resolution: str | None, by: str,
                logged: dict[str, Any]) -> dict[str, Any]:
        """An operator's command to one shoe (action "resolve" with its `resolution`, or
        "new-shoe"), sent by that shoe's own session thread on the link it holds, signed with
        serve's command key, and logged in the chained operator log with `by` and `logged` (the
        account, its role, and where the request came from). What the shoe then reports (as
        `sabot resolve` / `sabot new-shoe` print it), or a one-line SabotError."""
        from sabot.link.operate import RESOLUTIONS, Operation

        shoe = self._shoe(shoe_id)
        if shoe is None or shoe.session is None or shoe.validator is None:
            raise SabotError("no such shoe is served here")
        if shoe.key is None:
            raise SabotError("serve holds no command key")
        if action == "resolve" and resolution not in RESOLUTIONS:
            raise SabotError(f"resolution must be one of {', '.join(RESOLUTIONS)}")
        validator = shoe.validator

        def work(link: Any) -> dict[str, Any]:
            op = Operation.on_link(shoe.url, validator, link, logged)
            try:
                if action == "resolve":
                    assert resolution is not None
                    return op.resolve(resolution, by)
                return op.new_shoe(by)
            finally:
                op.detach()

        if action not in ("resolve", "new-shoe"):
            raise SabotError(f"no operation {action!r}: resolve or new-shoe")
        done: dict[str, Any] = shoe.session.call(work, OPERATION_WAIT)
        return done

    def ready(self, shoe_id: int) -> str | None:
        """Why the table's dealer may not change now, or None. A dealer's rounds are those
        stored after their sign-on, so the shoe must have delivered every round dealt so far
        (its link up, nothing it holds unsent), or the rounds of the dealer before would count
        as the next's."""
        shoe = self._shoe(shoe_id)
        if shoe is None:
            return "no such shoe is served here"
        link = shoe.link
        if link["state"] != "up":
            return (f"its link is {link['state']}: sign dealers on and off once it is back and "
                    "the shoe has sent what it kept (its rounds would count to the wrong "
                    "dealer)")
        v = shoe.validator
        st = v.status if v is not None else None
        if v is not None and st is not None and st.get("unacked_to", 0) > v.state["last_seq"]:
            return "the shoe is still sending rounds it kept while its link was down: try again"
        return None

    def applicable(self, shoe_id: int) -> list[str] | None:
        """The resolutions the held shoe takes, as the shoe decides it, from this serve's
        accounting of its frames (serve asks for no status while it validates: a round with its
        initial cards stored is in progress); None where it cannot tell (met mid-shoe, nothing
        held)."""
        from sabot.link.operate import applicable_resolutions

        shoe = self._shoe(shoe_id)
        if shoe is None or shoe.validator is None:
            return None
        if not self.lock.acquire(timeout=LOCK_WAIT):  # a commit the database holds: unknown
            return None
        try:
            inv = dict(shoe.validator.state.get("inventory") or {})
        finally:
            self.lock.release()
        if not inv.get("held"):
            return None
        in_round = inv.get("round", 0) + (inv.get("initial") is not None)
        return applicable_resolutions(inv["held"], in_round, inv, shoe.config.decks,
                                      shoe.config.game == "blackjack")

    def summary(self) -> dict[str, Any]:
        rejections: list[dict[str, Any]] = []
        alarms: list[dict[str, Any]] = []
        rounds = verified = 0
        logs = []  # (table, its validator's summary): what each shoe's log came to
        for s in self.shoes:
            assert s.validator is not None
            v = s.validator.summary()
            logs.append((s.config.table, v))
            rejections += v["rejections"]
            alarms += v["alarms"]
            rounds += v["rounds"]
            verified += v["verified"]
        return {"rounds": rounds, "verified": verified, "rejections": rejections,
                "alarms": alarms, "logs": logs}


def _said(table: str, url: str) -> Callable[[str], None]:
    """A table's link and rejection lines, on stderr with the time and the shoe's port: a
    service manager's journal says when each table's link went, where, and why."""
    def say(text: str) -> None:  # a link gone, frames refused, another shoe: for a person
        usual = text.startswith(("link back", "the registered shoe answers again"))
        serve_line(f"{table} ({url}): {text}", "info" if usual else "warning")

    return say


def _told(table: str) -> Callable[[SabotError], None]:
    """A store error of one table's session, on stderr, once while it stays the same: the
    session goes on, and tries the read again every half second."""
    last = [""]

    def tell(e: SabotError) -> None:
        if str(e) != last[0]:
            last[0] = str(e)
            serve_line(f"{table}: {e}", "error")

    return tell


def load_shoes(specs: list[str], registry: str | None,
               entry: Callable[[str | None, int | None, str, int], ShoeEntry],
               key: CommandKey | None, baud: int = 115200) -> list[ServedShoe]:
    """Each `--shoe URL[=SHOE_ID]` with its registry entry (as `sabot validate`: without an id,
    the shoe on the port says which it is), all acknowledged with the host command key."""
    shoes = []
    for spec in specs:
        url, shoe_id = parse_shoe(spec)
        shoes.append(ServedShoe(url, key, entry(registry, shoe_id, url, baud)))
    ids = [s.config.shoe_id for s in shoes]
    if len(set(ids)) != len(ids):
        raise SabotError("two --shoe name the same shoe: give each its id, --shoe URL=SHOE_ID")
    tables = [s.config.table for s in shoes]
    if len(set(tables)) != len(tables):
        raise SabotError(f"two shoes name the same table: {', '.join(sorted(tables))}")
    return shoes

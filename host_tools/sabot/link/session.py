"""A validation session: one shoe's validator on its port, pumped until it is stopped, so every
frame is verified, stored and acknowledged as it arrives. A lost link is waited for, however
long (the shoe keeps what it has not delivered). `sabot validate` runs one in the foreground
(`validate`); `sabot serve` runs one per shoe, each in its own thread (pit/serve.py)."""

from __future__ import annotations

import contextlib
import hashlib
import queue
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from concurrent.futures import wait as wait_for
from contextlib import contextmanager
from typing import Any

from sabot.audit.cosign import Cosigner
from sabot.audit.replay import CaptureWriter, open_capture
from sabot.audit.validator import Validator
from sabot.errors import SabotError
from sabot.keys import CommandKey
from sabot.link.answering import first_status, identify, open_port
from sabot.link.host import HostLink
from sabot.link.transport import DEFAULT_BAUD, TIMEOUT, LinkTaken, Port
from sabot.protocol import C_HELLO, HOLDS, T_STATUS, command, shoe_id_text
from sabot.registry import Registry, ShoeEntry

RECONNECT_WAIT = 30.0  # seconds of one try to get a lost link back
RETRY_PAUSE = 0.2  # seconds between tries
TAKEN_PAUSE = 2.0  # seconds between tries of a shoe whose link another host holds
COSIGN_WAIT = 10.0  # seconds the witnesses have at the end to answer the last checkpoints
BURST_LINE = 1000  # rejections said in one line at most (a long burst: one line per thousand)
NOT_THIS_SHOE = frozenset(("bad_signature", "unknown_shoe_or_key"))  # another shoe's frames
WHO_AFTER = 6.0  # seconds of silence on a link that is up before asking whichever shoe is there

Record = Callable[[str, dict[str, Any]], None]


def registry_entry(path: str | None, shoe_id: int | None, port: str | None = None,
                   baud: int = DEFAULT_BAUD) -> ShoeEntry:
    """The registry's entry of a shoe: its configuration (the validator's, never the shoe's own
    word) and the public keys its frames are verified with. With several shoes registered and
    no --shoe-id, the shoe on `port` says which it is (a signed status)."""
    reg = Registry.load(path, must_exist=True)
    if shoe_id is None and port is not None and len(reg.shoes) > 1:
        return identify(port, reg, baud)
    return reg.pick(shoe_id)


def group_rejections(rejections: list[dict[str, Any]]) -> str:
    """"193 x unknown_shoe_or_key, 2 x bad_signature": one line however many frames were
    refused."""
    counted = Counter(r["reason"] for r in rejections)
    return ", ".join(f"{n} x {reason}" for reason, n in counted.most_common())


def _quiet(text: str) -> None:
    pass


class ValidationSession:
    """`validator` on the shoe at `url`. `say` gets the lines a person watching wants (the link
    lost and back, rejected frames, an irregularity that holds the shoe); `on_change` is called
    when the link's state changes or a read brought frames; `on_store_error`, when given, is
    told of a read the store refused (nothing of it was acknowledged: the shoe sends it again)
    and the session goes on; without it that error ends the session."""

    def __init__(self, validator: Validator, url: str, key: CommandKey | None, *,
                 capture: CaptureWriter | None = None, baud: int = DEFAULT_BAUD,
                 reconnect_wait: float = RECONNECT_WAIT, pump_wait: float = TIMEOUT,
                 stopping: threading.Event | None = None,
                 say: Callable[[str], None] = _quiet,
                 on_change: Callable[[], None] | None = None,
                 on_store_error: Callable[[SabotError], None] | None = None) -> None:
        self.validator = validator
        self.url = url
        self.key = key
        self.capture = capture
        self.baud = baud
        self.reconnect_wait = reconnect_wait
        self.pump_wait = pump_wait
        self.stopping = stopping or threading.Event()
        self.say = say
        self.on_change = on_change or (lambda: None)
        self.on_store_error = on_store_error
        self.link: HostLink | None = None
        self.link_state = "connecting"  # connecting, up, lost
        self.link_reason = ""  # why the link is lost (the port's own words), "" when up
        self.link_since = time.time()  # when link_state last changed
        self.heard_at = 0.0  # when the shoe's authentic frames last came (time.time())
        self.wrong: str | None = None  # why what answers is not the registered shoe
        self.wrong_since = 0.0
        self._asked_who = 0.0
        self.first_tried = threading.Event()  # the first connection tried (connect())
        self._status_seq, self._statuses = -1, set[bytes]()  # statuses taken at that seq
        self._replay_said = False
        self.pumping_since: float | None = None  # a read being validated and stored since
        # since when the store has refused this shoe's reads (none stored since), and its words
        self.store_refused_since: float | None = None
        self.store_refusal = ""
        self.taken: LinkTaken | None = None  # what the shoe said of that try, when taken
        self.refused: list[dict[str, Any]] = []  # every rejected frame, with its reason
        self.ended: list[int] = []  # shoes seen ended (a shoe_end stored, or the shoe's status)
        self.held: list[dict[str, Any]] = []  # irregularities holding the shoe, until resolved
        self._on_record = validator.on_record
        validator.on_record = self._record
        # work another thread asks of this session's link (serve's operations), done in the
        # session's own thread between reads: one thread ever talks on the link
        self._asked: queue.Queue[tuple[Callable[[HostLink], Any], Future[Any]]] = queue.Queue()

    @property
    def heard(self) -> float:
        """When the shoe was last heard: its last authentic frame, or the link's last change if
        that came later (a link just up, or just lost, has not yet been silent for long)."""
        return max(self.heard_at, self.link_since)

    def call(self, work: Callable[[HostLink], Any], timeout: float) -> Any:
        """`work(link)` done by the session's thread, its result (or its exception) here; a
        SabotError when the link is not up to do it, or it took longer than `timeout`: then
        either nothing was done, or the work is under way and the session says in a line how it
        ended (a command may have reached the shoe: the asker is told so)."""
        if self.link_state != "up":
            raise SabotError(f"the shoe's link is {self.link_state}"
                             + (f" ({self.link_reason})" if self.link_reason else ""))
        done: Future[Any] = Future()
        self._asked.put((work, done))
        end = time.monotonic() + timeout
        while True:  # a stopping session (serve's SIGTERM) answers at once, never at `timeout`
            wait_for([done], min(0.2, max(0.0, end - time.monotonic())))
            if done.done() and not done.cancelled():
                return done.result()  # (or the work's own exception)
            if self.stopping.is_set() and done.cancel():
                raise SabotError("serve is stopping: nothing was sent")
            if time.monotonic() >= end:
                if done.cancel():
                    raise SabotError(f"the shoe's session did not get to it within {timeout:g} "
                                     "s: nothing was sent")
                done.add_done_callback(self._ended_late)
                raise SabotError(f"it was under way on the shoe's link when this page stopped "
                                 f"waiting, after {timeout:g} s: it may have taken effect; check "
                                 "the table (its state, the operator log) before asking again; "
                                 "serve's log says how it ended")

    def _ended_late(self, done: Future[Any]) -> None:
        """How work whose asker gave up waiting ended, in the session's line."""
        e = done.exception()
        if e is None:
            st = done.result()
            now = (f": the shoe's phase is now {st['phase']} (shoe {st['shoe']}, round "
                   f"{st['round']})"
                   if isinstance(st, dict) and {"phase", "shoe", "round"} <= st.keys() else "")
            self.say(f"an operator's command its page gave up waiting for was done{now}")
        else:
            self.say(f"an operator's command its page gave up waiting for ended: {e}")

    def _do_asked(self, link: HostLink) -> None:
        while True:
            try:
                work, done = self._asked.get_nowait()
            except queue.Empty:
                return
            if not done.set_running_or_notify_cancel():
                continue
            try:
                done.set_result(work(link))
            except BaseException as e:  # the asker gets it; a lost link is found by the pump
                done.set_exception(e)

    def _record(self, kind: str, rec: dict[str, Any]) -> None:
        if kind == "shoe_end":
            self.ended.append(rec["shoe"])
        elif kind == "irregularity" and rec["kind"] in HOLDS:
            self.held.append(rec)
        elif kind == "resolution":
            self.held.clear()
        if self._on_record:
            self._on_record(kind, rec)

    def _state(self, state: str, reason: str = "") -> None:
        """The link's state, and why it is lost: said once per change (a shoe that stays away
        is tried every RETRY_PAUSE, with one line for as long as the reason stays the same)."""
        if state != self.link_state:
            self.link_since = time.time()
            if state == "up" and self.link_state == "lost":
                self.say("link back")
        if state == "lost" and (self.link_state != "lost" or reason != self.link_reason):
            self.say(f"link lost ({reason or 'no reason given'}); reconnecting (the shoe keeps "
                     "what it has not delivered)")
        self.link_state, self.link_reason = state, reason if state == "lost" else ""
        self.on_change()

    def open(self, port: Port, wait: float) -> HostLink:
        """The link on an open port, and the shoe's first answer on it; a one-line SabotError
        when none comes within `wait` seconds (nothing speaks, or not this shoe)."""
        self.link = HostLink(port, self.validator, self.key, self.capture)
        first_status(self.link, self.url, wait, any_frame=True)
        self._state("up")
        return self.link

    def connect(self) -> HostLink | None:
        """The link, tried until the shoe's port opens (None when stopped first)."""
        while not self.stopping.is_set():
            try:
                self.link = HostLink(self.url, self.validator, self.key, self.capture,
                                     connect_timeout=self.reconnect_wait, baud=self.baud)
            except (SabotError, ConnectionError) as e:
                self._state("lost", _reason(e))
                self._first(e)
                self.stopping.wait(TAKEN_PAUSE if isinstance(e, LinkTaken) else RETRY_PAUSE)
                continue
            self._state("up")
            self._first(None)
            return self.link
        return None

    def _first(self, e: BaseException | None) -> None:
        """The first try's outcome, for whoever waits on `first_tried` (serve, before it
        serves): the link up, lost, or taken by another host (`taken`)."""
        if not self.first_tried.is_set():
            self.taken = e if isinstance(e, LinkTaken) else None
            self.first_tried.set()

    def stop(self) -> None:
        self.stopping.set()

    def run(self, until: str | None = None, end: float | None = None) -> None:
        """Pump the link until stopped, until `end` (time.monotonic()) or, with `until`, until
        the shoe has ended ("shoe-end") or also an irregularity holds it ("irregularity")."""
        link = self.link or self.connect()
        unsaid: list[dict[str, Any]] = []  # rejections of this burst, said in one line
        while link is not None and not self.stopping.is_set():
            if end is not None and time.monotonic() >= end:
                break
            if until and self._reached(until):
                break
            self._do_asked(link)
            try:
                self._who_is_there(link)
                self.pumping_since = time.time()
                try:
                    results = link.pump(self.pump_wait)
                finally:
                    self.pumping_since = None
            except (ConnectionError, LinkTaken) as e:  # (another host's now: waited out too)
                link = self._get_back(link, end, _reason(e))
                continue
            except SabotError as e:  # the store refused a write: nothing of it was acknowledged
                if self.on_store_error is None:
                    raise
                self.store_refused_since = self.store_refused_since or time.time()
                self.store_refusal = str(e)
                self.on_store_error(e)
                with contextlib.suppress(ConnectionError, LinkTaken):
                    link.refused()  # the shoe resends what the store did not keep
                self.stopping.wait(0.5)
                continue
            if results:
                self.store_refused_since = None  # stored again
            burst = [{"reason": r} for _, v, r in results if v == "rejected"]
            self.refused += burst
            if self._heard(results):
                self.heard_at = time.time()
                self._not_ours(None)
            elif burst:
                self._not_ours(self._who([f for f, v, r in results
                                          if v == "rejected" and r in NOT_THIS_SHOE]))
            # a shoe that is not this table's is said once (above), not frame by frame
            unsaid += [b for b in burst if not (self.wrong and b["reason"] in NOT_THIS_SHOE)]
            if results:
                self.on_change()
            if unsaid and (len(unsaid) >= BURST_LINE or not burst):
                self.say(f"rejected frames: {group_rejections(unsaid)}")
                unsaid = []

    def _heard(self, results: list[Any]) -> bool:
        """Whether these frames are the shoe speaking now: any authentic frame, but a status
        the very bytes of one already taken (a status is signed afresh each time, so the same
        bytes again are a recording played on the line, however it passed the validator), said
        once."""
        heard = False
        for f, verdict, _ in results:
            if verdict == "rejected" or f is None:
                continue
            if f.type != T_STATUS:
                heard = True
                continue
            digest = hashlib.sha256(f.raw).digest()
            if f.seq != self._status_seq:
                self._status_seq, self._statuses = f.seq, set()
            if digest in self._statuses:
                if not self._replay_said:
                    self._replay_said = True
                    self.say("a status came again byte for byte (a recording played on the "
                             "line?): the shoe itself is not counted as heard")
                continue
            self._statuses.add(digest)
            heard = True
        return heard

    def keep_alive(self) -> None:
        """One zero byte to the shoe (an empty frame it ignores), from another thread, while
        this session waits on the store: a networked shoe's link stays this host's."""
        link = self.link
        if link is not None and self.link_state == "up":
            try:
                link.port.write(b"\x00")
            except (ConnectionError, SabotError, OSError):
                pass  # the session finds a lost link itself

    def _who_is_there(self, link: HostLink) -> None:
        """A link up and silent: a hello to whichever shoe is on the port (shoe id 0), whose
        answer, if it is another shoe's, the validator refuses and _who names. (A shoe answers
        only hellos to its own id or to any: the registered shoe's silence says nothing.)"""
        now = time.time()
        if (now - self.heard >= WHO_AFTER
                and now - self._asked_who >= 5 * WHO_AFTER):
            self._asked_who = now
            link.port.write(command(None, 0, 0, C_HELLO, b""))

    def _who(self, frames: list[Any]) -> str | None:
        """Why the frames refused are none of the registered shoe's (None: no sign they are
        another's)."""
        if not frames:
            return None
        cfg = self.validator.config
        mine = f"{cfg.table} ({shoe_id_text(cfg.shoe_id)})"
        others = sorted({f.shoe_id for f in frames if f is not None
                         and f.shoe_id != cfg.shoe_id})
        if others:
            return (f"shoe {', '.join(map(shoe_id_text, others))} answers on {self.url}, not "
                    f"{mine}: another shoe on this port, or the wrong --shoe id")
        return (f"the shoe on {self.url} says it is {mine}, but its frames are not signed by "
                "the key the registry holds for it: another shoe provisioned under this id, or "
                "a registry that is not this shoe's")

    def _not_ours(self, why: str | None) -> None:
        if why == self.wrong:
            return
        if why is not None:
            self.say(f"not the registered shoe: {why}; every frame of it is refused and stored "
                     "as refused, none as this table's")
        elif self.wrong is not None:
            self.say("the registered shoe answers again")
        self.wrong, self.wrong_since = why, time.time()
        self.on_change()

    def _reached(self, until: str) -> bool:
        # the shoe's own word counts too: what happened before this validator came is stored
        st = self.validator.status or {}
        if st.get("phase") == "ended" and not st.get("unacked_to"):
            self.ended.append(st["shoe"])
        if self.ended:
            return True
        if until == "irregularity" and (self.held or st.get("phase") == "held"):
            held = self.held[-1] if self.held else None
            what = f"{held['kind']} holds" if held else "an irregularity holds"
            self.say(f"{what} shoe {st.get('shoe', held['shoe'] if held else '?')}: "
                     "resolve it with sabot resolve, then validate again")
            return True
        return False

    def _get_back(self, link: HostLink, end: float | None, reason: str) -> HostLink | None:
        """The lost link back (None when stopped, or `end` passed, first). The audit never stops
        on its own: a shoe off for a minute (a power cut) is waited for; it keeps everything it
        has not delivered."""
        self._state("lost", reason)
        while not self.stopping.is_set():
            wait = self.reconnect_wait
            if end is not None:
                wait = max(0.1, min(wait, end - time.monotonic()))
            try:
                link.reconnect(timeout=wait)
            except (SabotError, ConnectionError) as e:
                if end is not None and time.monotonic() >= end:
                    return None
                self._state("lost", _reason(e))
                self.stopping.wait(TAKEN_PAUSE if isinstance(e, LinkTaken) else RETRY_PAUSE)
                continue
            self._state("up")
            return link
        return None

    def close(self) -> None:
        if self.link is not None:
            self.link.close()


def _reason(e: BaseException) -> str:
    """Why a link went or would not come back, in the port's own words (a link taken: by whom,
    without the seconds that change at every try, so it is said once)."""
    if isinstance(e, LinkTaken):
        return (f"the shoe's link is taken by another host ({e.holder}): one validator per "
                "shoe")
    text = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
    return text or type(e).__name__


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """SIGTERM (a service manager's stop) raises KeyboardInterrupt, as Ctrl-C does, so a session
    ends with its summary either way. Only the main thread receives signals."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def validate(url: str, key: CommandKey, config: ShoeEntry, db: str, *,
             capture: str | None = None, baud: int = DEFAULT_BAUD, wait: float = 5.0,
             until: str | None = None, seconds: float | None = None,
             on_record: Record | None = None,
             on_alarm: Callable[[dict[str, Any]], None] | None = None,
             say: Callable[[str], None] = _quiet,
             cosigner: Cosigner | None = None) -> tuple[dict[str, Any], list[int]]:
    """`sabot validate`: validate the shoe on `url` into `db` until Ctrl-C or SIGTERM, `seconds`
    or `until` (see ValidationSession.run); the validator's summary, with the shoe's word on
    our command key ("command_key": HostLink.key_verdict), and the shoes seen ended."""
    with sigterm_interrupts():
        # the store first: one in use or not a sabot store refuses before the port is opened
        validator = Validator(config, db, on_record=on_record, on_alarm=on_alarm,
                              cosigner=cosigner)
        try:
            # What the validator takes is kept, with a mark at each connection (audit/replay.py):
            # not what the port reads, which includes the backlog the link drops unread.
            capture_file = open_capture(capture)
            try:
                port = open_port(url, baud)
            except BaseException:
                if capture_file:
                    capture_file.close()
                raise
        except BaseException:
            validator.store.discard_if_unused()  # nothing stored: no database left behind
            raise
        end = time.monotonic() + seconds if seconds else None
        session = ValidationSession(validator, url, key, capture=capture_file, baud=baud, say=say)
        try:
            try:
                link = session.open(port, wait)
            except SabotError:
                validator.store.discard_if_unused()  # nothing stored: no database left behind
                raise
            link.on_key_refused = say  # said once, as soon as the shoe's count shows it
            try:
                link.check_key()
            except ConnectionError:
                pass  # the link went as it was asked: run() gets it back, and judges on
            session.run(until, end)
            if cosigner is not None and session.link is not None:
                session.link.checkpoint()  # the shoe's newest head, for the witnesses
        except KeyboardInterrupt:
            pass
        finally:
            port.close()
            try:
                validator.store_cosignatures(wait=COSIGN_WAIT)  # what the witnesses answered
            finally:
                validator.store.close()
            if capture_file:
                capture_file.close()
    verdict = session.link.key_verdict() if session.link else "untested"
    return dict(validator.summary(), command_key=verdict), session.ended

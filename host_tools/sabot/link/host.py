"""The host end of the shoe link: the validator behind a shoe's port (sabot.transport), and the
acknowledgements and hellos that make delivery exactly-once."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, BinaryIO

from sabot import protocol as pr
from sabot.audit.replay import CaptureWriter
from sabot.audit.store import StoreRefused
from sabot.audit.validator import Validator, Verdict
from sabot.errors import SabotError
from sabot.keys import CommandKey
from sabot.link.transport import DEFAULT_BAUD, TIMEOUT, Port, ShoePort

HELLO_EVERY = 2.0  # seconds of silence before asking the shoe to resend what it holds
ANSWER_WAIT = 0.5  # seconds to wait for the status answering a hello before asking again
ASK_EVERY = 0.1  # seconds between hellos while waiting for the shoe to get somewhere
# seconds between two signed commands: the shoe checks one at a time (a Verify in its element,
# ~60 ms), at most 4 a second, and refuses what comes while one waits (docs/PROTOCOL.md)
SIGNED_GAP = 0.3
# A shoe refuses a command whose signature fails without a word but a count (status `refused`):
# a signed command of ours is judged by a status answering a hello sent after it, at least
# SETTLE seconds after it went (the shoe has checked it by then), and the command key is called
# refused once KEY_EVIDENCE of them are counted refused and none took effect (one may be lost
# to noise on the line).
SETTLE = 0.25
KEY_EVIDENCE = 2
HEARD = 1024  # bytes of what the port said first, kept to tell a MicroPython REPL by
KEY_CHECK_WAIT = 3.0  # seconds check_key() tries before it calls the key untested
CHECKPOINT_EVERY = 1.0  # seconds between the checkpoints a witnessed link asks for


ROUND_RESULTS = (pr.T_RESULT, pr.T_RESULT21)  # a round a receipt can be made of


class HostLink:
    """A validator session on a shoe's port: `port` is a Port, or a URL to open as a ShoePort.
    A shoe whose link another host holds is LinkTaken (transport.py, a SabotError), from the
    constructor or reconnect(), or from the reads after them should the shoe's line come late."""

    def __init__(self, port: Port | str, validator: Validator, command_key: CommandKey | None,
                 capture: CaptureWriter | BinaryIO | None = None,
                 connect_timeout: float = 10.0, hello_every: float = HELLO_EVERY,
                 baud: int = DEFAULT_BAUD) -> None:
        if capture is not None:
            # what the validator takes, with a mark at each connection; not the port's bytes,
            # which include the backlog dropped unread below
            kept = validator.capture
            validator.capture = (capture if isinstance(capture, CaptureWriter)
                                 else kept if kept is not None and kept.file is capture
                                 else CaptureWriter(capture))
        if isinstance(port, str):
            self.port: Port = ShoePort(port, baud, connect_timeout)
        else:
            self.port = port
            if port.closed:
                port.reopen(connect_timeout)
        self.validator = validator
        self.command_key = command_key  # signs acks and counted commands; None: hello only
        validator.live = True  # its statuses now answer hellos: it anchors at the first one
        validator.awaiting_status = True
        self.hello_every = hello_every
        self.counter = 0
        self.last_rx = 0.0
        self.acked = 0
        self.ack_owed = False  # an ack held back: too soon after the last signed command
        self.signed_at = -SIGNED_GAP  # when the last signed command went
        self.hellos = 0
        self.checkpoint_asked = 0.0  # when the last checkpoint was asked for (witnessed)
        self.rx_bytes = 0  # everything read from the port, frames or not
        # told a read the store refused (nothing of it kept), after which the link goes on as
        # after a reconnection; None: the refusal is raised to the caller
        self.on_store_refused: Callable[[StoreRefused], None] | None = None
        self.heard = bytearray()  # the first HEARD bytes of it: what speaks, when no shoe does
        self.status_boot: int | None = None  # the boot counter of the latest authentic status
        self.statuses_before = validator.statuses  # statuses that answered no hello of this link
        # the shoe's word on our signed commands (key_verdict)
        # (boot, refused for the key, refused in all) before them
        self._refused_base: tuple[int, int, int] | None = None
        self._signed: list[tuple[int, float]] = []  # each one sent: (hellos before it, when)
        self._acks_due: list[int] = []  # acks beyond what the shoe had acknowledged when sent
        self._counter_due = 0  # the counter of our latest counted command
        self._judged = 0  # how many of them the latest status judged
        self.key_taken = False  # the shoe did what a signed command of ours asked
        self.key_cleared = False  # a judged command of ours was not counted refused
        self.refused_ours = 0  # judged commands of ours the shoe's refused count covers
        self.on_key_refused: Callable[[str], None] | None = None  # told once, with the line
        self._told = False
        try:
            self._drop_backlog()
            self.hello()
        except ConnectionError:
            # A tty that vanished just as it was opened: a board resetting re-enumerates its USB
            # port (after a deploy's hard reset, a power cut). Once more, on the port back.
            self.reconnect(connect_timeout)

    def reconnect(self, timeout: float = 10.0) -> None:
        self.port.reopen(timeout)
        self.validator.awaiting_status = True
        self._forget_hellos()  # their answers went with the old connection
        # judged afresh: the shoe may have rebooted
        self._refused_base, self._signed, self._judged = None, [], 0
        self._drop_backlog()
        self.hello()

    def _drop_backlog(self, longest: float = 1.0) -> None:
        """What a tty buffered before this link opened it is a torn, stale backlog (pyserial
        flushes part of it at open): drop it. The shoe resends everything unacknowledged after
        the hello, oldest first, so a fresh validator anchors on the shoe's own sequence, not on
        whatever frame of the backlog came first."""
        end = time.monotonic() + longest
        while time.monotonic() < end and self.port.read_chunks(TIMEOUT):
            pass

    def _forget_hellos(self) -> None:
        self.statuses_before = self.validator.statuses - self.hellos

    def _answered(self) -> bool:
        """Every hello sent has had its status (one each, in order)."""
        return self.validator.statuses - self.statuses_before >= self.hellos

    def write(self, data: bytes) -> None:
        self.port.write(data)

    def _command(self, ftype: int, payload: bytes = b"", counted: bool = True) -> None:
        """A command to the shoe: signed with the command key unless hello or verify; a counted
        one carries exactly the element's command counter + 1 (the latest status's
        host_counter + 1)."""
        counter = 0
        if counted:
            st = self.validator.status
            counter = (st["host_counter"] if st else self.validator.state["host_counter"]) + 1
            self.counter = counter
        key = None
        if ftype not in pr.UNSIGNED:
            if self.command_key is None:
                raise SabotError("a command key is needed to sign commands to the shoe (--key)")
            key = self.command_key.private_key
            time.sleep(max(0.0, self.signed_at + SIGNED_GAP - time.monotonic()))
            self.signed_at = time.monotonic()
            self._sent_signed(ftype, counter, payload)
        self.write(pr.command(key, self.validator.shoe_id, counter, ftype, payload))

    def _sent_signed(self, ftype: int, counter: int, payload: bytes) -> None:
        """Remember a signed command for key_verdict(), from this link's first status on (its
        refused count is the baseline)."""
        st = self.validator.status
        if st is None or self.status_boot is None:
            return
        if self._refused_base is None:
            self._refused_base = (self.status_boot, pr.refused_for_key(st), st["refused"])
        self._signed.append((self.hellos, time.monotonic()))
        if ftype == pr.C_ACK:
            seq = int.from_bytes(payload[:4], "big")
            if seq > st["acked"]:
                self._acks_due.append(seq)
        elif counter:
            self._counter_due = counter

    def _judge(self, now: float) -> None:
        """What the latest status says of our signed commands (see SETTLE)."""
        st = self.validator.status
        if st is None or self._refused_base is None:
            return
        boot, base, total = self._refused_base
        if self.status_boot != boot:  # rebooted: its count started again
            self._refused_base, self._signed, self._judged = None, [], 0
            return
        if (any(st["acked"] >= seq for seq in self._acks_due)
                or (self._counter_due and st["host_counter"] >= self._counter_due)):
            self.key_taken = True
        answered = self.validator.statuses - self.statuses_before  # hellos answered so far
        judged = sum(1 for hellos, at in self._signed if hellos < answered and now - at >= SETTLE)
        self._judged = judged
        # a busy or rate-limited shoe refuses too: only refusals for a bad signature count
        # against the key, and only commands refused for nothing clear it
        self.refused_ours = min(judged, max(0, pr.refused_for_key(st) - base))
        if judged > max(self.refused_ours, st["refused"] - total):
            self.key_cleared = True
        if self.key_verdict() == "refused" and not self._told:
            self._told = True
            if self.on_key_refused:
                self.on_key_refused(self.key_refusal())

    def key_verdict(self) -> str:
        """"accepted" when the shoe did what one of our signed commands asked, or did not count
        a judged one refused; "refused" when it counted KEY_EVIDENCE or more refused and every
        judged one; "untested" while neither holds."""
        if self.key_taken or self.key_cleared:
            return "accepted"
        if self.refused_ours >= KEY_EVIDENCE:
            return "refused"
        return "untested"

    def key_refusal(self) -> str:
        """The line that says the shoe refuses our command key."""
        where = f" {self.command_key.path}" if self.command_key and self.command_key.path else ""
        return (f"shoe {pr.shoe_id_text(self.validator.shoe_id)} refuses our commands: its "
                f"status counts {self.refused_ours} of them refused and none took effect, so "
                f"nothing is acknowledged (the shoe keeps every frame): --key{where} is not the "
                "command key this shoe was provisioned with")

    def check_key(self, timeout: float = KEY_CHECK_WAIT) -> str:
        """Find out whether the shoe takes this link's command key (key_verdict()) within
        `timeout` seconds: a signed ack of what the store holds (an ack only moves forward, so
        at worst it does nothing), then a hello once the shoe has checked it; again while the
        answer leaves it open. "untested" with no command key, or no answer in time."""
        end = time.monotonic() + timeout
        while (self.command_key is not None and self.key_verdict() == "untested"
               and time.monotonic() < end):
            if self._judged >= len(self._signed):  # all judged, and still open: one more
                time.sleep(max(0.0, self.signed_at + SIGNED_GAP - time.monotonic()))
                self._ack(self.validator.state["last_seq"])
                if self._judged >= len(self._signed):
                    return "untested"  # no status yet on this link: nothing to judge it by
            time.sleep(max(0.0, min(self._signed[-1][1] + SETTLE, end) - time.monotonic()))
            self.ask(max(min(ANSWER_WAIT, end - time.monotonic()), 0.05))
        return self.key_verdict()

    def hello(self) -> None:
        """Pyserial drops what arrived before the port opened: ask the shoe where it stands and to
        resend what it holds."""
        self._command(pr.C_HELLO, counted=False)
        self.hellos += 1
        self.last_rx = time.monotonic()

    def refused(self) -> None:
        """The store kept nothing of a read (its frames were taken off the port all the same):
        what comes next is judged as after a reconnection, awaiting the status that answers a
        hello and the resends after it, not as frames after a gap."""
        self.validator.awaiting_status = True
        self.hello()

    def resolve(self, code: int) -> None:
        self._command(pr.C_RESOLVE, bytes([code]))

    def new_shoe(self) -> None:
        self._command(pr.C_NEW_SHOE)

    def pump(self, wait: float = TIMEOUT) -> list[Verdict]:
        """Read what has arrived (waiting up to `wait` seconds for a first byte), validate it,
        acknowledge it. Returns the per-frame verdicts."""
        chunks = self.port.read_chunks(wait)
        now = time.monotonic()
        if not chunks:
            if now - self.last_rx > self.hello_every:
                self.hello()
            if self.ack_owed:
                self._ack(self.validator.state["last_seq"])
            return []
        self.last_rx = now
        self.rx_bytes += sum(len(c) for c in chunks)
        if len(self.heard) < HEARD:
            self.heard += b"".join(chunks)[: HEARD - len(self.heard)]
        # One receive for all that arrived: one durable commit stores every frame of it.
        try:
            results = self.validator.receive(b"".join(chunks))
        except StoreRefused as e:  # (a commit in doubt is no refusal: raised as it is)
            if self.on_store_refused is None:
                raise
            self.on_store_refused(e)
            self.refused()  # the shoe sends it again once asked
            return []
        statuses = False
        for f, v, _ in results:
            if v == "accepted" and f is not None and f.type == pr.T_STATUS:
                self.status_boot = f.boot
                statuses = True
            elif (v == "accepted" and f is not None and f.type == pr.T_COMMAND_REJECTED
                  and self._counter_due
                  and f.payload[2:6] == self._counter_due.to_bytes(4, "big")):
                self.key_taken = True  # ours, refused for its moment: its signature held
        if statuses:
            self._judge(now)
        if self.validator.cosigner is not None and now - self.checkpoint_asked > CHECKPOINT_EVERY \
                and any(v == "accepted" and f is not None and f.type in ROUND_RESULTS
                        for f, v, _ in results):
            # witnessed: each round's head of the log soon after it, so its receipt can be made
            self.checkpoint_asked = now
            self._command(pr.C_CHECKPOINT, counted=False)
        if any(v == "rejected" and r == "sequence_gap" for _, v, r in results):
            self.hello()  # something was lost on the line: the shoe resends the oldest unacked on
        last = self.validator.state["last_seq"]
        resent = any(v == "resent" for _, v, _ in results)
        if (self.validator.status is not None and self.command_key is not None
                and (last > self.acked or resent or self.ack_owed)):
            self._ack(last)
        return results

    def _ack(self, last: int) -> None:
        """Acknowledge up to `last` (signed, uncounted), or later when a signed command went
        less than SIGNED_GAP ago: never a wait in the read loop."""
        if time.monotonic() - self.signed_at < SIGNED_GAP:
            self.ack_owed = True
            return
        self.ack_owed = False
        self._command(pr.C_ACK, last.to_bytes(4, "big"), counted=False)
        self.acked = last

    def pump_until(self, done: Callable[[], bool], timeout: float, wait: float = TIMEOUT) -> bool:
        """Pump until done() holds; False if it still does not after `timeout` seconds."""
        end = time.monotonic() + timeout
        while True:
            self.pump(wait)
            if done():
                return True
            if time.monotonic() >= end:
                return False

    def ask(self, timeout: float = ANSWER_WAIT) -> dict[str, Any] | None:
        """Hello, then pump until the status answering it has arrived, and with it every frame the
        shoe sent before it; that status, or None if none came in time."""
        end = time.monotonic() + timeout
        # Answers to earlier hellos may still be on their way: take them first, so none of them is
        # mistaken for this one's. A squeezing shoe sends no status at all: give up on those.
        if not self.pump_until(self._answered, min(ANSWER_WAIT, timeout)):
            self._forget_hellos()
        self.hello()
        if self.pump_until(self._answered, max(end - time.monotonic(), 0.0)):
            return self.validator.status
        self._forget_hellos()  # a hello or its answer was lost on the line: stop waiting for it
        return None

    def ask_until(self, done: Callable[[dict[str, Any]], bool],
                  timeout: float) -> dict[str, Any] | None:
        """Ask the shoe where it stands, every ASK_EVERY seconds, until its answer satisfies
        done(status); in between take what it sends, resends included, so acknowledgements catch
        up. None if no answer did within `timeout` seconds."""
        end = time.monotonic() + timeout
        while True:
            asked = time.monotonic()
            status = self.ask(min(ANSWER_WAIT, max(end - asked, 0.0)))
            if status is not None and done(status):
                return status
            next_ask = min(asked + ASK_EVERY, end)
            if time.monotonic() >= end:
                return None
            self.pump_until(lambda: time.monotonic() >= next_ask, ASK_EVERY)

    def checkpoint(self, timeout: float = 5.0) -> pr.Frame | None:
        """Ask the shoe for a checkpoint of its log (the root it computed, signed by its element)
        and take what it sends until one covering every frame stored here has held against them
        (Validator.checkpoint); that frame, or None when none did within `timeout` seconds (or
        the store does not hold the shoe's frames from seq 1 to check one)."""
        def covered() -> bool:
            c = self.validator.checkpoint
            return c is not None and c.seq >= self.validator.state["last_seq"]

        if len(self.validator.log.hashes) < self.validator.state["last_seq"]:
            return None  # the store lacks the log's first frames: no checkpoint can be checked
        if not covered():
            self._command(pr.C_CHECKPOINT, counted=False)
            self.pump_until(covered, timeout)
        return self.validator.checkpoint if covered() else None

    def drain(self, timeout: float) -> bool:
        """Until the shoe reports its shoe ended and nothing unacknowledged (so everything it made
        is stored); False if that takes longer than `timeout` seconds."""
        done = self.ask_until(lambda st: st["phase"] == "ended" and st["unacked_to"] == 0, timeout)
        return done is not None

    def close(self) -> None:
        if self.ack_owed and not self.port.closed:  # what this link stored, acknowledged
            time.sleep(max(0.0, self.signed_at + SIGNED_GAP - time.monotonic()))
            try:
                self._ack(self.validator.state["last_seq"])
            except OSError:
                pass  # the port went away: the shoe resends them to the next host
        self.port.close()

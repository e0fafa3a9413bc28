"""Group commit: the reads of several validators writing through one store (a `sabot serve`'s
shoes) made durable by one commit, each acknowledged only after it (docs/INTERFACES.md "`sabot
serve`", --commit-wait)."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from sabot.errors import SabotError

if TYPE_CHECKING:
    from sabot.audit.store import AuditStore
    from sabot.audit.validator import Read, Validator, Verdict

COMMIT_WAIT = 0.02  # seconds at most a read waits for the reads queued behind it to join it
CLAIM_LOOK = 0.05  # seconds at most a read that would open a batch lets another use go first


class Batch:
    """The reads staged in the store's open batch, and what became of them."""

    __slots__ = ("alone", "done", "error", "expect", "opened", "reads")

    def __init__(self, expect: int) -> None:
        self.opened = time.monotonic()
        self.expect = expect  # reads that waited for the lock as it opened: it takes them too
        self.reads: list[tuple[Validator, Read]] = []
        self.done = threading.Event()  # committed, or refused
        self.error: BaseException | None = None  # the commit's failure: none of them stored
        self.alone = False  # refused for a row of one read: each is tried again on its own


class GroupCommit:
    """One writer store shared by validators in threads of their own, and the lock over it.

    A read (receive) is verified and staged into the store's open batch under the lock. The
    batch is committed at once when no other read waits for the lock, else once the reads that
    were waiting as it opened have been staged too, or `wait` seconds after its first read,
    whichever is first: so while one commit is being made the reads that arrive meanwhile
    queue, and the next commit covers them all (not the reads that come after them: they wait
    for nothing but a commit already under way). A read's thread waits for its batch's outcome
    outside the lock: stored, or the store's one-line refusal, and then nothing of it was taken
    (its validator is as it was before it: its shoe sends it again).

    Anything else that uses the store (an operator's log entry, the cosignatures stored at a
    stop, a page reading a validator's state) takes this as a lock: `with group:`, or
    acquire(timeout=...) and release(). It gets the store between batches, never inside one,
    and before any new batch opens."""

    def __init__(self, store: AuditStore, wait: float = COMMIT_WAIT) -> None:
        self.store = store
        self.wait = wait
        self._lock = threading.Lock()
        self._closed = threading.Condition(self._lock)  # a batch closed, or the lock let go
        self._queue = threading.Lock()  # guards `queued`
        self.queued = 0  # reads waiting for the lock to be staged
        self._claims = 0  # other users waiting for the store between batches
        self._batch: Batch | None = None
        self.commits = 0  # commits confirmed ...
        self.reads = 0  # ... and the reads with frames they stored

    # ---- as a lock, for every other use of the store ----------------------------------------
    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """The store between batches (held as a lock), within `timeout` seconds however long a
        commit takes; no new batch opens while this waits."""
        if not blocking:
            if not self._lock.acquire(False):
                return False
            if self._batch is None:
                return True
            self._lock.release()
            return False
        end = None if timeout < 0 else time.monotonic() + timeout
        with self._queue:
            self._claims += 1
        try:
            while True:
                left = None if end is None else max(0.0, end - time.monotonic())
                if not self._lock.acquire(True, -1 if left is None else left):
                    return False
                batch = self._batch
                if batch is None:
                    return True
                self._lock.release()  # the batch's reads commit it; its outcome is waited for
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    return False
                batch.done.wait(left)
        finally:
            with self._queue:
                self._claims -= 1

    def release(self) -> None:
        self._closed.notify_all()  # reads held back for this use may open a batch
        self._lock.release()

    def __enter__(self) -> GroupCommit:
        self.acquire()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()

    # ---- reads ------------------------------------------------------------------------------
    def receive(self, v: Validator, data: bytes) -> list[Verdict]:
        """Validator.receive, the read committed with whatever other reads came meanwhile."""
        with self._queue:
            self.queued += 1
        with self._lock:
            with self._queue:
                self.queued -= 1
            read = v.take(data)
            if not read.parsed:
                v.stored(read)
                if self._batch is not None:  # a read it waited for, with no frame to store
                    self._batch.expect -= 1
                    self._close_if_due(self._batch)
                return []
            if self._batch is None and self._claims:  # another use of the store goes first,
                self._closed.wait(CLAIM_LOOK)  # once: a read is held back no longer than this
            batch = self._batch
            if batch is None:
                try:
                    self.store.begin()  # a server lost here refuses the read, as at a commit
                except BaseException:
                    v.undo(read)
                    raise
                batch = self._batch = Batch(self.queued)
            else:
                batch.expect -= 1
                self.store.stamp()  # its rows carry its own receive time, not the batch's first
            point = self.store.savepoint()
            try:
                v.stage(read)
            except BaseException:
                self.store.back_to(point)  # the other reads of the batch stay in it
                v.undo(read)
                if not batch.reads:
                    self._batch = None
                    self.store.rollback()
                    self._closed.notify_all()
                else:
                    self._close_if_due(batch)
                raise
            batch.reads.append((v, read))
            self._close_if_due(batch)
        while not batch.done.wait(max(0.0, batch.opened + self.wait - time.monotonic())):
            with self._lock:  # its time is up and no read behind it committed it: now
                if not batch.done.is_set():
                    self._commit(batch)
        if batch.alone:  # refused for a row of one of them: each
            return self._alone(v, data)  # tries again on its own
        return self._outcome(batch, v, read)

    def _alone(self, v: Validator, data: bytes) -> list[Verdict]:
        """The read (its validator back to before it) committed in a batch of its own: a row the
        database refuses refuses only its own shoe's read, not the others' it came with."""
        with self:
            read = v.take(data)
            batch = self._batch = Batch(0)
            try:
                self.store.begin()
                v.stage(read)
            except BaseException:
                self._batch = None
                self.store.rollback()
                v.undo(read)
                raise
            batch.reads.append((v, read))
            self._commit(batch, alone=True)
        return self._outcome(batch, v, read)

    @staticmethod
    def _outcome(batch: Batch, v: Validator, read: Read) -> list[Verdict]:
        """The read's verdicts once its batch is stored, or the batch's refusal (each read's
        thread raises a copy of the store's one line)."""
        if batch.error is not None:
            if isinstance(batch.error, SabotError):
                raise SabotError(str(batch.error)) from None
            raise batch.error
        v.stored(read)
        return read.verdicts

    def _close_if_due(self, batch: Batch) -> None:
        if batch.expect <= 0 or self.queued == 0 or time.monotonic() >= batch.opened + self.wait:
            self._commit(batch)

    def _commit(self, batch: Batch, alone: bool = False) -> None:
        """The batch made durable, or undone for every read in it (under the lock)."""
        self._batch = None
        try:
            self.store.commit()
        except BaseException as e:
            self.store.rollback()
            for v, read in batch.reads:
                v.undo(read)
            batch.error = e
            batch.alone = not alone and len(batch.reads) > 1 and self.store.row_refused
            return
        finally:
            batch.done.set()
            self._closed.notify_all()
        self.commits += 1
        self.reads += len(batch.reads)

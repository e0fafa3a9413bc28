"""The frames' signatures checked ahead of `sabot audit verify`'s walk, in other processes: the
walk reads the store's rows in chain order and decides each frame in turn, but a P-256
verification is most of its work and needs nothing the walk decides. So each frame row is handed
to a pool of processes as it is read, in batches, a window of rows ahead of the walk, and the walk
takes the answer when it reaches the frame — the same answer, for the same bytes (a frame whose
bytes are not the ones handed over, or whose check did not run, is checked by the walk itself).
Processes, not threads: pyca/cryptography lets go of the interpreter while it verifies, but the
threads' own Python (parsing, handing answers back) then takes it from the walk in turns that
cost more than the checks save."""

from __future__ import annotations

import multiprocessing
import signal
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

from sabot import protocol as pr
from sabot.errors import SabotError
from sabot.registry import ShoeEntry

AHEAD = 2048  # rows read ahead of the walk
AHEAD_BYTES = 8 << 20  # and at most so many bytes of their values (an edited store's may be huge)
MOST_RAW = 1024  # a frame is 200 bytes at most: a longer raw is no frame's, the walk says so
BATCH = 256  # frames a process checks at a time (each hand-over costs a pickle both ways)
_CONFIGS: Mapping[int, ShoeEntry] = {}  # the registry's entries, in each forked process
_KEYS: dict[tuple[int, int], Any] = {}


def _key(f: pr.Frame) -> Any:
    k = (f.shoe_id, f.key_id)
    if k not in _KEYS:
        entry = _CONFIGS.get(f.shoe_id)
        try:
            _KEYS[k] = entry.public_key(f.key_id) if entry else None
        except SabotError:
            _KEYS[k] = None
    return _KEYS[k]


def quiet() -> None:
    """A checking process leaves Ctrl-C to the command, which says it was interrupted."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _checks(batch: list[tuple[int, bytes]]) -> dict[int, bool | None]:
    """Each frame's check: True or False, or None where the walk must decide it."""
    out: dict[int, bool | None] = {}
    for rid, raw in batch:
        try:
            f = pr.parse(raw)
        except pr.FrameError:
            out[rid] = None
            continue
        key = _key(f) if f.signed else None
        out[rid] = None if key is None else pr.verify(key, f)
    return out


class SignaturesAhead:
    """`jobs` processes, forked once the store proves longer than the window (a small store's
    frames are all checked by the walk: forking would cost more)."""

    def __init__(self, jobs: int, configs: Mapping[int, ShoeEntry]) -> None:
        self.jobs, self.configs = jobs, configs
        self.pool: ProcessPoolExecutor | None = None
        self.pending: dict[int, tuple[bytes, Future[dict[int, bool | None]]]] = {}
        self.batch: list[tuple[int, bytes]] = []
        self.lost = False

    def _send(self) -> None:
        if not self.batch or self.lost:
            self.batch = []
            return
        if self.pool is None:
            global _CONFIGS
            _CONFIGS = self.configs  # what each process forked from here reads (no pickling)
            _KEYS.clear()
            self.pool = ProcessPoolExecutor(self.jobs, initializer=quiet,
                                            mp_context=multiprocessing.get_context("fork"))
        batch, self.batch = self.batch, []
        try:
            job = self.pool.submit(_checks, batch)
        except Exception:  # the pool broke (a process lost): the walk checks the rest alone
            self.lost = True
            return
        for rid, raw in batch:
            self.pending[rid] = (raw, job)

    def _queue(self, row: tuple[Any, ...]) -> None:
        raw = row[3][1] if row[0] == "frames" else None
        if isinstance(raw, bytes) and len(raw) <= MOST_RAW:  # (longer: no frame; the walk says)
            self.batch.append((row[1], raw))
            if len(self.batch) >= BATCH:
                self._send()

    def rows(self, rows: Iterable[tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
        """The store's rows as they come, each frame's check started up to AHEAD rows (and
        AHEAD_BYTES of their values) before the walk reaches it. A row that cannot be read is
        said when the walk comes to it, after every row before it: the verdict is the walk's."""
        window: deque[tuple[tuple[Any, ...], int]] = deque()
        held = 0
        started = False  # a small store (AHEAD rows or fewer) is walked alone
        it = iter(rows)
        failure: Exception | None = None
        while True:
            try:
                row = next(it)
            except StopIteration:
                break
            except Exception as e:  # (a store that cannot be read there, or a row no row is)
                failure = e
                break
            size = sum(len(v) for v in row[3] if isinstance(v, (bytes, str)))
            window.append((row, size))
            held += size
            if started:
                self._queue(row)
            elif len(window) > AHEAD:
                started = True
                for r, _ in window:
                    self._queue(r)
            while len(window) > AHEAD or held > AHEAD_BYTES:
                r, size = window.popleft()
                held -= size
                yield r
        self._send()
        for r, _ in window:
            yield r
        if failure is not None:
            raise failure

    def authentic(self, rid: int, f: pr.Frame) -> bool | None:
        """The check of frame row `rid` made ahead, or None: not made for these bytes."""
        got = self.pending.pop(rid, None)
        if got is None and any(r == rid for r, _ in self.batch):
            self._send()  # (a frame the walk reached before its batch was full)
            got = self.pending.pop(rid, None)
        if got is None or got[0] != f.raw:
            return None
        try:
            return got[1].result().get(rid)
        except Exception:  # a process lost (killed, out of memory): the walk checks it itself
            return None

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)

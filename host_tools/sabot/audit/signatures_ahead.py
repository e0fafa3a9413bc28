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
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

from sabot import protocol as pr
from sabot.errors import SabotError
from sabot.registry import ShoeEntry

AHEAD = 2048  # rows read ahead of the walk
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
            self.pool = ProcessPoolExecutor(self.jobs,
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
        if row[0] == "frames" and isinstance(row[3][1], bytes):
            self.batch.append((row[1], row[3][1]))
            if len(self.batch) >= BATCH:
                self._send()

    def rows(self, rows: Iterable[tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
        """The store's rows as they come, each frame's check started some AHEAD rows before."""
        window: deque[tuple[Any, ...]] = deque()
        it = iter(rows)
        for row in it:
            window.append(row)
            if len(window) > AHEAD:
                break
        else:  # a small store
            yield from window
            return
        for row in window:
            self._queue(row)
        for row in it:
            self._queue(row)
            window.append(row)
            yield window.popleft()
        self._send()
        yield from window

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

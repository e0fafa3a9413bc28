"""Captures: what a validator took from a shoe's link, kept by `validate --capture` (and `demo
--capture`), and `sabot replay`: a capture verified offline, with the registry's public keys
only, by validators over a throwaway store, as the live validators took it.

A capture is the bytes each read brought, exactly as the validator was fed them (what the link
reads and drops unread — a tty's stale backlog at opening — is not in it), with a *mark* before
the first read of each validator and wherever its link (re)connected (docs/PROTOCOL.md
"Captures"): `00 "SABOT-CAPTURE " JSON 00`, the JSON saying how the validator read on from there
(`live`, `awaiting_status`), which validator it was (`run`) and what it held (`anchored`,
`state`: the link state it had stored). Every mark of a file carries the file's own random
`capture` token, which never goes on the line, so bytes a shoe or the cable sends cannot pass
for a mark. A mark is no frame: the summary counts every frame once, in verified, resent,
rejected, deferred or pending."""

from __future__ import annotations

import json
import os
import secrets
import tempfile
import time
from typing import Any, BinaryIO

from sabot import protocol as pr
from sabot.audit.store import open_store
from sabot.audit.validator import Validator
from sabot.errors import SabotError, parse_json
from sabot.registry import Registry, ShoeEntry

MARK = b"\x00SABOT-CAPTURE "  # the zero ends any torn frame before it, for a reader of frames
COUNTED = ("frames", "verified", "rejected", "resent", "deferred", "pending", "rounds")
SUMMARY = (*COUNTED, "rejections", "alarms", "sessions", "connections", "uncaptured")


class CaptureWriter:
    """A capture being kept: the validator hands it every read it took (`write`) and, before the
    first and after every (re)connection of its link, a mark (`mark`)."""

    def __init__(self, file: BinaryIO, token: str | None = None) -> None:
        self.file = file
        self.token = token or secrets.token_hex(8)

    def mark(self, v: Validator) -> None:
        st = v.state
        fields = {"capture": self.token, "run": v.run, "live": v.live,
                  "awaiting_status": v.awaiting_status, "anchored": v.anchored,
                  "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                  "state": {"last_seq": st["last_seq"], "last_digest": st["last_digest"].hex(),
                            "last_boot": st["last_boot"], "host_counter": st["host_counter"],
                            "inventory": st["inventory"]}}
        self._put(MARK + json.dumps(fields, sort_keys=True).encode() + b"\x00")

    def write(self, data: bytes) -> None:
        self._put(data)

    def _put(self, data: bytes) -> None:
        self.file.write(data)
        self.file.flush()  # a capture is evidence: what was taken is on disk as it is taken

    def close(self) -> None:
        self.file.close()


def open_capture(path: str | None) -> CaptureWriter | None:
    """The capture at `path`, appended to when it exists (sessions one after another into one
    store, kept in one file, replay as their validators took them); a file that is not a capture
    is refused, untouched."""
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 16)
    except FileNotFoundError:
        head = b""
    except OSError as e:
        raise SabotError(f"cannot write capture {path}: {e.strerror}") from None
    token = None
    if head:
        first = _mark(head[len(MARK):].split(b"\x00", 1)[0], None)
        if not head.startswith(MARK) or first is None:
            raise SabotError(f"{path} is not a capture kept by sabot (it does not begin with a "
                             "capture mark): name a new file for --capture")
        token = first["capture"]
    try:
        return CaptureWriter(open(path, "ab"), token)
    except OSError as e:
        raise SabotError(f"cannot write capture {path}: {e.strerror}") from None


def _mark(body: bytes, token: str | None) -> dict[str, Any] | None:
    """A mark's fields, or None when `body` is not a well-formed mark of this capture (then it is
    bytes the validator took, as any other)."""
    try:
        body.decode("ascii")
        m: Any = parse_json(body, "a capture mark")
        st = m["state"]
        ok = (isinstance(m["capture"], str) and (token is None or m["capture"] == token)
              and isinstance(m["run"], str)
              and all(isinstance(m[k], bool) for k in ("live", "awaiting_status", "anchored"))
              and all(isinstance(st[k], int) for k in ("last_seq", "last_boot", "host_counter"))
              and isinstance(st["inventory"], dict))
        st["last_digest"] = bytes.fromhex(st["last_digest"])
    except (SabotError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return m if ok else None


def split_capture(capture: bytes) -> list[tuple[dict[str, Any] | None, bytes]]:
    """The capture as (mark, the bytes taken after it up to the next mark); bytes before the first
    mark (a capture cut out of a longer one, or kept before captures had marks) come with None.
    The first well-formed mark names the capture's token; a mark-like run of bytes without it is
    bytes taken."""
    out: list[tuple[dict[str, Any] | None, bytes]] = []
    token: str | None = None
    mark: dict[str, Any] | None = None
    start = 0  # where the bytes after `mark` begin
    at = capture.find(MARK)
    while at >= 0:
        end = capture.find(b"\x00", at + len(MARK))
        found = _mark(capture[at + len(MARK):end], token) if end >= 0 else None
        if found is None:
            at = capture.find(MARK, at + 1)
            continue
        if mark is not None or capture[start:at]:
            out.append((mark, capture[start:at]))
        token, mark, start = found["capture"], found, end + 1
        at = capture.find(MARK, start)
    if mark is not None or capture[start:]:
        out.append((mark, capture[start:]))
    return out


def received(capture: bytes) -> bytes:
    """The bytes a capture's validators took, its marks left out."""
    return b"".join(data for _, data in split_capture(capture))


def read_capture(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise SabotError(f"cannot read capture {path}: {e.strerror}") from None


def first_shoe_id(capture: bytes) -> int | None:
    """The shoe id the capture's first well-formed frame names."""
    for encoded in pr.Deframer().feed(received(capture)):
        try:
            return pr.parse(pr.decode_frame(encoded)).shoe_id
        except pr.FrameError:
            continue
    return None


def capture_shoe(registry: Registry, shoe_id: int | None, capture: bytes) -> ShoeEntry:
    """The registered shoe a capture is verified as: `shoe_id`, else the registry's only shoe,
    else the one the capture names in its frames."""
    if shoe_id is None and len(registry.shoes) != 1:
        shoe_id = first_shoe_id(capture)
    return registry.pick(shoe_id)


def _catch_up(v: Validator, mark: dict[str, Any]) -> dict[str, int] | None:
    """Where the live validator held more than this replay has seen (its store had frames from
    before the capture began, or from a session the capture does not hold: a `status` or
    `new-shoe` in between), the replay goes on from the live validator's state, as it did; the
    frames it never saw are named (`uncaptured`), not alarmed: the live store holds them."""
    live = mark["state"]
    have = v.state["last_seq"] if v.anchored else 0
    if not mark["anchored"] or (v.anchored and have >= live["last_seq"]):
        return None
    v.state = {k: live[k] for k in ("last_seq", "last_digest", "last_boot", "host_counter",
                                    "inventory")}
    v.anchored = True
    v.unseen_to = max(v.unseen_to, live["last_seq"])
    return {"first": have + 1, "last": live["last_seq"]} if live["last_seq"] > have else None


def replay(capture: bytes, config: ShoeEntry) -> dict[str, Any]:
    """The capture verified as shoe `config`, each session by a validator of its own over one
    store, as the live ones took it: frames, verified, resent, rejected, deferred, pending,
    rounds, rejections (each with its reason), alarms, sessions (validators), connections
    (marks), uncaptured (seq ranges the live validators held that the capture does not).

    Bytes before a capture's first mark (one cut from a longer capture) are verified frame by
    frame from their first frame (re-anchored there, with a `sequence_gap` alarm)."""
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(os.path.join(tmp, "replay.db"))
        runs: list[Validator] = []
        uncaptured: list[dict[str, int]] = []
        connections = 0
        run_id: str | None = None
        try:
            for mark, data in split_capture(capture):
                if mark is not None:
                    connections += 1
                    if not runs or (run_id is not None and mark["run"] != run_id):
                        runs.append(Validator(config, store))  # a new session on the same store
                    run_id = mark["run"]
                    gap = _catch_up(runs[-1], mark)
                    if gap:
                        uncaptured.append(gap)
                    runs[-1].live, runs[-1].awaiting_status = mark["live"], mark["awaiting_status"]
                elif not runs:
                    runs.append(Validator(config, store))
                runs[-1].receive(data)
            if not runs:
                runs.append(Validator(config, store))
            # the capture's end: a frame still waiting for its seal is unsealed, a shoe started
            # and not ended an alarm (sessions before the last left theirs as their live
            # validators did: counted pending)
            runs[-1].finish()
            summaries = [v.summary() for v in runs]
        finally:
            store.close()
    out: dict[str, Any] = {k: sum(s[k] for s in summaries) for k in COUNTED}
    out["rejections"] = [r for s in summaries for r in s["rejections"]]
    out["alarms"] = [a for s in summaries for a in s["alarms"]]
    out.update(sessions=len(runs), connections=connections, uncaptured=uncaptured)
    return {k: out[k] for k in SUMMARY}


def replay_all(captures: list[bytes], configs: list[ShoeEntry], jobs: int = 1
               ) -> list[dict[str, Any]]:
    """Each capture replayed on its own (replay), `jobs` at once in processes of their own when
    there are several: the same summaries, in the captures' order. A capture whose process did
    not answer (killed, out of memory) is replayed here."""
    pairs = list(zip(captures, configs, strict=True))
    if len(pairs) < 2 or jobs < 2:
        return [replay(c, config) for c, config in pairs]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    from sabot.audit.signatures_ahead import quiet

    out = []
    with ProcessPoolExecutor(min(jobs, len(pairs)), initializer=quiet,
                             mp_context=multiprocessing.get_context("fork")) as pool:
        jobs_ = [pool.submit(replay, c, config) for c, config in pairs]
        for job, (c, config) in zip(jobs_, pairs, strict=True):
            try:
                out.append(job.result())
            except BrokenProcessPool:  # its process lost (killed, out of memory)
                out.append(replay(c, config))
    return out

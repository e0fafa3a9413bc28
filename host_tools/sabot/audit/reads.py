"""A validator's reads (Validator.take, stage, undo): each read's frames, what the validator was
before them (put back when the store keeps nothing of the read), and which of its frames one
checked signature authenticates (batch verification, docs/PROTOCOL.md "Validator verdicts")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sabot import protocol as pr
from sabot.audit.cosign import Cosigned

Verdict = tuple[pr.Frame | None, str, str | None]  # (the frame if it parsed, verdict, reason)


class Read:
    """One read from the link as a validator takes it (Validator.take): its frames and the
    validator as it was before them."""

    __slots__ = (
        "cosigned",
        "counted",
        "data",
        "fields",
        "kept",
        "log",
        "parsed",
        "saved",
        "torn",
        "verdicts",
        "watched",
    )

    def __init__(self, data: bytes, torn: tuple[bytes, bool]) -> None:
        self.data = data
        self.torn = torn  # the deframer's partial frame before it
        self.parsed: list[tuple[bytes, pr.Frame | None, str | None]] = []
        self.verdicts: list[Verdict] = []
        self.saved: dict[str, Any] = {}
        self.counted: tuple[dict[str, int], int, int, int] = ({}, 0, 0, 0)
        self.fields: dict[str, Any] = {}  # the validator's own values (UNDONE)
        self.kept: tuple[set[bytes], list[tuple[str, str]], dict[int, list[str]]] = (
            set(), [], {})  # ... and its sets, deferred alarms and witnesses, copied
        self.log = 0  # the leaves of the shoe's log
        self.cosigned: list[Cosigned] = []
        self.watched: Any = None  # the watch's (Watch.snapshot)


# what a validator's read may change of its own, put back as it was when the store keeps nothing
# of the read (Validator.undo): a resend then meets the validator the first sending met
UNDONE = ("pending", "held", "checkpoint", "anchored", "resend_until", "resend_from", "status",
          "statuses", "awaiting_status", "unseen_to", "_tilt_seen", "owed")


def covered(frames: list[pr.Frame], verified: Callable[[pr.Frame], bool]) -> set[bytes]:
    """The digests of the frames of one read (of one shoe) whose bodies one checked signature
    authenticates: in each run of chained frames where every frame's chain is the digest of the
    one before, the newest signed frame's signature (`verified`) covers it and, through the
    digests, every frame before it in the run. A signature that fails covers nothing: those
    frames are checked one by one."""
    out: set[bytes] = set()
    run: list[pr.Frame] = []

    def close() -> None:
        last = max((i for i, f in enumerate(run) if f.signed), default=-1)
        if last > 0 and verified(run[last]):  # a run of one is checked on its own anyway
            out.update(f.digest for f in run[: last + 1])
        run.clear()

    for f in frames:
        if f.type not in pr.CHAINED:
            continue
        if run and (f.chain != run[-1].digest or f.seq != run[-1].seq + 1):
            close()
        run.append(f)
    close()
    return out

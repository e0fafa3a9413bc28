"""`sabot replay`: a capture of a shoe's link verified offline, with the registry's public keys
only, by a Validator over a throwaway store; the summary counts every frame once."""

from __future__ import annotations

import os
import tempfile
from typing import Any

from sabot import protocol as pr
from sabot.audit.validator import Validator
from sabot.errors import SabotError
from sabot.registry import Registry, ShoeEntry

SUMMARY = ("frames", "verified", "rejected", "resent", "rounds", "rejections", "alarms")


def read_capture(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise SabotError(f"cannot read capture {path}: {e.strerror}") from None


def has_status(capture: bytes) -> bool:
    """Whether a status frame is in the capture (a live link's hello was answered)."""
    for part in capture.split(b"\x00"):
        try:
            if part and pr.parse(pr.decode_frame(part)).type == pr.T_STATUS:
                return True
        except pr.FrameError:
            continue
    return False


def first_shoe_id(capture: bytes) -> int | None:
    """The shoe id the capture's first well-formed frame names."""
    for encoded in pr.Deframer().feed(capture):
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


def replay(capture: bytes, config: ShoeEntry) -> dict[str, Any]:
    """The capture verified as shoe `config`: frames, verified, rejected, resent, rounds,
    rejections (each with its reason) and alarms."""
    with tempfile.TemporaryDirectory() as tmp:
        v = Validator(config, os.path.join(tmp, "replay.db"))
        try:
            # A capture kept by a live link starts with whatever the shoe was sending when the
            # link opened, then the status answering its hello and the resends: replay it as the
            # live validator took it, anchoring at that status.
            v.live = v.awaiting_status = has_status(capture)
            v.receive(capture)
            v.finish()
            s = v.summary()
        finally:
            v.store.close()
    return {k: s[k] for k in SUMMARY}

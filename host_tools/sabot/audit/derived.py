"""What `sabot audit verify` derives again from a store's frames, shared by its walk over the
store (audit/verify.py) and its check of the operator log (audit/operator_log.py): each shoe as
its validators saw it, and the words its findings use."""

from __future__ import annotations

import json
from typing import Any

from sabot import protocol as pr
from sabot import tlog
from sabot.audit.accounts import ShoeAccounts
from sabot.audit.records import LINK_KEY
from sabot.registry import ShoeEntry


class Broken(Exception):
    """The first thing found wrong with the store."""


def type_name(f: pr.Frame) -> str:
    return pr.TYPES.get(f.type, f"0x{f.type:02x}")


def sid(shoe_id: Any) -> str:
    return f"{shoe_id:#010x}" if isinstance(shoe_id, int) else repr(shoe_id)


def differ(names: tuple[str, ...], have: tuple[Any, ...], want: tuple[Any, ...]) -> str:
    return ", ".join(n for n, a, b in zip(names, have, want, strict=True) if a != b)


def status_of(f: pr.Frame) -> dict[str, Any] | None:
    try:
        return pr.decode_status(f.payload)
    except pr.FrameError:
        return None


class DerivedShoe:
    """One shoe device as its validators saw it, derived again from its stored frames: the link
    state they stored after each read (last seq, digest and boot, the host counter, the shoe's
    accounts) and what only the walk needs."""

    def __init__(self, shoe_id: int, config: ShoeEntry) -> None:
        self.shoe_id = shoe_id
        self.config = config
        self.st: dict[str, Any] = {"last_seq": 0, "last_digest": b"", "last_boot": 0,
                                   "host_counter": 0, "inventory": {}}
        self.raised: list[tuple[Any, ...]] = []  # alarms derived for the frame at hand
        self.accounts = ShoeAccounts(config, self.st, self._alarm)
        self.anchored = False  # an accepted chained frame or status of it is stored
        self.linked = False  # a link_state row of it is stored: a restarted validator anchors
        self.row: tuple[Any, ...] | None = None  # its latest link_state row
        self.tilted = False  # its latest authentic status said tilt
        self.said = 0  # the newest frame an authentic status of it named
        self.stored: dict[int, bytes] = {}  # seq -> digest of its accepted frame (resends)
        self.log = tlog.Prefix()  # its log as stored, from seq 1 while none is missing
        self.round_seqs: list[tuple[int, Any]] = []  # (seq, shoe) of each round's result
        self.ended: set[Any] = set()  # the shoes its shoe_end frames ended
        self.unseen = 0  # met at its first frame past seq 1: the seqs before it (resends)
        # seq -> what an operator entry may name there: ("resolve", record) given from the host,
        # ("new_shoe", record, the shoe that ended before it)
        self.effects: dict[int, tuple[Any, ...]] = {}

    def _alarm(self, kind: str, detail: str, **where: Any) -> None:
        inv = self.st.get("inventory") or {}
        self.raised.append((kind, where.get("shoe", inv.get("shoe")), where.get("round"), detail))

    def emit(self, kind: str, detail: Any) -> None:
        """An alarm the validator held until the frame was stored (a gap, a tilt): raised with the
        accounts as they are once the frame's sequence is decided."""
        self._alarm(kind, detail)

    def link_values(self) -> tuple[Any, ...]:
        st = self.st
        return (LINK_KEY, self.shoe_id, st["last_seq"], st["last_digest"], st["last_boot"],
                st["host_counter"], json.dumps(st["inventory"], sort_keys=True))

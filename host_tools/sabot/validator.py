"""The validator: verifies every frame (MAC, sequence, chain, boot counter), recomputes every round
from its cards with the host's independent rules, tracks the shoe inventory, and stores everything
in the audit log. Works the same on a live link and on a capture (`sabot replay`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from . import protocol as pr
from . import rules
from .audit import AuditStore
from .cards import BURN_VALUES
from .keys import ShoeKey
from .protocol import FrameError

CONTRACT_ROUND_KEYS = ("shoe", "round", "player", "banker", "player_total", "banker_total",
                       "winner", "flags", "dummy")
Verdict = tuple[pr.Frame | None, str, str | None]  # (the frame if it parsed, verdict, reason)


def contract_round(rec: dict[str, Any]) -> dict[str, Any]:
    """A round record with exactly the keys CONTRACTS.md promises (the audit log keeps more)."""
    return {k: rec[k] for k in CONTRACT_ROUND_KEYS if k in rec}


def expected_announcements(rec: dict[str, Any], variant: dict[str, Any]) -> list[str]:
    """627a.11(a) / 631a.12(a): "tie hand"; "Dragon 7" / "Panda 8" on EZ tables; 631c.5(e): "Lucky
    Six"."""
    out = ["tie hand"] if rec["winner"] == "tie" else []
    if variant.get("ez"):
        out += [n for f, n in (("dragon7", "Dragon 7"), ("panda8", "Panda 8"))
                if f in rec["flags"]]
    if variant.get("commission_free") and "lucky_six" in rec["flags"]:
        out.append("Lucky Six")
    return out


class Validator:
    def __init__(self, key: ShoeKey, store: AuditStore | str,
                 on_record: Callable[[str, dict[str, Any]], None] | None = None) -> None:
        self.key = key
        self.store = store if isinstance(store, AuditStore) else AuditStore(store)
        self.deframer = pr.Deframer()
        self.on_record = on_record
        st = self.store.link(key.key_id, key.shoe_id)
        self.state: dict[str, Any] = st or {"last_seq": 0, "last_mac": b"", "last_boot": 0,
                                            "host_counter": 0, "inventory": {}}
        self.anchored = st is not None
        self.resend_until = 0  # after an authentic status, resends up to this seq are expected
        self.status: dict[str, Any] | None = None  # the latest authentic status
        self.statuses = 0  # how many authentic statuses arrived: answers to the link's hellos
        self.counts = {"frames": 0, "verified": 0, "rejected": 0, "rounds": 0, "irregularities": 0,
                       "resent": 0}
        self.rejections: list[dict[str, Any]] = []
        self.alarms: list[str] = []

    # ---- intake --------------------------------------------------------------------------------
    def receive(self, data: bytes) -> list[Verdict]:
        """Bytes from the link; [(frame or None, verdict, reason)] for each frame completed.

        The frames of one read are stored in one durable transaction (a group commit); the link
        acknowledges them only after this returns, so an acknowledged frame is always on disk."""
        encoded = self.deframer.feed(data)
        if not encoded:
            return []
        self.store.begin()
        try:
            out = [self._one(e) for e in encoded]
            self.store.save_link(self.key.key_id, self.key.shoe_id, self.state)
        except BaseException:
            self.store.rollback()
            raise
        self.store.commit()
        return out

    def _one(self, encoded: bytes) -> Verdict:
        self.counts["frames"] += 1
        raw, frame = encoded, None
        try:
            raw = pr.decode_frame(encoded)
            frame = pr.parse(raw)
            verdict, reason, decoded = self._verify(frame)
            fid = self.store.add_frame(raw, frame, verdict, reason)
            if decoded is not None:
                self._store_record(frame, fid, decoded)
        except FrameError as e:
            verdict, reason = "rejected", e.reason
            self.store.add_frame(raw, frame, verdict, reason)
            self.counts["rejected"] += 1
            seq = frame.seq if frame is not None else None
            self.rejections.append({"seq": seq, "reason": reason})
        if verdict == "accepted":
            self.counts["verified"] += 1
        elif verdict == "resent":
            self.counts["resent"] += 1
        return frame, verdict, reason

    def _verify(self, f: pr.Frame) -> tuple[str, None, tuple[str, dict[str, Any]] | None]:
        k = self.key
        if f.key_id != k.key_id or f.shoe_id != k.shoe_id:
            raise FrameError("unknown_shoe_or_key")
        if not pr.verify(k.key, f):
            raise FrameError("bad_mac")
        st = self.state
        if f.type == pr.T_STATUS:
            if f.boot < st["last_boot"]:
                raise FrameError("boot_backwards")
            self.status = pr.decode_status(f.payload)
            self.statuses += 1
            self.resend_until = max(self.resend_until, self.status["unacked_to"])
            st["host_counter"] = max(st["host_counter"], self.status["host_counter"])
            return "accepted", None, None
        if f.type == pr.T_INTEGRITY:
            return "accepted", None, None  # answers a verify-firmware challenge; checked there
        if f.type not in pr.CHAINED:
            raise FrameError("unknown_type")
        if self.anchored and f.seq <= st["last_seq"]:
            # Already stored: a resend we asked for (after our hello) is expected, anything else is
            # a replay.
            same = self.store.stored_raw(f.key_id, f.shoe_id, f.seq) == f.raw
            if same and f.seq <= self.resend_until:
                return "resent", None, None
            raise FrameError("replayed")
        if f.boot < st["last_boot"]:
            raise FrameError("boot_backwards")
        if self.anchored and f.seq != st["last_seq"] + 1:
            raise FrameError("sequence_gap")
        if self.anchored and st["last_mac"] and f.chain != st["last_mac"][:8]:
            raise FrameError("chain_broken")
        if not self.anchored and f.seq != 1:
            self.alarms.append(f"chain anchored at seq {f.seq}: earlier frames were not seen here")
        # raises FrameError; nothing of the frame is applied before it passes
        decoded = self._check_content(f)
        self.anchored = True
        self.resend_until = 0  # resends come oldest first, before anything new: window closed
        st["last_seq"], st["last_mac"], st["last_boot"] = f.seq, f.mac, f.boot
        return "accepted", None, decoded

    # ---- content: recompute with the host's own rules -----------------------------------------
    def _check_content(self, f: pr.Frame) -> tuple[str, dict[str, Any]]:
        decoded = pr.decode_payload(f)
        kind, rec = decoded
        inv = self.state["inventory"]
        if kind == "shoe_start":
            self.state["inventory"] = {"decks": rec["decks"], "shoe": rec["shoe"], "round": 0,
                                       "counts": {}, "initial": None, "variant": rec["variant"]}
            return decoded
        if not inv:
            inv.update({"decks": 8, "shoe": rec.get("shoe"), "round": 0, "counts": {},
                        "initial": None})
        if kind == "burn":
            cards = rec["cards"]
            if None in cards or len(cards) != 1 + BURN_VALUES[cards[0][0]]:
                raise FrameError("burn_mismatch")
            self._count(cards)
        elif kind == "initial_cards":
            p, b = rec["player"], rec["banker"]
            inv["initial"] = [p[0], b[0], p[1], b[1]]
        elif kind == "result":
            self._check_round(rec, inv)
        elif kind == "resolution" and rec["resolution"] == "void_round":
            self._count(rec["voided_cards"])
        elif kind == "shoe_end":
            counted = {c: n for c, n in inv["counts"].items() if n}
            if rec["inventory"] != counted:
                raise FrameError("inventory_mismatch")
        return decoded

    def _check_round(self, rec: dict[str, Any], inv: dict[str, Any]) -> None:
        player, banker = rec["player"], rec["banker"]
        if None in player or None in banker or "CUT" in player + banker:
            raise FrameError("recompute_mismatch")
        if rules.redeal(player, banker) != (player, banker):
            raise FrameError("recompute_mismatch")  # the rules draw otherwise than the shoe did
        want = rules.round_outcome(player, banker)
        for k in ("player_total", "banker_total", "winner", "flags"):
            if rec[k] != want[k]:
                raise FrameError("recompute_mismatch")
        if rec["announcements"] != expected_announcements(want, inv.get("variant", {})):
            raise FrameError("announcement_mismatch")
        if rec["shoe"] == inv.get("shoe") and rec["round"] != inv["round"] + 1:
            raise FrameError("round_out_of_order")
        order = rules.dealing_order(player, banker)
        if inv.get("initial") and inv["initial"] != order[:4]:
            raise FrameError("initial_cards_mismatch")
        self._count(order)
        inv["round"] = rec["round"]
        inv["initial"] = None

    def _count(self, cards: Sequence[str | None]) -> None:
        inv = self.state["inventory"]
        counts, decks = inv["counts"], inv["decks"]
        for c in cards:
            if counts.get(c, 0) >= decks:
                self.alarms.append(f"inventory: a copy of {c} beyond {decks} decks")
                raise FrameError("inventory_exceeded")
        for c in cards:
            counts[c] = counts.get(c, 0) + 1

    def _store_record(self, f: pr.Frame, fid: int, decoded: tuple[str, dict[str, Any]]) -> None:
        kind, rec = decoded
        self.store.add_record(f, fid, kind, rec)
        if kind == "result":
            self.counts["rounds"] += 1
        elif kind == "irregularity":
            self.counts["irregularities"] += 1
        if self.on_record:
            self.on_record(kind, rec)

    def summary(self) -> dict[str, Any]:
        s: dict[str, Any] = dict(self.counts)
        s["rejections"] = self.rejections
        s["alarms"] = self.alarms
        return s


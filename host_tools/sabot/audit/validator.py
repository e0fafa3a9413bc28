"""The validator: verifies every frame (signature, sealing, sequence, digest chain, boot counter)
with the shoe's public keys from the registry, recomputes every round
from its cards with the host's independent rules, keeps the shoe's accounting of every card out,
and stores everything in the audit log. Works the same on a live link and on a capture (`sabot
replay`).

Only a frame that fails authentication or sequence is rejected. An authentic frame in sequence is
stored (and so acknowledged) whatever it says: where its content disagrees with the host — a round
the rules deal otherwise, a card beyond the decks, a missing burn, a configuration other than the
registry's — an alarm is stored with it and the audit goes on."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

from sabot import protocol as pr
from sabot.audit.store import AuditStore
from sabot.audit.watch import Watch
from sabot.errors import SabotError
from sabot.game import rules
from sabot.game.cards import BURN_VALUES
from sabot.protocol import FrameError
from sabot.registry import ShoeEntry

STALE_STATUSES = 3  # statuses in a row older than the store: the shoe is behind it, no replay
CONTRACT_ROUND_KEYS = ("shoe_id", "shoe", "round", "player", "banker", "player_total",
                       "banker_total", "winner", "flags", "dummy")
Verdict = tuple[pr.Frame | None, str, str | None]  # (the frame if it parsed, verdict, reason)
Alarm = dict[str, Any]


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


def new_shoe_accounts(shoe: int | None, partial: bool = False) -> dict[str, Any]:
    """The host's accounting of one shoe: every card that left it, as the shoe's frames say."""
    return {"shoe": shoe, "round": 0, "counts": {}, "unknown": 0, "initial": None, "burned": False,
            "held": None, "dummy": None, "ended": False,
            "partial": partial}  # partial: met mid-shoe, its earlier cards were never seen here


LINK_KEY = 0  # link state is kept per shoe, whatever result key version signs its frames


class Validator:
    """Verifies one shoe's frames with the public keys of its registry entry: it holds no
    secret."""

    def __init__(self, config: ShoeEntry, store: AuditStore | str,
                 on_record: Callable[[str, dict[str, Any]], None] | None = None,
                 on_alarm: Callable[[Alarm], None] | None = None, watch: bool = True,
                 batch_verify: bool = False) -> None:
        self.config = config
        self.shoe_id = config.shoe_id
        self.store = store if isinstance(store, AuditStore) else AuditStore(store)
        self.deframer = pr.Deframer()
        self.on_record = on_record
        self.on_alarm = on_alarm
        # True: one signature checked per run of digest-linked frames of a read (docs/PROTOCOL.md
        # "Validator verdicts": sound for the bodies, but a signature damaged on the line is then
        # stored as it came, and audit verify names it). False, the default: every signature.
        self.batch_verify = batch_verify
        st = self.store.link(LINK_KEY, config.shoe_id)
        self.state: dict[str, Any] = st or {"last_seq": 0, "last_digest": b"", "last_boot": 0,
                                            "host_counter": 0, "inventory": {}}
        self.anchored = st is not None
        self.resend_until = 0  # after an authentic status, resends up to this seq are expected
        self.resend_from = 0  # ... and from this one: what the shoe still held unacknowledged
        self.status: dict[str, Any] | None = None  # the latest authentic status
        self.statuses = 0  # how many authentic statuses arrived: answers to the link's hellos
        self.counts = {"frames": 0, "verified": 0, "rejected": 0, "rounds": 0, "irregularities": 0,
                       "resent": 0, "alarms": 0}
        self.rejections: list[dict[str, Any]] = []
        self.alarms: list[Alarm] = []
        self.pending: pr.Frame | None = None  # an unsigned frame waiting for its seal
        self._covered: set[bytes] = set()  # this read's frames a checked signature covers
        self._keys: dict[int, Any] = {}
        self._frame_id: int | None = None
        self._key_id = 0
        self._deferred: list[tuple[str, str]] = []  # alarms found before their frame is stored
        self._tilt_seen = False
        self.live = False  # set by the host link: statuses answer our hellos
        self.awaiting_status = False  # set by the host link at each (re)connection
        self._stale_statuses = 0  # statuses in a row older than the store (see _verify)
        # Issue 14's alarms on what is dealt (watch.py): player_advantage, repeated_sequence.
        self.watch = (Watch(self.store, config.shoe_id, self.config, self.state, self._alarm)
                      if watch else None)

    # ---- intake --------------------------------------------------------------------------------
    def receive(self, data: bytes) -> list[Verdict]:
        """Bytes from the link; [(frame or None, verdict, reason)] for each frame decided (an
        unsigned frame is decided when the next signed frame arrives: it seals it or not).

        The frames of one read are stored in one durable transaction (a group commit); the link
        acknowledges them only after this returns, so an acknowledged frame is always on disk."""
        encoded = self.deframer.feed(data)
        if not encoded:
            return []
        saved = copy.deepcopy(self.state)  # what to go back to if the batch cannot be stored
        pending = self.pending
        parsed = [self._parse(e) for e in encoded]
        if self.batch_verify:
            self._covered = self._cover([f for _, f, _ in parsed if f is not None])
        self.store.begin()
        try:
            out = [v for p in parsed for v in self._one(*p)]
            self.store.save_link(LINK_KEY, self.shoe_id, self.state)
            self.store.commit()
        except BaseException:
            self.store.rollback()
            self.state = saved  # nothing of this read was stored: the shoe will send it again
            self.pending = pending
            raise
        finally:
            self._covered = set()
        return out

    def finish(self) -> list[Verdict]:
        """The end of a capture: an unsigned frame nothing sealed is rejected, and a shoe that
        started and never ended is an alarm."""
        out = []
        self.store.begin()
        if self.pending is not None:
            p, self.pending = self.pending, None
            out.append(self._reject(p.raw, p, "unsealed"))
        inv = self.state["inventory"]
        if inv and inv.get("shoe") is not None and not inv.get("ended"):
            self._frame_id = None
            self._alarm("missing_shoe_end", f"shoe {inv['shoe']} has no shoe_end in what was "
                        "received", shoe=inv["shoe"])
        self.store.commit()
        return out

    @staticmethod
    def _parse(encoded: bytes) -> tuple[bytes, pr.Frame | None, str | None]:
        raw = encoded
        try:
            raw = pr.decode_frame(encoded)
            return raw, pr.parse(raw), None
        except FrameError as e:
            return raw, None, e.reason

    def _public_key(self, f: pr.Frame) -> Any:
        """The registry's public key for this frame, or unknown_shoe_or_key."""
        if f.shoe_id != self.shoe_id:
            raise FrameError("unknown_shoe_or_key")
        key = self._keys.get(f.key_id)
        if key is None:
            key = self.config.public_key(f.key_id)
            if key is None:
                raise FrameError("unknown_shoe_or_key")
            self._keys[f.key_id] = key
        return key

    def _cover(self, frames: list[pr.Frame]) -> set[bytes]:
        """The frames of one read whose bodies one checked signature authenticates: in each run
        of chained frames where every frame's chain is the digest of the one before, the newest
        signed frame's signature covers it and, through the digests, every frame before it in
        the run (docs/PROTOCOL.md "Validator verdicts"). A signature that fails covers nothing:
        those frames are checked one by one."""
        covered: set[bytes] = set()
        run: list[pr.Frame] = []

        def close() -> None:
            last = max((i for i, f in enumerate(run) if f.signed), default=-1)
            if last > 0:  # a run of one is checked on its own anyway
                try:
                    ok = pr.verify(self._public_key(run[last]), run[last])
                except FrameError:
                    ok = False
                if ok:
                    covered.update(f.digest for f in run[: last + 1])
            run.clear()

        for f in frames:
            if f.type not in pr.CHAINED or f.shoe_id != self.shoe_id:
                continue
            if run and (f.chain != run[-1].digest or f.seq != run[-1].seq + 1):
                close()
            run.append(f)
        close()
        return covered

    def _one(self, raw: bytes, frame: pr.Frame | None, error: str | None) -> list[Verdict]:
        """The verdicts one received frame decides: none while it waits for its seal, its own
        (and that of the unsigned frame it seals or leaves unsealed) otherwise."""
        self.counts["frames"] += 1
        if frame is None:
            return [self._reject(raw, None, error or "bad_framing")]
        f = frame
        try:
            key = self._public_key(f)
            if not f.signed:
                if f.type != pr.T_INITIAL_CARDS:
                    raise FrameError("unknown_type")  # a hello or verify: no shoe frame
            elif f.digest not in self._covered and not pr.verify(key, f):
                raise FrameError("bad_signature")
        except FrameError as e:
            return [self._reject(raw, f, e.reason)]  # a pending frame waits on: not its seal
        out: list[Verdict] = []
        p = self.pending
        if p is not None and not (f.signed and f.type not in pr.CHAINED and f.seq > p.seq):
            # (a status or integrity answer naming a newer frame says nothing of this one: its
            # successor, still on its way, decides)
            self.pending = None
            if f.signed and f.chain == p.digest and f.seq == p.seq + (f.type in pr.CHAINED):
                out.append(self._process(p))
            else:
                out.append(self._reject(p.raw, p, "unsealed"))
        if not f.signed:
            self.pending = f  # decided by the next signed frame
            return out
        out.append(self._process(f))
        return out

    def _reject(self, raw: bytes, frame: pr.Frame | None, reason: str) -> Verdict:
        self.store.add_frame(raw, frame, "rejected", reason, _type_name(frame))
        self.counts["rejected"] += 1
        self.rejections.append({"seq": frame.seq if frame else None, "reason": reason})
        return frame, "rejected", reason

    def _process(self, frame: pr.Frame) -> Verdict:
        """An authentic frame: its sequence, then storing and accounting."""
        try:
            verdict, chained = self._verify(frame)
        except FrameError as e:
            return self._reject(frame.raw, frame, e.reason)
        if verdict == "deferred":
            self.store.add_frame(frame.raw, frame, verdict, None, _type_name(frame))
            self.counts["deferred"] = self.counts.get("deferred", 0) + 1
            return frame, verdict, None
        self._key_id = frame.key_id
        self._frame_id = self.store.add_frame(frame.raw, frame, verdict, None, _type_name(frame))
        for kind, detail in self._deferred:
            self._alarm(kind, detail)
        self._deferred = []
        if verdict == "resent":
            self.counts["resent"] += 1
            return frame, verdict, None
        self.counts["verified"] += 1
        if chained:
            try:
                decoded = pr.decode_payload(frame)
            except FrameError:
                self._alarm("malformed_payload", "an authentic frame whose payload does not fit "
                            f"its type {_type_name(frame)}")
            else:
                self._account(frame, decoded)
        return frame, verdict, None

    def _verify(self, f: pr.Frame) -> tuple[str, bool]:
        """Sequence, chain and boot counter of an authentic frame: (verdict, whether it is a
        chained frame) — or a FrameError: a rejection."""
        st = self.state
        if f.type == pr.T_STATUS:
            if f.boot < st["last_boot"]:
                raise FrameError("boot_backwards")
            if self.anchored and f.seq < st["last_seq"]:
                # Older than what is stored: one such status is a recorded one played back on
                # the cable (refused, counted); a shoe that only ever says so is behind the store.
                self._stale_statuses += 1
                if self._stale_statuses >= STALE_STATUSES:
                    raise SabotError(f"shoe {self.shoe_id} says its newest frame is seq {f.seq} "
                                     f"but this store already holds up to seq {st['last_seq']}: "
                                     "a re-provisioned shoe or an altered store; validate it "
                                     "into a new database")
                raise FrameError("replayed")
            self._stale_statuses = 0
            self.status = pr.decode_status(f.payload)
            self.awaiting_status = False
            self.statuses += 1
            first = self.status["unacked_from"]
            if first:  # the shoe resends what it held unacknowledged, nothing acked before
                self.resend_from = first if not self.resend_until else min(self.resend_from,
                                                                             first)
            self.resend_until = max(self.resend_until, self.status["unacked_to"])
            st["host_counter"] = self.status["host_counter"]  # the element's counter: exact
            self._after_status(self.status)
            return "accepted", False
        if f.type == pr.T_INTEGRITY:
            return "accepted", False  # answers a verify-firmware challenge; checked there
        if f.type not in pr.CHAINED:
            raise FrameError("unknown_type")
        if not self.anchored and self.live and self.status is None:
            # Met live before the status answering our hello: the shoe may be mid-way through
            # resending older frames. Anchor at what its status says it holds, not here (this
            # frame comes again after the status); never store past frames not yet seen.
            return "deferred", False
        if self.anchored and f.seq <= st["last_seq"]:
            # Already stored: a resend we asked for (after our hello) is expected, anything else is
            # a replay.
            same = self.store.stored_raw(f.key_id, f.shoe_id, f.seq) == f.raw
            if same and self.resend_from <= f.seq <= self.resend_until:
                return "resent", False
            raise FrameError("replayed")
        if f.boot < st["last_boot"]:
            raise FrameError("boot_backwards")
        if self.anchored and f.seq > st["last_seq"] + 1 and self.live and self.awaiting_status:
            # Just (re)connected: frames the shoe sent while nobody listened come again after the
            # status answering our hello; a newer one seen before that is not a gap yet.
            return "deferred", False
        if self.anchored and f.seq != st["last_seq"] + 1:
            raise FrameError("sequence_gap")
        if self.anchored and st["last_digest"] and f.chain != st["last_digest"]:
            raise FrameError("chain_broken")
        if not self.anchored and f.seq != 1:
            self._gap(1, f.seq - 1, "before this validator first met the shoe")
        self.anchored = True
        self.resend_until = 0  # resends come oldest first, before anything new: window closed
        st["last_seq"], st["last_digest"], st["last_boot"] = f.seq, f.digest, f.boot
        return "accepted", True

    def _after_status(self, status: dict[str, Any]) -> None:
        """The shoe says what it still holds. Frames it no longer holds — acknowledged to a host
        whose state this validator does not have — can never be seen here: re-anchor after them,
        with an alarm, instead of rejecting every later frame as a gap."""
        st = self.state
        if status["integrity"] == "tilt" and not self._tilt_seen:
            self._tilt_seen = True
            self._deferred.append(("tilt", "the shoe's code does not match its MANIFEST: it "
                                   "deals nothing"))
        if not self.anchored:
            # The first status a validator gets: the shoe holds frames from unacked_from on;
            # everything before was acknowledged elsewhere and can never be seen here.
            first = status["unacked_from"] or status["acked"] + 1
            if first > 1:
                self._gap(1, first - 1, "acknowledged before this validator met the shoe")
            st["last_seq"], st["last_digest"] = first - 1, b""
            self.anchored = True
        elif status["acked"] > st["last_seq"]:
            self._gap(st["last_seq"] + 1, status["acked"], "acknowledged to another host")
            st["last_seq"], st["last_digest"] = status["acked"], b""

    def _gap(self, first: int, last: int, why: str) -> None:
        """Frames that can never be seen here: the shoe's accounting stays partial until its next
        shoe starts, and an alarm (stored with the frame that revealed the gap) says why."""
        if not self.state["inventory"]:
            self.state["inventory"] = new_shoe_accounts(None, partial=True)
        self.state["inventory"]["partial"] = True
        self._deferred.append(("sequence_gap", f"frames {first}..{last} were never seen here "
                               f"({why})"))

    # ---- content: the shoe's accounting and the host's own rules -------------------------------
    def _account(self, f: pr.Frame, decoded: tuple[str, dict[str, Any]]) -> None:
        kind, rec = decoded
        self.store.add_record(f, self._require_id(), kind, rec)
        inv = self.state["inventory"]
        if kind == "shoe_start":
            if inv and inv.get("shoe") is not None and not inv.get("ended"):
                self._alarm("missing_shoe_end", f"shoe {inv['shoe']} never ended; shoe "
                            f"{rec['shoe']} starts", shoe=inv["shoe"])
            self.state["inventory"] = inv = new_shoe_accounts(rec["shoe"])
            self._check_config(rec)
        elif not inv:
            self.state["inventory"] = inv = new_shoe_accounts(rec.get("shoe"), partial=True)
        elif inv["shoe"] is None:
            inv["shoe"] = rec.get("shoe")
        if inv.get("ended") and kind in ("burn", "initial_cards", "result"):
            self._alarm("round_after_shoe_end", f"a {kind} after shoe {inv['shoe']} ended, with "
                        "no new shoe started", shoe=inv["shoe"])
        handler = getattr(self, f"_on_{kind}", None)
        if handler is not None:
            handler(rec, inv)
        if kind == "result":
            self.counts["rounds"] += 1
        elif kind == "irregularity":
            self.counts["irregularities"] += 1
        if self.watch is not None:  # the hook: alarms on the accounted shoe (watch.py)
            self.watch.after(f.seq, kind, rec, self.state["inventory"])
        if self.on_record:
            self.on_record(kind, rec)

    def _check_config(self, rec: dict[str, Any]) -> None:
        cfg = self.config
        said = dict(rec["variant"], decks=rec["decks"])
        want = dict(cfg.variant, decks=cfg.decks)
        if said != want:
            diff = ", ".join(f"{k} {said[k]!r} (registry: {want[k]!r})" for k in want
                             if said[k] != want[k])
            self._alarm("config_mismatch", f"the shoe announces {diff}", shoe=rec["shoe"])

    def _on_burn(self, rec: dict[str, Any], inv: dict[str, Any]) -> None:
        cards = rec["cards"]
        first = cards[0] if cards else None
        held = inv.get("held") or {}
        cut_short = held.get("kind") == "cards_exhausted"  # the shoe ran out during the burn
        if (first is None or "CUT" in cards or len(cards) > 1 + BURN_VALUES[first[0]]
                or (len(cards) < 1 + BURN_VALUES[first[0]] and not cut_short)):
            self._alarm("burn_mismatch", f"burn {cards} does not follow the burn procedure",
                        shoe=rec["shoe"])
        self._count([c for c in cards if c != "CUT"], inv, rec)  # the cut card is no card
        inv["burned"] = True

    def _on_irregularity(self, rec: dict[str, Any], inv: dict[str, Any]) -> None:
        kind = rec["kind"]
        if kind in pr.COUNTS_ITS_CARD:
            self._count([rec["card"]], inv, rec)
        elif kind in pr.COUNTS_UNKNOWN:
            inv["unknown"] += 1
        if kind in pr.HOLDS:
            inv["held"] = {"kind": kind, "card": rec["card"]}

    def _on_resolution(self, rec: dict[str, Any], inv: dict[str, Any]) -> None:
        held = inv.get("held")
        if held is None or held != {"kind": rec["kind"], "card": rec["card"]}:
            named = f"{rec['kind']}" + (f" {rec['card']}" if rec["card"] else "")
            was = f"{held['kind']}" + (f" {held['card']}" if held and held["card"] else "") \
                if held else "nothing"
            self._alarm("resolution_mismatch", f"{rec['resolution']} of {named} resolves no "
                        f"such held irregularity (held: {was})",
                        shoe=rec["shoe"], round=rec["round"] + 1)
        inv["held"] = None
        voided = rec["voided_cards"]
        if voided:
            if inv.get("dummy") and voided[0] == inv["dummy"]:
                voided = voided[1:]  # the kept dummy card was counted when it came out
            self._count(voided, inv, rec)
            inv["dummy"] = None
            inv["initial"] = None
        if rec["resolution"] == "keep_dummy":
            inv["dummy"] = rec["card"]

    def _on_initial_cards(self, rec: dict[str, Any], inv: dict[str, Any]) -> None:
        p, b = rec["player"], rec["banker"]
        inv["initial"] = [p[0], b[0], p[1], b[1]]

    def _on_result(self, rec: dict[str, Any], inv: dict[str, Any]) -> None:
        player, banker = rec["player"], rec["banker"]
        where = {"shoe": rec["shoe"], "round": rec["round"]}
        if not inv["burned"] and not inv["partial"]:
            inv["burned"] = True  # one alarm per shoe
            self._alarm("missing_burn", "a round was dealt before the burn", **where)
        if None in player or None in banker or "CUT" in player + banker:
            self._alarm("rules_mismatch", "a round with a card that is no card", **where)
            return
        order = rules.dealing_order(player, banker)
        want = rules.round_outcome(player, banker)
        if rules.redeal(player, banker) != (player, banker):
            self._alarm("rules_mismatch", "the third-card rule deals these cards otherwise",
                        **where)
        elif any(rec[k] != want[k] for k in ("player_total", "banker_total", "winner", "flags")):
            self._alarm("rules_mismatch", f"the shoe says {rec['winner']} {rec['flags']}; the "
                        f"rules say {want['winner']} {want['flags']}", **where)
        elif rec["announcements"] != expected_announcements(want, self.config.variant):
            self._alarm("announcement_mismatch", f"announced {rec['announcements']}", **where)
        if not inv["partial"] and rec["round"] != inv["round"] + 1:
            self._alarm("round_out_of_order", f"round {rec['round']} after {inv['round']}",
                        **where)
        if inv.get("initial") and inv["initial"] != order[:4]:
            self._alarm("initial_cards_mismatch", "the result's first four cards are not the "
                        "initial cards signed before", **where)
        elif not inv.get("initial") and not inv["partial"]:
            self._alarm("missing_initial_cards", "a result with no initial_cards frame before "
                        "it: pair and House Money wagers had no settle point", **where)
        dummy = inv.get("dummy")
        if bool(rec.get("dummy")) != bool(dummy) or (dummy and order[0] != dummy):
            self._alarm("dummy_mismatch", "a dummy hand without a keep-dummy resolution, or "
                        "the other way round", **where)
        self._count(order[1:] if dummy and order[0] == dummy else order, inv, rec)
        inv["round"], inv["initial"], inv["dummy"] = rec["round"], None, None

    def _on_shoe_end(self, rec: dict[str, Any], inv: dict[str, Any]) -> None:
        inv["ended"] = True
        if inv["partial"]:
            return  # its earlier cards were never seen here: the sequence_gap alarm says so
        counted = {c: n for c, n in inv["counts"].items() if n}
        if rec["inventory"] != counted or rec["unknown"] != inv["unknown"]:
            diff = sorted(c for c in set(counted) | set(rec["inventory"])
                          if counted.get(c, 0) != rec["inventory"].get(c, 0))
            self._alarm("inventory_mismatch", f"the shoe's inventory and the frames differ in "
                        f"{diff or 'unknown cards'}", shoe=rec["shoe"])

    def _count(self, cards: Sequence[str | None], inv: dict[str, Any],
               rec: dict[str, Any]) -> None:
        counts, decks = inv["counts"], self.config.decks
        for c in cards:
            if c is None:
                inv["unknown"] += 1
                continue
            counts[c] = counts.get(c, 0) + 1
            if counts[c] > decks:
                self._alarm("inventory_exceeded", f"copy {counts[c]} of {c} in a {decks}-deck "
                            "shoe", shoe=rec.get("shoe"), round=rec.get("round"))

    # ---- alarms --------------------------------------------------------------------------------
    def _require_id(self) -> int:
        assert self._frame_id is not None
        return self._frame_id

    def _alarm(self, kind: str, detail: str, **where: Any) -> None:
        inv = self.state.get("inventory") or {}
        alarm = {"kind": kind, "shoe_id": self.shoe_id,
                 "shoe": where.get("shoe", inv.get("shoe")), "round": where.get("round"),
                 "detail": detail}
        self.store.add_alarm(self._frame_id, self._key_id, self.shoe_id, alarm)
        self.alarms.append(alarm)
        self.counts["alarms"] += 1
        if self.on_alarm:
            self.on_alarm(alarm)

    def summary(self) -> dict[str, Any]:
        s: dict[str, Any] = dict(self.counts)
        s["rejections"] = self.rejections
        s["alarms"] = self.alarms
        return s


def _type_name(f: pr.Frame | None) -> str | None:
    return None if f is None else pr.TYPES.get(f.type, f"0x{f.type:02x}")

"""The validator: verifies every frame (signature, sealing, sequence, digest chain, boot counter)
with the shoe's public keys from the registry, stores everything in the audit log, and hands
every authentic record in sequence to the shoe's accounting (accounts.py: every card out, every
round dealt again with the host's independent rules) and to the watch on what is dealt
(watch.py). Works the same on a live link and on a capture (`sabot
replay`).

Only a frame that fails authentication or sequence is rejected. An authentic frame in sequence is
stored (and so acknowledged) whatever it says: where its content disagrees with the host — a round
the rules deal otherwise, a card beyond the decks, a missing burn, a configuration other than the
registry's — an alarm is stored with it and the audit goes on."""

from __future__ import annotations

import pickle
import secrets
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sabot import protocol as pr
from sabot.audit.accounts import ShoeAccounts
from sabot.audit.cosign import Cosigned, Cosigner
from sabot.audit.reads import UNDONE, Read, Verdict, covered
from sabot.audit.records import (
    COUNTER_LOW,
    LINK_KEY,
    TILT_DETAIL,
    checkpoint_mismatch,
    counter_low,
    stored_log,
)
from sabot.audit.store import AuditStore, open_store
from sabot.audit.watch import Watch
from sabot.protocol import FrameError
from sabot.registry import ShoeEntry

if TYPE_CHECKING:
    from sabot.audit.replay import CaptureWriter

Alarm = dict[str, Any]


class Validator:
    """Verifies one shoe's frames with the public keys of its registry entry: it holds no
    secret."""

    def __init__(self, config: ShoeEntry, store: AuditStore | str,
                 on_record: Callable[[str, dict[str, Any]], None] | None = None,
                 on_alarm: Callable[[Alarm], None] | None = None, watch: bool = True,
                 batch_verify: bool = False, cosigner: Cosigner | None = None) -> None:
        self.config = config
        self.shoe_id = config.shoe_id
        self.store = store if isinstance(store, AuditStore) else open_store(store)
        self.deframer = pr.Deframer()
        self.on_record = on_record
        self.on_alarm = on_alarm
        # True: one signature checked per run of digest-linked frames of a read (docs/PROTOCOL.md
        # "Validator verdicts": sound for the bodies, but a signature damaged on the line is then
        # stored as it came, and audit verify names it). False, the default: every signature.
        self.batch_verify = batch_verify
        self.store.claim(config.shoe_id)  # one validator per shoe, however many write the store
        st = self.store.link(LINK_KEY, config.shoe_id)
        # The link state and the accounts it carries (state["inventory"]): stored after each read
        self.accounts = ShoeAccounts(config, st or {"last_seq": 0, "last_digest": b"",
                                                    "last_boot": 0, "host_counter": 0,
                                                    "inventory": {}}, self._alarm)
        self.anchored = st is not None
        self.resend_until = 0  # after an authentic status, resends up to this seq are expected
        self.resend_from = 0  # ... and from this one: what the shoe still held unacknowledged
        self.status: dict[str, Any] | None = None  # the latest authentic status
        self.statuses = 0  # how many authentic statuses arrived: answers to the link's hellos
        # every frame received is in exactly one of verified, resent, rejected, deferred (met
        # live before the status answering a hello: it comes again) or pending (see summary)
        self.counts = {"frames": 0, "verified": 0, "rejected": 0, "rounds": 0, "irregularities": 0,
                       "resent": 0, "deferred": 0, "alarms": 0}
        self.rejections: list[dict[str, Any]] = []
        self.alarms: list[Alarm] = []
        self.pending: pr.Frame | None = None  # an unsigned frame waiting for its seal
        # a pending frame the shoe showed it sends again (with its seal), until its seq comes
        self.held: pr.Frame | None = None
        self._covered: set[bytes] = set()  # this read's frames a checked signature covers
        self._keys: dict[int, Any] = {}
        self._frame_id: int | None = None
        self._key_id = 0
        self._deferred: list[tuple[str, str]] = []  # alarms found before their frame is stored
        self._tilt_seen = False
        self.live = False  # set by the host link: statuses answer our hellos
        self.awaiting_status = False  # set by the host link at each (re)connection
        self._stale: set[bytes] = set()  # distinct statuses older than the store (see _verify)
        # A replay anchored past frames it never saw (a capture that begins after them): the
        # shoe's resend of one of those, authentic and asked for, is taken as a resend.
        self.unseen_to = 0
        # With a capture (audit/replay.py) every read this validator takes is kept, with a mark
        # wherever the link changed how it is read (a connection: live, awaiting_status).
        self.capture: CaptureWriter | None = None
        self.run = secrets.token_hex(6)  # this validator in a capture's marks
        self._captured: tuple[bool, bool] | None = None  # (live, awaiting_status) last kept
        # Alarms on what is dealt (watch.py): player_advantage, repeated_sequence.
        self.watch = (Watch(self.store, config.shoe_id, self.config, self.state, self._alarm)
                      if watch else None)
        # The shoe's log as this store holds it (firmware/shoe/tree.py): the leaf hashes of its
        # chained frames from seq 1 on, as long as none is missing; a checkpoint within them is
        # checked against them
        self.log = stored_log(self.store, config.shoe_id)[0]
        self.checkpoint: pr.Frame | None = None  # the newest checkpoint that held
        # Witnesses (audit/cosign.py): each checkpoint that holds goes to them once stored; what
        # they answer is stored at the start of a later batch
        self.cosigner = cosigner
        self._held: tuple[int, pr.Frame] | None = None  # a checkpoint that held in this batch
        # the newest cosigned size -> its witnesses (each value replaced, never changed in place)
        self.witnessed: dict[int, list[str]] = {}
        # a witnessed table's rounds stored past its newest cosigned checkpoint (rounds_beyond),
        # oldest first
        self.round_seqs: deque[int] = deque()
        # operator entries owed to records still to come (link/operate.py), oldest first: each
        # answers a record (kind, record) with (done with: owed no more, its entry or None); an
        # entry is stored in the batch of its record's frame, after the read's rows (the tuple
        # replaced, never changed in place: a read the store refuses puts it back)
        self.owed: tuple[Callable[[str, dict[str, Any]],
                                  tuple[bool, dict[str, Any] | None]], ...] = ()
        self._entries: list[tuple[dict[str, Any], int]] = []  # this read's, with their seqs

    @property
    def state(self) -> dict[str, Any]:
        """The link state stored after each read: last seq, digest and boot, the host counter,
        and the shoe's accounts (`inventory`)."""
        return self.accounts.state

    @state.setter
    def state(self, st: dict[str, Any]) -> None:
        self.accounts.state = st

    # ---- intake --------------------------------------------------------------------------------
    def receive(self, data: bytes) -> list[Verdict]:
        """Bytes from the link; [(frame or None, verdict, reason)] for each frame decided (an
        unsigned frame is decided when the next signed frame arrives: it seals it or not).

        The frames of one read are stored in one durable transaction (a group commit); the link
        acknowledges them only after this returns, so an acknowledged frame is always on disk.
        A read the store refuses is not taken at all (nor kept in a capture)."""
        read = self.take(data)
        if read.parsed:
            try:
                self.store.begin()  # a server lost here refuses the read, as at its commit
                self.stage(read)
                self.store.commit()
            except BaseException:
                self.store.rollback()
                self.undo(read)
                raise
        self.stored(read)
        return read.verdicts

    def take(self, data: bytes) -> Read:
        """A read's frames, parsed, with what to go back to should the store not keep them."""
        if self.capture is not None and self._captured != (self.live, self.awaiting_status):
            self.capture.mark(self)  # the link (re)connected: a replay reads on as this did
        read = Read(data, (bytes(self.deframer.buf), self.deframer.noise))
        encoded = self.deframer.feed(data)
        if not encoded:
            return read
        seen = max(self.witnessed, default=0)  # rounds a witness has seen are kept no more
        while self.round_seqs and self.round_seqs[0] <= seen:
            self.round_seqs.popleft()
        # a copy to go back to (of plain values: pickle copies them a third of deepcopy's time)
        read.saved = pickle.loads(pickle.dumps(self.state, pickle.HIGHEST_PROTOCOL))
        read.counted = (dict(self.counts), len(self.rejections), len(self.alarms),
                        len(self.round_seqs))
        read.fields = {k: getattr(self, k) for k in UNDONE}
        read.kept = (set(self._stale), list(self._deferred), dict(self.witnessed))
        read.log = len(self.log.hashes)
        read.watched = self.watch.snapshot() if self.watch is not None else None
        read.parsed = [self._parse(e) for e in encoded]
        read.cosigned = self.cosigner.take() if self.cosigner is not None else []
        return read

    def stage(self, read: Read) -> None:
        """The read's frames decided and queued in the store's open batch (store.begin() before,
        store.commit() after: by the caller, who may commit other validators' reads with it)."""
        if self.batch_verify:
            self._covered = self._cover([f for _, f, _ in read.parsed if f is not None])
        self._entries = []
        try:
            self._add_cosignatures(read.cosigned)
            read.verdicts = [v for p in read.parsed for v in self._one(*p)]
            self.store.save_link(LINK_KEY, self.shoe_id, self.state)
            for entry, seq in self._entries:  # after the read's rows, as a read of its own
                self.store.add_operation(entry, self.shoe_id, seq)
        finally:
            self._covered = set()

    def undo(self, read: Read) -> None:
        """Back to before the read (the store kept nothing of it): the shoe sends it again."""
        if not read.parsed:
            return
        if self.cosigner is not None:
            self.cosigner.put_back(read.cosigned)
        self._held = None
        self.state = read.saved
        for k, value in read.fields.items():
            setattr(self, k, value)
        stale, deferred, witnessed = read.kept
        self._stale, self._deferred, self.witnessed = stale, deferred, witnessed
        self.deframer.buf, self.deframer.noise = bytearray(read.torn[0]), read.torn[1]
        counts, rejections, alarms, rounds = read.counted
        self.counts = counts
        del self.rejections[rejections:], self.alarms[alarms:]
        while len(self.round_seqs) > rounds:
            self.round_seqs.pop()
        self.log.cut(read.log)
        if self.watch is not None:
            self.watch.restore(read.watched)
        read.verdicts = []

    def stored(self, read: Read) -> None:
        """The read is durable: kept in the capture, and a checkpoint that held to the
        witnesses."""
        self._took(read.data)
        self._submit()

    def _add_cosignatures(self, cosigned: list[Cosigned]) -> None:
        for frame_id, size, lines in cosigned:
            for witness, line in sorted(lines.items()):
                self.store.add_cosignature(frame_id, self.shoe_id, size, witness, line)
            self.witnessed[size] = sorted(set(self.witnessed.get(size, [])) | set(lines))
        newest = max(self.witnessed, default=0)  # only the newest is read: the rest let go
        self.witnessed = {newest: self.witnessed[newest]} if self.witnessed else {}

    def rounds_beyond_witnesses(self) -> int:
        """The rounds stored this session past the newest checkpoint a witness cosigned (all of
        them while none has): what a witnessed table may hold only so many of. (Read from the
        recording watch's thread: it changes nothing.)"""
        cosigned = max(list(self.witnessed), default=0)  # (copies taken whole, under the GIL)
        return sum(1 for seq in list(self.round_seqs) if seq > cosigned)

    def _submit(self) -> None:
        """The checkpoint that held in the batch just stored, to the witnesses."""
        held, self._held = self._held, None
        if held is not None and self.cosigner is not None:
            fid, f = held
            self.cosigner.submit(fid, pr.checkpoint_note(f, self._public_key(f)), f.seq,
                                 self.log.hashes)

    def store_cosignatures(self, wait: float = 0.0) -> None:
        """Store what the witnesses answered (waiting up to `wait` seconds for those still
        asked): at the end of a session, where no batch comes to carry them."""
        if self.cosigner is None:
            return
        if wait:
            self.cosigner.wait(wait)
        cosigned = self.cosigner.take()
        if not cosigned:
            return
        try:
            self.store.begin()
            self._add_cosignatures(cosigned)
            self.store.commit()
        except BaseException:
            self.store.rollback()
            self.cosigner.put_back(cosigned)
            raise

    def _took(self, data: bytes) -> None:
        if self.capture is not None:
            self.capture.write(data)
            self._captured = (self.live, self.awaiting_status)

    def finish(self) -> list[Verdict]:
        """The end of a capture: an unsigned frame nothing sealed is rejected, so is a frame the
        capture ends inside (`truncated`), and a shoe that started and never ended is an
        alarm."""
        out = []
        self.store.begin()
        for p in (self.held, self.pending):
            if p is not None:
                out.append(self._reject(p.raw, p, "unsealed"))
        self.held = self.pending = None
        if self.deframer.buf:
            self.counts["frames"] += 1
            out.append(self._reject(bytes(self.deframer.buf), None, "truncated"))
            self.deframer.buf.clear()
        if self.watch is not None:  # a repeated run the capture ends in is reported now
            self._frame_id = None
            self.watch.finish()
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
        """The frames of one read whose bodies one checked signature authenticates (reads.py)."""
        def verified(f: pr.Frame) -> bool:
            try:
                return pr.verify(self._public_key(f), f)
            except FrameError:
                return False

        return covered([f for f in frames if f.shoe_id == self.shoe_id], verified)

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
        h = self.held
        if h is not None and ((f.type in pr.CHAINED and f.seq >= h.seq and not self._defers(f))
                              or (f.type == pr.T_STATUS and f.seq < h.seq)):
            # its seq again: the same bytes (the copy held is deferred, this one goes on to its
            # seal) or other bytes in its place (it was not the shoe's: unsealed); or a status
            # of the shoe saying it never made that seq (unsealed)
            self.held = None
            out.append(self._deferred_copy(h) if not f.signed and f.raw == h.raw
                       else self._reject(h.raw, h, "unsealed"))
        p = self.pending
        if p is not None and not f.signed and f.raw == p.raw:
            # The same unsigned frame again (resent after a reconnect, before its seal came): the
            # later copy is the one its seal decides; the earlier is deferred, as any frame met
            # again among the resends. A different unsigned frame still leaves p unsealed.
            self.pending = f
            return [*out, self._deferred_copy(p)]
        if p is not None and self.held is None and f.type in pr.CHAINED and (
                (f.seq < p.seq and ((self.live and self.awaiting_status)
                                    or self.resend_from <= p.seq <= self.resend_until))
                or (f.seq > p.seq + 1 and self._defers(f))):
            # The shoe shows it sends it again, its seal after it: an older frame around a
            # reconnection (it resends from before it, as its status said), or a newer one met
            # live before the status answering a hello (it went on while no link listened).
            # Held until its seq comes again, then decided.
            self.held, self.pending, p = p, None, None
        if p is not None and not (f.signed and f.type not in pr.CHAINED and (
                f.seq != p.seq or f.type == pr.T_CHECKPOINT)):
            # (a status or integrity answer naming another frame says nothing of this one: its
            # successor, still on its way, decides; nor does a checkpoint, whose signature
            # covers its note, not its header's chain)
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

    def _deferred_copy(self, p: pr.Frame) -> Verdict:
        """An unsigned frame's copy not taken: another copy of it is on its way."""
        self.store.add_frame(p.raw, p, "deferred", None, _type_name(p))
        self.counts["deferred"] += 1
        return p, "deferred", None

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
            self.counts["deferred"] += 1
            return frame, verdict, None
        self._key_id = frame.key_id
        self._frame_id = self.store.add_frame(frame.raw, frame, verdict, None, _type_name(frame))
        if chained:
            self.log.add(frame.seq - 1, frame.raw)
        elif frame.type == pr.T_CHECKPOINT and self.checkpoint is frame:
            self._held = (self._frame_id, frame)
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
                # Older than what is stored: a recorded status played back on the cable, or a
                # shoe behind the store. Refused and counted either way; the audit goes on (the
                # first contact names a shoe that answers only so: behind_store).
                if not self.statuses:
                    self._stale.add(f.raw)
                raise FrameError("replayed")
            self.status = pr.decode_status(f.payload, self.config.game == "blackjack")
            self.awaiting_status = False
            self.statuses += 1
            first = self.status["unacked_from"]
            if first:  # the shoe resends what it held unacknowledged, nothing acked before
                self.resend_from = first if not self.resend_until else min(self.resend_from,
                                                                             first)
            self.resend_until = max(self.resend_until, self.status["unacked_to"])
            before = st["host_counter"]
            st["host_counter"] = self.status["host_counter"]  # the element's counter: exact
            self._after_status(self.status, before)
            return "accepted", False
        if f.type == pr.T_INTEGRITY:
            return "accepted", False  # answers a verify-firmware challenge; checked there
        if f.type == pr.T_CHECKPOINT:
            self._checkpoint(f)
            return "accepted", False
        if f.type not in pr.CHAINED:
            raise FrameError("unknown_type")
        if not self.anchored and self._defers(f):
            # Met live before the status answering our hello: the shoe may be mid-way through
            # resending older frames. Anchor at what its status says it holds, not here (this
            # frame comes again after the status); never store past frames not yet seen.
            return "deferred", False
        if self.anchored and f.seq <= st["last_seq"]:
            # Already stored: a resend we asked for (after our hello) is expected, anything else is
            # a replay.
            stored = self.store.stored_raw(f.key_id, f.shoe_id, f.seq)
            same = stored == f.raw or (stored is None and f.seq <= self.unseen_to)
            if same and self.resend_from <= f.seq <= self.resend_until:
                return "resent", False
            raise FrameError("replayed")
        if f.boot < st["last_boot"]:
            raise FrameError("boot_backwards")
        if self.anchored and self._defers(f):
            # Just (re)connected: frames the shoe sent while nobody listened come again after the
            # status answering our hello; a newer one seen before that is not a gap yet.
            return "deferred", False
        if self.anchored and f.seq != st["last_seq"] + 1:
            raise FrameError("sequence_gap")
        if self.anchored and st["last_digest"] and f.chain != st["last_digest"]:
            raise FrameError("chain_broken")
        if not self.anchored and f.seq != 1:
            self._gap(1, f.seq - 1, "before this validator first met the shoe")
            self.unseen_to = f.seq - 1
        self.anchored = True
        self.resend_until = 0  # resends come oldest first, before anything new: window closed
        st["last_seq"], st["last_digest"], st["last_boot"] = f.seq, f.digest, f.boot
        return "accepted", True

    def _defers(self, f: pr.Frame) -> bool:
        """Whether a chained frame met now waits for the status answering the link's hello (it
        comes again among the resends after it): met live before any status, or, anchored,
        newer than the next seq while that status is awaited."""
        if not self.anchored:
            return self.live and self.status is None
        return f.seq > self.state["last_seq"] + 1 and self.live and self.awaiting_status

    def _after_status(self, status: dict[str, Any], counted: int) -> None:
        """The shoe says what it still holds. Frames it no longer holds — acknowledged to a host
        whose state this validator does not have — can never be seen here: re-anchor after them,
        with an alarm, instead of rejecting every later frame as a gap."""
        st = self.state
        # one alarm per tilt this validator sees begin (audit verify derives the same from the
        # stored statuses: after a status that did not say tilt, or as its first)
        if status["integrity"] == "tilt" and not self._tilt_seen:
            self._deferred.append(("tilt", TILT_DETAIL))
        self._tilt_seen = status["integrity"] == "tilt"
        # once, as the counter passes COUNTER_LOW (`counted`: the count before this status)
        if counted < COUNTER_LOW <= status["host_counter"]:
            self._deferred.append(("counter_low", counter_low(status["host_counter"])))
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
        self.accounts.mark_partial()
        self._deferred.append(("sequence_gap", f"frames {first}..{last} were never seen here "
                               f"({why})"))

    # ---- content: stored, then accounted (accounts.py) and watched (watch.py) ----------------
    def _account(self, f: pr.Frame, decoded: tuple[str, dict[str, Any]]) -> None:
        kind, rec = decoded
        self.store.add_record(f, self._require_id(), kind, rec)
        if self.owed:
            self._settle_owed(kind, rec, f.seq)
        self.accounts.account(kind, rec)
        if kind == "result" or (kind == "blackjack_result" and not rec["voided"]):
            self.counts["rounds"] += 1
            if self.config.witness_bound is not None:
                self.round_seqs.append(f.seq)
        elif kind == "irregularity":
            self.counts["irregularities"] += 1
        if self.watch is not None:  # the hook: alarms on the accounted shoe (watch.py)
            self.watch.after(f.seq, kind, rec, self.state["inventory"])
        if self.on_record:
            self.on_record(kind, rec)

    def _settle_owed(self, kind: str, rec: dict[str, Any], seq: int) -> None:
        """A record each owed entry is asked about, oldest first, until one takes it as its
        command's: those done with (theirs stored, or their hold resolved otherwise) owed no
        more."""
        keep, taken = [], False
        for owe in self.owed:
            done, entry = (False, None) if taken else owe(kind, rec)
            if entry is not None:
                self._entries.append((entry, seq))
                taken = True
            if not done:
                keep.append(owe)
        self.owed = tuple(keep)

    # ---- alarms --------------------------------------------------------------------------------
    def _require_id(self) -> int:
        assert self._frame_id is not None
        return self._frame_id

    def _checkpoint(self, f: pr.Frame) -> None:
        """A checkpoint the shoe signed: its root against the log of the frames stored here,
        when they are all here (a store that met the shoe later, or lost frames, cannot say)."""
        root = self.log.root_at(f.seq)
        if root is None:
            return
        if root != f.payload:
            self._deferred.append(("checkpoint_mismatch", checkpoint_mismatch(f.seq)))
        elif self.checkpoint is None or f.seq > self.checkpoint.seq:
            self.checkpoint = f  # (one of a size already held, played again: not sent again)

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

    def behind_store(self) -> str | None:
        """Why no status came, when the shoe answered this validator only with statuses older
        than its store (distinct ones: a genuine shoe's, not one recording played again)."""
        if self.statuses or len(self._stale) < 2:
            return None
        stale = max(pr.parse(raw).seq for raw in self._stale)
        return (f"shoe {self.shoe_id:#010x} says its newest frame is seq {stale} but this store "
                f"already holds up to seq {self.state['last_seq']}: a re-provisioned shoe or an "
                "altered store; validate it into a new database")

    def summary(self) -> dict[str, Any]:
        """The counts (frames = verified + resent + rejected + deferred + pending: `pending`, the
        unsigned frames still waiting for their seal, one held for its resend among them),
        rejections and alarms."""
        s: dict[str, Any] = dict(self.counts)
        s["pending"] = int(self.pending is not None) + int(self.held is not None)
        # the newest checkpoint of the shoe's log that held against the stored frames: its size
        s["checkpoint"] = self.checkpoint.seq if self.checkpoint is not None else None
        # the newest checkpoint witnesses cosigned in this session: {size, witnesses}
        if self.witnessed:
            size = max(self.witnessed)
            s["cosigned"] = {"size": size, "witnesses": self.witnessed[size]}
        else:
            s["cosigned"] = None
        s["rejections"] = self.rejections
        s["alarms"] = self.alarms
        return s


def _type_name(f: pr.Frame | None) -> str | None:
    return None if f is None else pr.TYPES.get(f.type, f"0x{f.type:02x}")

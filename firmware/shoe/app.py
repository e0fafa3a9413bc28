"""The dealing shoe: sensor -> card -> dealing state -> table decision, then (outside the card
path) events -> signed frames (frames.py) -> outbox and flash log -> host link; host commands come
in through the command port. Hardware comes in as plain calls and two injected objects: `link`
(write(bytes)) and `indicators`: show(phase, due, position, shoe_no, round_no, alarm, reveal) —
alarm the held irregularity's kind (0: none), reveal 1 while squeezed hands await the dealer's
reveal — and announce(player_total, banker_total, winner, announcements) when a round is
complete."""

import struct

from shoe import cobs, frames, integrity
from shoe.cards import CUT, NO_CARD
from shoe.dealing import (
    EV_BURN,
    EV_INITIAL,
    EV_IRREGULARITY,
    EV_RESOLUTION,
    EV_RESULT,
    EV_SHOE_END,
    EV_SHOE_START,
    PH_BURN_FIRST,
    PH_ENDED,
    PH_HELD,
    Shoe,
)
from shoe.decision import DRAGON7, LUCKY_SIX, PANDA8, WINNER_MASK, WINNER_TIE, outcome, total
from shoe.outbox import Outbox
from shoe.port import REJ_NOT_NOW, REJ_UNKNOWN, CommandPort
from shoe.sensor import READ_CARD, READ_CUT, READ_FOREIGN, READ_NONE, SensorDecoder
from shoe.store import (
    R_ACK,
    R_CHECKPOINT,
    R_FRAME,
    R_INPUT,
    RecordLog,
    frames_in,
    load_identity,
    next_boot,
)

try:
    from micropython import const
except ImportError:  # CPython (tests): const is only a compiler hint
    def const(x):  # type: ignore[misc]
        return x

# Inputs, as logged: kind, arg, arg2
IN_CARD = const(1)
IN_TWO_CARDS = const(2)
IN_FOREIGN = const(3)
IN_CONFIRM = const(4)
IN_EMPTY = const(5)
IN_RESOLVE = const(6)  # arg: resolution code, arg2: 0 supervisor button, 1 host command
IN_NEW_SHOE = const(7)
IN_REVEAL = const(8)  # squeeze: the dealer releases the hands' identities to the link

_CHECKPOINT = ">HI8sII"  # shoe, seq, chain, acked, host counter: what a compaction carries over
_MAX_SEED = const(64)


class ShoeApp:
    def __init__(self, flash, link, indicators, decks=8, min_confidence=0x80, code_root=None,
                 code_skip=()):
        self.flash = flash
        self.link = link
        self.indicators = indicators
        self.min_confidence = min_confidence
        self.shoe = Shoe(decks)
        self.decoder = SensorDecoder()
        self.latch = READ_NONE
        self.latch_card = NO_CARD
        self.latch_conf = 0
        self.log = RecordLog(flash)
        self.outbox = Outbox(self.log)
        self.boot = 0
        self.maintenance = False  # an authenticated maintenance command: hand the port to the REPL
        raw = flash.read("variant")
        self.variant = raw[0] if raw else frames.V_DEFAULT
        self.code_root = code_root
        self.code_skip = code_skip
        self.integrity = frames.INTEGRITY_UNCHECKED
        self.hold_from = 0  # squeeze: frames from this seq wait for the dealer's reveal (0: none)
        self.released_from = 0
        identity = load_identity(flash)
        self.identity = identity
        self.port = CommandPort(identity)

    # ---- start-up ----------------------------------------------------------------------------
    def start(self):
        if not self.identity:
            raise ValueError("shoe not provisioned: no key in flash (run `sabot provision`)")
        if self.code_root is not None:
            # The board's main checked the code before importing this module (see shoe/tilt.py).
            self.integrity = frames.INTEGRITY_OK
        self.boot = next_boot(self.flash)
        key_id, shoe_id, _ = self.identity
        self.outbox.signer = frames.Signer(self.port.key, key_id, shoe_id, self.boot)
        empty = True
        for rtype, payload in self.log.records():
            self._replay(rtype, payload)
            empty = False
        if empty:
            self._input(IN_NEW_SHOE)
        self.show()

    def _replay(self, rtype, payload):
        if rtype == R_INPUT:
            self._apply(payload[0], payload[1], payload[2])
            self.shoe.events = 0
        if rtype == R_INPUT or rtype == R_FRAME:
            for f in frames_in(rtype, payload):
                self.outbox.remember(f)
                self._hold_if_secret(f)
        elif rtype == R_ACK:
            acked, counter = struct.unpack(">II", payload)
            self._acked(acked, counter)
        elif rtype == R_CHECKPOINT:
            shoe_no, seq, chain, acked, counter = struct.unpack(_CHECKPOINT, payload)
            self.shoe.shoe_no = shoe_no
            self.outbox.seq, self.outbox.chain, self.outbox.acked = seq, chain, acked
            self.port.counter = counter

    def _hold_if_secret(self, frame):
        """Squeeze (631a.9(d)): a frame naming a hand's cards waits for the reveal, and so does all
        after it."""
        if self.variant & frames.V_SQUEEZE and not self.hold_from and frames.names_cards(frame):
            self.hold_from = frames.seq_of(frame)

    def _acked(self, seq, counter):
        self.outbox.ack(seq)
        self.port.counter = max(self.port.counter, counter)

    def unacked(self, from_seq=0):
        return self.outbox.unacknowledged(from_seq)

    # ---- hardware inputs -----------------------------------------------------------------------
    def sensor_byte(self, b):
        """A byte from the recognition module's UART. Allocation-free."""
        r = self.decoder.feed(b)
        if r == READ_NONE:
            return
        if self.latch != READ_NONE:
            # A second read before the exit sensor saw the first card leave: two cards at once.
            self._input(IN_TWO_CARDS, self.latch_card if self.latch == READ_CARD else NO_CARD)
        self.latch = r
        self.latch_card = self.decoder.card
        self.latch_conf = self.decoder.confidence

    def card_path(self):
        """The exit sensor fired: decide what left the shoe. Allocation-free; returns the input to
        log as one small int, kind << 8 | card (a tuple would allocate), for `commit_card`."""
        r = self.latch
        self.latch = READ_NONE
        if r == READ_FOREIGN:
            self.shoe.foreign()
            return IN_FOREIGN << 8 | NO_CARD
        if r == READ_CUT:
            card = CUT
        elif r == READ_CARD and self.latch_conf >= self.min_confidence:
            card = self.latch_card
        else:  # exit without a read, an unreadable card, or too little confidence
            card = NO_CARD
        self.shoe.card_out(card)
        return IN_CARD << 8 | card

    def commit_card(self, done):
        """The card path's decision, made durable and sent: frames, flash log, link."""
        self._commit(done >> 8, done & 0xFF, 0)

    def exit_edge(self):
        self.commit_card(self.card_path())

    def confirm_button(self):
        self._input(IN_CONFIRM)

    def empty_sensor(self):
        self._input(IN_EMPTY)

    def supervisor(self, code):
        self._input(IN_RESOLVE, code, 0)

    def reveal_button(self):
        """Squeeze: the players have seen their cards; the withheld frames may go to the host."""
        if self.hold_from:
            self._input(IN_REVEAL)

    # ---- inputs -> frames -> flash -> link ---------------------------------------------------
    def _apply(self, kind, arg=0, arg2=0):
        s = self.shoe
        if kind == IN_CARD:
            s.card_out(arg)
        elif kind == IN_TWO_CARDS:
            s.two_cards(arg)
        elif kind == IN_FOREIGN:
            s.foreign()
        elif kind == IN_CONFIRM:
            s.confirm()
        elif kind == IN_EMPTY:
            s.empty()
        elif kind == IN_RESOLVE:
            return s.resolve(arg)
        elif kind == IN_NEW_SHOE:
            s.new_shoe()
        elif kind == IN_REVEAL:
            self.released_from = self.hold_from
            self.hold_from = 0
        return True

    def _input(self, kind, arg=0, arg2=0):
        if kind == IN_NEW_SHOE:
            self._compact()
        ok = self._apply(kind, arg, arg2)
        self._commit(kind, arg, arg2)
        return ok

    def _commit(self, kind, arg, arg2):
        out = self._frames_for_events(arg2)
        payload = bytes((kind, arg, arg2)) + b"".join(bytes((len(f),)) + f for f in out)
        self.log.append(R_INPUT, payload)
        if kind == IN_REVEAL:  # everything withheld goes now, in order
            out = self.unacked(self.released_from)
        for f in out:
            self._send(f)
        self.show()

    def _chained(self, ftype, payload):
        f = self.outbox.chained(ftype, payload)
        self._hold_if_secret(f)
        return f

    def _frames_for_events(self, source):
        s = self.shoe
        ev = s.events
        s.events = 0
        out = []
        no, rnd = s.shoe_no, s.round_no
        if ev & EV_SHOE_START:
            body = frames.shoe_start(no, s.decks, self.variant)
            out.append(self._chained(frames.T_SHOE_START, body))
        if ev & EV_BURN:
            out.append(self._chained(frames.T_BURN, frames.burn(no, rnd, s.burned, s.n_burned)))
        if ev & EV_RESOLUTION:
            body = frames.resolution(no, rnd, s.resolution, s.ir_kind, s.ir_card, source, s.voided,
                                     s.player, s.banker)
            out.append(self._chained(frames.T_RESOLUTION, body))
        if ev & EV_IRREGULARITY:
            body = frames.irregularity(no, rnd, s.ir_kind, s.ir_card, s.ir_position)
            out.append(self._chained(frames.T_IRREGULARITY, body))
        if ev & EV_INITIAL:
            body = frames.initial(no, rnd, s.player, s.banker)
            out.append(self._chained(frames.T_INITIAL, body))
        if ev & EV_RESULT:
            o = outcome(s.player, s.np, s.banker, s.nb)
            ann = self._announcement(o)
            body = frames.result(no, rnd, s.player, s.np, s.banker, s.nb, s.dummy_done, o, ann)
            out.append(self._chained(frames.T_RESULT, body))
            self.indicators.announce(total(s.player, s.np), total(s.banker, s.nb), o & WINNER_MASK,
                                     ann)
        if ev & EV_SHOE_END:
            body = frames.shoe_end(no, rnd, s.position, s.inventory, s.unknown)
            out.append(self._chained(frames.T_SHOE_END, body))
        return out

    def _announcement(self, o):
        """What the dealer must announce besides the final counts, for this game variant."""
        a = frames.A_TIE_HAND if o & WINNER_MASK == WINNER_TIE else 0
        if self.variant & frames.V_EZ:
            a |= (frames.A_DRAGON7 if o & DRAGON7 else 0) | (frames.A_PANDA8 if o & PANDA8 else 0)
        if self.variant & frames.V_COMMISSION_FREE and o & LUCKY_SIX:
            a |= frames.A_LUCKY_SIX
        return a

    def _compact(self):
        """At a new shoe the log restarts: the state it carries over, then every unacknowledged
        frame."""
        o = self.outbox
        checkpoint = struct.pack(_CHECKPOINT, self.shoe.shoe_no, o.seq, o.chain, o.acked,
                                 self.port.counter)

        def keep():
            yield R_CHECKPOINT, checkpoint
            for f in o.unacknowledged():
                yield R_FRAME, f

        self.log.replace(keep())

    def _send(self, frame):
        if self.hold_from and frames.is_chained(frame) and frames.seq_of(frame) >= self.hold_from:
            return  # squeeze: not before the reveal
        try:
            self.link.write(cobs.encode(frame))
        except OSError:
            pass  # no host: the frame stays in the outbox until acknowledged

    def show(self):
        s = self.shoe
        alarm = s.ir_kind if s.phase == PH_HELD else 0
        self.indicators.show(s.phase, s.due(), s.position, s.shoe_no, s.round_no, alarm,
                             1 if self.hold_from else 0)

    # ---- host commands -------------------------------------------------------------------------
    def host_bytes(self, data, n=-1):
        self.port.feed(data, len(data) if n < 0 else n, self)

    def refuse(self, reason, ftype, counter):
        """A refused command is itself a chained frame, so the refusal reaches the audit log."""
        payload = frames.command_rejected(reason, ftype, counter)
        f = self._chained(frames.T_COMMAND_REJECTED, payload)
        self.log.append(R_FRAME, f)
        self._send(f)

    def command(self, ftype, counter, payload):
        """An authentic host command (the port checked key, MAC and, where it counts, the
        counter)."""
        if ftype == frames.C_INTEGRITY:
            if 1 <= len(payload) <= _MAX_SEED:
                # A regulator's challenge: HMAC(seed, code). Fresh seeds make recorded answers
                # useless.
                answer = frames.integrity_answer(self.integrity, self._seeded(payload))
                self._send(self._unchained(frames.T_INTEGRITY, answer))
            return
        if ftype == frames.C_HELLO:
            # Any authentic hello (even a replayed one) only makes the shoe say where it stands and
            # resend what the host has not acknowledged.
            self.send_status()
            for f in self.unacked():
                self._send(f)
            return
        s = self.shoe
        if ftype == frames.C_ACK and len(payload) == 4:
            self.outbox.ack(struct.unpack(">I", payload)[0])
        self.log.append(R_ACK, struct.pack(">II", self.outbox.acked, counter))
        if ftype == frames.C_ACK and len(payload) == 4:
            return
        if ftype == frames.C_RESOLVE and len(payload) == 1:
            if not self._input(IN_RESOLVE, payload[0], 1):
                self.refuse(REJ_NOT_NOW, ftype, counter)
        elif ftype == frames.C_MAINTENANCE:
            if s.in_round() or s.phase == PH_HELD:
                self.refuse(REJ_NOT_NOW, ftype, counter)  # never mid-round or with a round held
            else:
                self.maintenance = True
        elif ftype == frames.C_NEW_SHOE:
            if s.phase == PH_ENDED or (s.phase == PH_BURN_FIRST and not s.position):
                self._input(IN_NEW_SHOE)
            else:
                self.refuse(REJ_NOT_NOW, ftype, counter)
        else:
            self.refuse(REJ_UNKNOWN, ftype, counter)

    def _seeded(self, seed):
        if self.code_root is None:
            return bytes(32)  # a development run has no certified code tree to vouch for
        return integrity.seeded(bytes(seed), self.code_root, self.code_skip)

    def _unchained(self, ftype, payload):
        o = self.outbox
        return o.signer.frame(o.seq, o.chain, ftype, payload)

    def send_status(self):
        s = self.shoe
        o = self.outbox
        pending = o.pending()
        payload = frames.status(s.phase, s.shoe_no, s.round_no, s.position, s.due(),
                                self.port.counter, o.acked, o.acked + 1 if pending else 0,
                                o.seq if pending else 0, self.integrity, self.port.refused)
        self._send(self._unchained(frames.T_STATUS, payload))

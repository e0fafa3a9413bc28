"""The shoe application: sensor -> card -> dealing state -> table decision, then (outside the card path)
events -> signed frames -> flash log -> host link. Hardware comes in as plain calls and two injected
objects: `link` (write(bytes)) and `indicators`: show(phase, due, position, shoe_no, round_no, alarm,
reveal) — alarm the held irregularity's kind (0: none), reveal 1 while squeezed hands await the dealer's
reveal — and announce(player_total, banker_total, winner, announcements) when a round is complete."""

import struct

from shoe import cobs, frames
from shoe.cards import CUT, NO_CARD
from shoe.dealing import (
    EV_BURN, EV_INITIAL, EV_IRREGULARITY, EV_RESOLUTION, EV_RESULT, EV_SHOE_END, EV_SHOE_START,
    PH_BURN_FIRST, PH_ENDED, PH_HELD, Shoe,
)
from shoe.decision import DRAGON7, LUCKY_SIX, PANDA8, WINNER_MASK, WINNER_TIE, outcome, total
from shoe.hmac256 import HmacKey, equal
from shoe.sensor import READ_CARD, READ_CUT, READ_FOREIGN, READ_NONE, READ_UNREADABLE, SensorDecoder
from shoe.store import R_ACK, R_CHECKPOINT, R_FRAME, R_INPUT, RecordLog, frames_in, load_identity

# Inputs, as logged: kind, arg, arg2
IN_CARD = 1
IN_TWO_CARDS = 2
IN_FOREIGN = 3
IN_CONFIRM = 4
IN_EMPTY = 5
IN_RESOLVE = 6  # arg: resolution code, arg2: 0 supervisor button, 1 host command
IN_NEW_SHOE = 7
IN_REVEAL = 8  # squeeze: the dealer releases the hands' identities to the link

# Variant id (flash file "variant", one byte, signed in every shoe_start frame)
# bits 0-1: game, 0 minibaccarat, 1 midibaccarat, 2 baccarat
V_EZ = 4
V_COMMISSION_FREE = 8
V_SQUEEZE = 16
V_DEFAULT = 2

# Announcement bits in a result frame (627a.11(a), 631a.12(a), 631c.5(e))
A_TIE_HAND = 1
A_DRAGON7 = 2
A_PANDA8 = 4
A_LUCKY_SIX = 8

# Why a host command was refused (T_COMMAND_REJECTED payload)
REJ_BAD_MAC = 1
REJ_REPLAYED = 2
REJ_NOT_FOR_THIS_SHOE = 3
REJ_NOT_NOW = 4
REJ_UNKNOWN = 5

MAX_RX = 256
OUTBOX_RAM = 16  # newest unacknowledged frames kept in RAM; older ones are read back from the flash log


def _seq(frame):
    return struct.unpack_from(">I", frame, 10)[0]


INTEGRITY_UNCHECKED = 0  # a development run from source: no MANIFEST to check against
INTEGRITY_OK = 1  # (a failed check never reaches this module: see shoe/tilt.py)


class ShoeApp:
    def __init__(self, flash, link, indicators, decks=8, min_confidence=0x80, code_root=None, code_skip=()):
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
        self.seq = 0
        self.chain = bytes(8)
        self.outbox = []  # the newest frames not yet acknowledged, oldest first (each carries its seq)
        self.acked = 0
        self.host_counter = 0
        self.boot = 0
        self.rx = bytearray()
        self.maintenance = False  # set by an authenticated maintenance command: hand the port to the REPL
        raw = flash.read("variant")
        self.variant = raw[0] if raw else V_DEFAULT
        self.code_root = code_root
        self.code_skip = code_skip
        self.integrity = INTEGRITY_UNCHECKED
        self.hold_from = 0  # squeeze: frames from this seq on wait for the dealer's reveal (0: none)
        self.released_from = 0
        self.identity = load_identity(flash)
        if self.identity:
            self.key_id, self.shoe_id, key = self.identity
            self.key = HmacKey(key)

    # ---- start-up ----------------------------------------------------------------------------
    def start(self):
        if not self.identity:
            raise ValueError("shoe not provisioned: no key in flash (run `sabot provision`)")
        if self.code_root is not None:
            # The board's main checked the code before importing this module (see shoe/tilt.py).
            self.integrity = INTEGRITY_OK
        raw = self.flash.read("boot")
        self.boot = (int(raw) if raw else 0) + 1
        self.flash.write_atomic("boot", str(self.boot).encode())
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
                self._remember(f)
        elif rtype == R_ACK:
            self._acked(*struct.unpack(">II", payload))
        elif rtype == R_CHECKPOINT:
            shoe_no, self.seq, self.chain, self.acked, self.host_counter = struct.unpack(">HI8sII", payload)
            self.shoe.shoe_no = shoe_no

    def _remember(self, frame):
        self._hold_in_ram(frame)
        self.seq = _seq(frame)
        self.chain = frame[-32:-24]
        self._hold_if_secret(frame)

    def _hold_if_secret(self, frame):
        """Squeeze (631a.9(d)): a frame naming a hand's cards waits for the reveal, and so does all after it."""
        if self.variant & V_SQUEEZE and not self.hold_from and frame[1] in (frames.T_INITIAL, frames.T_RESULT):
            self.hold_from = _seq(frame)

    def _hold_in_ram(self, frame):
        self.outbox.append(frame)
        if len(self.outbox) > OUTBOX_RAM:
            self.outbox.pop(0)  # still in the flash log until acknowledged

    def unacked(self, from_seq=0):
        """Every unacknowledged frame from `from_seq` on, oldest first: from the log, then from RAM."""
        start = max(self.acked + 1, from_seq)
        in_ram = _seq(self.outbox[0]) if self.outbox else self.seq + 1
        if start < in_ram:
            for rtype, payload in self.log.records():
                for f in frames_in(rtype, payload):
                    if start <= _seq(f) < in_ram and f[1] < 0x40:
                        start = _seq(f) + 1
                        yield f
        for f in self.outbox:
            if _seq(f) >= start:
                yield f

    def _acked(self, seq, counter):
        self.acked = max(self.acked, seq)
        self.host_counter = max(self.host_counter, counter)
        self.outbox = [f for f in self.outbox if _seq(f) > self.acked]

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
        """The exit sensor fired: decide what left the shoe. Allocation-free; returns the input to log
        as one small int, kind << 8 | card (a tuple would allocate)."""
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

    def exit_edge(self):
        done = self.card_path()
        self._commit(done >> 8, done & 0xFF, 0)

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

    def _frames_for_events(self, source):
        s = self.shoe
        ev = s.events
        s.events = 0
        out = []
        sr = struct.pack(">HH", s.shoe_no, s.round_no)
        if ev & EV_SHOE_START:
            out.append(self._chained(frames.T_SHOE_START, struct.pack(">HBB", s.shoe_no, s.decks, self.variant)))
        if ev & EV_BURN:
            out.append(self._chained(frames.T_BURN, sr + bytes(s.burned[: s.n_burned])))
        if ev & EV_RESOLUTION:
            voided = bytes(s.player[: s.voided >> 4]) + bytes(s.banker[: s.voided & 15])
            head = bytes((s.resolution, s.ir_kind, s.ir_card, source, s.voided))
            out.append(self._chained(frames.T_RESOLUTION, sr + head + voided))
        if ev & EV_IRREGULARITY:
            out.append(self._chained(frames.T_IRREGULARITY,
                                     sr + struct.pack(">BBH", s.ir_kind, s.ir_card, s.ir_position)))
        if ev & EV_INITIAL:
            p, b = s.player, s.banker
            out.append(self._chained(frames.T_INITIAL, sr + bytes((p[0], b[0], p[1], b[1]))))
        if ev & EV_RESULT:
            o = outcome(s.player, s.np, s.banker, s.nb)
            ann = self._announcement(o)
            body = sr + bytes((s.np << 4 | s.nb, s.dummy_done)) + bytes(s.player[: s.np])
            body += bytes(s.banker[: s.nb]) + struct.pack(">HB", o, ann)
            out.append(self._chained(frames.T_RESULT, body))
            self.indicators.announce(total(s.player, s.np), total(s.banker, s.nb), o & WINNER_MASK, ann)
        if ev & EV_SHOE_END:
            out.append(self._chained(frames.T_SHOE_END, sr + struct.pack(">H", s.position) + s.inventory))
        return out

    def _announcement(self, o):
        """What the dealer must announce besides the final counts, for this game variant."""
        a = A_TIE_HAND if o & WINNER_MASK == WINNER_TIE else 0
        if self.variant & V_EZ:
            a |= (A_DRAGON7 if o & DRAGON7 else 0) | (A_PANDA8 if o & PANDA8 else 0)
        if self.variant & V_COMMISSION_FREE and o & LUCKY_SIX:
            a |= A_LUCKY_SIX
        return a

    def _chained(self, ftype, payload):
        self.seq += 1
        f = frames.build(self.key, self.key_id, self.shoe_id, self.boot, self.seq, self.chain, ftype, payload)
        self.chain = f[-32:-24]
        self._hold_in_ram(f)
        self._hold_if_secret(f)
        return f

    def _compact(self):
        checkpoint = struct.pack(">HI8sII", self.shoe.shoe_no, self.seq, self.chain, self.acked, self.host_counter)

        def keep():
            yield R_CHECKPOINT, checkpoint
            for f in self.unacked():
                yield R_FRAME, f

        self.log.replace(keep())

    def _send(self, frame):
        if self.hold_from and _seq(frame) >= self.hold_from:
            return  # squeeze: not before the reveal
        try:
            self.link.write(cobs.encode(frame))
        except OSError:
            pass  # no host: the frame stays in the outbox until acknowledged

    def show(self):
        s = self.shoe
        alarm = s.ir_kind if s.phase == PH_HELD else 0
        self.indicators.show(s.phase, s.due(), s.position, s.shoe_no, s.round_no, alarm, 1 if self.hold_from else 0)

    # ---- host commands -------------------------------------------------------------------------
    def host_bytes(self, data):
        for b in data:
            if b == 0:
                if self.rx:
                    f = cobs.decode(bytes(self.rx))
                    self.rx = bytearray()
                    if f is not None:
                        self._command(f)
            elif len(self.rx) < MAX_RX:
                self.rx.append(b)
            else:
                self.rx = bytearray()  # oversized: line noise; resync at the next zero

    def _reject(self, reason, ftype, counter):
        self._input_frame_only(frames.T_COMMAND_REJECTED, struct.pack(">BBI", reason, ftype, counter))

    def _input_frame_only(self, ftype, payload):
        f = self._chained(ftype, payload)
        self.log.append(R_FRAME, f)
        self._send(f)

    def _command(self, frame):
        p = frames.parse(frame)
        if p is None:
            return
        ftype, key_id, shoe_id, _, counter, _, payload, mac = p
        if key_id != self.key_id or shoe_id != self.shoe_id:
            return self._reject(REJ_NOT_FOR_THIS_SHOE, ftype, counter)
        if not equal(self.key.mac(frame[:-32]), mac):
            return self._reject(REJ_BAD_MAC, ftype, counter)
        if ftype == frames.C_INTEGRITY and 1 <= len(payload) <= 64:
            # A regulator's challenge: HMAC(seed, code). Fresh seeds make recorded answers useless.
            self._send(self._unchained(frames.T_INTEGRITY, bytes((self.integrity,)) + self._seeded(payload)))
            return
        if ftype == frames.C_HELLO:
            # Any authentic hello (even a replayed one) only makes the shoe say where it stands and resend.
            self.send_status()
            for f in self.unacked():
                self._send(f)
            return
        if counter <= self.host_counter:
            return self._reject(REJ_REPLAYED, ftype, counter)
        self.host_counter = counter
        if ftype == frames.C_ACK and len(payload) == 4:
            self._acked(struct.unpack(">I", payload)[0], counter)
            self.log.append(R_ACK, struct.pack(">II", self.acked, counter))
        elif ftype == frames.C_RESOLVE and len(payload) == 1:
            self.log.append(R_ACK, struct.pack(">II", self.acked, counter))
            if not self._input(IN_RESOLVE, payload[0], 1):
                self._reject(REJ_NOT_NOW, ftype, counter)
        elif ftype == frames.C_MAINTENANCE:
            self.log.append(R_ACK, struct.pack(">II", self.acked, counter))
            if self.shoe.in_round():
                self._reject(REJ_NOT_NOW, ftype, counter)  # never in the middle of a round
            else:
                self.maintenance = True
        elif ftype == frames.C_NEW_SHOE:
            self.log.append(R_ACK, struct.pack(">II", self.acked, counter))
            if self.shoe.phase == PH_ENDED or (self.shoe.phase == PH_BURN_FIRST and not self.shoe.position):
                self._input(IN_NEW_SHOE)
            else:
                self._reject(REJ_NOT_NOW, ftype, counter)
        else:
            self.log.append(R_ACK, struct.pack(">II", self.acked, counter))
            self._reject(REJ_UNKNOWN, ftype, counter)

    def _seeded(self, seed):
        if self.code_root is None:
            return bytes(32)  # a development run has no certified code tree to vouch for
        from shoe import integrity

        return integrity.seeded(bytes(seed), self.code_root, self.code_skip)

    def _unchained(self, ftype, payload):
        return frames.build(self.key, self.key_id, self.shoe_id, self.boot, self.seq, self.chain, ftype, payload)

    def send_status(self):
        s = self.shoe
        pending = self.seq > self.acked
        payload = struct.pack(">BHHHBIIIIB", s.phase, s.shoe_no, s.round_no, s.position, s.due(), self.host_counter,
                              self.acked, self.acked + 1 if pending else 0, self.seq if pending else 0, self.integrity)
        self._send(self._unchained(frames.T_STATUS, payload))

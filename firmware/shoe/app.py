"""The dealing shoe: sensor -> card -> dealing state -> table decision -> frame bodies (frames.py)
in the outbox's RAM ring -> flash log, all allocation-free; then, outside the card path, the
outbox finishes each frame with the secure element (digest, signature; see outbox.py) in seq order
and `service()` sends it on the host link. Host commands come in through the command port.
Hardware comes in as plain calls and injected objects: `element` (shoe/element.Element), `link`
(write(buf, n)) and `indicators`: show(phase, due, position, shoe_no, round_no, alarm, reveal) —
alarm the held irregularity's kind (0: none), reveal 1 while squeezed hands await the dealer's
reveal — and announce(player_total, banker_total, winner, announcements) when a round is
complete; at a blackjack table placed(round) when the dealer's hand is complete (the display
shows each card's hand for the dealer to confirm: shoe/blackjack.py) and `due` the seat whose
hand is due."""

import struct

from shoe import cobs, commands, frames
from shoe.cards import CUT, NO_CARD
from shoe.dealing import (
    EV_BURN,
    EV_INITIAL,
    EV_IRREGULARITY,
    EV_PLACED,
    EV_RESOLUTION,
    EV_RESULT,
    EV_SHOE_END,
    EV_SHOE_START,
    PH_ENDED,
    PH_HELD,
    RES_VOID_ROUND,
    DealingState,
)
from shoe.decision import DRAGON7, LUCKY_SIX, PANDA8, WINNER_MASK, WINNER_TIE, outcome, total
from shoe.element import ElementError
from shoe.inputs import (
    IN_CARD,
    IN_CONFIRM,
    IN_DISPUTE,
    IN_EMPTY,
    IN_FOREIGN,
    IN_NEW_SHOE,
    IN_NONE,
    IN_PRESS,
    IN_RESOLVE,
    IN_REVEAL,
    IN_TWO_CARDS,
)
from shoe.outbox import Outbox, resend
from shoe.port import CommandPort
from shoe.sensor import READ_CARD, READ_CUT, READ_FOREIGN, READ_NONE, SensorDecoder
from shoe.store import (
    BOOT_MAX,
    CHECKPOINT,
    R_ACK,
    R_CHECKPOINT,
    R_FINAL,
    R_INPUT,
    R_TREE,
    REKEY_FILE,
    frames_in,
    load_identity,
    next_boot,
    open_log,
    rekey_due,
    reserve,
    result_slot,
)

try:
    from micropython import const
except ImportError:  # CPython (tests): const is only a compiler hint
    def const(x):  # type: ignore[misc]
        return x

_ELEMENT_RETRIES = const(3)  # failed element steps in a row while a command waits for it
ALARM_FLASH_LOW = const(14)  # the lamp's alarm: the flash cannot take another shoe (15: tilt)


def _staged(code_root):
    """An update's staging directory is there (shoe/update.py): one a power cut interrupted."""
    import os

    try:
        os.stat(code_root.rstrip("/") + "/update.tmp")
        return True
    except OSError:
        return False


class ShoeApp:
    # shoe/maintain.py's Maintainer, made at the first update or rekey: a class default, so the
    # instance's attribute table stays as small as the card path's 96 KB heap needs
    maint = None
    # A hello's status, made a step a pass by service() (_answer): 0 none, 1 asked, 2 digesting,
    # 3 signing, 4 signed, to send; and its length. Class defaults, as `maint`.
    _asked = 0
    _asked_n = 0
    _asked_seq = 0  # the newest frame built when the hello came: the status comes after it
    bets = 0  # blackjack: the bet spots (bit s-1: a wager at seat s), set by the board loop

    def __init__(self, flash, link, indicators, element, decks=8, min_confidence=0x80,
                 code_root=None, code_skip=()):
        """`decks`: the board's DECKS, the most its shoe holds; the shoe deals the deck count it
        was provisioned with (flash `variant`, read below), this only when none was written."""
        self.flash = flash
        self.link = link
        # a link whose driver takes part of a frame (shoe/drivers/hw.py) keeps the rest and says
        # so: the next frame waits in the outbox meanwhile instead of crowding the link's queue
        self._link_busy = getattr(link, "busy", None)
        self.indicators = indicators
        self.element = element
        self.min_confidence = min_confidence
        # The table's configuration, written at provisioning (shoe/provision.py): the variant
        # byte, then the deck count (a shoe provisioned before it had one byte: the board's).
        # A count the board cannot hold is not taken: the shoe_start announces what is dealt,
        # and the host's config_mismatch names the difference.
        raw = flash.read("variant")
        self.variant = raw[0] if raw else frames.V_DEFAULT
        if raw and len(raw) > 1 and 1 <= raw[1] <= decks:
            decks = raw[1]
        self.shoe = DealingState(decks)
        if self.variant == frames.V_B21 | frames.V_DEFAULT and raw and len(raw) > 3:
            from shoe.b21 import Rules21  # only at a 21 Baccarat table: RAM

            self.shoe.b21 = Rules21(raw[2], raw[3])
        elif self.variant & 3 == frames.V_BLACKJACK:
            from shoe.blackjack import Round  # only at a blackjack table: RAM

            self.shoe.bj = Round()
            indicators.blackjack = True  # the lamps say whose hand draws (drivers/controls.py)
            self.shoe.h17 = 1 if self.variant & frames.V_H17 else 0
            self.shoe.hole = 0 if self.variant & frames.V_NO_HOLE else 1
        self.decoder = SensorDecoder()
        self.latch = READ_NONE
        self.latch_card = NO_CARD
        self.latch_conf = 0
        self.log = open_log(flash)
        self.outbox = Outbox(self.log, element)
        self.sent = 0  # the newest chained frame sent (or withheld: see hold_from)
        self.element_errors = 0
        self.boot = 0
        self.restart = False  # an update switched the code: the board boots it (machine.reset)
        self.code_root = code_root
        self.code_skip = code_skip
        self.integrity = frames.INTEGRITY_UNCHECKED
        self.hold_from = 0  # squeeze: frames from this seq wait for the dealer's reveal (0: none)
        self.low = -1  # the ended shoe's flash_low(), checked once outside the card path (-1)
        self.identity = load_identity(flash)
        self.port = CommandPort(self.identity, element)
        self.outbox.other = self._element_now  # when a card's frame cannot wait for a check
        self._tx = bytearray(frames.MAX_ENCODED)  # one COBS-encoded frame on its way out
        self._one = bytearray(frames.MAX_FRAME)  # a status or integrity frame being made
        self._asked_low = False  # flash_low() when the hello being answered came
        self.host_frames = 0  # frames a host caused in the log since its last compaction
        self.unlogged = 0  # host commands refused and counted, not kept (status), since boot

    # ---- start-up ----------------------------------------------------------------------------
    def start(self):
        if not self.identity:
            raise ValueError("shoe not provisioned: no identity in flash (run `sabot provision`)")
        if self.element is None:
            raise ValueError("no secure element: nothing can sign the shoe's frames")
        if self.code_root is not None:
            # The board's main checked the code before importing this module (see shoe/tilt.py).
            self.integrity = frames.INTEGRITY_OK
        self.boot = next_boot(self.flash)
        if self.boot >= BOOT_MAX:  # the last number frames can carry: the board starts the tilt
            raise ValueError("the boot counter is at its maximum (%d power-ons)" % BOOT_MAX)
        key_version, shoe_id = self.identity
        o = self.outbox
        o.key_id, o.shoe, o.boot = key_version, frames.shoe_bytes(shoe_id), self.boot
        o.slot = result_slot(key_version)
        # the SHA end lengths of every body the shoe makes (payloads of 4-15 bytes and
        # shoe_end's), of the log's leaves (0x00 then the frame, signed or not), of its nodes
        # (65 bytes), of a checkpoint's note text (67-76 bytes) and of the signed commands a
        # service pass checks (new shoe, resolve, ack: payloads of 0, 1 and 4 bytes); a status's
        # body is shoe_end's length. Marked in 64 bytes first: no list of them on the heap.
        tails = bytearray(64)
        for n in range(67, 77):
            tails[n & 63] = 1
        for n in (65, frames.HEADER_LEN, frames.HEADER_LEN + 1):
            tails[n & 63] = 1
        more = (range(64) if self.shoe.bj is not None  # a blackjack result: any length
                else range(16, 32) if self.shoe.b21 is not None else ())  # 21 Baccarat's
        for payloads in (range(4, 16), (frames.MAX_BODY - frames.HEADER_LEN,), more):
            for n in payloads:
                body = frames.HEADER_LEN + n
                for t in (body, body + 1, body + 1 + frames.SIG_LEN):
                    tails[t & 63] = 1
        self.element.prepare([t for t in range(64) if tails[t]])
        self.port.start()
        empty = True
        for rtype, payload in self.log.records():
            self._replay(rtype, payload)
            empty = False
        # Finished frames were logged before they were sent: a hello resends any the host lacks.
        # Unfinished ones were never sent; service() finishes them (new signatures) and sends.
        # Frames withheld for a squeeze stay withheld: the reveal sends them.
        self.sent = min(o.done, self.hold_from - 1) if self.hold_from else o.done
        if self.hold_from:
            self._mark_at_boot()
        if empty:
            self._input(IN_NEW_SHOE)
        bj = self.shoe.bj
        if bj is not None and self.shoe.in_round() and bj.done():
            self.indicators.placed(bj)  # the hands shown again for the confirm due
        if self.code_root is not None and _staged(self.code_root):
            from shoe.maintain import Maintainer  # only then: RAM

            self.maint = Maintainer(self)
            self.maint.abandoned()
        self.log.prepare()
        self.show()

    def _replay(self, rtype, payload):
        o = self.outbox
        if rtype == R_INPUT:
            if payload[0] == IN_NONE:
                self.host_frames += 1  # a refusal or a maintenance record: the host's budget
            self._apply(payload[0], payload[1], payload[2])
            self.shoe.events = 0
            for body in frames_in(rtype, payload):
                o.restore_body(body)
                self._hold_if_secret(frames.type_of(body), frames.seq_of(body))
        elif rtype == R_FINAL:
            o.restore_final(payload)
        elif rtype == R_ACK:
            o.ack(frames.seq_at(payload, 0))
        elif rtype == R_CHECKPOINT:
            shoe_no, seq, digest, acked, hold_from = struct.unpack(CHECKPOINT, payload)
            self.shoe.shoe_no = shoe_no
            o.checkpoint(seq, digest)
            o.acked = acked
            self.hold_from = hold_from
        elif rtype == R_TREE:
            o.tree.load(payload)

    def _hold_if_secret(self, ftype, seq):
        """Squeeze (631a.9(d)): a frame naming a hand's cards waits for the reveal, and so does all
        after it."""
        if self.variant & frames.V_SQUEEZE and not self.hold_from and frames.names_cards(ftype):
            self.hold_from = seq
            self._mark(seq - 1)

    def _mark(self, seq):
        """The hold starts after frame `seq`: keep its digest (now if it is finished, else as it
        is), so a status or integrity answer can name it instead of a withheld frame — whose
        digest would give away its four cards to anyone who tries 52**4 (a hello is
        anyone's)."""
        o = self.outbox
        o.mark = seq
        if o.done == seq:
            o.mark_digest[0 : frames.DIGEST_LEN] = o.digest

    def _newest_seq(self):
        """The newest finished frame the shoe may name: during a squeeze's hold, the last before
        it (an int, and its digest from _newest_digest: no tuple, which would allocate)."""
        o = self.outbox
        if self.hold_from and o.done >= self.hold_from - 1:
            return self.hold_from - 1
        return o.done

    def _newest_digest(self):
        o = self.outbox
        if self.hold_from and o.done >= self.hold_from - 1:
            return o.mark_digest
        return o.digest

    def _mark_at_boot(self):
        """A hold restored at boot: the digest of the frame before it, from RAM or the log (a
        boot may allocate)."""
        o = self.outbox
        seq = self.hold_from - 1
        o.mark = seq
        if o.done < seq:
            return  # not finished yet: _final keeps it as it is
        if o.in_ram(seq):
            o.mark_digest[0 : frames.DIGEST_LEN] = o.buf(seq)[0 : frames.DIGEST_LEN]
            return
        for rtype, payload in self.log.records():
            if rtype == R_FINAL and frames.seq_of(payload, frames.DIGEST_LEN) == seq:
                o.mark_digest[0 : frames.DIGEST_LEN] = payload[: frames.DIGEST_LEN]

    def unacked(self, from_seq=0):
        """The finished, unacknowledged frames as bytes, oldest first."""
        return self.outbox.frames(from_seq)

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
        bets = self.bets
        self.shoe.card_out(card, bets)
        return bets << 16 | IN_CARD << 8 | card

    def commit_card(self, done):
        """The card path's decision made durable: frame bodies and the flash log. Allocation-free;
        the frames go out from service()."""
        self._commit(done >> 8 & 0xFF, done & 0xFF, done >> 16)

    def exit_edge(self):
        self.commit_card(self.card_path())

    def confirm_button(self):
        self._input(IN_CONFIRM)

    def empty_sensor(self):
        self._input(IN_EMPTY)

    def supervisor(self, code):
        if code == RES_VOID_ROUND and self.shoe.disputable():
            # blackjack: the dealer found the shoe's hands other than the table's; the round is
            # held as disputed, then voided
            self._input(IN_DISPUTE)
        if self._input(IN_RESOLVE, code, 0):
            # The element's command counter moves too: a signed host command held back on the
            # cable before this resolution is stale after it (it cannot act in another context).
            self.port.consume(self)

    def blackjack_press(self, kind):
        """Blackjack: NEXT (1), DOUBLE (2) or SPLIT (3); one the hand cannot take is an
        irregularity."""
        self._input(IN_PRESS, kind)

    def reveal_button(self):
        """Squeeze: the players have seen their cards; the withheld frames may go to the host."""
        if self.hold_from:
            self._input(IN_REVEAL)

    # ---- inputs -> frame bodies -> flash --------------------------------------------------------
    def _apply(self, kind, arg=0, arg2=0):
        s = self.shoe
        if kind == IN_CARD:
            s.card_out(arg, arg2)
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
            self.low = -1
        elif kind == IN_REVEAL:
            self.hold_from = 0  # service() sends what was withheld, in order
        elif kind == IN_PRESS:
            return s.press(arg)
        elif kind == IN_DISPUTE:
            s.dispute()
        return True

    def _input(self, kind, arg=0, arg2=0):
        if kind == IN_NEW_SHOE:
            self._compact()
        ok = self._apply(kind, arg, arg2)
        self._commit(kind, arg, arg2)
        return ok

    def _commit(self, kind, arg, arg2, first=0):
        """One log record: the input and the bodies of the frames it produced (from seq `first`
        when made before). Allocation-free."""
        o = self.outbox
        if not first:
            first = o.seq + 1
        self._bodies_for_events(arg2)
        o.commit(kind, arg, arg2, first)
        self.show()

    def _made(self, ftype, n):
        self._hold_if_secret(ftype, self.outbox.end(n))

    def _bodies_for_events(self, source):
        s = self.shoe
        ev = s.events
        s.events = 0
        o = self.outbox
        no, rnd = s.shoe_no, s.round_no
        if ev & EV_SHOE_START:
            at = o.begin(frames.T_SHOE_START)
            ring = o.building
            self._made(frames.T_SHOE_START, frames.shoe_start_into(ring, at, no, s.decks,
                                                                   self.variant, s.b21))
        if ev & EV_BURN:
            at = o.begin(frames.T_BURN)
            ring = o.building
            self._made(frames.T_BURN, frames.burn_into(ring, at, no, rnd, s.burned, s.n_burned))
        bj = s.bj
        if ev & EV_RESOLUTION:
            voided = s.voided
            if bj is not None:
                if voided:  # the voided round's cards, in a frame of their own
                    at = o.begin(frames.T_BLACKJACK_RESULT)
                    self._made(frames.T_BLACKJACK_RESULT,
                               bj.result_into(o.building, at, no, rnd, 1))
                voided = 0
            at = o.begin(frames.T_RESOLUTION)
            ring = o.building
            n = frames.resolution_into(ring, at, no, rnd, s.resolution, s.ir_kind, s.ir_card,
                                       source, voided, s.player, s.banker)
            self._made(frames.T_RESOLUTION, n)
        if ev & EV_IRREGULARITY:
            at = o.begin(frames.T_IRREGULARITY)
            ring = o.building
            n = frames.irregularity_into(ring, at, no, rnd, s.ir_kind, s.ir_card, s.ir_position)
            self._made(frames.T_IRREGULARITY, n)
        if ev & EV_INITIAL:
            at = o.begin(frames.T_INITIAL)
            ring = o.building
            self._made(frames.T_INITIAL, frames.initial_into(ring, at, no, rnd, s.player,
                                                             s.banker))
        if ev & EV_PLACED:
            self.indicators.placed(bj)
        if ev & EV_RESULT and bj is not None:
            at = o.begin(frames.T_BLACKJACK_RESULT)
            self._made(frames.T_BLACKJACK_RESULT, bj.result_into(o.building, at, no, rnd))
        elif ev & EV_RESULT and s.b21 is not None:
            s.b21.result(self, s)
        elif ev & EV_RESULT:
            oc = outcome(s.player, s.np, s.banker, s.nb)
            ann = self._announcement(oc)
            at = o.begin(frames.T_RESULT)
            ring = o.building
            n = frames.result_into(ring, at, no, rnd, s.player, s.np, s.banker, s.nb,
                                   s.dummy_done, oc, ann)
            self._made(frames.T_RESULT, n)
            self.indicators.announce(total(s.player, s.np), total(s.banker, s.nb),
                                     oc & WINNER_MASK, ann)
        if ev & EV_SHOE_END:
            at = o.begin(frames.T_SHOE_END)
            ring = o.building
            n = frames.shoe_end_into(ring, at, no, rnd, s.position, s.inventory, s.unknown)
            self._made(frames.T_SHOE_END, n)

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
        frame. The queue is finished first (waiting for the element is fine here: no card is
        out between shoes), so every frame carried over is a finished one."""
        o = self.outbox
        self._finish_all()
        s = self.shoe
        if s.round_no and rekey_due(self.flash, s.shoe_no, s.round_no):
            self.flash.remove(REKEY_FILE)  # the shoe ending dealt a round: the next rekey may come
        checkpoint = struct.pack(CHECKPOINT, self.shoe.shoe_no, o.seq, bytes(o.digest), o.acked,
                                 self.hold_from)

        def keep():
            yield R_CHECKPOINT, checkpoint
            for edge in o.tree.records():
                yield R_TREE, edge
            for buf, at, n in o.unacknowledged():
                yield R_FINAL, bytes(buf[at - frames.DIGEST_LEN : at + n])

        self.log.replace(keep())
        self.host_frames = 0  # the new log holds none

    # ---- outside the card path: finishing and sending ------------------------------------------
    def service(self, now=0):
        """Called by the board loop on every pass: one step of finishing frames with the element
        (never waiting for a Sign), then send what is finished, in order. Allocation-free."""
        o = self.outbox
        idle = not self.busy()  # a pass with nothing to finish or send: no card's path
        self.port.service(self)  # a command's check takes turns with the frames, step by step
        if self.maint is not None:
            self.maint.tick()  # an update session nobody finishes is abandoned, its files removed
        if self._asked == 1:
            # a host waits for the status: it takes the element before the next frame does once
            # the frames made before the hello are out (a fast dealer's frames never leave the
            # element idle: the status would otherwise wait for the shoe's end)
            self._answer()
        if o.work() and (o.digesting or o.signing or o.tree.busy()
                         or not self.element.pending()):
            try:
                # (a hello's status took the element above when it could: the log is never
                # held back for it, or a hello flood would leave a card waiting for a slot
                # the log still needs)
                o.service()
            except ElementError:  # the element failed this step (bus noise): again next pass;
                self.element_errors += 1  # a flash error is not caught: it ends in a reset
        self._send_finished()
        if self._asked:
            self._answer()  # a hello's status, one step
        if idle and self.low < 0 and self.shoe.phase == PH_ENDED:
            # the lamp says so before anyone asks (statvfs allocates: an idle pass, after the
            # shoe end's frames are out)
            self.low = 1 if self.flash_low() else 0
            self.show()
        # The sector the next card's record may need is erased now, right after a card, never
        # in its path (a raw NOR log); a file log is reopened here after a failed write.
        self.log.prepare()

    def _answer(self):
        """One step of the status a hello asked for, never a wait."""
        a = self._asked
        o = self.outbox
        el = self.element
        try:
            if a == 1:
                if o.done < self._asked_seq or el.pending():
                    return  # the frames made before the hello first; the element is busy
                self._asked_n = commands.status_into(self, self._one)
                el.sha_queue(self._one, 0, self._asked_n, self._tx)  # (_tx: its digest, unused)
                self._asked = 2
            elif a == 2:
                if el.sha_ready():  # the Sign at once: nothing else may take TempKey between
                    el.sign_start(o.slot)
                    self._asked = 3
            elif a == 3:
                if el.sign_ready(self._one, self._asked_n):
                    self._asked = 4
            else:
                self._asked = 0
                self.send_frame(self._one, 0, self._asked_n + frames.SIG_LEN)
                resend(self)
        except ElementError:
            self.element_errors += 1
            self._asked = 1  # from the start on a later pass

    def _element_now(self):
        """The outbox needs the element at once (every RAM slot holds an unfinished frame): the
        command port's check and a status under way are taken to their ends first."""
        self.port.abandon()
        while 1 < self._asked < 4:
            self._answer()

    def busy(self):
        """Frames wait for the element or the link: the board loop should come back soon."""
        o = self.outbox
        return (o.work() or (self.sent < o.done and not self.hold_from)
                or self.port.busy() or self._asked
                or (o.tree.unsent and self.sent >= o.tree.signed_size))

    def settle(self):
        """Wait for what the element is working on, the frame and a hello's status under way (the
        command port needs the element: left pending, a status would hold its check forever)."""
        self.outbox.settle()
        while 1 < self._asked < 4:
            self._answer()
        self._send_finished()

    def _finish_all(self):
        # A step the element failed (a late answer, bus noise) is taken again, as service()
        # takes it on its next pass; only an element that keeps failing ends in the reset.
        failures = 0
        while True:
            try:
                self.outbox.finish_all()
                break
            except ElementError:
                self.element_errors += 1
                failures += 1
                if failures == _ELEMENT_RETRIES:
                    raise
        self._send_finished()

    def _send_finished(self):
        o = self.outbox
        if self._asked == 4:
            # a status signed while the outbox finished the frames after it (every slot was
            # taken: _element_now): it goes first, as it was made first
            self._answer()
        while self.sent < o.done:
            if self._link_busy is not None and self._link_busy():
                return  # the link still sends the last frame's rest: this one on a later pass
            seq = self.sent + 1
            if self.hold_from and seq >= self.hold_from:
                return  # squeeze: not before the reveal
            if o.in_ram(seq):
                self.send_frame(o.buf(seq), o.at(seq), o.length(seq))
                self.sent = seq
            else:  # withheld so long it left RAM: from the log (rare; may allocate)
                for buf, at, n in o.unacknowledged(seq, o.done):
                    if self.hold_from and frames.seq_of(buf, at) >= self.hold_from:
                        return
                    self.send_frame(buf, at, n)
                    self.sent = frames.seq_of(buf, at)
                if self.sent < seq:
                    self.sent = seq  # acknowledged meanwhile: nothing to send
        tree = o.tree
        if tree.unsent and self.sent >= tree.signed_size:
            # after the frames it covers (a squeeze's withheld ones included)
            if self._link_busy is not None and self._link_busy():
                return
            tree.unsent = False
            self.send_frame(tree.frame, 0, len(tree.frame))

    def send_frame(self, buf, at, n):
        m = cobs.encode_into(buf, n, self._tx, at)
        try:
            self.link.write(self._tx, m)
        except OSError:
            pass  # no host: the frame stays in the outbox until acknowledged

    def flash_low(self):
        """A new shoe's rounds would not fit: after the compaction the log holds the frames not
        yet acknowledged, and the one reserve (store.reserve: a whole shoe's records and room to
        recover) must fit beside them."""
        o = self.outbox
        return reserve(self.shoe.decks, o.done - o.acked) > self.log.capacity()

    def show(self):
        s = self.shoe
        alarm = s.ir_kind if s.phase == PH_HELD else ALARM_FLASH_LOW if self.low > 0 else 0
        self.indicators.show(s.phase, s.due(), s.position, s.shoe_no, s.round_no, alarm,
                             1 if self.hold_from else 0)

    # ---- the host's commands (answered in shoe/commands.py) -------------------------------------
    def host_bytes(self, data, n=-1):
        self.port.feed(data, len(data) if n < 0 else n, self)

    def command(self, ftype, counter, payload):
        commands.command(self, ftype, counter, payload)

    def refuse(self, reason, ftype, counter):
        commands.refuse(self, reason, ftype, counter)

    def host_frame(self, n=1, rekey=False):
        return commands.host_frame(self, n, rekey)

    # what maintenance (shoe/maintain.py, loaded at the first update) calls
    def finish_all(self):
        self._finish_all()

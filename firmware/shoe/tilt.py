"""Tilt: the boot-time integrity check failed, so the shoe must not run its dealing code (which may
be what was altered). This minimal shoe, built only from the modules the check itself needs, deals
nothing, keeps the alarm on, and still answers the host through the same command port: status
(integrity: tilt) and the seeded HMAC challenge, both signed by the secure element, so a regulator
sees exactly what is on the board. Boards call `boot()` before importing shoe.app."""

import struct

from shoe import cobs, frames, integrity
from shoe.maintain import Maintainer, add_frame
from shoe.outbox import Outbox, resend
from shoe.port import REJ_NOT_NOW, CommandPort, sign_into
from shoe.store import (
    CHECKPOINT,
    HOST_FRAMES,
    R_ACK,
    R_CHECKPOINT,
    R_FINAL,
    R_INPUT,
    R_TREE,
    frames_in,
    load_identity,
    next_boot,
    open_log,
    result_slot,
)

try:
    from micropython import const
except ImportError:  # CPython (tests): const is only a compiler hint
    def const(x):  # type: ignore[misc]
        return x

ALARM_TILT = const(15)
PH_TILT = const(5)
_MAX_SEED = const(64)
_IN_REVEAL = const(8)  # shoe/app.py's IN_REVEAL, as logged: the squeeze's hold ends there


def cause_of(error, element):
    """The status's tilt cause for a dealing shoe that could not start (`error`)."""
    if element is None:
        return frames.TILT_ELEMENT
    if "boot counter" in str(error):
        return frames.TILT_BOOTS
    return frames.TILT_LOG


def boot(code_root, code_skip=(), element=None):
    """None when the code matches its signed MANIFEST (or there is no code root: a development
    run), else the reason for the tilt."""
    if code_root is None:
        return None
    why = integrity.check(code_root, code_skip, element)
    if why is None and element is not None:
        try:
            why = integrity.keep_floor(code_root, element)
        except Exception:
            why = "secure element error keeping the firmware version"
    return why


class TiltShoe:
    """The tilted shoe still keeps its word: it replays its log (the frames only, no dealing
    state), finishes and resends every unacknowledged frame, takes acknowledgements, and takes a
    firmware update (shoe/maintain.py) — the way out of the tilt that needs no REPL. A frame it
    withholds for a squeeze stays withheld."""

    def __init__(self, flash, link, indicators, code_root, code_skip=(), element=None,
                 cause=frames.TILT_CODE):
        self.flash = flash
        self.cause = frames.TILT_ELEMENT if element is None else cause  # why (status)
        self.host_frames = 0  # frames a host caused in the log (a tilted shoe never compacts it)
        self.unlogged = 0
        self.link = link
        self.indicators = indicators
        self.code_root = code_root
        self.code_skip = code_skip
        self.element = element
        identity = load_identity(flash)
        self.identity = identity
        self.port = CommandPort(identity, element)
        self.boot = 0
        self.restart = False
        self.outbox = None  # the log's frames, once replayed (None: no log could be read)
        self.hold_from = 0
        self.sent = 0
        self.maint = Maintainer(self)
        self._buf = bytearray(frames.MAX_FRAME)
        self._tx = bytearray(frames.MAX_ENCODED)

    def start(self):
        try:
            self.boot = next_boot(self.flash)
        except Exception:
            self.boot = 0  # a full or damaged flash (or a boot counter at its end): unnumbered
        try:
            self.port.start()
        except Exception:
            pass  # no element: the shoe answers nothing, the alarm stays on
        try:
            self._recover()
        except Exception:
            self.outbox = None  # a log that cannot be read: statuses and integrity answers only
        if self.outbox is not None:
            try:
                self.maint.abandoned()  # an update a power cut interrupted: recorded
            except Exception:
                pass  # (a full flash): its staged files go at the next boot
        self.show()

    def _recover(self):
        if self.identity is None or self.element is None:
            return
        key_version, shoe_id = self.identity
        o = Outbox(open_log(self.flash), self.element)
        o.key_id, o.shoe, o.boot = key_version, frames.shoe_bytes(shoe_id), self.boot
        o.slot = result_slot(key_version)
        o.other = self.port.abandon  # when the outbox cannot wait for a command's check
        raw = self.flash.read("variant")
        squeeze = raw and raw[0] & frames.V_SQUEEZE
        hold = 0
        for rtype, payload in o.log.records():
            # as shoe/app.py's _replay, the dealing state left out
            if rtype == R_FINAL:
                o.restore_final(payload)
            elif rtype == R_ACK:
                o.ack(frames.seq_at(payload, 0))
            elif rtype == R_CHECKPOINT:
                _, seq, digest, acked, hold = struct.unpack(CHECKPOINT, payload)
                o.checkpoint(seq, digest)
                o.acked = acked
            elif rtype == R_TREE:
                o.tree.load(payload)
            if rtype != R_INPUT:
                continue
            if payload[0] == 0:
                self.host_frames += 1  # shoe/inputs.py's IN_NONE: a frame a host caused
            if payload[0] == _IN_REVEAL:
                hold = 0
            for body in frames_in(rtype, payload):
                o.restore_body(body)
                if squeeze and not hold and frames.names_cards(frames.type_of(body)):
                    hold = frames.seq_of(body)
        self.outbox = o
        self.hold_from = hold
        self.sent = min(o.done, hold - 1) if hold else o.done

    def show(self):
        self.indicators.show(PH_TILT, 0, 0, 0, 0, ALARM_TILT, 0)

    # every hardware input is refused: the alarm stays on
    def sensor_byte(self, b):
        pass

    def card_path(self):
        return 0

    def commit_card(self, done):
        self.show()

    def exit_edge(self):
        self.show()

    confirm_button = empty_sensor = reveal_button = exit_edge

    def blackjack_press(self, kind):
        self.show()

    def supervisor(self, code):
        self.show()

    def service(self, now=0):
        self.port.service(self)  # a command's check, step by step; a hello owed from a burst
        self.maint.tick()  # an update session nobody finishes is abandoned, its files removed
        o = self.outbox
        if o is None:
            return
        # frames to finish and the log's leaves to hash, as the dealing shoe's service()
        if o.work() and (o.digesting or o.signing or o.tree.busy()
                         or not self.element.pending()):
            try:
                o.service()
            except Exception:
                pass  # the element failed this step: again next pass
        while self.sent < o.done and not (self.hold_from and self.sent + 1 >= self.hold_from):
            self._resend(self.sent + 1, self.sent + 1)

    def busy(self):
        o = self.outbox
        return self.port.busy() or (o is not None and o.work())

    def settle(self):
        if self.outbox is not None:
            self.outbox.settle()

    def host_bytes(self, data, n=-1):
        self.port.feed(data, len(data) if n < 0 else n, self)

    # what maintenance (shoe/maintain.py) calls
    def finish_all(self):
        if self.outbox is not None:
            self.outbox.finish_all()
            self.service()

    def refuse(self, reason, ftype, counter):
        if self.outbox is None:
            return
        if self.host_frame():
            add_frame(self.outbox, frames.T_COMMAND_REJECTED,
                      struct.pack(">BBI", reason, ftype, counter))
        else:
            self.unlogged += 1

    def host_frame(self, n=1, rekey=False):
        """As the dealing shoe's (shoe/app.py): within store.HOST_FRAMES in the log, counting those
        it already holds, else counted only (a tilted shoe takes no rekey)."""
        if self.host_frames + n > HOST_FRAMES - 2:
            return False
        self.host_frames += n
        return True

    # ---- host commands -------------------------------------------------------------------------
    def command(self, ftype, counter, payload):
        buf = self._buf
        at = frames.HEADER_LEN
        o = self.outbox
        if ftype == frames.C_INTEGRITY and 1 <= len(payload) <= _MAX_SEED:
            digest = integrity.seeded(bytes(payload), self.code_root, self.code_skip)
            self._send(frames.T_INTEGRITY,
                       frames.integrity_into(buf, at, frames.INTEGRITY_TILT, digest))
        elif ftype == frames.C_HELLO:
            acked = first = last = 0
            if o is not None:
                self.finish_all()
                acked = o.acked
                if o.pending():
                    first, last = acked + 1, o.done
            n = frames.status_into(buf, at, PH_TILT, 0, 0, 0, 0, self.port.counter, acked,
                                   first, last, frames.INTEGRITY_TILT, self.port.refused, 0,
                                   self.port.bad_key, self.unlogged, self.cause)
            self._send(frames.T_STATUS, n)
            if first:
                self._resend(0, 0)
        elif o is None or ftype == frames.C_CHECKPOINT:
            # no log: nothing to acknowledge, no chain to record an update in; and a tilted shoe
            # signs no checkpoint (unsigned, anyone's: refused at no cost, not as a frame)
            return
        elif ftype == frames.C_ACK:
            if len(payload) == 4 and o.ack(frames.seq_at(payload, 0)):
                try:
                    struct.pack_into(">I", o.log.rec, 3, o.acked)  # no bytes object made
                    o.log.commit(R_ACK, 4)
                except OSError:
                    pass  # a full flash: acknowledged in RAM, resent after a power cut
        else:
            try:
                if not self.maint.command(ftype, counter, payload):
                    self.refuse(REJ_NOT_NOW, ftype, counter)  # a tilted shoe deals nothing
            except OSError:
                pass  # a full flash: the command leaves no trace and is not obeyed

    def _resend(self, from_seq, to_seq):
        if self.outbox is not None:
            resend(self, from_seq, to_seq)

    def _head(self, ftype):
        key_version, shoe_id = self.identity
        o = self.outbox
        # seq and chain: the newest finished frame of the log (zero when there is none)
        frames.head_into(self._buf, 0, ftype, key_version, frames.shoe_bytes(shoe_id), self.boot,
                         o.done if o else 0, o.digest if o else frames.ZERO_CHAIN)

    def send_frame(self, buf, at, n):
        try:
            self.link.write(self._tx, cobs.encode_into(buf, n, self._tx, at))
        except Exception:
            pass  # no host: the frame stays in the log until acknowledged

    def _send(self, ftype, n):
        if self.identity is None or self.element is None:
            return  # unprovisioned: nothing to sign with (the port obeys nothing then anyway)
        key_version, _ = self.identity
        self._head(ftype)  # the payload is already at HEADER_LEN
        try:
            if self.outbox is not None:
                self.outbox.settle()  # the element does one thing at a time
            m = sign_into(self.element, result_slot(key_version), self._buf,
                          frames.HEADER_LEN + n)
        except Exception:
            return  # no element: nothing to answer with
        self.send_frame(self._buf, 0, m)

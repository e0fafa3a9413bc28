"""Maintenance commands, for the dealing shoe and the tilted shoe alike: a firmware update
(shoe/update.py) and, on a dealing shoe, a rekey (shoe/rekey.py). Each is recorded in the shoe's
chain as maintenance frames — who asked (the command's counter and the name the host signed into
it), what, and the MANIFEST digest or the new key — so every change of what runs or signs reaches
the audit log. Not on the card path: the shoe is between rounds or tilted.

The shoe (shoe/app.ShoeApp or shoe/tilt.TiltShoe) offers what this needs: `outbox`, `element`,
`flash`, `port`, `boot`, `code_root`, `code_skip`, `finish_all()`,
`refuse(reason, ftype, counter)`
and `send_frame(buf, at, n)`; a dealing shoe has `shoe` (its dealing state), a tilted one none.
`restart` is set once the shoe must boot again. (These helpers live here, loaded at the first
update, not in the modules the card path keeps in RAM.)"""

import struct

from shoe import frames
from shoe.port import REJ_NOT_NOW, REJ_UNKNOWN
from shoe.store import (
    CARD_BYTES,
    KEPT_FRAME,
    RECOVERY_BYTES,
    REKEY_FILE,
    rekey_due,
    result_slot,
)
from shoe.update import R_ABANDONED, R_INTERRUPTED, Refused, Update

try:
    from micropython import const
except ImportError:  # CPython (tests): const is only a compiler hint
    def const(x):  # type: ignore[misc]
        return x

# What a maintenance frame records (its payload's first byte; docs/PROTOCOL.md)
_M_UPDATE_BEGUN = const(1)  # length(4) chain head(32)
_M_UPDATE_APPLIED = const(2)  # tree digest(32) version(4): MANIFEST's, the code switched to
_M_UPDATE_REFUSED = const(3)  # reason(1) tree digest(32, zero when none was read) version(4)
_M_REKEY = const(4)  # version(2) X||Y(64): the new result key, made in the element
_M_REKEY_CERTIFICATE = const(5)  # version(2) r||s(64): the attestation key's Sign internal
_REJ_KEYS_EXHAUSTED = const(7)  # command_rejected: no result key slot left for a rekey
_REJ_NO_ROUND = const(8)  # command_rejected: no round dealt in a later shoe than the last rekey's
_PH_HELD = const(3)  # shoe/dealing.py's PH_HELD (not imported: the tilted shoe loads no dealing)
_BY_LEN = const(16)  # who asked: the name the host put in the signed command (ASCII, padded)


def frame_payload(what, counter, by, detail):
    """A maintenance frame's payload: what(1) counter(4: the command that asked) by(16) detail."""
    by = bytes(by[:_BY_LEN])
    return (bytes((what,)) + struct.pack(">I", counter) + by + bytes(_BY_LEN - len(by))
            + bytes(detail))


def add_frame(outbox, ftype, payload):
    """A frame of the shoe's own from bytes, logged (not the card path: may allocate)."""
    first = outbox.seq + 1
    at = outbox.begin(ftype)
    outbox.building[at : at + len(payload)] = payload
    outbox.end(len(payload))
    outbox.commit(0, 0, 0, first)


def _free_bytes(flash):
    """The flash filesystem's free bytes; with the board's cap (the virtual board's
    `--flash-bytes`), the cap less the files kept in the flash directory."""
    import os

    if not flash.capacity:
        return flash.log_capacity(0)  # the filesystem's free space (statvfs)
    used = 0
    for entry in os.ilistdir(flash.root):
        if entry[1] != 0x4000:
            used += os.stat(flash.path(entry[0]))[6]
    return flash.capacity - used


def room(shoe):
    """The filesystem bytes an update may stage: what is free there, less the room to recover in
    (store.RECOVERY_BYTES) and, when the log is a file in the same filesystem, less what it may
    still need: the rest of the shoe in progress and the unacknowledged frames a compaction
    carries over (the one reserve); negative when that is short."""
    o = shoe.outbox
    if o is None:
        return -1  # no log: no room known, nothing written
    free = _free_bytes(shoe.flash) - RECOVERY_BYTES
    if shoe.flash.log_device is None:
        s = getattr(shoe, "shoe", None)  # a tilted shoe deals nothing
        left = s.decks * 52 - s.position if s is not None else 0
        free -= left * CARD_BYTES + (o.done - o.acked) * KEPT_FRAME
    return free


def _element_free(shoe):
    """The element for a Verify of the update's own: it does one thing at a time, so a signed
    command's check under way is taken to its verdict (obeyed at the next service()) and the
    frame it is finishing finished first."""
    shoe.port.abandon()
    shoe.settle()


def _between_rounds(shoe):
    s = getattr(shoe, "shoe", None)  # the dealing state; a tilted shoe deals nothing
    return s is None or not (s.in_round() or s.phase == _PH_HELD)


def _send_unsigned(shoe, ftype, payload):
    """An unsigned answer (update progress): the newest finished seq and digest, no Sign."""
    o = shoe.outbox
    buf = bytearray(frames.HEADER_LEN + len(payload))
    frames.head_into(buf, 0, ftype, o.key_id, o.shoe, shoe.boot, o.done, o.digest)
    buf[frames.HEADER_LEN :] = payload
    shoe.send_frame(buf, 0, len(buf))


class Maintainer:
    def __init__(self, shoe):
        self.shoe = shoe
        self.update = Update(shoe.code_root, shoe.code_skip, shoe.element)

    def tick(self):
        """From service(): an update session that took no chunk for IDLE_MS is abandoned, its
        staged files removed (a host that stopped mid-stream keeps no flash)."""
        if self.update.idle():
            self._ended(R_ABANDONED)

    def command(self, ftype, counter, payload):
        """True when `ftype` is a maintenance command (then it was handled)."""
        if ftype == frames.C_UPDATE:
            self._begin(counter, payload)
        elif ftype == frames.C_UPDATE_DATA:
            self._chunk(payload)
        elif ftype == frames.C_REKEY:
            self._rekey(counter, payload)
        else:
            return False
        return True

    def abandoned(self):
        """At boot: an update a power cut interrupted before its switch is recorded as refused
        (interrupted), so its update_begun frame does not stand alone."""
        got = self.update.abandoned()
        if got is not None:
            self._record(_M_UPDATE_REFUSED, got[0], got[1], bytes((R_INTERRUPTED,)) + bytes(36))

    def _record(self, what, counter, by, detail, repair=False):
        """A maintenance frame, within the host's budget (the shoe's host_frame); beyond it only
        counted, and False. `repair`: an update_applied that upgrades the firmware (its version
        above the running tree's) or repairs a shoe tilted for its code is kept beyond the
        budget all the same: each is followed by a boot of a tree the release key signed, and
        neither can recur without another release or an opened case."""
        shoe = self.shoe
        if not shoe.host_frame():
            if not repair:
                shoe.unlogged += 1
                return False
            shoe.host_frames += 1
        add_frame(shoe.outbox, frames.T_MAINTENANCE, frame_payload(what, counter, by, detail))
        return True

    def _begin(self, counter, payload):
        shoe = self.shoe
        if not 36 <= len(payload) <= 36 + _BY_LEN:
            shoe.refuse(REJ_UNKNOWN, frames.C_UPDATE, counter)
            return
        if not _between_rounds(shoe):
            shoe.refuse(REJ_NOT_NOW, frames.C_UPDATE, counter)
            return
        length = struct.unpack_from(">I", payload, 0)[0]
        head, by = payload[4:36], payload[36:]
        u = self.update
        if u.open:
            self._ended(R_INTERRUPTED)  # the session before never ended
        try:
            u.begin(length, head, counter, by)  # nothing recorded before chunk 0 is checked
        except Refused as e:
            self._record(_M_UPDATE_REFUSED, counter, by, bytes((e.reason,)) + bytes(36))

    def _ended(self, reason):
        """An open session ends unfinished: its staged files go, and, when chunk 0 had opened it
        (update_begun), that it ended is recorded; one never begun leaves no trace."""
        u = self.update
        begun = u.authorized
        u.discard()
        if begun:
            self._record(_M_UPDATE_REFUSED, u.counter, u.by,
                         bytes((reason,)) + bytes(32) + struct.pack(">I", u.version))

    def _refused(self, reason, digest, version=0):
        u = self.update
        u.discard()
        self._record(_M_UPDATE_REFUSED, u.counter, u.by,
                     bytes((reason,)) + digest + struct.pack(">I", version))

    def _chunk(self, payload):
        shoe = self.shoe
        u = self.update
        if not u.open or len(payload) < 35:
            shoe.port.refused += 1
            return
        index = payload[0] << 8 | payload[1]
        try:
            got = u.chunk(index, payload[2:34], payload[34:])
        except Refused as e:
            self._refused(e.reason, bytes(32))
            return
        if got < 0:
            shoe.port.refused += 1  # not the session's next chunk: someone else's bytes
            return
        if got == 3:  # chunk 0: the release key's word on the stream, before a byte is kept
            _element_free(shoe)
            why = u.authorize(payload[34:], room(shoe))
            if why:
                self._refused(why, bytes(32), u.version)
                return
            self._record(_M_UPDATE_BEGUN, u.counter, u.by, struct.pack(">I", u.length) + u.head)
        _send_unsigned(shoe, frames.T_UPDATE_PROGRESS, struct.pack(">H", index))
        if got == 2:
            self._finish()

    def _finish(self):
        shoe = self.shoe
        u = self.update
        if not _between_rounds(shoe):
            self._refused(R_INTERRUPTED, bytes(32))  # the dealer dealt on: no switch mid-round
            return
        _element_free(shoe)
        reason, digest, version = u.finish()
        if reason:
            self._refused(reason, digest, version)
            return
        from shoe import integrity

        running = integrity.manifest(u.root)
        repair = (getattr(shoe, "cause", 0) == frames.TILT_CODE
                  or running is None or version > running[1])
        if not self._record(_M_UPDATE_APPLIED, u.counter, u.by,
                            digest + struct.pack(">I", version), repair):
            u.discard()  # never a switch the log does not record: the host's budget is spent
            _send_unsigned(shoe, frames.T_UPDATE_PROGRESS, b"\xff\xff")  # (the host asks why)
            return
        shoe.finish_all()  # signed and sent by the firmware that checked it, before the switch
        u.switch()
        shoe.restart = True

    def _rekey(self, counter, payload):
        shoe = self.shoe
        if len(payload) > _BY_LEN:
            shoe.refuse(REJ_UNKNOWN, frames.C_REKEY, counter)
            return
        if getattr(shoe, "shoe", None) is None or not _between_rounds(shoe):
            shoe.refuse(REJ_NOT_NOW, frames.C_REKEY, counter)
            return
        s = shoe.shoe
        if not rekey_due(shoe.flash, s.shoe_no, s.round_no):
            # one rekey a dealt shoe: a script holding the command key cannot burn the slots
            shoe.refuse(_REJ_NO_ROUND, frames.C_REKEY, counter)
            return
        if not shoe.host_frame(2, True):  # its two frames (the budget keeps two for a rekey)
            shoe.unlogged += 1
            return
        from shoe import rekey

        try:
            version, xy, _, certificate = rekey.make(shoe.element, shoe.flash)
        except ValueError:
            shoe.host_frames -= 2  # (the refusal is the one frame it keeps)
            shoe.refuse(_REJ_KEYS_EXHAUSTED, frames.C_REKEY, counter)  # every slot is used
            return
        except Exception:
            shoe.host_frames -= 2
            shoe.refuse(REJ_NOT_NOW, frames.C_REKEY, counter)  # the element failed: again later
            return
        # closed before the frames: a power cut after make() leaves its slot to certify again
        shoe.flash.write_atomic(REKEY_FILE, struct.pack(">H", s.shoe_no))
        v = struct.pack(">H", version)
        # both signed by the current version, then the identity moves to the new one
        o = shoe.outbox  # (their room taken from the budget above)
        add_frame(o, frames.T_MAINTENANCE, frame_payload(_M_REKEY, counter, payload, v + xy))
        add_frame(o, frames.T_MAINTENANCE,
                  frame_payload(_M_REKEY_CERTIFICATE, counter, payload, v + certificate))
        shoe.finish_all()
        rekey.commit(shoe.flash, version)
        # the frames from here on are signed with the new version
        o.key_id, o.slot = version, result_slot(version)
        shoe.identity = (version, shoe.identity[1])

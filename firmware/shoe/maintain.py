"""Maintenance commands, for the dealing shoe and the tilted shoe alike: a firmware update
(shoe/update.py) and, on a dealing shoe, a rekey (shoe/rekey.py). Each is recorded in the shoe's
chain as maintenance frames — who asked (the command's counter and the name the host signed into
it), what, and the MANIFEST digest or the new key — so every change of what runs or signs reaches
the audit log. Not on the card path: the shoe is between rounds or tilted.

The shoe offers the host methods this needs: `outbox`, `element`, `flash`, `port`, `code_root`,
`code_skip`, `finish_all()`, `refuse(reason, ftype, counter)`, `send_unsigned(ftype, payload)`,
`between_rounds()` and `use_key(version)`; `restart` is set once the shoe must boot again."""

import struct

from shoe import frames
from shoe.port import REJ_NOT_NOW, REJ_UNKNOWN
from shoe.update import R_FLASH, R_INTERRUPTED, Refused, Update


class Maintainer:
    def __init__(self, shoe):
        self.shoe = shoe
        self.update = None

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

    def _record(self, what, counter, by, detail):
        self.shoe.outbox.add(frames.T_MAINTENANCE, frames.maintenance(what, counter, by, detail))

    def _begin(self, counter, payload):
        shoe = self.shoe
        if not 36 <= len(payload) <= 36 + frames.BY_LEN:
            shoe.refuse(REJ_UNKNOWN, frames.C_UPDATE, counter)
            return
        if not shoe.between_rounds():
            shoe.refuse(REJ_NOT_NOW, frames.C_UPDATE, counter)
            return
        length = struct.unpack(">I", payload[:4])[0]
        head, by = payload[4:36], payload[36:]
        u = self.update
        if u is None:
            u = self.update = Update(shoe.code_root, shoe.code_skip, shoe.element)
        elif u.open:
            self._refused(R_INTERRUPTED, bytes(32))  # the session before this one never ended
        try:
            u.begin(length, head, counter, by)
        except Refused as e:
            self._record(frames.M_UPDATE_REFUSED, counter, by, bytes((e.reason,)) + bytes(32))
            return
        except OSError:
            self._record(frames.M_UPDATE_REFUSED, counter, by, bytes((R_FLASH,)) + bytes(32))
            return
        self._record(frames.M_UPDATE_BEGUN, counter, by, payload[:36])

    def _refused(self, reason, digest):
        u = self.update
        u.discard()
        self._record(frames.M_UPDATE_REFUSED, u.counter, u.by, bytes((reason,)) + digest)

    def _chunk(self, payload):
        shoe = self.shoe
        u = self.update
        if u is None or not u.open or len(payload) < 35:
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
        shoe.send_unsigned(frames.T_UPDATE_PROGRESS, struct.pack(">H", index))
        if got == 2:
            self._finish()

    def _finish(self):
        shoe = self.shoe
        u = self.update
        if not shoe.between_rounds():
            self._refused(R_INTERRUPTED, bytes(32))  # the dealer dealt on: no switch mid-round
            return
        reason, digest = u.finish()
        if reason:
            self._refused(reason, digest)
            return
        self._record(frames.M_UPDATE_APPLIED, u.counter, u.by, digest)
        shoe.finish_all()  # signed and sent by the firmware that checked it, before the switch
        u.switch()
        shoe.restart = True

    def _rekey(self, counter, payload):
        shoe = self.shoe
        if len(payload) > frames.BY_LEN:
            shoe.refuse(REJ_UNKNOWN, frames.C_REKEY, counter)
            return
        if not shoe.between_rounds() or not hasattr(shoe, "use_key"):
            shoe.refuse(REJ_NOT_NOW, frames.C_REKEY, counter)
            return
        from shoe import rekey

        try:
            version, xy, _, certificate = rekey.make(shoe.element, shoe.flash)
        except Exception:
            shoe.refuse(REJ_NOT_NOW, frames.C_REKEY, counter)  # every slot used, or the bus
            return
        v = struct.pack(">H", version)
        # both signed by the current version, then the identity moves to the new one
        self._record(frames.M_REKEY, counter, payload, v + xy)
        self._record(frames.M_REKEY_CERTIFICATE, counter, payload, v + certificate)
        shoe.finish_all()
        rekey.commit(shoe.flash, version)
        shoe.use_key(version)

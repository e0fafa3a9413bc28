"""What the dealing shoe answers a host, for shoe/app.py's ShoeApp (`app`): the commands the
command port found authentic, a refusal as a chained frame within the host's budget, the
regulator's integrity challenge and the status a hello asks for. The card path is app.py's;
nothing here runs on it."""

import struct

from shoe import frames
from shoe.dealing import PH_ENDED
from shoe.element import ElementError
from shoe.inputs import IN_NEW_SHOE, IN_NONE, IN_RESOLVE
from shoe.port import REJ_FLASH_LOW, REJ_NOT_NOW, REJ_UNKNOWN, sign_into
from shoe.store import HOST_FRAMES, R_ACK

try:
    from micropython import const
except ImportError:  # CPython (tests): const is only a compiler hint
    def const(x):  # type: ignore[misc]
        return x


_MAX_SEED = const(64)


def refuse(app, reason, ftype, counter):
    """A refused command is itself a chained frame, so the refusal reaches the audit log,
    within the host's budget (host_frame)."""
    if host_frame(app):
        commit_rejected(app, reason, ftype, counter)
    else:
        app.unlogged += 1


def host_frame(app, n=1, rekey=False):
    """May the log keep `n` more frames a host caused (refusals, maintenance records)? Up to
    store.HOST_FRAMES between two compactions, the last two only for a rekey's (their room
    is in the one reserve); beyond, what the host asked is counted (status `unlogged`) and
    kept nowhere, so no host fills the flash, acknowledged or not (an acknowledged frame
    stays on flash until the next compaction, at a new shoe)."""
    if app.host_frames + n > (HOST_FRAMES if rekey else HOST_FRAMES - 2):
        return False
    app.host_frames += n
    return True


def commit_rejected(app, reason, ftype, counter):
    o = app.outbox
    first = o.seq + 1
    at = o.begin(frames.T_COMMAND_REJECTED)
    o.end(frames.command_rejected_into(o.building, at, reason, ftype, counter))
    app._commit(IN_NONE, 0, 0, first)


def command(app, ftype, counter, payload):
    """An authentic host command (the port checked shoe, signature and, where it counts, the
    counter)."""
    if ftype == frames.C_INTEGRITY:
        if 1 <= len(payload) <= _MAX_SEED:
            # A regulator's challenge: HMAC(seed, code), signed by the element. Fresh seeds
            # make recorded answers useless.
            send_one(app, frames.T_INTEGRITY, app.integrity, seeded(app, payload))
        return
    if ftype == frames.C_CHECKPOINT:
        # Anyone may ask for the shoe's log head: the shoe signs the root it computed (never
        # one the host supplies) of every frame its log holds, or sends again the one it
        # signed when the log has not grown since.
        tree = app.outbox.tree
        if tree.signed_size and tree.signed_size == tree.size:
            tree.unsent = True
        else:
            tree.want = True
        return
    if ftype == frames.C_HELLO:
        # Any hello only makes the shoe say where it stands and resend what the host has
        # not acknowledged (finished frames, byte for byte as first sent). The status is made
        # by service() once every frame made before the hello is finished, so it comes after
        # them (a host that has the status has everything made before it); its digest and
        # Sign take turns with the frames', so a flood of hellos never holds up a card.
        if not app._asked:
            app._asked = 1
            app._asked_seq = app.outbox.seq
            # read now, as the hello is received (os.statvfs allocates), not in the
            # service() passes that make the status
            app._asked_low = app.flash_low()
        return
    if frames.C_UPDATE <= ftype <= frames.C_REKEY:  # an update or a rekey
        if app.maint is None:
            from shoe.maintain import Maintainer

            app.maint = Maintainer(app)
        app.maint.command(ftype, counter, payload)
        return
    s = app.shoe
    if ftype == frames.C_ACK:
        # seq_at: an acknowledged seq of 2**30 or more is none the shoe made (-1, ignored)
        if len(payload) == 4 and app.outbox.ack(frames.seq_at(payload, 0)):
            # packed into the log's record buffer: a bytes object would be an allocation
            struct.pack_into(">I", app.log.rec, 3, app.outbox.acked)
            app.log.commit(R_ACK, 4)
    elif ftype == frames.C_RESOLVE and len(payload) == 1:
        if not app._input(IN_RESOLVE, payload[0], 1):
            refuse(app, REJ_NOT_NOW, ftype, counter)
    elif ftype == frames.C_NEW_SHOE:
        # only once the shoe has ended: a new shoe compacts the log (a sector erased), and
        # one asked for over a shoe that dealt nothing would let a host wear the flash out
        if s.phase == PH_ENDED:
            if app.flash_low():  # the host acknowledges, then asks again
                app.low = 1
                refuse(app, REJ_FLASH_LOW, ftype, counter)
            else:
                app._input(IN_NEW_SHOE)
        else:
            refuse(app, REJ_NOT_NOW, ftype, counter)
    else:
        refuse(app, REJ_UNKNOWN, ftype, counter)


def seeded(app, seed):
    if app.code_root is None:
        return bytes(32)  # a development run has no certified code tree to vouch for
    from shoe import integrity  # only for a regulator's challenge: not kept in RAM before

    return integrity.seeded(bytes(seed), app.code_root, app.code_skip)


def send_one(app, ftype, *payload):
    """An integrity answer: seq and chain are the newest *finished* chained frame's (a frame
    still waiting for the element is not yet part of what the shoe vouches for), signed by
    the element right now (blocking: a regulator's challenge, at most one a second)."""
    o = app.outbox
    app.settle()
    buf = app._one
    frames.head_into(buf, 0, ftype, o.key_id, o.shoe, app.boot, app._newest_seq(),
                     app._newest_digest())
    n = frames.integrity_into(buf, frames.HEADER_LEN, *payload)
    try:
        n = sign_into(app.element, o.slot, buf, frames.HEADER_LEN + n)
    except ElementError:
        app.element_errors += 1
        return
    app.send_frame(buf, 0, n)


def status_into(app, buf):
    """A status body at buf[0:] (seq and chain: the newest finished frame's); its length."""
    s = app.shoe
    o = app.outbox
    newest = app._newest_seq()  # (a squeeze's withheld frames: not named, not counted)
    frames.head_into(buf, 0, frames.T_STATUS, o.key_id, o.shoe, app.boot, newest,
                     app._newest_digest())
    pending = newest > o.acked
    # Squeeze: a status answers any unsigned hello, so who draws next (and how far the round
    # has gone) would tell the cable what the withheld frames hide.
    flags = frames.S_WITHHELD if app.hold_from else 0
    if app._asked_low:
        flags |= frames.S_FLASH_LOW
    hidden = flags & frames.S_WITHHELD
    return frames.HEADER_LEN + frames.status_into(
        buf, frames.HEADER_LEN, s.phase, s.shoe_no, s.round_no, 0 if hidden else s.position,
        0 if hidden else s.due(), app.port.counter, o.acked, o.acked + 1 if pending else 0,
        newest if pending else 0, app.integrity, app.port.refused, flags,
        app.port.bad_key, app.unlogged)

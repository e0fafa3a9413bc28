"""`sabot deploy` to a provisioned shoe: the update channel of the sabot protocol
(docs/PROTOCOL.md, "Updates"; the shoe's side is firmware/shoe/update.py). No REPL is involved:
the build's files and its release-signed MANIFEST go to the shoe as one stream in chunks; a
signed, counted C_UPDATE names the stream's length and the head of a hash chain that
authenticates every chunk. The shoe stages the files, checks them against the MANIFEST and the
MANIFEST's signature against the release key it already trusts, records the outcome as a chained
maintenance frame, and only then switches and boots the new tree. `--rekey` is a signed C_REKEY:
the element makes the next result key and its attestation key certifies it (two chained
maintenance frames).

The stream here is the host's own rendering of the canonical code-tree form (release/build.py's
`tree_files` order and framing), not the firmware's."""

from __future__ import annotations

import hashlib
import os
import struct
import time
from collections.abc import Callable
from typing import Any

from sabot import protocol as pr
from sabot.errors import SabotError
from sabot.keys import CommandKey
from sabot.link.transport import ShoePort
from sabot.registry import ShoeEntry
from sabot.release.build import read_update, tree_files

CHUNK_DATA = 120  # stream bytes a chunk carries (firmware/shoe/update.py CHUNK_DATA)
BEGIN_WAIT = 12.0  # the shoe verifies at most one signed command a second
CHUNK_WAIT = 1.0  # a chunk unanswered this long is sent again
CHUNK_TRIES = 8
RECORD_WAIT = 5.0  # a chained frame the shoe made is signed and sent (a Sign or two) by then
CHECK_WAIT = 30.0  # staging checked (a digest of every file, one Verify), the outcome signed
BOOT_WAIT = 30.0  # the shoe boots its new tree and answers again


def stream(build_dir: str) -> bytes:
    """The code tree in canonical form — path, 0, length(4), content, paths in byte order — and
    then the MANIFEST the same way."""
    out = bytearray()
    for rel in tree_files(build_dir) + ["MANIFEST"]:
        data = open(os.path.join(build_dir, rel), "rb").read()
        out += rel.encode() + b"\0" + struct.pack(">I", len(data)) + data
    return bytes(out)


def chain(data: bytes) -> tuple[bytes, list[tuple[int, bytes, bytes]]]:
    """(head, chunks): chunk i is (i, h(i+1), piece), h(i) = SHA-256(i(2) ‖ h(i+1) ‖ piece), the
    last h(i+1) 32 zeros; head = h(1). Built from the end, so each hash commits to every chunk
    after it and the signed head to the whole stream."""
    pieces = [data[i : i + CHUNK_DATA] for i in range(0, len(data), CHUNK_DATA)]
    nxt = bytes(32)
    chunks: list[tuple[int, bytes, bytes]] = []
    for i in range(len(pieces), 0, -1):
        chunks.append((i, nxt, pieces[i - 1]))
        nxt = chunk_hash(i, nxt, pieces[i - 1])
    chunks.reverse()
    return nxt, chunks


def chunk_hash(i: int, nxt: bytes, piece: bytes) -> bytes:
    return hashlib.sha256(struct.pack(">H", i) + nxt + piece).digest()


def release_chunk(version: int, board: str, signature: bytes) -> bytes:
    """Chunk 0's data: version(4), the release key's signature over the stream (the build's
    UPDATE; 64), len(board)(1), board. The shoe checks it before it keeps a byte."""
    b = board.encode()
    return struct.pack(">I", version) + signature + bytes((len(b),)) + b


def prepared(build_dir: str) -> tuple[int, bytes, list[tuple[int, bytes, bytes]]]:
    """A build's stream as it is sent: its length, h(0) (the head the C_UPDATE carries) and the
    chunks from chunk 0 (the release key's signature over the stream, from the build's UPDATE)
    on. SabotError when UPDATE was signed for other files than the build holds."""
    data = stream(build_dir)
    head, chunks = chain(data)
    version, board, length, signed_head, signature = read_update(build_dir)
    if (length, signed_head) != (len(data), head):
        raise SabotError(f"{build_dir}/UPDATE was signed for other files than the build holds "
                         "now: build it again with `sabot firmware`")
    release = release_chunk(version, board, signature)
    return length, chunk_hash(0, head, release), [(0, head, release), *chunks]


class ShoeChannel:
    """The shoe's frames on an open port, each signed one checked against the registry entry;
    commands signed with the command key, counted from the shoe's own counter."""

    def __init__(self, port: ShoePort, key: CommandKey | None, config: ShoeEntry) -> None:
        self.port, self.key, self.config = port, key, config
        self.status: dict[str, Any] | None = None
        self.status_frame: pr.Frame | None = None
        self.backlog: list[pr.Frame] = []

    def authentic(self, f: pr.Frame) -> bool:
        public = self.config.public_key(f.key_id)
        return f.shoe_id == self.config.shoe_id and public is not None and pr.verify(public, f)

    def hello(self, wait: float) -> dict[str, Any] | None:
        """A hello every half second until the shoe's signed status comes (None after `wait`
        seconds); the frames it resends after the status wait in the backlog."""
        rest: list[pr.Frame] = []
        f = self.port.status_where(self.config.shoe_id, self.authentic, wait, rest)
        self.backlog = [r for r in rest if r.shoe_id == self.config.shoe_id]
        if f is None:
            return None
        self.status_frame, self.status = f, pr.decode_status(f.payload)
        return self.status

    def send(self, ftype: int, payload: bytes, counter: int = 0) -> None:
        self.port.send_command(self.key, self.config.shoe_id, ftype, payload, counter)

    def wait_for(self, accept: Callable[[pr.Frame], Any], wait: float,
                 again: Callable[[], None] | None = None, every: float = 1.0) -> Any:
        """The first value `accept` returns for an incoming frame of this shoe (None: not that
        one); None at the end of `wait` seconds. `again` is called every `every` seconds
        meanwhile. Frames that arrived with the one taken wait for the next call."""
        end, last = time.monotonic() + wait, time.monotonic()
        while True:
            while self.backlog:
                f = self.backlog.pop(0)
                got = accept(f)
                if got is not None:
                    return got
            if time.monotonic() >= end:
                return None
            self.backlog = [f for _, f in self.port.frames(0.05)
                            if isinstance(f, pr.Frame) and f.shoe_id == self.config.shoe_id]
            if again is not None and time.monotonic() - last >= every:
                again()
                last = time.monotonic()

    def answer_to(self, counter: int, wait: float, again: Callable[[], None] | None = None,
                  every: float = 1.0, taken: Callable[[pr.Frame], bool] | None = None
                  ) -> tuple[str, dict[str, Any]] | None:
        """The shoe's signed, chained word on the command with this counter: ("maintenance", rec)
        or ("command_rejected", rec); or ("taken", {}) for a frame `taken` accepts (an unsigned
        sign that it went on, where the shoe could not record its word)."""
        def accept(f: pr.Frame) -> tuple[str, dict[str, Any]] | None:
            if taken is not None and taken(f):
                return "taken", {}
            if f.type not in (pr.T_MAINTENANCE, pr.T_COMMAND_REJECTED) or not self.authentic(f):
                return None
            kind, rec = pr.decode_payload(f)
            return (kind, rec) if rec["counter"] == counter else None

        return self.wait_for(accept, wait, again, every)

    def command(self, ftype: int, payload: bytes, what: str,
                after: Callable[[], None] | None = None,
                taken: Callable[[pr.Frame], bool] | None = None) -> tuple[int, dict[str, Any]]:
        """A counted command and the shoe's maintenance record of it (SabotError when refused or
        unanswered). The counter is the shoe's status counter + 1: a hello first. `after` is
        sent after the command each time it is (an update's chunk 0, which the record waits
        for)."""
        if self.hello(5.0) is None:
            raise SabotError(f"{self.port.url}: shoe {pr.shoe_id_text(self.config.shoe_id)} did "
                             "not answer")
        assert self.status is not None
        counter = self.status["host_counter"] + 1

        def send() -> None:
            self.send(ftype, payload, counter)
            if after is not None:
                time.sleep(0.3)  # the shoe takes a signed command, then checks it
                after()

        send()
        got = self.answer_to(counter, BEGIN_WAIT, again=send, every=2.0, taken=taken)
        if got is None:
            before = self.status
            again = self.hello(5.0)
            name = pr.shoe_id_text(self.config.shoe_id)
            if again is not None and pr.refused_for_key(again) > pr.refused_for_key(before):
                raise SabotError(f"shoe {name} refused the signed {what} command: its element "
                                 "found the signature not the command key's (--key: the one it "
                                 "was provisioned for)")
            if again is not None and again["refused"] > before["refused"]:
                raise SabotError(f"shoe {name} was busy and did not take the {what} command "
                                 f"within {BEGIN_WAIT:g} s ({again['refused'] - before['refused']}"
                                 " frames refused over its rate or while it checked another "
                                 "command, none for the key): try again")
            raise SabotError(f"shoe {name} did not answer the {what} command within "
                             f"{BEGIN_WAIT:g} s")
        kind, rec = got
        if kind == "command_rejected":
            why = {"not_now": "the shoe is mid-round or holds an irregularity: finish or "
                              "resolve it first",
                   "keys_exhausted": "every result key slot of its element is used: it can "
                                     "make no further version",
                   "no_round_since_rekey": "it takes one rekey a dealt shoe: deal a round "
                                           "first (since provisioning, or in a later shoe "
                                           "than the last rekey's)",
                   }.get(rec["reason"], rec["reason"])
            raise SabotError(f"shoe {pr.shoe_id_text(self.config.shoe_id)} refused the {what}: "
                             f"{why}")
        return counter, rec


class OutcomeUnseen(ConnectionError):
    """The link went after the shoe took every chunk, before its outcome was read: the shoe may
    have switched and be booting the update (a board's reset can drop the outcome frame with
    the port), or refused it. Its next status and its code tree's HMAC tell which."""


def update(port: ShoePort, key: CommandKey, config: ShoeEntry, info: dict[str, Any],
           by: str, log: Callable[[str], Any]) -> dict[str, Any]:
    """Send the build in `info` (release/build.py's) to the shoe; the shoe's signed outcome.
    SabotError when the shoe refused it (then it still runs what it ran)."""
    ch = ShoeChannel(port, key, config)
    length, head, chunks = prepared(info["dir"])
    # chunk 0, the release key's signature over the stream: the shoe checks it, then records
    # update_begun (or update_refused), before it keeps a byte
    _, nxt0, release = chunks[0]
    counter, rec = ch.command(pr.C_UPDATE, struct.pack(">I", length) + head
                              + pr.maintenance_by(by), "update",
                              after=lambda: ch.send(pr.C_UPDATE_DATA, bytes(2) + nxt0 + release),
                              taken=lambda f: (f.type == pr.T_UPDATE_PROGRESS
                                               and f.payload[:2] == bytes(2)))
    before = ch.status or {}
    if not rec:  # chunk 0 taken (its unsigned progress comes at once): its record, signed, next
        got = ch.answer_to(counter, RECORD_WAIT)
        if got is None:
            log("the shoe took the release key's signature but could not record update_begun "
                "(the frames a host may have it keep are used up until its next shoe)")
        else:
            rec = got[1]
    if rec and rec["what"] == "update_refused":
        raise SabotError(f"shoe {pr.shoe_id_text(config.shoe_id)} refused the update before "
                         f"keeping any of it: {rec['reason']}; it still runs its firmware")
    log(f"update begun (command {counter}): sending {length:,} B in {len(chunks) - 1} chunks "
        "after the release key's signature")
    step = max(1, len(chunks) // 10)
    for i, nxt, piece in chunks[1:]:
        payload = struct.pack(">H", i) + nxt + piece
        index = struct.pack(">H", i)

        def taken(f: pr.Frame) -> Any:
            if f.type == pr.T_UPDATE_PROGRESS and f.payload[:2] == index:
                return True
            if f.type == pr.T_MAINTENANCE and ch.authentic(f):
                rec = pr.decode_payload(f)[1]
                if rec["counter"] == counter and rec["what"] == "update_refused":
                    raise SabotError(f"the shoe refused the update at chunk {i}: "
                                     f"{rec['reason']}; it still runs its firmware")
            return None

        for _ in range(CHUNK_TRIES):
            ch.send(pr.C_UPDATE_DATA, payload)
            if ch.wait_for(taken, CHUNK_WAIT):
                break
        else:
            raise SabotError(f"the shoe did not take chunk {i} of {len(chunks)} after "
                             f"{CHUNK_TRIES} tries: the update is abandoned; the shoe still "
                             "runs its firmware")
        if i and (i % step == 0 or i == len(chunks) - 1):
            log(f"  sent {i} of {len(chunks) - 1} chunks ({min(i * CHUNK_DATA, length):,} B)")
    try:  # (progress 0xFFFF, unsigned: the shoe could not record an outcome; its status says)
        got = ch.answer_to(counter, CHECK_WAIT, taken=lambda f: (
            f.type == pr.T_UPDATE_PROGRESS and f.payload[:2] == b"\xff\xff"))
    except ConnectionError as e:
        raise OutcomeUnseen(str(e)) from None
    if got is None or got[0] == "taken":
        again = ch.hello(5.0)
        if again is not None and (again.get("refusals_unlogged") or 0) > (
                before.get("refusals_unlogged") or 0):
            raise SabotError(f"shoe {pr.shoe_id_text(config.shoe_id)} took the build but could "
                             "not record its outcome, so it did not switch: the frames a host "
                             "may have it keep are used up until its next shoe (an upgrade, or "
                             "the repair of a tilted shoe, is recorded all the same); it still "
                             "runs its firmware")
        raise SabotError(f"shoe {pr.shoe_id_text(config.shoe_id)} sent no outcome of the update "
                         f"within {CHECK_WAIT:g} s")
    rec = got[1]
    if rec["what"] == "update_refused":
        raise SabotError(f"shoe {pr.shoe_id_text(config.shoe_id)} refused the update: "
                         f"{rec['reason']} "
                         f"(MANIFEST {rec['manifest'][:16]}...); it still runs its firmware")
    if rec["manifest"] != info["manifest"]:
        raise SabotError(f"the shoe switched to MANIFEST {rec['manifest'][:16]}..., not the "
                         f"build's {info['manifest'][:16]}...")
    log(f"the shoe checked the build (version {rec['version']}) against its MANIFEST and the "
        "release key, recorded the update (signed frame) and is booting it")
    return rec


def back_after_boot(port: ShoePort, key: CommandKey, config: ShoeEntry) -> dict[str, Any]:
    """The shoe's first signed status after it booted the new tree."""
    ch = ShoeChannel(port, key, config)
    end = time.monotonic() + BOOT_WAIT
    while time.monotonic() < end:
        try:
            if port.closed:
                try:
                    port.reopen(max(end - time.monotonic(), 1.0))
                except SabotError:  # its port not back (a tty that a bridge must recreate)
                    continue  # the line below says so, once the wait is over
            st = ch.hello(2.0)
            if st is not None and ch.status_frame is not None:
                return dict(st, boot=ch.status_frame.boot)
        except ConnectionError:
            port.close()  # the board dropped the port as it reset
            time.sleep(0.2)
    raise SabotError(f"shoe {pr.shoe_id_text(config.shoe_id)} recorded the update (a signed "
                     "frame) and "
                     f"reset, but its port did not answer within {BOOT_WAIT:g} s (a USB bridge "
                     "or socat pty to restart?); once it answers, `sabot status` and `sabot "
                     "verify-firmware` say what it runs")


def rekey(port: ShoePort, key: CommandKey, config: ShoeEntry, by: str
          ) -> tuple[int, bytes, bytes]:
    """The shoe's next result key version: (version, X||Y, certificate), from its two signed
    maintenance frames (both signed by the current version)."""
    ch = ShoeChannel(port, key, config)
    counter, first = ch.command(pr.C_REKEY, pr.maintenance_by(by), "rekey")
    if first["what"] != "rekey":
        raise SabotError(f"the shoe answered the rekey with {first['what']}")

    def certificate(f: pr.Frame) -> dict[str, Any] | None:
        if f.type != pr.T_MAINTENANCE or not ch.authentic(f):
            return None
        rec = pr.decode_payload(f)[1]
        ok = rec["what"] == "rekey_certificate" and rec["counter"] == counter
        return rec if ok else None

    cert = ch.wait_for(certificate, 5.0)
    if cert is None or cert["version"] != first["version"]:
        raise SabotError("the shoe sent its new key but no certificate for it")
    return (first["version"], bytes.fromhex(first["public_key"]),
            bytes.fromhex(cert["certificate"]))

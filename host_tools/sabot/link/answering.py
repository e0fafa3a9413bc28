"""Finding the shoe on a port: its first authentic status on a fresh link, which registered shoe
answers a hello, and when none does, why in one line (silence, an echo, a MicroPython REPL,
another shoe). `sabot status`, `validate`, `new-shoe`, `resolve`, `deploy` and `provision` begin
here (link/operate.py, link/session.py, release/)."""

from __future__ import annotations

import io
import time
from collections import Counter
from typing import Any

from sabot import protocol as pr
from sabot.errors import SabotError
from sabot.link.host import HostLink
from sabot.link.transport import DEFAULT_BAUD, ShoePort
from sabot.registry import Registry, ShoeEntry

ANSWER_WAIT = 5.0  # seconds for a shoe to answer its first hello
ANY_SHOE = 0  # a hello to shoe id 0 is answered by whichever shoe is on the port


def first_status(link: HostLink, url: str, wait: float = ANSWER_WAIT,
                 any_frame: bool = False) -> dict[str, Any] | None:
    """The shoe's first authentic status on a fresh link; a one-line SabotError saying why there
    is none: nothing speaks on the port, something that is not a sabot shoe speaks, or a shoe
    speaks that does not answer to this key; LinkTaken (its own line) when the shoe's link is
    another host's."""
    start = time.monotonic()
    end = start + wait
    reconnected = False
    while True:
        try:
            status = link.ask(min(1.0, max(end - time.monotonic(), 0.05)))
        except ConnectionError:
            if reconnected:
                raise
            # a tty that vanished as it was opened: a board rebooting re-enumerates its USB port
            reconnected = True
            link.reconnect(timeout=max(end - time.monotonic(), 1.0))
            continue
        if status is not None:
            return status
        if any_frame and link.validator.counts["verified"]:
            return link.validator.status  # a shoe that speaks, only not in statuses (squeeze)
        reasons = Counter(r["reason"] for r in link.validator.rejections)
        elapsed = time.monotonic() - start
        problem = _why_silent(link, url, wait, reasons, elapsed, time.monotonic() >= end)
        if problem and not link.rx_bytes and time.monotonic() >= end:
            other = _other_shoe(link)  # silent to our shoe's hello: is another shoe there?
            if other is not None and other != link.validator.shoe_id:
                problem = (f"shoe {pr.shoe_id_text(other)} answers on {url}, not shoe "
                           f"{pr.shoe_id_text(link.validator.shoe_id)}: another shoe on this "
                           "port, or one the registry does not hold (--shoe-id, --registry FILE)")
        if problem:
            link.validator.store.discard_if_unused()  # nothing was stored: leave no database
            raise SabotError(problem)


def _other_shoe(link: HostLink, wait: float = 1.0) -> int | None:
    """The id of a shoe that answers a hello to any shoe (shoe id 0) on the link's port, or
    None. Read here, not by the validator: another shoe's frames are no evidence of this one."""
    deframer = pr.Deframer()
    end = time.monotonic() + wait
    try:
        link.write(pr.command(None, ANY_SHOE, 0, pr.C_HELLO))
        return _status_of_any(link, deframer, end)
    except ConnectionError:
        return None


def _status_of_any(link: HostLink, deframer: pr.Deframer, end: float) -> int | None:
    while time.monotonic() < end:
        for chunk in link.port.read_chunks(0.1):
            for encoded in deframer.feed(chunk):
                try:
                    f = pr.parse(pr.decode_frame(encoded))
                except pr.FrameError:
                    continue
                if f.type == pr.T_STATUS:
                    return f.shoe_id
    return None


def _why_silent(link: HostLink, url: str, wait: float, reasons: Counter[str], elapsed: float,
                timed_out: bool) -> str | None:
    """Why no status came, once it is clear; None while it may still come."""
    if at_repl(bytes(getattr(link, "heard", b""))) and elapsed >= 0.5:
        return at_repl_line(url)
    if elapsed >= 0.5 and _echoes(bytes(getattr(link, "heard", b""))):
        return echo_line(url)
    if reasons["replayed"] and elapsed >= 1.0:  # statuses refused: all older than the store?
        behind = link.validator.behind_store()
        if behind:
            return behind
    if reasons["bad_signature"] and elapsed >= 1.0:
        return (f"the shoe on {url} does not sign with the public key the registry holds for "
                f"shoe {pr.shoe_id_text(link.validator.shoe_id)} (its frames fail the signature "
                "check: another shoe, or a re-provisioned one?)")
    if reasons["unknown_shoe_or_key"] and elapsed >= 1.0:
        v = link.validator
        return (f"the shoe on {url} is another shoe, or signs with a key version the registry "
                f"does not hold for shoe {pr.shoe_id_text(v.shoe_id)} (versions "
                f"{v.config.key_versions_text}): wrong --shoe-id, or run sabot deploy?")
    # a frame met before the hello's status is deferred, not verified, yet it is the shoe's own
    authentic = link.validator.counts["verified"] or link.validator.counts.get("deferred", 0)
    if link.rx_bytes >= 32 and elapsed >= 1.0 and not authentic:
        return (f"{url} does not speak the sabot protocol ({link.rx_bytes} bytes received, no "
                "frame of a shoe among them; wrong port or baud rate?)")
    if timed_out and authentic:
        return (f"shoe {pr.shoe_id_text(link.validator.shoe_id)} on {url} sends its frames but "
                "did not "
                f"answer the hello within {wait:g} s (still signing what it dealt? a longer "
                "--wait)")
    if timed_out and link.rx_bytes:
        return (f"{url} does not speak the sabot protocol ({link.rx_bytes} bytes received in "
                f"{wait:g} s, no frame of a shoe among them; wrong port or baud rate?)")
    if timed_out:
        return (f"no shoe answered on {url} within {wait:g} s: not a byte came back (is it "
                f"powered, at this baud rate, and is it shoe "
                f"{pr.shoe_id_text(link.validator.shoe_id)}?)")
    return None


def echo_line(url: str) -> str:
    return (f"{url} sends back what we send it (our own hello came back): a loopback or an "
            "echoing terminal, not a shoe; wrong port?")


def _echoes(heard: bytes) -> bool:
    """Whether what came back holds a host command (a hello): ours, echoed; no shoe sends one."""
    for encoded in pr.Deframer().feed(heard):
        try:
            if pr.parse(pr.decode_frame(encoded)).type >= pr.C_HELLO:
                return True
        except pr.FrameError:
            continue
    return False


# What a MicroPython REPL says to the bytes of a hello (its Ctrl-A: the raw REPL), or at all
REPL_SAYS = (b"raw REPL; CTRL-B to exit", b"MicroPython v", b"MicroPython ", b">>> ",
             b'Type "help()" for more information')


def at_repl(heard: bytes) -> bool:
    """Whether what came back is a MicroPython REPL talking."""
    return any(marker in heard for marker in REPL_SAYS)


def at_repl_line(url: str) -> str:
    """A shoe at its REPL: blank, its first deploy or its provisioning interrupted or never
    run (a provisioned shoe offers no REPL)."""
    return (f"{url}: the shoe is at its MicroPython REPL, not running the sabot firmware: a "
            "blank shoe (its element not provisioned) whose first deploy or provisioning was "
            "interrupted or never run; it deals and signs nothing. Run sabot deploy --port "
            f"{url} --board BOARD (again: it copies the whole build), then sabot provision "
            f"--port {url} --key FILE")


def open_port(url: str, baud: int = DEFAULT_BAUD, open_timeout: float = 10.0,
              capture: Any = None) -> ShoePort:
    """The shoe's port (ShoePort: retried until `open_timeout`). Its callers open their store
    first, so a store that refuses never touches the port, and drop that store when the port
    fails (no empty database left behind). A shoe whose link another host holds says so on the
    port's first read: LinkTaken (transport.py)."""
    return ShoePort(url, baud, open_timeout, capture)


def answering_shoe(url: str, registry: Registry | None, baud: int = DEFAULT_BAUD,
                   wait: float = ANSWER_WAIT, config: ShoeEntry | None = None,
                   heard: bytearray | None = None) -> ShoeEntry | None:
    """The registered shoe answering on this port: a hello to `config`'s shoe, or to any shoe
    (shoe id 0), and its signed status checked with the registry's key. None when nothing
    answers in the sabot protocol (a blank shoe at its REPL, another device, or no shoe; what
    came back is added to `heard`: silence_line says which); a SabotError when a shoe answers
    that the registry does not hold, or not with the key it holds."""
    got = io.BytesIO()
    port = ShoePort(url, baud, capture=got)
    try:
        status = hello_answer(port, config.shoe_id if config is not None else ANY_SHOE, wait,
                               got)
    finally:
        port.close()
        if heard is not None:
            heard += got.getvalue()
    if status is None:
        return None
    entry = config if config is not None else (registry.shoes.get(status.shoe_id)
                                               if registry is not None else None)
    where = registry.path if registry is not None else "the registry"
    if entry is None or entry.shoe_id != status.shoe_id:
        raise SabotError(f"{url}: shoe {pr.shoe_id_text(status.shoe_id)} answers, but {where} "
                         "does not hold it (provisioned with another registry? --registry FILE)")
    public = entry.public_key(status.key_id)
    if public is None or not pr.verify(public, status):
        raise SabotError(f"{url}: shoe {pr.shoe_id_text(status.shoe_id)} answers, but not with "
                         f"the key {where} holds for it (versions {entry.key_versions_text})")
    return entry


def hello_answer(port: ShoePort, shoe_id: int, wait: float, got: io.BytesIO) -> pr.Frame | None:
    """The status answering a hello to `shoe_id` (sent every half second), or None after `wait`
    seconds, or as soon as what came back (`got`, the port's capture) is plainly no shoe's: a
    REPL's words, or a second of bytes without a frame."""
    start = time.monotonic()
    asked = 0.0
    framed = False
    while time.monotonic() - start < wait:
        if time.monotonic() - asked > 0.5:
            port.send_command(None, shoe_id, pr.C_HELLO)
            asked = time.monotonic()
        for _, f in port.frames(0.1):
            if isinstance(f, pr.Frame):
                framed = True
                if f.type == pr.T_STATUS:
                    return f
        heard = got.getvalue()
        if at_repl(heard) or (len(heard) >= 32 and not framed
                              and time.monotonic() - start >= 1.0):
            return None
    return None


def silence_line(url: str, heard: bytes, wait: float, who: str = "a shoe") -> str:
    """Why no sabot shoe answered on `url`, from what came back (`heard`): a MicroPython REPL,
    bytes that are no frame of a shoe, or nothing at all; each with what to do."""
    if at_repl(heard):
        return at_repl_line(url)
    if _echoes(heard):
        return echo_line(url)
    if heard:
        return (f"{url} does not speak the sabot protocol ({len(heard)} bytes came back in "
                f"{wait:g} s, no frame of a shoe among them: another device on this port, or "
                "the wrong baud rate?)")
    return (f"no reply from {who} on {url} within {wait:g} s: not a byte came back (powered? "
            "the right port?)")


def identify(url: str, registry: Registry, baud: int = DEFAULT_BAUD,
             wait: float = ANSWER_WAIT) -> ShoeEntry:
    """Which registered shoe is on this port (answering_shoe), for a registry of several shoes
    when no --shoe-id is given (a pit's registry, one shoe per port)."""
    heard = bytearray()
    entry = answering_shoe(url, registry, baud, wait, heard=heard)
    if entry is None:
        raise SabotError(silence_line(url, bytes(heard), wait,
                                      f"any shoe of the registry {registry.path}"))
    return entry

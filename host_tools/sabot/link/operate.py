"""Operating a shoe over its port: `sabot status`, `sabot new-shoe`, `sabot resolve`, and the
first-contact checks `sabot validate` shares with them.

Every operation runs a validator on the link (so frames arriving meanwhile are verified, stored
and acknowledged like under `sabot validate`), sends authenticated commands with a counter above
the shoe's last accepted one, and waits for the shoe's own word that the command took effect.
Who gave a resolution or started a shoe is recorded on the host, in the audit store's operator log
(chained with every other row; `sabot history --operations`), each entry naming the shoe's signed
frame that shows it was done: the shoe's resolution frame only says that the host gave it, and its
new shoe's start says nothing of who asked. `sabot audit verify` checks each entry against that
frame, and that every resolution the shoe signed as given from the host has its entry."""

from __future__ import annotations

import getpass
import io
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from sabot import protocol as pr
from sabot.audit.group_commit import GroupCommit
from sabot.audit.records import COUNTER_MAX
from sabot.audit.store import AuditStore
from sabot.audit.validator import Validator
from sabot.errors import SabotError
from sabot.keys import CommandKey
from sabot.link.host import SIGNED_GAP, HostLink
from sabot.link.transport import DEFAULT_BAUD, ShoePort
from sabot.registry import Registry, ShoeEntry

ANSWER_WAIT = 5.0  # seconds for a shoe to answer its first hello
EFFECT_WAIT = 5.0  # seconds for a command to show in the shoe's status
RESEND_LOOK = 1.0  # seconds a command sent again needs left to see its status's answer
# seconds for its signed frame once the status shows it done: the frame is on its way (the
# element signs it), and the operator log's entry must name it, or audit verify will miss it
FRAME_WAIT = 20.0
ANY_SHOE = 0  # a hello to shoe id 0 is answered by whichever shoe is on the port
RESOLUTIONS = {"void-card": 1, "keep-dummy": 2, "void-round": 3, "end-shoe": 4}


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


class Operation:
    """A validator session on a shoe's port for one operator command; or (Operation.on_link)
    one command on a link a validation session holds (`sabot serve`'s)."""

    def __init__(self, url: str, key: CommandKey, db: str, config: ShoeEntry,
                 baud: int = DEFAULT_BAUD, open_timeout: float = 5.0,
                 on_record: Callable[[str, dict[str, Any]], None] | None = None,
                 on_alarm: Callable[[dict[str, Any]], None] | None = None) -> None:
        # the store first: one in use, or not a sabot store, refuses before the port is opened
        validator = Validator(config, db, on_alarm=on_alarm)
        try:
            port = open_port(url, baud, open_timeout)
        except BaseException:
            validator.store.discard_if_unused()  # nothing stored: no database left behind
            raise
        try:
            link = HostLink(port, validator, key)
        except BaseException:
            port.close()
            validator.store.discard_if_unused()
            raise
        self._attach(url, validator, link, on_record)

    @classmethod
    def on_link(cls, url: str, validator: Validator, link: HostLink,
                lock: threading.Lock | GroupCommit | None = None,
                logged: dict[str, Any] | None = None) -> Operation:
        """An operation on a link another session holds, run in that session's thread (which
        alone talks on it); `lock` guards the store it shares with other threads; `logged` is
        added to the operator log's entry (who gave the command, and from where). detach()
        when done."""
        op = cls.__new__(cls)
        op._attach(url, validator, link, None, lock, logged)
        op.cli = False  # its refusals name no command line: the asker is not at one
        return op

    def _attach(self, url: str, validator: Validator, link: HostLink,
                on_record: Callable[[str, dict[str, Any]], None] | None,
                lock: threading.Lock | GroupCommit | None = None,
                logged: dict[str, Any] | None = None) -> None:
        self.url = url
        self.validator = validator
        self.link = link
        self.cli = True
        self.lock = lock
        self.logged = logged or {}
        self.records: list[tuple[str, dict[str, Any]]] = []
        self.seqs: list[int] = []  # the seq of each record's frame
        self.on_record_user = on_record
        self._chained = validator.on_record  # the session's own hook goes on being called
        validator.on_record = self._record

    def detach(self) -> None:
        """The validator's record hook as it was before this operation."""
        self.validator.on_record = self._chained

    def _record(self, kind: str, rec: dict[str, Any]) -> None:
        self.records.append((kind, rec))
        self.seqs.append(self.validator.state["last_seq"])  # the frame being accounted
        if self._chained:
            self._chained(kind, rec)
        if self.on_record_user:
            self.on_record_user(kind, rec)

    def refusals(self, since: int) -> list[dict[str, Any]]:
        return [r for k, r in self.records[since:] if k == "command_rejected"]

    def status(self, wait: float = ANSWER_WAIT) -> dict[str, Any]:
        """The shoe's status, and its word on our command key ("command_key": accepted, refused
        or untested; HostLink.check_key)."""
        st = first_status(self.link, self.url, wait)
        assert st is not None
        verdict = self.link.check_key()
        return dict(self.describe(self.validator.status or st), command_key=verdict)

    def _commands_taken(self, st: dict[str, Any]) -> None:
        if st["command_key"] == "refused":
            raise SabotError(self.link.key_refusal())

    def describe(self, st: dict[str, Any]) -> dict[str, Any]:
        unacked = st["unacked_to"] - st["unacked_from"] + 1 if st["unacked_from"] else 0
        out = {"shoe_id": self.validator.shoe_id, "phase": st["phase"], "shoe": st["shoe"],
               "round": st["round"], "position": st["position"], "due": st["due"],
               "unacknowledged": unacked, "integrity": st["integrity"],
               "boot": self.link.status_boot, "acked": st["acked"],
               "host_counter": st["host_counter"],
               "commands_left": COUNTER_MAX - st["host_counter"], "refused": st["refused"],
               "refused_bad_key": st.get("refused_bad_key"),
               "refusals_unlogged": st.get("refusals_unlogged"), "tilt": st.get("tilt"),
               "flash_low": st.get("flash_low", False), "withheld": st.get("withheld", False)}
        inv = self.validator.state.get("inventory") or {}
        if st["phase"] == "held":
            out["pending"] = inv.get("held")  # the irregularity, as this store saw it
        return out

    def new_shoe(self, by: str) -> dict[str, Any]:
        st = self.status()
        self._commands_taken(st)
        if st["phase"] == "burn_first" and st["position"] == 0:
            return dict(st, started=False)
        if st["phase"] != "ended":
            raise SabotError(f"shoe {st['shoe']} has not ended (phase {st['phase']}, round "
                             f"{st['round']}, card {st['position']}): a new shoe starts only "
                             "after it ends (an irregularity can end it: sabot resolve end-shoe)")
        mark = len(self.records)

        def started(s: dict[str, Any]) -> bool:
            # a short shoe dealt at once may have ended again before the status shows it: its
            # number (or its signed start) says it began
            return (s["phase"] != "ended" or s["shoe"] != st["shoe"] or bool(self.refusals(mark))
                    or self._since(mark, "shoe_start") is not None)

        after = self._until_taken(self.link.new_shoe, started)
        refused = self.refusals(mark)
        if refused:
            raise SabotError(f"the shoe refused new-shoe ({refused[0]['reason']})")
        if after is None or not started(after):
            raise SabotError(f"no status showed a new shoe within {EFFECT_WAIT:g} s: the "
                             "command was sent and may yet take effect; check the table (its "
                             "state, or sabot status) before sending it again")
        # its signed start came before the status that shows it, unless the line lost it
        start = self._signed(mark, "shoe_start", f"shoe {after['shoe']} started, but its "
                             "shoe_start frame")
        out = self.describe(after)
        self.log({"operation": "new_shoe", "by": by, "shoe_id": self.validator.shoe_id,
                  "ended_shoe": st["shoe"], "shoe": start[0]["shoe"], "port": self.url},
                 start[1])
        return dict(out, started=True)

    def resolve(self, resolution: str, by: str) -> dict[str, Any]:
        code = RESOLUTIONS[resolution]
        st = self.status()
        self._commands_taken(st)
        if st["phase"] != "held":
            raise SabotError(f"no irregularity is pending on shoe {st['shoe']} (phase "
                             f"{st['phase']}, round {st['round']}): nothing to resolve")
        mark = len(self.records)

        def done(s: dict[str, Any]) -> bool:
            return (s["phase"] != "held" or bool(self.refusals(mark))
                    or any(k == "resolution" for k, _ in self.records[mark:]))

        after = self._until_taken(lambda: self.link.resolve(code), done)
        refused = self.refusals(mark)
        if refused and refused[0]["reason"] == "not_now":
            raise SabotError(self._inapplicable(resolution, st))
        if refused:
            raise SabotError(f"the shoe refused {resolution} ({refused[0]['reason']}): "
                             f"{WHY_REFUSED.get(refused[0]['reason'], '')}".rstrip(": "))
        if after is None:
            raise SabotError(f"no status showed the resolution within {EFFECT_WAIT:g} s: the "
                             "command was sent and may yet take effect; check the table (its "
                             "state, or sabot status) before sending it again")
        # the signed resolution may follow the status that shows its effect: wait for it
        rec, seq = self._signed(mark, "resolution",
                                "the shoe resolved it, but its signed resolution frame")
        self.log({"operation": "resolve", "resolution": rec["resolution"], "by": by,
                  "shoe_id": self.validator.shoe_id, "shoe": rec["shoe"], "round": rec["round"],
                  "irregularity": rec["kind"], "card": rec["card"], "source": rec["source"],
                  "port": self.url}, seq)
        return dict(self.describe(after), resolution=rec)

    def _until_taken(self, send: Callable[[], None],
                     effect: Callable[[dict[str, Any]], bool]) -> dict[str, Any] | None:
        """Send a signed, counted command; the status that shows its effect, or None if none did
        within EFFECT_WAIT. The shoe checks one signed command at a time in its element and
        refuses, with a count and nothing else, one that comes meanwhile (a forger's on the
        cable, or an acknowledgement on a stalled board): while a status shows that — more
        refused, its command counter not moved — the command is sent again with that status's
        counter. (Sent again after the first was taken, it carries a counter the shoe has
        passed: refused the same way, nothing done twice.)"""
        end = time.monotonic() + EFFECT_WAIT
        before = self.validator.status
        counter, refused = ((before["host_counter"], before["refused"]) if before is not None
                            else (None, None))
        send()
        sends = 1
        while True:
            def settled(s: dict[str, Any]) -> bool:
                return effect(s) or (s["host_counter"] == counter and refused is not None
                                     and s["refused"] > refused)

            after = self.link.ask_until(settled, max(0.0, end - time.monotonic()))
            if after is None or effect(after):
                return after
            # refused unheard, and answered after the last send: that one was not taken either
            if end - time.monotonic() < SIGNED_GAP + RESEND_LOOK:
                raise SabotError(f"the shoe took none of {sends} sends of it within "
                                 f"{EFFECT_WAIT:g} s: each came while its element was checking "
                                 "another signed command (its status counts them refused; a "
                                 "flood on the cable?): nothing was done")
            refused = after["refused"]
            send()
            sends += 1

    def _inapplicable(self, resolution: str, st: dict[str, Any]) -> str:
        """The line for a resolution the shoe refused as not fitting its hold: what holds it and
        the resolutions that do fit."""
        inv = self.validator.state.get("inventory") or {}
        held = st.get("pending") or inv.get("held")
        what = (f"the held {held['kind']}" + (f" ({held['card']})" if held.get("card") else "")
                if held else "what holds the shoe")
        cfg = self.validator.config
        fits = applicable_resolutions(held, st["round"], inv, cfg.decks, cfg.game == "blackjack")
        if fits is None:
            return (f"the shoe refused {resolution} (not_now): it does not apply to {what}; "
                    f"{RESOLUTION_RULE}")
        others = [r for r in fits if r != resolution]
        how = f" (sabot resolve {others[0]} --by NAME)" if self.cli else ""
        return (f"the shoe refused {resolution} (not_now): it does not apply to {what}; "
                f"what applies: {', '.join(others)}{how}")

    def _signed(self, mark: int, kind: str, what: str) -> tuple[dict[str, Any], int]:
        """The shoe's signed `kind` record since `mark` and its frame's seq, waited for up to
        FRAME_WAIT (the status showed the command done); a SabotError starting with `what` when
        it did not come: nothing is then logged."""
        self.link.pump_until(lambda: self._since(mark, kind) is not None, FRAME_WAIT)
        found = self._since(mark, kind)
        if found is None:
            raise SabotError(f"{what} did not arrive within {FRAME_WAIT:g} s: nothing was logged "
                             "(sabot validate stores it when the shoe resends it)")
        return found

    def _since(self, mark: int, kind: str) -> tuple[dict[str, Any], int] | None:
        """The first record of `kind` stored since `mark`, with its frame's seq."""
        for i in range(mark, len(self.records)):
            if self.records[i][0] == kind:
                return self.records[i][1], self.seqs[i]
        return None

    def log(self, entry: dict[str, Any], seq: int) -> None:
        """The operator log's entry, in this session's audit store, naming the frame `seq`."""
        entry = dict(entry, **self.logged)
        if self.lock is None:
            log_operation(self.validator.store, entry, seq)
            return
        with self.lock:
            log_operation(self.validator.store, entry, seq)

    def close(self) -> None:
        self.link.close()
        self.validator.store.close()


# Which resolution fits which hold, as the shoe decides it (firmware/shoe/dealing.py
# DealingState.resolve; tests/test_interfaces.py checks the two agree): named when the shoe
# refuses one.
RESOLUTION_RULE = ("void-card applies to every hold but a card_missing or cards_exhausted after "
                   "the burn; keep-dummy only to a readable card drawn between rounds "
                   "(card_not_due, two_cards); void-round to every hold after the burn; end-shoe "
                   "to every hold")


def applicable_resolutions(held: dict[str, Any] | None, status_round: int,
                           inv: dict[str, Any], decks: int,
                           blackjack: bool = False) -> list[str] | None:
    """The resolutions the shoe takes for `held` (the irregularity's kind and card) given its
    status's round and this host's accounting of the shoe (`inv`); None where this host did not
    see enough of the shoe to tell (met mid-shoe, or mid-hold). A blackjack shoe keeps no
    dummy hand."""
    if not held or inv.get("partial"):
        return None
    kind, card = held["kind"], held.get("card")
    ended = bool(inv.get("ended"))  # a card drawn after the shoe ended
    # held in the burn: its burn frame, sent when the burn completes, has not come
    in_burn = not ended and (kind == "cut_card_in_burn" or not inv.get("burned"))
    between = status_round == inv.get("round", 0)  # no card of a next round out yet
    fits = []
    if in_burn or kind not in ("card_missing", "cards_exhausted", "disputed"):
        fits.append("void-card")
    if (not blackjack and card not in (None, "CUT") and kind in ("card_not_due", "two_cards")
            and not in_burn
            and not ended and between and inv.get("counts", {}).get(card, 0) <= decks):
        fits.append("keep-dummy")
    if not in_burn:
        fits.append("void-round")
    return fits + ["end-shoe"]


WHY_REFUSED = {"not_now": "this resolution does not apply to the pending irregularity",
               "replayed": "a command counter the shoe has already seen",
               "bad_signature": "the command's signature failed (is --key the command key "
               "this shoe was provisioned with?)"}


def log_operation(store: AuditStore, entry: dict[str, Any], seq: int) -> None:
    """One operator action into the audit store's operator log, with the time, the host it was
    given from and the account that gave it, naming the seq of the shoe's frame that shows it."""
    line = dict({"at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host": socket.gethostname(),
                 "user": user_name()}, **entry)
    store.log_operation(line, entry["shoe_id"], seq)


def user_name() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def format_status(st: dict[str, Any]) -> str:
    due = f", {st['due']}'s card due" if st["due"] not in ("none", None) else ""
    if st["due"] == "confirm":  # blackjack: the round's cards are out
        due = ", the dealer's confirm of the hands due"
    pending = ""
    if st.get("pending"):
        card = st["pending"]["card"]
        pending = f"; pending {st['pending']['kind']}" + (f" ({card})" if card else "")
    elif st["phase"] == "held":
        pending = "; an irregularity is pending"
    card = "card withheld (squeeze)" if st.get("withheld") else f"card {st['position']}"
    line = (f"shoe id {pr.shoe_id_text(st['shoe_id'])}: shoe {st['shoe']} round {st['round']}, "
            f"{card}, {st['phase']}{due}{pending}; {st['unacknowledged']} "
            f"unacknowledged; integrity {st['integrity']}; boot {st['boot']}")
    words = {"code_not_the_signed_build": "its code is not the signed build (a signed update "
                                          "repairs it: sabot deploy)",
             "log_unreadable": "its log could not be read",
             "no_secure_element": "no secure element of sabot's answers",
             "boots_spent": "its boot counter is spent"}
    if st.get("tilt"):
        line += (f"\nTILT: {words.get(st['tilt'], st['tilt'])}; it deals nothing and resends "
                 "what it holds")
    if st.get("refusals_unlogged"):
        line += (f"\n{st['refusals_unlogged']} refused commands were counted, not kept as frames: "
                 "16 refusals wait unacknowledged (a host acknowledging them keeps the next)")
    if st.get("flash_low"):
        line += ("\nFLASH LOW: the shoe's flash cannot hold another shoe beside its "
                 f"{st['unacknowledged']} unacknowledged frames; a new shoe is refused until a "
                 "host stores and acknowledges them (sabot validate)")
    return line


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

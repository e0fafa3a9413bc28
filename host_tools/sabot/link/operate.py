"""Operating a shoe over its port: `sabot status`, `sabot new-shoe`, `sabot resolve` (finding the
shoe on the port first: link/answering.py).

Every operation runs a validator on the link (so frames arriving meanwhile are verified, stored
and acknowledged like under `sabot validate`), sends authenticated commands with a counter above
the shoe's last accepted one, and waits for the shoe's own word that the command took effect.
Who gave a resolution or started a shoe is recorded on the host, in the audit store's operator log
(chained with every other row; `sabot history --operations`), each entry naming the shoe's signed
frame that shows it was done: the shoe's resolution frame only says that the host gave it, and its
new shoe's start says nothing of who asked. The entry is stored in the transaction that stores that
frame (Validator.owed). `sabot audit verify` checks each entry against that frame, and that every
resolution the shoe signed as given from the host has its entry."""

from __future__ import annotations

import getpass
import socket
import time
from collections.abc import Callable
from typing import Any

from sabot import protocol as pr
from sabot.audit.records import COUNTER_MAX
from sabot.audit.store import AuditStore
from sabot.audit.validator import Validator
from sabot.errors import SabotError
from sabot.keys import CommandKey
from sabot.link.answering import ANSWER_WAIT, first_status, open_port
from sabot.link.host import SIGNED_GAP, HostLink
from sabot.link.transport import DEFAULT_BAUD
from sabot.registry import ShoeEntry

EFFECT_WAIT = 5.0  # seconds for a command to show in the shoe's status
RESEND_LOOK = 1.0  # seconds a command sent again needs left to see its status's answer
# seconds for its signed frame once the status shows it done: the frame is on its way (the
# element signs it), and the operator log's entry must name it, or audit verify will miss it
FRAME_WAIT = 20.0
RESOLUTIONS = {"void-card": 1, "keep-dummy": 2, "void-round": 3, "end-shoe": 4}
# what a command owes the operator log (Validator.owed): a record -> (done with, its entry or None)
Owed = Callable[[str, dict[str, Any]], tuple[bool, "dict[str, Any] | None"]]


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
                logged: dict[str, Any] | None = None) -> Operation:
        """An operation on a link another session holds, run in that session's thread (which
        alone talks on it, and stores what it reads as its session does); `logged` is added to
        the operator log's entry (who gave the command, and from where). detach() when
        done."""
        op = cls.__new__(cls)
        op._attach(url, validator, link, None, logged)
        op.cli = False  # its refusals name no command line: the asker is not at one
        return op

    def _attach(self, url: str, validator: Validator, link: HostLink,
                on_record: Callable[[str, dict[str, Any]], None] | None,
                logged: dict[str, Any] | None = None) -> None:
        self.url = url
        self.validator = validator
        self.link = link
        self.cli = True
        self.store_refusal = ""  # the audit store's last refusal met, once the command was sent
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

        stamp = operator_line({})  # when, where from and by which login it was given
        owe = self._owe(lambda kind, rec: (kind == "shoe_start", dict(
            stamp, operation="new_shoe", by=by, shoe_id=self.validator.shoe_id,
            ended_shoe=st["shoe"], shoe=rec["shoe"], port=self.url, **self.logged)
            if kind == "shoe_start" else None))
        after = self._until_taken(self.link.new_shoe, started, owe)
        refused = self.refusals(mark)
        if refused or after is None or not started(after):
            # no entry owed: a later start may be the shoe's own (on an empty log), and audit
            # verify asks no start for an entry
            self._disown(owe)
        if refused:
            raise SabotError(f"the shoe refused new-shoe ({refused[0]['reason']})")
        if after is None or not started(after):
            raise SabotError(f"no status showed a new shoe within {EFFECT_WAIT:g} s"
                             f"{self._refused()}: the command was sent and may yet take effect; "
                             "check the table (its state, or sabot status) before sending it "
                             "again")
        # its signed start came before the status that shows it, unless the line lost it
        self._signed(mark, "shoe_start", f"shoe {after['shoe']} started, but its shoe_start "
                     "frame")
        return dict(self.describe(after), started=True)

    def resolve(self, resolution: str, by: str) -> dict[str, Any]:
        code = RESOLUTIONS[resolution]
        st = self.status()
        self._commands_taken(st)
        if st["phase"] != "held":
            raise SabotError(f"no irregularity is pending on shoe {st['shoe']} (phase "
                             f"{st['phase']}, round {st['round']}): nothing to resolve")
        self._caught_up()  # the hold this resolves is the one the store holds
        mark = len(self.records)

        def done(s: dict[str, Any]) -> bool:
            return (s["phase"] != "held" or bool(self.refusals(mark))
                    or any(k == "resolution" for k, _ in self.records[mark:]))

        owe = self._owe(self._resolution_entry(st, resolution, by))
        after = self._until_taken(lambda: self.link.resolve(code), done, owe)
        refused = self.refusals(mark)
        if refused:
            self._disown(owe)
        if refused and refused[0]["reason"] == "not_now":
            raise SabotError(self._inapplicable(resolution, st))
        if refused:
            raise SabotError(f"the shoe refused {resolution} ({refused[0]['reason']}): "
                             f"{WHY_REFUSED.get(refused[0]['reason'], '')}".rstrip(": "))
        if after is None:  # its entry still owed: only a host's command resolves from the host
            raise SabotError(f"no status showed the resolution within {EFFECT_WAIT:g} s"
                             f"{self._refused()}: the command was sent and may yet take effect; "
                             "check the table (its state, or sabot status) before sending it "
                             "again")
        # the signed resolution may follow the status that shows its effect: wait for it
        rec, _ = self._signed(mark, "resolution",
                              "the shoe resolved it, but its signed resolution frame")
        return dict(self.describe(after), resolution=rec)

    def _caught_up(self) -> None:
        """Every frame the shoe's status says it still holds unacknowledged, stored here (they
        come right after the status): a command is given on what the store shows."""
        status = self.validator.status
        newest = status["unacked_to"] if status is not None else 0
        if self.validator.state["last_seq"] < newest and not self.link.pump_until(
                lambda: self.validator.state["last_seq"] >= newest, ANSWER_WAIT):
            raise SabotError("the shoe is still sending what it kept unacknowledged: nothing "
                             "was sent; try again shortly")

    def _resolution_entry(self, st: dict[str, Any], resolution: str, by: str) -> Owed:
        """The operator entry a resolution owes: only to the shoe's resolution of the hold it
        was given for (the shoe, the irregularity and its card as this store saw them), the
        resolution asked, given from the host; a resolution of that hold given otherwise (the
        supervisor's key switch, another host) ends what it owes."""
        held = (self.validator.state.get("inventory") or {}).get("held")
        hold = (held.get("kind"), held.get("card")) if held else None  # None: any of the shoe
        stamp = operator_line({})  # when, where from and by which login it was given

        def owe(kind: str, rec: dict[str, Any]) -> tuple[bool, dict[str, Any] | None]:
            if kind != "resolution" or rec["shoe"] != st["shoe"] or (
                    hold is not None and (rec["kind"], rec["card"]) != hold):
                return False, None
            if rec["source"] != "host" or rec["resolution"] != resolution.replace("-", "_"):
                return True, None
            return True, dict(stamp, operation="resolve", resolution=rec["resolution"], by=by,
                              shoe_id=self.validator.shoe_id, shoe=rec["shoe"],
                              round=rec["round"], irregularity=rec["kind"], card=rec["card"],
                              source=rec["source"], port=self.url, **self.logged)
        return owe

    def _owe(self, owe: Owed) -> Owed:
        """`owe` added to what the validator owes: the operator log's entry for the record this
        command makes, stored in the batch that stores that record's frame, whenever it comes,
        so the entry and the frame it names are stored together or not at all (audit verify
        asks a resolution given from the host for its entry)."""
        self.validator.owed = (*self.validator.owed, owe)
        return owe

    def _through_refusals(self) -> None:
        """`sabot resolve` / `new-shoe`, once the command is on its way: a read the audit
        store refuses for a moment (a backup holding the file) is asked of the shoe again, as
        serve's session does, so the command's record and its entry are stored when the store
        takes them again; what it said last is named should the command give up."""
        if not self.cli:
            return  # serve's session itself goes on after a refusal

        def refused(e: SabotError) -> None:
            self.store_refusal = str(e)
            time.sleep(0.5)  # the shoe asked again, not at once (as serve's session waits)
            # the records of the read it refused were accounted, then undone: not the shoe's
            # word here until the resend is stored
            last = self.validator.state["last_seq"]
            while self.seqs and self.seqs[-1] > last:
                self.seqs.pop()
                self.records.pop()

        self.link.on_store_refused = refused

    def _refused(self) -> str:
        """The store's refusal still standing, for a line that gives up."""
        why = self.validator.store.refusal
        return f" (the audit store refuses what the shoe sends: {why})" if why else ""

    def _disown(self, owe: Owed) -> None:
        """No entry owed: the shoe refused the command, or took none of its sends."""
        self.validator.owed = tuple(o for o in self.validator.owed if o is not owe)

    def _until_taken(self, send: Callable[[], None], effect: Callable[[dict[str, Any]], bool],
                     owed: Owed) -> dict[str, Any] | None:
        """Send a signed, counted command; the status that shows its effect, or None if none did
        within EFFECT_WAIT. The shoe checks one signed command at a time in its element and
        refuses, with a count and nothing else, one that comes meanwhile (a forger's on the
        cable, or an acknowledgement on a stalled board): while a status shows that — more
        refused, its command counter not moved — the command is sent again with that status's
        counter. (Sent again after the first was taken, it carries a counter the shoe has
        passed: refused the same way, nothing done twice.) `owed`: the operator entry the command
        owes (_owe), owed no more when no send was taken."""
        self._through_refusals()
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
                self._disown(owed)  # nothing done: no entry owed
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
        """The shoe's signed `kind` record since `mark` and its frame's seq (the operator entry
        owed to it stored with it), waited for up to FRAME_WAIT (the status showed the command
        done); a SabotError starting with `what` when it is not stored by then. serve's session
        goes on and stores the entry with the frame when the shoe resends it; `sabot resolve` /
        `new-shoe` end their session here (its validator, and what it owes, with it), and nothing
        is logged."""
        try:
            self.link.pump_until(lambda: self._since(mark, kind) is not None, FRAME_WAIT)
        except SabotError as e:  # serve's store refused a read: its session goes on after it
            if self.cli:
                raise  # (the CLI's refusals are ridden out: _through_refusals)
            raise SabotError(f"{what} is not stored yet ({e}); the operator log's entry is "
                             "stored with it when serve stores it") from None
        found = self._since(mark, kind)
        if found is not None:
            return found
        if self.cli:  # this session ends here: the frame is stored by the next, unlogged
            unlogged = ("; sabot audit verify will name that resolution as one without its "
                        "operator entry: note who gave it in the pit's own records"
                        if kind == "resolution" else "")
            raise SabotError(f"{what} did not arrive within {FRAME_WAIT:g} s{self._refused()}: "
                             "nothing was logged (sabot validate stores it when the shoe resends "
                             f"it){unlogged}")
        raise SabotError(f"{what} did not arrive within {FRAME_WAIT:g} s: the operator log's "
                         "entry is stored with it when serve stores it (the shoe resends it)")

    def _since(self, mark: int, kind: str) -> tuple[dict[str, Any], int] | None:
        """The first record of `kind` stored since `mark`, with its frame's seq."""
        for i in range(mark, len(self.records)):
            if self.records[i][0] == kind:
                return self.records[i][1], self.seqs[i]
        return None

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
    store.log_operation(operator_line(entry), entry["shoe_id"], seq)


def operator_line(entry: dict[str, Any]) -> dict[str, Any]:
    """An operator entry as the log keeps it: with the time, the host and the login."""
    return dict({"at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host": socket.gethostname(),
                 "user": user_name()}, **entry)


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

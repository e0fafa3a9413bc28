"""`sabot soak`: whole shoes through the virtual board and the validator while faults are injected:
power cuts (the MicroPython process killed, restarted on the same flash), validator restarts, link
disconnects, line noise (bytes flipped or inserted, both directions), fragmented reads and slow
writes (host commands trickled out two bytes at a time). Nothing may be lost or stored twice, and
every stored round must equal the host's recomputation.

The faults and the dealer's mistakes follow the cards, not the clock (`Plan`): each is due at a
card the seed picks, counted by the shoe's own position, so a seed deals the same schedule and the
same rounds however fast the machine runs."""

from __future__ import annotations

import os
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from sabot import keys
from sabot.audit.records import contract_round
from sabot.audit.store import AuditStore, open_store
from sabot.audit.validator import Validator
from sabot.audit.verify import verify
from sabot.errors import SabotError
from sabot.game import rules
from sabot.game.cards import shuffled_shoe
from sabot.link.host import HostLink
from sabot.link.transport import DEFAULT_BAUD, TIMEOUT, ShoePort
from sabot.protocol import END_SHOE, KEEP_DUMMY, PH_ENDED, PH_HELD, VOID_CARD, VOID_ROUND
from sabot.registry import ShoeEntry
from sabot.virtual.board import VirtualBoard
from sabot.virtual.dealer import Dealer, supervisor_default
from sabot.virtual.dealer_channel import CONFIRM, EMPTY, EXIT_EDGE, SUPERVISOR, card_bytes
from sabot.virtual.provisioning import provision

FAULTS = ("power_cut", "validator_restart", "disconnect", "noise", "fragmented", "slow_writes")
# what a careless dealer or supervisor does, anywhere in a shoe, the burn included
MISTAKES = ("unreadable_card", "card_not_due", "missing_confirm", "extra_cut_card", "shoe_empty")
DRAIN_WAIT = 30.0  # seconds for everything a shoe made to be stored, faults and all
NEW_SHOE_WAIT = 30.0  # seconds for the shoe to begin the next shoe the host asked for
STALL_WAIT = 60.0  # seconds a dealt shoe may show the same state before the soak gives up
# The clock's only say in the soak's course: how long the dealer waits for the shoe to show a card
# taken, and for a mistake's or resolution's effect (after which it takes it there is none: a
# refused resolution, a confirm the shoe ignores). The shoe answers in milliseconds.
CARD_WAIT = 10.0
CHANGE_WAIT = 2.0
RESOLUTION_TRIES = 50


class Plan:
    """What a seed plans, card by card. Before the shoe takes the card at each position (its own
    count of cards out, kept in its flash log: a power cut does not undo it, so a fault is due at
    the same card however the timing fell), a fault with chance `fault_rate` and a mistake with
    chance `mistake_rate`; each supervisor's resolution in turn. Every shoe has its own streams
    for each, seeded from (seed, shoe): a fault never shifts a mistake, nor one shoe the next."""

    def __init__(self, seed: int, fault_rate: float, mistake_rate: float) -> None:
        self.seed = seed
        self.fault_rate = fault_rate
        self.mistake_rate = mistake_rate
        self._faults: dict[int, list[tuple[str, float] | None]] = {}
        self._mistakes: dict[int, list[str | None]] = {}
        self._streams: dict[tuple[int, str], random.Random] = {}

    def stream(self, shoe: int, what: str) -> random.Random:
        key = (shoe, what)
        if key not in self._streams:  # str seeds hash the same in every process (not hash())
            self._streams[key] = random.Random(f"{self.seed}:{shoe}:{what}")
        return self._streams[key]

    def fault(self, shoe: int, position: int) -> tuple[str, float] | None:
        """The fault due before card `position` of the soak's shoe `shoe` (1-based), and a number
        in [0, 1) it uses (the instant of a power cut into the card's handling)."""
        planned = self._faults.setdefault(shoe, [])
        rng = self.stream(shoe, "faults")
        while len(planned) <= position:
            due = rng.random() < self.fault_rate
            kind, arg = rng.choice(FAULTS), rng.random()
            planned.append((kind, arg) if due else None)
        return planned[position]

    def mistake(self, shoe: int, position: int) -> str | None:
        planned = self._mistakes.setdefault(shoe, [])
        rng = self.stream(shoe, "mistakes")
        while len(planned) <= position:
            due = rng.random() < self.mistake_rate
            kind = rng.choice(MISTAKES)
            planned.append(kind if due else None)
        return planned[position]


class SoakDealer(Dealer):
    """The soak's dealer: deals the shoe file, makes the mistakes the plan holds for each card
    (and a supervisor resolves each hold with a resolution drawn in turn: one the shoe refuses
    leaves it held, and another is drawn), and cuts the power a planned instant into a card's
    handling. Only a card is ever cut: the dealer then waits for the board to be off, so no other
    input (a mistake, a resolution) is lost to a cut and the shoe's course stays the seed's."""

    def __init__(self, board: VirtualBoard, tokens: list[str], plan: Plan, shoe: int,
                 made: Counter[str], schedule: list[tuple[int, int, str]]) -> None:
        super().__init__(board, tokens,
                         on_held=self._resolve if plan.mistake_rate else supervisor_default)
        self.plan = plan
        self.shoe = shoe
        self.made = made
        self.schedule = schedule
        self.resolutions = plan.stream(shoe, "resolutions")
        self.mistakes: list[str] = []  # due, waiting for a moment the dealer can make them
        self.cuts: list[float] = []  # power cuts due, each for the next card dealt
        self.checked = -1  # the last position whose plan is taken

    def due(self, position: int) -> list[str]:
        """The link's and the validator's faults due now the shoe is at `position` (each card's
        once); power cuts are kept for the next card dealt, mistakes for the next moment the
        dealer can make one."""
        faults = []
        for at in range(self.checked + 1, position + 1):
            if self.plan.mistake_rate and (mistake := self.plan.mistake(self.shoe, at)):
                self.mistakes.append(mistake)
            if fault := self.plan.fault(self.shoe, at):
                if fault[0] == "power_cut":
                    self.cuts.append(fault[1])
                else:
                    self.schedule.append((self.shoe, at, fault[0]))
                    faults.append(fault[0])
        self.checked = max(self.checked, position)
        return faults

    def _resolve(self, board: VirtualBoard, state: tuple[int, ...]) -> None:
        """Resolutions drawn in turn until the shoe takes one."""
        rng = self.resolutions
        for _ in range(RESOLUTION_TRIES):
            drawn_card = rng.random() < self.plan.mistake_rate
            # ending the shoe is every hold's way out, but a rare one: most shoes should go on
            code = rng.choices((VOID_CARD, KEEP_DUMMY, VOID_ROUND, END_SHOE), (8, 3, 6, 1))[0]
            if drawn_card:  # a card drawn while the shoe is held
                self._card(board, state[2])
            self.made[f"resolution_{code}"] += 1
            self.schedule.append((self.shoe, state[2], f"resolution_{code}"))
            board.send(bytes([SUPERVISOR + code]))
            board.wait_read()
            if board.wait(lambda s: s[0] != PH_HELD, CHANGE_WAIT):
                return

    def _card(self, board: VirtualBoard, position: int) -> None:
        self.made["card_not_due"] += 1
        self.schedule.append((self.shoe, position, "card_not_due"))
        if position < len(self.tokens):
            board.send(card_bytes(self.tokens[position]))
        board.wait_read()  # taken before anything else is sent

    def step(self, timeout: float = 10) -> bool:
        b = self.board
        ind = self.indicator(timeout)
        if ind is None:
            return True  # board off: nothing to do now
        phase, _, position, _, _, _, reveal = ind
        if self.mistakes and phase not in (PH_ENDED, PH_HELD) and not reveal:
            self._mistake(self.mistakes.pop(0), ind)
            return True
        if self.cuts and phase not in (PH_ENDED, PH_HELD) and not reveal \
                and position < len(self.tokens):
            # the planned instant into this card's handling (mid-write included), then off
            proc = b.proc
            self.schedule.append((self.shoe, position, "power_cut"))
            b.cut_power_in(self.cuts.pop(0) * 0.004)
            super().step(timeout)
            if proc is not None:
                proc.wait()
            return True
        return super().step(timeout)

    def _mistake(self, mistake: str, ind: tuple[int, ...]) -> None:
        b = self.board
        if mistake == "shoe_empty" and not (ind[0] < 2 or ind[1] == 2):
            mistake = "missing_confirm"  # between rounds shoe-empty just ends the shoe
        if mistake == "card_not_due":
            self._card(b, ind[2])
        else:
            self.made[mistake] += 1
            self.schedule.append((self.shoe, ind[2], mistake))
            if mistake == "unreadable_card":
                b.send(bytes([EXIT_EDGE]))  # the card left the shoe unread
            elif mistake == "missing_confirm":
                b.send(bytes([CONFIRM]))  # confirmed while a card may still be due
            elif mistake == "extra_cut_card":
                b.send(card_bytes("CUT"))
            else:
                b.send(bytes([EMPTY]))
            b.wait_read()
        b.wait(lambda s: s != ind, CHANGE_WAIT)


class FaultyPort:
    """A shoe's port with line faults injected from outside the host link: noise and fragmented
    reads on the shoe -> host direction, host commands trickled out (slow writes)."""

    def __init__(self, port: ShoePort, rng: random.Random) -> None:
        self.port = port
        self.rng = rng
        self.noise_pending = 0
        self.fragment_pending = 0
        self.slow_writes = 0  # the next N writes trickle out

    @property
    def closed(self) -> bool:
        return self.port.closed

    def reopen(self, timeout: float) -> None:
        self.port.reopen(timeout)

    def close(self) -> None:
        self.port.close()

    def write(self, data: bytes) -> None:
        if self.slow_writes <= 0:
            self.port.write(data)
            return
        self.slow_writes -= 1
        for i in range(0, len(data), 2):  # two bytes at a time, a millisecond apart
            self.port.write(data[i : i + 2])
            time.sleep(0.001)

    def read_chunks(self, wait: float = TIMEOUT) -> list[bytes]:
        """What arrived, with line faults; each chunk reaches the validator as its own read."""
        data = bytearray(self.port.read(wait))
        if not data:
            return []
        if self.noise_pending:
            self.noise_pending -= 1
            for _ in range(self.rng.randint(1, 3)):
                i = self.rng.randrange(len(data))
                if self.rng.random() < 0.5:
                    data[i] ^= 1 << self.rng.randrange(8)
                else:
                    data[i:i] = self.rng.randbytes(self.rng.randint(1, 8))
        if self.fragment_pending:
            self.fragment_pending -= 1
            n = len(data)
            cuts = sorted(self.rng.sample(range(1, n), min(n - 1, 6))) if n > 1 else []
            return [bytes(data[a:b]) for a, b in zip([0] + cuts, cuts + [n])]
        return [bytes(data)]


class Soak:
    def __init__(self, workdir: str, seed: int = 0, fault_rate: float = 0.04,
                 progress: Callable[[Soak], None] | None = None, baud: int = DEFAULT_BAUD,
                 mistake_rate: float = 0.0) -> None:
        self.plan = Plan(seed, fault_rate, mistake_rate)
        # what a line fault does once due (the bytes noise flips or inserts, where a read is
        # cut): seeded too, though which frames it hits depends on how the reads fall
        self.rng = random.Random(f"{seed}:line")
        self.workdir = workdir
        self.shoes = 0  # the shoes begun
        self.schedule: list[tuple[int, int, str]] = []  # (shoe, card, fault or mistake), in order
        self.mistakes: Counter[str] = Counter()
        self.progress = progress
        self.key = keys.create(os.path.join(workdir, "command.pem"))
        self.flash = os.path.join(workdir, "flash")
        self.db = os.path.join(workdir, "audit.db")
        shoe_id, version, pem = provision(self.flash, self.key)[:3]
        self.config = ShoeEntry(shoe_id)
        self.config.add_public_key(version, pem)
        self.rejected: Counter[str] = Counter()
        self.alarms: list[dict[str, Any]] = []
        self.board = VirtualBoard(self.flash).start()
        self.port = FaultyPort(ShoePort(self.board.url, baud), self.rng)
        self.link: HostLink
        self._new_validator()

    @property
    def faults(self) -> dict[str, int]:
        """The faults injected so far, by kind."""
        made = dict.fromkeys(FAULTS, 0)
        made.update(Counter(what for _, _, what in self.schedule if what in FAULTS))
        return made

    def _new_validator(self) -> None:
        self.validator = Validator(self.config, self.db)
        self.ensure_up(new_link=True)

    def _tally(self) -> None:
        """Count the rejections of the validator about to be replaced."""
        self.rejected.update(r["reason"] for r in self.validator.rejections)
        self.validator.rejections.clear()

    def ensure_up(self, new_link: bool = False) -> None:
        """Power the board back on and reconnect the validator, however many tries it takes."""
        for _ in range(100):
            try:
                if not self.board.alive():
                    self.board.start()
                if new_link:  # a new validator: a new session on the port
                    self.link = HostLink(self.port, self.validator, self.key, hello_every=0.3)
                elif self.port.closed:
                    self.link.reconnect(timeout=2)
                return
            except (SabotError, ConnectionError, OSError):
                self.port.close()
                time.sleep(0.05)
        raise SabotError("the virtual board did not come back up after a fault")

    def recover(self) -> None:
        self.port.close()
        self.ensure_up()

    def pump(self) -> None:
        if not self.board.alive() or self.port.closed:
            self.recover()
        try:
            self.link.pump(wait=0.002)
        except ConnectionError:
            self.recover()

    def inject(self, fault: str) -> None:
        """A fault of the link or the validator (a power cut is the dealer's: SoakDealer)."""
        if fault == "validator_restart":
            self.link.close()
            self._tally()
            self.alarms += self.validator.alarms
            self.validator.store.close()
            self._new_validator()
        elif fault == "disconnect":
            self.link.close()
            self.ensure_up()
        elif fault == "noise":
            self.port.noise_pending += 1
            if self.rng.random() < 0.5:  # and noise towards the shoe
                try:
                    self.port.write(self.rng.randbytes(self.rng.randint(1, 12)))
                except ConnectionError:
                    pass
        elif fault == "fragmented":
            self.port.fragment_pending += 3
        else:
            self.port.slow_writes += 3

    def ensure_new_shoe(self) -> None:
        end = time.monotonic() + NEW_SHOE_WAIT
        while time.monotonic() < end:
            self.pump()
            st = self.board.indicator
            if st and st[0] != PH_ENDED:
                return
            if st and self.validator.status is not None:
                try:
                    self.link.new_shoe()
                except ConnectionError:
                    pass
            time.sleep(0.02)
        # dealing on would deal nothing: a shoe fewer, and a different soak from the seed's
        raise SabotError(f"the virtual shoe did not begin a new shoe in {NEW_SHOE_WAIT:.0f} s")

    def run_shoe(self, tokens: list[str]) -> None:
        self.ensure_new_shoe()
        self.shoes += 1
        dealer = SoakDealer(self.board, tokens, self.plan, self.shoes, self.mistakes,
                            self.schedule)
        shown, since = self.board.indicator, time.monotonic()
        while True:
            ind = self.board.indicator
            if ind is not None and self.board.alive():
                for fault in dealer.due(ind[2]):
                    self.inject(fault)
            if ind != shown:
                shown, since = ind, time.monotonic()
            elif time.monotonic() - since > STALL_WAIT:  # a hung shoe: say so, never deal on
                raise SabotError(f"the virtual shoe stopped taking cards: shoe {ind and ind[3]} "
                                 f"at card {ind and ind[2]}, unchanged for {STALL_WAIT:.0f} s")
            self.pump()
            more = dealer.step(timeout=CARD_WAIT)
            self.pump()
            if not more:
                break
            if self.progress:
                self.progress(self)
        end = time.monotonic() + DRAIN_WAIT
        while time.monotonic() < end:
            try:
                # The shoe holds nothing unacknowledged, and the store holds this shoe's end: a
                # status alone can be an older one (HostLink counts answers to its hellos, and a
                # hello owed across a reconnect is answered on the new connection).
                if self.link.drain(end - time.monotonic()) and self.shoe_stored():
                    break
            except ConnectionError:
                self.recover()

    def shoe_stored(self) -> bool:
        """The validator has accounted the end of the shoe the board shows."""
        inv = self.validator.state["inventory"]
        ind = self.board.indicator
        return ind is not None and inv.get("shoe") == ind[3] and bool(inv.get("ended"))

    def close(self) -> None:
        self.link.close()
        self._tally()
        self.alarms += self.validator.alarms
        self.validator.store.close()
        self.board.stop()


def run_soak(shoes: int = 1, seed: int = 0, fault_rate: float = 0.04, workdir: str | None = None,
             progress: Callable[[Soak], None] | None = None,
             mistake_rate: float = 0.0) -> dict[str, Any]:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="sabot-soak-") as tmp:
        s = Soak(workdir or tmp, seed, fault_rate, progress, mistake_rate=mistake_rate)
        plans = []
        t0 = time.monotonic()
        try:
            for _ in range(shoes):
                tokens = shuffled_shoe(8, rng.randrange(1 << 30))
                s.run_shoe(tokens)
                plans.append(tokens)
        finally:
            s.close()
        store = open_store(s.db, writer=False)
        try:
            outcome = judge_store(store, plans, exact=not mistake_rate)
        finally:
            store.close()
        # what faults leave behind is an honest store all the same: its own audit must hold
        audited = verify(s.db, {s.config.shoe_id: s.config})
    return {"shoes": shoes, **outcome, "audit_verify": audited["problem"] or "ok",
            "faults": s.faults, "mistakes": dict(s.mistakes),
            "schedule": [list(event) for event in s.schedule],
            "rejected": dict(s.rejected),
            "alarms": dict(Counter(a["kind"] for a in s.alarms)),
            "board_boots": s.board.boots, "seconds": round(time.monotonic() - t0, 1)}


def judge_store(store: AuditStore, plans: list[list[str]], exact: bool) -> dict[str, int]:
    """rounds, stored, lost, duplicated, mismatched, unended. Exact (no dealer mistakes): every
    round the shoe files deal must be stored as the host's rules deal it. With mistakes the shoe's
    own count is the measure: each shoe's rounds 1..N (N from its shoe_end) stored once, each
    either what the rules deal or stored with an alarm. Unended: shoes dealt whose end the store
    does not hold (their last rounds are uncounted, so this must be 0 too)."""
    results = [(rec, fid) for fid, rec in store.result_records()]
    stored = [{k: v for k, v in contract_round(r).items() if k != "shoe_id"} for r, _ in results]
    keys_stored = [(r["shoe"], r["round"]) for r in stored]
    duplicated = len(keys_stored) - len(set(keys_stored))
    ends = {r["shoe"]: r["rounds"] for _, r in store.records(("shoe_end",))}
    # the soak's shoes are numbered from its fresh flash's first: one missing from the store is
    # still expected
    shoe_nos = range(1, len(plans) + 1)
    unended = sum(1 for no in shoe_nos if no not in ends)
    if exact:
        expected = [r for no, tokens in zip(shoe_nos, plans)
                    for r in rules.deal_shoe(tokens, shoe=no)]
        return {"rounds": len(expected), "stored": len(stored), "duplicated": duplicated,
                "lost": sum(1 for r in expected if r not in stored),
                "mismatched": sum(1 for r in stored if r not in expected), "unended": unended}
    alarmed = store.alarmed_frame_ids()
    made = sum(ends.values())
    lost = sum(1 for shoe, n in ends.items() for rnd in range(1, n + 1)
               if (shoe, rnd) not in set(keys_stored))
    mismatched = 0
    for rec, fid in results:
        legal = rules.redeal(rec["player"], rec["banker"]) == (rec["player"], rec["banker"])
        if not legal and fid not in alarmed:
            mismatched += 1
    return {"rounds": made, "stored": len(stored), "duplicated": duplicated, "lost": lost,
            "mismatched": mismatched, "unended": unended}


def progress_line(soak: Soak) -> None:
    ind = soak.board.indicator or (0, 0, 0, 0, 0, 0)
    sys.stderr.write(f"\rsoak: shoe {ind[3]} card {ind[2]} round {ind[4]}  "
                     f"faults {sum(soak.faults.values())}"
                     f"  boots {soak.board.boots}   ")
    sys.stderr.flush()

"""`sabot soak`: whole shoes through the virtual board and the validator while faults are injected
at random instants: power cuts (the MicroPython process killed, restarted on the same flash),
validator restarts, link disconnects, line noise (bytes flipped or inserted, both directions),
fragmented reads and slow writes (host commands trickled out two bytes at a time). Nothing may be
lost or stored twice, and every stored round must equal the host's recomputation."""

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
from sabot.audit.store import AuditStore
from sabot.audit.validator import Validator, contract_round
from sabot.errors import SabotError
from sabot.game import rules
from sabot.game.cards import shuffled_shoe
from sabot.link.host import HostLink
from sabot.link.transport import DEFAULT_BAUD, TIMEOUT, ShoePort
from sabot.protocol import PH_ENDED, PH_HELD
from sabot.registry import ShoeEntry
from sabot.virtual.board import (
    CONFIRM,
    EMPTY,
    EXIT_EDGE,
    SUPERVISOR,
    Dealer,
    VirtualBoard,
    card_bytes,
    provision,
)

VOID_CARD, KEEP_DUMMY, VOID_ROUND, END_SHOE = 1, 2, 3, 4

FAULTS = ("power_cut", "validator_restart", "disconnect", "noise", "fragmented", "slow_writes")
# what a careless dealer or supervisor does, anywhere in a shoe, the burn included
MISTAKES = ("unreadable_card", "card_not_due", "missing_confirm", "extra_cut_card", "shoe_empty")


class MistakenDealer(Dealer):
    """A dealer who now and then gets it wrong, and a supervisor who resolves each hold with a
    resolution drawn at random (one the shoe refuses leaves it held, and another is drawn)."""

    def __init__(self, board: VirtualBoard, tokens: list[str], rng: random.Random, rate: float,
                 made: Counter[str]) -> None:
        super().__init__(board, tokens, on_held=self._resolve)
        self.rng = rng
        self.rate = rate
        self.made = made

    def _resolve(self, board: VirtualBoard, state: tuple[int, ...]) -> None:
        if self.rng.random() < self.rate:  # a card drawn while the shoe is held
            self._card(board, state[2])
        # ending the shoe is every hold's way out, but a rare one: most shoes should go on
        code = self.rng.choices((VOID_CARD, KEEP_DUMMY, VOID_ROUND, END_SHOE), (8, 3, 6, 1))[0]
        self.made[f"resolution_{code}"] += 1
        board.send(bytes([SUPERVISOR + code]))

    def _card(self, board: VirtualBoard, position: int) -> None:
        self.made["card_not_due"] += 1
        if position < len(self.tokens):
            board.send(card_bytes(self.tokens[position]))

    def step(self, timeout: float = 10) -> bool:
        b = self.board
        ind = b.indicator
        if ind is not None and ind[0] not in (PH_ENDED, PH_HELD) and not ind[6] \
                and self.rng.random() < self.rate:
            mistake = self.rng.choice(MISTAKES)
            if mistake == "shoe_empty" and not (ind[0] < 2 or ind[1] == 2):
                mistake = "missing_confirm"  # between rounds shoe-empty just ends the shoe
            self.made[mistake] += 1
            if mistake == "unreadable_card":
                b.send(bytes([EXIT_EDGE]))  # the card left the shoe unread
            elif mistake == "missing_confirm":
                b.send(bytes([CONFIRM]))  # confirmed while a card may still be due
            elif mistake == "extra_cut_card":
                b.send(card_bytes("CUT"))
            elif mistake == "shoe_empty":
                b.send(bytes([EMPTY]))
            else:
                self._card(b, ind[2])
            b.wait(lambda s: s != ind, timeout)
        return super().step(timeout)
DRAIN_WAIT = 30.0  # seconds for everything a shoe made to be stored, faults and all


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
                    data[i:i] = os.urandom(self.rng.randint(1, 8))
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
        self.rng = random.Random(seed)
        self.workdir = workdir
        self.fault_rate = fault_rate
        self.mistake_rate = mistake_rate
        self.mistakes: Counter[str] = Counter()
        self.progress = progress
        self.key = keys.create(os.path.join(workdir, "command.pem"))
        self.flash = os.path.join(workdir, "flash")
        self.db = os.path.join(workdir, "audit.db")
        shoe_id, version, pem, _ = provision(self.flash, self.key)
        self.config = ShoeEntry(shoe_id)
        self.config.add_public_key(version, pem)
        self.faults = dict.fromkeys(FAULTS, 0)
        self.rejected: Counter[str] = Counter()
        self.alarms: list[dict[str, Any]] = []
        self.board = VirtualBoard(self.flash).start()
        self.port = FaultyPort(ShoePort(self.board.url, baud), self.rng)
        self.link: HostLink
        self._new_validator()

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

    def inject(self) -> None:
        fault = self.rng.choice(FAULTS)
        self.faults[fault] += 1
        if fault == "power_cut":
            # Cut the power a random instant into the next card's handling (mid-write included).
            self.board.cut_power_in(self.rng.random() * 0.004)
        elif fault == "validator_restart":
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
                    self.port.write(os.urandom(self.rng.randint(1, 12)))
                except ConnectionError:
                    pass
        elif fault == "fragmented":
            self.port.fragment_pending += 3
        else:
            self.port.slow_writes += 3

    def ensure_new_shoe(self) -> None:
        for _ in range(100):
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

    def run_shoe(self, tokens: list[str]) -> None:
        self.ensure_new_shoe()
        dealer: Dealer = Dealer(self.board, tokens)
        if self.mistake_rate:
            dealer = MistakenDealer(self.board, tokens, self.rng, self.mistake_rate, self.mistakes)
        while True:
            if self.rng.random() < self.fault_rate:
                self.inject()
            self.pump()
            more = dealer.step(timeout=2)
            self.pump()
            if not more:
                break
            if self.progress:
                self.progress(self)
        end = time.monotonic() + DRAIN_WAIT
        while time.monotonic() < end:
            try:
                if self.link.drain(end - time.monotonic()):
                    break  # everything the shoe made is acknowledged, so stored
            except ConnectionError:
                self.recover()

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
        store = AuditStore(s.db, writer=False)
        try:
            outcome = judge_store(store, plans, exact=not mistake_rate)
        finally:
            store.close()
    return {"shoes": shoes, **outcome, "faults": s.faults, "mistakes": dict(s.mistakes),
            "rejected": dict(s.rejected),
            "alarms": dict(Counter(a["kind"] for a in s.alarms)),
            "board_boots": s.board.boots, "seconds": round(time.monotonic() - t0, 1)}


def judge_store(store: AuditStore, plans: list[list[str]], exact: bool) -> dict[str, int]:
    """rounds, stored, lost, duplicated, mismatched. Exact (no dealer mistakes): every round the
    shoe files deal must be stored as the host's rules deal it. With mistakes the shoe's own count
    is the measure: each shoe's rounds 1..N (N from its shoe_end) stored once, each either what
    the rules deal or stored with an alarm."""
    results = [(rec, fid) for fid, rec in store.result_records()]
    stored = [{k: v for k, v in contract_round(r).items() if k != "shoe_id"} for r, _ in results]
    keys_stored = [(r["shoe"], r["round"]) for r in stored]
    duplicated = len(keys_stored) - len(set(keys_stored))
    if exact:
        shoe_nos = sorted({r["shoe"] for _, r in store.records(("shoe_start",))})
        expected = [r for no, tokens in zip(shoe_nos, plans)
                    for r in rules.deal_shoe(tokens, shoe=no)]
        return {"rounds": len(expected), "stored": len(stored), "duplicated": duplicated,
                "lost": sum(1 for r in expected if r not in stored),
                "mismatched": sum(1 for r in stored if r not in expected)}
    alarmed = store.alarmed_frame_ids()
    ends = {r["shoe"]: r["rounds"] for _, r in store.records(("shoe_end",))}
    made = sum(ends.values())
    lost = sum(1 for shoe, n in ends.items() for rnd in range(1, n + 1)
               if (shoe, rnd) not in set(keys_stored))
    mismatched = 0
    for rec, fid in results:
        legal = rules.redeal(rec["player"], rec["banker"]) == (rec["player"], rec["banker"])
        if not legal and fid not in alarmed:
            mismatched += 1
    return {"rounds": made, "stored": len(stored), "duplicated": duplicated, "lost": lost,
            "mismatched": mismatched}


def progress_line(soak: Soak) -> None:
    ind = soak.board.indicator or (0, 0, 0, 0, 0, 0)
    sys.stderr.write(f"\rsoak: shoe {ind[3]} card {ind[2]} round {ind[4]}  "
                     f"faults {sum(soak.faults.values())}"
                     f"  boots {soak.board.boots}   ")
    sys.stderr.flush()

"""`sabot soak`: whole shoes through the virtual board and the validator while faults are injected at
random instants: power cuts (the MicroPython process killed, restarted on the same flash), validator
restarts, link disconnects, line noise (bytes flipped or inserted, both directions), fragmented reads and
slow writes (host commands trickled out two bytes at a time).
Nothing may be lost or stored twice, and every stored round must equal the host's recomputation."""

import os
import random
import sys
import tempfile
import threading
import time

from . import keys, rules
from .audit import AuditStore
from .cards import shuffled_shoe
from .link import HostLink
from .validator import Validator, contract_round
from .virtual import PH_ENDED, Dealer, VirtualBoard, provision_flash

FAULTS = ("power_cut", "validator_restart", "disconnect", "noise", "fragmented", "slow_writes")


class Soak:
    def __init__(self, workdir, seed=0, fault_rate=0.04, progress=None):
        self.rng = random.Random(seed)
        self.workdir = workdir
        self.fault_rate = fault_rate
        self.progress = progress
        self.key = keys.create(os.path.join(workdir, "shoe.key"))
        self.flash = os.path.join(workdir, "flash")
        self.db = os.path.join(workdir, "audit.db")
        provision_flash(self.flash, self.key)
        self.faults = dict.fromkeys(FAULTS, 0)
        self.rejected = {}
        self.noise_pending = 0
        self.fragment_pending = 0
        self.board = VirtualBoard(self.flash).start()
        self._new_validator()

    def _new_validator(self):
        self.validator = Validator(self.key, self.db)
        self.link = None
        self.ensure_up()

    def ensure_up(self):
        """Power the board back on and reconnect the validator, however many tries it takes."""
        from .errors import SabotError

        for _ in range(100):
            try:
                if not self.board.alive():
                    self.board.start()
                if self.link is None:
                    self.link = HostLink(self.board.url, self.validator, tap=self._tap, hello_every=0.3)
                elif self.link.ser is None:
                    self.link.reconnect(timeout=2)
                return
            except (SabotError, ConnectionError, OSError):
                if self.link is not None:
                    self.link.close()
                time.sleep(0.05)
        raise SabotError("the virtual board did not come back up after a fault")

    def _tap(self, data):
        """Line faults on the shoe -> host direction, as the bytes arrive."""
        data = bytearray(data)
        if self.noise_pending and data:
            self.noise_pending -= 1
            for _ in range(self.rng.randint(1, 3)):
                i = self.rng.randrange(len(data))
                if self.rng.random() < 0.5:
                    data[i] ^= 1 << self.rng.randrange(8)
                else:
                    data[i:i] = os.urandom(self.rng.randint(1, 8))
        if self.fragment_pending:
            self.fragment_pending -= 1
            cuts = sorted(self.rng.sample(range(1, len(data)), min(len(data) - 1, 6))) if len(data) > 1 else []
            return [bytes(data[a:b]) for a, b in zip([0] + cuts, cuts + [len(data)])]
        return [bytes(data)]

    def _count_rejections(self, results):
        for _, verdict, reason in results:
            if verdict == "rejected":
                self.rejected[reason] = self.rejected.get(reason, 0) + 1

    def pump(self):
        if not self.board.alive() or self.link.ser is None:
            self.link.close()
            self.ensure_up()
        try:
            self._count_rejections(self.link.pump(wait=0.002))
        except ConnectionError:
            self.link.close()
            self.ensure_up()

    def inject(self):
        fault = self.rng.choice(FAULTS)
        self.faults[fault] += 1
        if fault == "power_cut":
            # Cut the power a random instant into the next card's handling (mid-write included).
            proc = self.board.proc  # only this power-on: a late timer must not cut the next one
            threading.Timer(self.rng.random() * 0.004, lambda: proc.poll() is None and proc.kill()).start()
        elif fault == "validator_restart":
            self.link.close()
            self.validator.store.close()
            self._new_validator()
        elif fault == "disconnect":
            self.link.close()
            self.ensure_up()
        elif fault == "noise":
            self.noise_pending += 1
            if self.rng.random() < 0.5:  # and noise towards the shoe
                try:
                    self.link.write(os.urandom(self.rng.randint(1, 12)))
                except (ConnectionError, AttributeError):
                    pass
        elif fault == "fragmented":
            self.fragment_pending += 3
        else:
            self.link.slow_writes += 3

    def ensure_new_shoe(self):
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

    def run_shoe(self, tokens):
        self.ensure_new_shoe()
        dealer = Dealer(self.board, tokens)
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
        end = time.monotonic() + 30
        while time.monotonic() < end:
            self.pump()
            st = self.validator.status
            if st and st["phase"] == "ended" and st["unacked_to"] == 0:
                break  # everything the shoe made is acknowledged, so stored

    def close(self):
        self.link.close()
        self.board.stop()


def run_soak(shoes=1, seed=0, fault_rate=0.04, workdir=None, progress=None):
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="sabot-soak-") as tmp:
        s = Soak(workdir or tmp, seed, fault_rate, progress)
        plans = []
        t0 = time.monotonic()
        try:
            for _ in range(shoes):
                tokens = shuffled_shoe(8, rng.randrange(1 << 30))
                s.run_shoe(tokens)
                plans.append(tokens)
        finally:
            s.close()
        store = AuditStore(s.db)
        stored = [contract_round(r) for k, r in store.records(("result",))]
        shoe_nos = sorted({r["shoe"] for k, r in store.records(("shoe_start",))})
        store.close()
    expected = [r for no, tokens in zip(shoe_nos, plans) for r in rules.deal_shoe(tokens, shoe=no)]
    keys_stored = [(r["shoe"], r["round"]) for r in stored]
    duplicated = len(keys_stored) - len(set(keys_stored))
    lost = sum(1 for r in expected if r not in stored)
    mismatched = sum(1 for r in stored if r not in expected)
    return {"shoes": shoes, "rounds": len(expected), "stored": len(stored), "lost": lost,
            "duplicated": duplicated, "mismatched": mismatched, "faults": s.faults, "rejected": s.rejected,
            "board_boots": s.board.boots, "seconds": round(time.monotonic() - t0, 1)}


def progress_line(soak):
    ind = soak.board.indicator or (0, 0, 0, 0, 0, 0)
    sys.stderr.write(f"\rsoak: shoe {ind[3]} card {ind[2]} round {ind[4]}  faults {sum(soak.faults.values())}"
                     f"  boots {soak.board.boots}   ")
    sys.stderr.flush()

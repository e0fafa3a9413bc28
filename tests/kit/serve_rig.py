"""`sabot serve` over virtual shoes, for the tests and `make bench`: N provisioned virtual boards
(real MicroPython), `sabot serve` validating all of them in its own process, simulated dealers
drawing a shuffled 8-deck shoe each, and an SSE client timing the pages' updates."""

import json
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

from sabot import keys
from sabot.game import cards, rules
from sabot.protocol import variant_byte
from sabot.registry import Registry, ShoeEntry
from sabot.virtual.board import VirtualBoard
from sabot.virtual.dealer import Dealer
from sabot.virtual.provisioning import provision

from kit.base import SABOT
from kit.procs import free_port_for_tests


class ServeRig:
    def __init__(self, tmp, shoes=1, seed=100, side_wagers=(), ez=False, limits=(None, None),
                 accounts=None, tokens=None, db=None, pit="pit", first_shoe=0x5AB0_0001,
                 prefix="BAC", cut_from_end=None, extra=(), crossed=False, command=SABOT):
        self.tmp = Path(tmp)
        self.db = db or self.tmp / "audit.db"
        self.registry = self.tmp / "shoes.json"
        reg = Registry.load(str(self.registry))
        self.boards, self.tokens, self.tables, self.shoe_ids = [], [], [], []
        self.key = keys.create(str(self.tmp / "host.pem"))  # one command key for the pit
        for i in range(shoes):
            shoe_id, version, pem, *_ = provision(str(self.tmp / f"flash{i}"), self.key,
                                              first_shoe + i,
                                              variant=variant_byte("baccarat", ez, False, False))
            table = f"{prefix}-{i + 1:02d}"
            entry = ShoeEntry(shoe_id, table=table, side_wagers=list(side_wagers), ez=ez,
                              min_bet_cents=limits[0], max_bet_cents=limits[1])
            entry.add_public_key(version, pem)
            reg.put(entry)
            board = VirtualBoard(str(self.tmp / f"flash{i}"), port=free_port_for_tests(),
                                 sign_ms=5)
            self.boards.append(board.start())
            self.tokens.append(tokens or cards.shuffled_shoe(8, seed + i, cut_from_end))
            self.tables.append(table)
            self.shoe_ids.append(shoe_id)
        self.port = free_port_for_tests()
        self.url = f"http://127.0.0.1:{self.port}"
        # crossed: each port given another shoe's id (a shoe plugged in at the wrong table)
        ids = self.shoe_ids[::-1] if crossed else self.shoe_ids
        shoe_args = [a for i, b in enumerate(self.boards)
                     for a in ("--shoe", f"{b.url}={ids[i]}")]
        self.args = ["serve", "--listen", f"127.0.0.1:{self.port}", "--db", str(self.db),
                     "--registry", str(self.registry), "--key", str(self.key.path), "--pit", pit,
                     *shoe_args, *(["--accounts", str(accounts)] if accounts else []), *extra]
        self.log = open(self.tmp / "serve.log", "w")
        self.start(command)
        self.dealers = []

    def start(self, command=SABOT):
        """serve (again, after it stopped or died: its log appended to), as `command` runs it."""
        if self.log.closed:
            self.log = open(self.tmp / "serve.log", "a")
        self.proc = subprocess.Popen([*command, *self.args], stderr=self.log, cwd=self.tmp)
        self.wait_up()

    def wait_up(self, timeout=30):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                self.get("/api/tables")
                return
            except OSError:
                time.sleep(0.1)
        raise AssertionError(f"sabot serve did not answer: {self.log_text()}")

    def log_text(self):
        if not self.log.closed:
            self.log.flush()
        return (self.tmp / "serve.log").read_text()

    def get(self, path):
        with urllib.request.urlopen(self.url + path, timeout=10) as r:
            return json.loads(r.read())

    def deal(self):
        """Every dealer draws its shoe at full speed, each in its own thread."""
        for b, t in zip(self.boards, self.tokens):
            d = threading.Thread(target=Dealer(b, t).deal, daemon=True)
            d.start()
            self.dealers.append(d)

    def wait_dealt(self, timeout=120):
        for d in self.dealers:
            d.join(timeout)
            assert not d.is_alive(), "a dealer did not finish its shoe"

    def wait_stored(self, timeout=60):
        """Until every table's shoe has ended in the store (as the API says)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            tables = self.get("/api/tables")
            if all(t["state"] == "ended" for t in tables):
                return tables
            time.sleep(0.1)
        raise AssertionError(f"not every shoe ended: {self.get('/api/tables')}")

    def assert_every_round_stored(self):
        """Once the dealers are done: every table's shoe ended in the store, each with every
        round the host's rules deal from its shoe file, once, in order."""
        self.wait_dealt()
        self.wait_stored()
        for i, table in enumerate(self.tables):
            assert self.stored(i) == self.expected(i), table

    def expected(self, i):
        return rules.deal_shoe(self.tokens[i])

    def stored(self, i):
        recs = self.get(f"/api/tables/{self.tables[i]}")["rounds"]
        return [{k: v for k, v in r.items() if k != "shoe_id"} for r in recs]

    def stop(self, signal=2):
        """Ctrl-C (or another signal) to serve; its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for b in self.boards:
            b.stop()
        self.log.close()
        return self.proc.returncode


class SSEClient(threading.Thread):
    """Follows /table/NAME/events; for every round, the delay from its frame being stored
    (frames.received_at) to the arrival here of the first event that shows it."""

    def __init__(self, url):
        super().__init__(daemon=True)
        self.url = url
        self.events = []  # (arrived, message)
        self.delays = []  # one per round: from its frame's storage to the page's update
        self.seen = 0
        self.stop_flag = False
        self.connected = threading.Event()

    def run(self):
        with urllib.request.urlopen(self.url, timeout=60) as r:
            self.connected.set()
            for raw in r:
                if self.stop_flag:
                    return
                line = raw.decode().rstrip("\n")
                if not line.startswith("data: "):
                    continue
                now = time.time()
                msg = json.loads(line[6:])
                self.events.append((now, msg))
                stored = msg.get("round_stored") or []
                self.delays += [now - at for at in stored[self.seen:]]  # rounds new on the page
                self.seen = len(stored)


def percentile(values, q):
    s = sorted(values)
    if not s:
        return float("nan")
    return s[min(len(s) - 1, round(q / 100 * (len(s) - 1)))]

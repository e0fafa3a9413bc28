"""`sabot bench`: push a scripted shoe through a shoe and judge every round against the host's rules.

With --port, a technician draws the cards by hand into a real shoe (or any shoe on that port): the tool
prompts for each card and waits until the shoe has taken it. Without --port, a virtual board is started
and a simulated dealer draws them. Either way the validator verifies every frame, and each round the
rules expect is reported PASS (the shoe signed exactly that round), FAIL (it signed something else, or
the validator rejected it) or MISSING."""

import os
import sys
import tempfile
import time

from . import keys, rules
from .cards import CUT, read_shoe_file
from .demo import Session
from .errors import SabotError
from .link import HostLink
from .validator import Validator, contract_round


def progress_bar(done, total, label, width=30):
    filled = int(width * done / max(total, 1))
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label}   ")
    sys.stderr.flush()


def judge(expected, records, rejections):
    """Per-round verdicts: (round, verdict, detail)."""
    signed = {}
    for kind, rec in records:
        if kind == "result":
            signed[(rec["shoe"], rec["round"])] = contract_round(rec)
    shoes = sorted({s for s, _ in signed}) or [1]
    shoe = shoes[-1]
    out = []
    for want in expected:
        got = signed.get((shoe, want["round"]))
        want = dict(want, shoe=shoe)
        if got == want:
            out.append((want["round"], "PASS", _hand(want)))
        elif got is None:
            out.append((want["round"], "MISSING", f"rules deal {_hand(want)}"))
        else:
            out.append((want["round"], "FAIL", f"shoe signed {_hand(got)}; rules deal {_hand(want)}"))
    if rejections:
        out.append((None, "FAIL", "frames rejected: " + ", ".join(sorted({r["reason"] for r in rejections}))))
    return out


def _hand(r):
    return f"P {' '.join(r['player'])} B {' '.join(r['banker'])} -> {r['winner']}"


def bench_virtual(tokens, progress=True):
    with tempfile.TemporaryDirectory(prefix="sabot-bench-") as tmp:
        key = keys.create(os.path.join(tmp, "shoe.key"))

        def show(session, final=False):
            if progress:
                pos = session.board.indicator[2] if session.board and session.board.indicator else 0
                progress_bar(pos, len(tokens), f"cards, {len(session.rounds())} rounds")

        s = Session(tokens, key, os.path.join(tmp, "audit.db"), os.path.join(tmp, "flash"), progress=show)
        try:
            s.run()
        finally:
            s.close()
        return s.records, s.validator.rejections


def bench_port(tokens, url, key, db, ask=input, progress=True, card_timeout=None):
    """A shoe on a port; the technician draws each card when prompted."""
    v = Validator(key, db)
    link = HostLink(url, v, hello_every=0.3)
    records = []
    v.on_record = lambda k, r: records.append((k, r))
    try:
        deadline = time.monotonic() + 5
        while v.status is None and time.monotonic() < deadline:
            link.pump()
        if v.status is None:
            raise SabotError(f"no shoe answered on {url} with this key")
        for i, token in enumerate(tokens):
            if v.status["phase"] == "ended":
                break
            if v.status["position"] > i:
                continue  # already out of the shoe
            name = "the cut card" if token == CUT else token
            if progress:
                progress_bar(i, len(tokens), f"cards: draw {name}")
            ask(f"\ndraw card {i + 1}: {name} — press Enter when it is out ")
            end = time.monotonic() + (card_timeout or 1e9)
            while v.status["position"] <= i and v.status["phase"] != "ended":
                link.hello()
                link.pump(wait=0.2)
                if time.monotonic() > end:
                    raise SabotError(f"the shoe did not take card {i + 1} ({name})")
        end = time.monotonic() + 5
        while time.monotonic() < end and not (v.status["phase"] == "ended" and v.status["unacked_to"] == 0):
            link.hello()
            link.pump(wait=0.2)
    finally:
        link.close()
    return records, v.rejections


def run_bench(shoe_file, port=None, key_file=None, db=None, as_json=False, ask=input):
    tokens = read_shoe_file(shoe_file)
    expected = rules.deal_shoe(tokens)
    if port:
        if not key_file:
            raise SabotError("--key is needed with --port: the shoe's results are verified with it")
        records, rejections = bench_port(tokens, port, keys.load(key_file), db or "bench.db", ask,
                                         progress=not as_json)
    else:
        records, rejections = bench_virtual(tokens, progress=not as_json)
    if not as_json:
        sys.stderr.write("\n")
    verdicts = judge(expected, records, rejections)
    passed = all(v == "PASS" for _, v, _ in verdicts) and bool(verdicts)
    return passed, verdicts

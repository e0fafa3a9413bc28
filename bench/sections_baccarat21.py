"""21 Baccarat's bench section: its exact analysis summed by the compiled kernel and in Python,
the live edges the validator works out after each round of a shoe, the shoe's rules on the
unix-port MicroPython, and `sabot demo --game 21-baccarat`."""

import os
import random
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from sections_analysis import best_of

ROOT = Path(__file__).resolve().parents[1]


def bench_baccarat21():
    """An 8-deck shoe at a table of the default settings: the analysis (best of 5, the hands'
    enumeration made once before), the same sum in Python (best of 3), each round's live
    recompute over a whole shoe dealt by the host's rules (audit/watch.py LiveEdges21), and
    4,000 random rounds through the firmware's rules with the heap locked
    (tests/mp/rounds21.py)."""
    from sabot import frames21
    from sabot.audit.watch import LiveEdges21
    from sabot.game import baccarat21 as b21
    from sabot.game import baccarat21_analyze as analysis
    from sabot.game.cards import shuffled_shoe
    from sabot.paths import micropython

    rules = b21.Rules()
    counts = list(analysis.MOST[:9]) + [128]
    analysis.outcomes(counts, rules)  # the enumeration, made once a table
    kernel = best_of(lambda: analysis.outcomes(counts, rules), 5)
    python = best_of(lambda: analysis._outcomes_python(counts, analysis.hands(rules)), 3)
    tokens = shuffled_shoe(8, seed=21)
    live, seen, times = LiveEdges21(8, rules), {}, []
    at = 0
    for rec in b21.deal_shoe(tokens, rules):
        for c in rec["player"] + rec["banker"]:
            seen[c] = seen.get(c, 0) + 1
        at += 1
        live.update(1, seen)
        t = time.perf_counter()
        live.edges()
        times.append(time.perf_counter() - t)
    rng = random.Random(21)
    import sys

    sys.path.insert(0, str(ROOT / "tests"))
    from test_baccarat21_shoe import code, random_cards, random_rules

    cases = [(random_rules(rng), random_cards(rng)) for _ in range(4000)]
    with tempfile.TemporaryDirectory() as tmp:
        open(f"{tmp}/rounds", "wb").write(b"".join(
            frames21.rule_bytes(r) + bytes(code(c) for c in cards) for r, cards in cases))
        env = dict(os.environ, MICROPYPATH=str(ROOT / "firmware"))
        t = time.perf_counter()
        said = subprocess.run([micropython(), str(ROOT / "tests/mp/rounds21.py"),
                               f"{tmp}/rounds", f"{tmp}/out"], capture_output=True, text=True,
                              env=env, check=True).stdout
        firmware_s = time.perf_counter() - t
    _, failures = map(int, re.findall(r"\d+", said))
    from sabot.virtual.demo import run_demo

    with tempfile.TemporaryDirectory() as tmp:
        d, _ = run_demo(None, 5, f"{tmp}/b21.db", f"{tmp}/k.pem", quiet=True, game="21-baccarat")
    return {"analyze_8_decks_kernel_ms": round(kernel * 1000, 1),
            "analyze_8_decks_python_ms": round(python * 1000, 1),
            "live_rounds": at, "live_recompute_median_ms": round(
                statistics.median(times) * 1000, 1),
            "live_recompute_max_ms": round(max(times) * 1000, 1),
            "firmware_rounds": len(cases), "firmware_rounds_s": round(firmware_s, 2),
            "firmware_heap_locked_alloc_failures": failures,
            **{f"demo_{k}": d[k] for k in ("rounds", "expected_rounds", "lost", "seconds")},
            "demo_alarms": len(d["alarms"])}

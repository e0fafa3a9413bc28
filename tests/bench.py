"""`make bench`: speed and memory figures for README. Each section prints one line of figures.

Run: make bench   (or .venv/bin/python tests/bench.py [section ...])"""

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "host_tools"))

from sabot import rules  # noqa: E402
from sabot.analyze import analyze, first_four_classes  # noqa: E402


def baseline_rank_enumeration(decks=8):
    """A plain recursive enumeration over 13 ranks of Banker / Player / Tie (the issue's yardstick)."""
    counts = [4 * decks] * 13
    values = [1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 0, 0, 0]
    tally = {"player": 0, "banker": 0, "tie": 0}

    def finish(p, b, weight):
        tally["player" if p > b else "banker" if b > p else "tie"] += weight

    def deal(hands, weight, n):
        player, banker = hands
        if len(player) + len(banker) < 4:
            for r in range(13):
                if counts[r]:
                    w = counts[r]
                    counts[r] -= 1
                    nxt = (player + [values[r]], banker) if len(player) == len(banker) else (
                        player, banker + [values[r]])
                    deal(nxt, weight * w, n - 1)
                    counts[r] += 1
            return
        p, b = sum(player) % 10, sum(banker) % 10
        if len(player) == 2 and len(banker) == 2:
            if p >= 8 or b >= 8:
                return finish(p, b, weight * n * (n - 1))
            if rules.player_draws(p):
                for r in range(13):
                    if counts[r]:
                        w = counts[r]
                        counts[r] -= 1
                        deal((player + [values[r]], banker), weight * w, n - 1)
                        counts[r] += 1
                return
            if rules.banker_draws(b, None):
                for r in range(13):
                    if counts[r]:
                        finish(p, (b + values[r]) % 10, weight * counts[r] * (n - 1))
                return
            return finish(p, b, weight * n * (n - 1))
        # the Player has three cards, the Banker two
        if rules.banker_draws(b, player[2]):
            for r in range(13):
                if counts[r]:
                    finish(p, (b + values[r]) % 10, weight * counts[r])
            return
        finish(p, b, weight * n)

    deal(([], []), 1, 416)
    return tally


def best_of(fn, repeat):
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def bench_analyze():
    t0 = time.perf_counter()
    first_four_classes.cache_clear()
    cold = best_of(lambda: (first_four_classes.cache_clear(), analyze(8)), 3)
    warm = best_of(lambda: analyze(8), 5)
    seen = best_of(lambda: analyze(8, ["AS", "9H", "KD", "7C", "2S", "QH"]), 5)
    tb = time.perf_counter()
    base = baseline_rank_enumeration()
    baseline = time.perf_counter() - tb
    assert base == analyze(8)["outcomes"], "baseline disagrees with the analyzer"
    return {"analyze_8_decks_all_wagers_s": round(cold, 4), "analyze_warm_s": round(warm, 4),
            "seen_recompute_s": round(seen, 4), "baseline_13_rank_bpt_s": round(baseline, 3),
            "speedup_vs_baseline": round(baseline / cold, 1),
            "total_bench_s": round(time.perf_counter() - t0, 1)}


SECTIONS = {"analyze": bench_analyze}


def main(names):
    print(f"# machine: {platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"{platform.platform()}")
    for name in names or SECTIONS:
        print(name, json.dumps(SECTIONS[name]()), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

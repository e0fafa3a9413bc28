"""The exact analysis' bench sections: `sabot analyze` against a C and a Python enumeration of
the same counts (analyze), and the live edges recomputed through a dealt shoe (edges)."""

import os
import subprocess
import sys
import time
from pathlib import Path

from sabot.game import rules
from sabot.game.analyze import analyze

ROOT = Path(__file__).resolve().parents[1]


def baseline_rank_enumeration(decks=8):
    """A plain recursive enumeration over 13 ranks of Banker / Player / Tie (the
    yardstick the closed form is measured against)."""
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


def _c_enumerator(tmp):
    """bench/enumerate_bpt.c built here (the same recursion as baseline_rank_enumeration, in C)."""
    exe = f"{tmp}/enumerate_bpt"
    subprocess.run(["cc", "-O2", "-o", exe, str(ROOT / "bench/enumerate_bpt.c")], check=True)
    return exe


def _wall(argv, repeat, env=None):
    """The best wall time of a whole process over `repeat` runs, and its last output."""
    best, out = float("inf"), ""
    for _ in range(repeat):
        t = time.perf_counter()
        out = subprocess.run(argv, capture_output=True, text=True, check=True, env=env).stdout
        best = min(best, time.perf_counter() - t)
    return best, out


def bench_analyze():
    """`sabot analyze --decks 8`: the calculation (analyze(8) in this process, the kernel loaded;
    and the first one in a fresh process, its tables and kernel loaded too), the whole command
    as a user runs it (.venv/bin/sabot, Python's start included, bytecode cached), against a
    C enumerator (bench/enumerate_bpt.c, cc -O2: its own timing of the calculation, and its whole
    process) and the same enumeration in Python."""
    import tempfile

    t0 = time.perf_counter()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(ROOT / "host_tools")  # this tree's sabot, whatever the venv points at
    sabot = [str(Path(sys.executable).with_name("sabot")), "analyze", "--decks", "8"]
    first = ("import time; t = time.perf_counter(); from sabot.game.analyze import analyze; "
             "analyze(8); print(time.perf_counter() - t)")
    warm = best_of(lambda: analyze(8), 20)
    seen = best_of(lambda: analyze(8, ["AS", "9H", "KD", "7C", "2S", "QH"]), 20)
    with tempfile.TemporaryDirectory() as tmp:
        exe = _c_enumerator(tmp)
        c_wall, c_out = _wall([exe, "8"], 20)
        c_calc = min(float(_wall([exe, "8"], 1)[1].split()[-1]) for _ in range(20))
    counts = dict(line.split() for line in c_out.splitlines()[:3])
    assert {k: int(v) for k, v in counts.items()} == analyze(8)["outcomes"], counts
    _wall(sabot, 1, env)  # bytecode written once, as after any first run
    command, out = _wall(sabot, 20, env)
    assert out.startswith("8 decks, 416 cards left"), out
    fresh = min(float(_wall([sys.executable, "-c", first], 1, env)[1]) for _ in range(10))
    python_start, _ = _wall([sys.executable, "-c", "pass"], 20, env)
    tb = time.perf_counter()
    base = baseline_rank_enumeration()
    baseline = time.perf_counter() - tb
    assert base == analyze(8)["outcomes"], "baseline disagrees with the analyzer"
    return {"analyze_calculation_ms": round(warm * 1000, 3),
            "analyze_seen_ms": round(seen * 1000, 3),
            "analyze_first_in_a_process_ms": round(fresh * 1000, 2),
            "c_enumerator_calculation_ms": round(c_calc * 1000, 2),
            "calculation_speedup_vs_c": round(c_calc / warm, 1),
            "sabot_analyze_command_ms": round(command * 1000, 1),
            "python_start_ms": round(python_start * 1000, 1),
            "c_enumerator_command_ms": round(c_wall * 1000, 1),
            "baseline_13_rank_bpt_python_s": round(baseline, 3),
            "total_bench_s": round(time.perf_counter() - t0, 1)}


def _ideal_bound_recomputes(states, wagers):
    """How many of a shoe's rounds even an ideal bound would still recompute: after a recompute,
    rounds are skipped while, for every wager, (cards out since) x (the largest exact change one
    card makes to its edge there) stays below its distance to 0; an optimistic count (a sound
    bound is wider, and grows as the shoe empties)."""
    recomputes, base = 0, None
    for cards_left, edges_now, per_card in states:
        if base is None or any((base[0] - cards_left) * per_card_then >= abs(edge_then)
                               for edge_then, per_card_then in base[1]):
            recomputes += 1
            base = (cards_left, [(edges_now[w], per_card[w]) for w in wagers])
    return recomputes


def bench_edges():
    """Live edges (RemainingShoe) through a whole dealt 8-deck shoe: all 17 exact house edges
    recomputed after the burn and after every round's cards leave, with the kernel and counting
    in Python; the yardstick is the 13-rank recursive B/P/T enumeration of a full shoe. And the
    case against skipping recomputes with a bound: the rounds an ideal per-card bound would
    still recompute (the exact change one card of each value makes, worked out with the
    kernel)."""
    from statistics import median

    from sabot.game import cards
    from sabot.game.edges import ANALYZED_WAGERS, RemainingShoe, kernel

    assert kernel() is not None, "the kernel is not built (make builds it)"
    tokens = cards.shuffled_shoe(8, seed=14)
    rounds = rules.deal_shoe(tokens)
    dealt = [c for c in tokens if c != cards.CUT]
    burned = dealt[: cards.BURN_VALUES[dealt[0][0]] + 1]
    times: dict[bool, list[float]] = {}
    states = []  # (cards left, edges, each wager's largest change for one card out)
    for compiled in (True, False):
        shoe = RemainingShoe(8, compiled=compiled)
        times[compiled] = []
        for leaving in [burned] + [r["player"] + r["banker"] for r in rounds]:
            shoe.remove_all(leaving)
            t = time.perf_counter()
            now = shoe.house_edges()
            times[compiled].append(time.perf_counter() - t)
            if compiled and shoe.cards > 6:
                change = dict.fromkeys(ANALYZED_WAGERS, 0.0)
                for rank in "A23456789T":
                    r = cards.RANKS.index(rank)
                    if shoe.rank_counts[r]:
                        one_out = list(shoe.rank_counts)
                        one_out[r] -= 1
                        then = RemainingShoe(8, rank_counts=one_out).house_edges()
                        for w in change:
                            change[w] = max(change[w], abs(then[w] - now[w]))
                states.append((shoe.cards, now, change))
        seen = dealt[: 416 - shoe.cards]
        reference = analyze(8, seen)["wagers"]
        assert shoe.house_edges() == {w: e["house_edge"] for w, e in reference.items()}
    tb = time.perf_counter()
    baseline_rank_enumeration()
    baseline = time.perf_counter() - tb
    return {"rounds": len(rounds), "recomputes": len(times[True]),
            "recompute_median_ms": round(median(times[True]) * 1000, 3),
            "recompute_max_ms": round(max(times[True]) * 1000, 3),
            "python_recompute_median_ms": round(median(times[False]) * 1000, 2),
            "python_recompute_max_ms": round(max(times[False]) * 1000, 2),
            "ideal_bound_recomputes_banker_player_tie":
                _ideal_bound_recomputes(states, ("banker", "player", "tie")),
            "ideal_bound_recomputes_all_17": _ideal_bound_recomputes(states, ANALYZED_WAGERS),
            "baseline_13_rank_bpt_ms": round(baseline * 1000, 1),
            "speedup_vs_baseline": round(baseline / median(times[True]), 1)}

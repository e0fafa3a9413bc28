"""Blackjack's bench section: its analysis, the shoe's round follower on the unix-port
MicroPython, the simulated dealer's presses and `sabot demo --game blackjack`."""

import os
import subprocess
import sys
from pathlib import Path

from sections_analysis import best_of

ROOT = Path(__file__).resolve().parents[1]


def bench_blackjack():
    """Blackjack: `sabot analyze --game blackjack --decks 8` computed in this process
    (the dealer's exact distribution and both side wagers' edges, best of 5), and the shoe's
    round follower (firmware/shoe/blackjack.py) on the unix-port MicroPython: 1,000 random
    rounds' cards and presses, the heap locked over them (tests/mp/blackjack_rounds.py)."""
    import random
    import re
    import tempfile

    from sabot.game.blackjack_analyze import analyze
    from sabot.paths import micropython

    sys.path.insert(0, str(ROOT / "tests"))
    from test_blackjack_round import random_rounds

    t = best_of(lambda: analyze(8, [], "s17"), 5)
    events, _, _ = random_rounds(random.Random(1), "s17", True, 1000)
    with tempfile.TemporaryDirectory() as tmp:
        open(f"{tmp}/events", "wb").write(events)
        env = dict(os.environ, MICROPYPATH=os.pathsep.join([str(ROOT / "firmware")]))
        said = subprocess.run([micropython(), str(ROOT / "tests/mp/blackjack_rounds.py"),
                               f"{tmp}/events", f"{tmp}/out", f"{tmp}/placed", "0", "1"],
                              capture_output=True, text=True, env=env, check=True).stdout
    n, failures, us = map(int, re.findall(r"\d+", said))
    cards = sum(1 for i in range(0, len(events), 2) if events[i] == 2)
    # the dealer's presses a round at a table of basic-strategy players (virtual/blackjack_dealer)
    import itertools

    from sabot.game.cards import shuffled_shoe
    from sabot.virtual.blackjack_dealer import deal_round

    rng = random.Random(2)
    shoe = (c for s in itertools.count() for c in shuffled_shoe(6, seed=s) if c != "CUT")
    seats = presses = 0
    for _ in range(1000):
        at = [s for s in range(1, 8) if rng.random() < 0.6] or [4]
        seats += len(at)
        presses += sum(kind == "press" for kind, _ in deal_round(shoe, at, "s17"))
    # `sabot demo --game blackjack --seed 5 --mistakes 0.2` as a user runs it: the element at a
    # real chip's 50 ms a Sign, the dealer slipping in a fifth of the rounds
    from sabot.virtual.demo import run_demo

    with tempfile.TemporaryDirectory() as tmp:
        d, _ = run_demo(None, 5, f"{tmp}/bj.db", f"{tmp}/k.pem", quiet=True, game="blackjack",
                        mistakes=0.2)
    return {"analyze_8_decks_ms": round(t * 1000, 1), "follower_events": n,
            "follower_cards": cards, "follower_us_per_event": round(us / n, 1),
            "follower_heap_locked_alloc_failures": failures,
            "basic_strategy_seats_per_round": round(seats / 1000, 2),
            "dealer_presses_per_round": round(presses / 1000, 2),
            "dealer_presses_per_seat": round(presses / seats, 2),
            # and the one confirm of the shown hands a round
            "dealer_actions_per_round": round(presses / 1000 + 1, 2),
            **{f"demo_{k}": d[k] for k in ("rounds", "voided", "wrong", "lost", "seconds")}}

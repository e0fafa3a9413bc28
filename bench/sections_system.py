"""The whole system's bench sections: seeded soaks under faults (soak) and mistakes too
(reliability), `sabot demo` as a user runs it (demo), and the test suite's size (suite)."""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


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

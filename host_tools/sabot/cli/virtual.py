"""Commands that run the firmware on the virtual board: deal, demo, board, soak."""

from __future__ import annotations

import argparse
import json
import os
import sys

from sabot.cli.options import (
    DB_RULE,
    REGISTRY_HELP,
    Commands,
    add_fail_on_notice,
    add_witness_args,
    cosigner,
    listen_arg,
    probability,
    ranged,
)
from sabot.cli.output import alarm_below, fail_on, print_records, verified_text, witnessed_line
from sabot.errors import NotVerified, SabotError

TYPE_CHECKING = False  # not typing's: importing typing would slow every command's start
if TYPE_CHECKING:
    from typing import Any

commands = Commands()

BOARD_HELP = ("whose code runs: virtual (boards/virtual, the default), or rpi_pico / esp32: that "
              "board's own board.py, shoe/drivers/hw.py and main.py, built as for the board, on "
              "the unix port over an emulated machine module (UART fed by the dealer, pin IRQs, "
              "I2C to the element emulator, lamps and PWM recorded, the host link on the socket)")


def board_code(board: str, code: str | None, tmp: str) -> str | None:
    """The code tree an emulated board runs: `code`, else its build into `tmp`, signed with a
    throwaway release key (its public half is built into the tree the boot check trusts)."""
    if board == "virtual" or code:
        return code
    import os

    from sabot.release.build import build

    return str(build(board, os.path.join(tmp, board), os.path.join(tmp, "release.pem"),
                     log=lambda line: None)["dir"])


def deal_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("shoefile",
                   help="shoe file: cards in dealing order, CUT for the cut card, # comments")
    p.add_argument("--json", action="store_true",
                   help="one JSON round record per line (docs/INTERFACES.md)")
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
    print_records(records, args.json, shown=wanted)
    return 0


def demo_args(p: argparse.ArgumentParser) -> None:
    add_fail_on_notice(p)
    p.add_argument("--shoe", metavar="FILE",
                   help="shoe file to deal (default: a freshly shuffled 8-deck shoe)")
    p.add_argument("--seed", type=int, help="seed for the shuffle (repeatable demos)")
    p.add_argument("--db", default=None,
                   help="audit database (default ./sabot.db, with --game blackjack "
                   "./sabot-blackjack.db, with --game 21-baccarat ./sabot-21-baccarat.db: the "
                   "demo's virtual shoe is its own; "
                   + DB_RULE.split(";")[0] + ")")
    p.add_argument("--game", choices=["baccarat", "blackjack", "21-baccarat"],
                   default="baccarat",
                   help="blackjack: a six-deck blackjack shoe (Chapter 633a) dealt to a table of "
                   "basic-strategy players, the dealer pressing next, double and split and "
                   "confirming each round's hands; every verified round settled (Hit and Run, "
                   "Straight Jack, House Money) and held to what the table dealt; 21-baccarat: "
                   "an 8-deck 21 Baccarat shoe (§ 681a) at a table of the default settings "
                   "offering the Tie and both Bonus Wagers, the shoe deciding every draw")
    p.add_argument("--mistakes", type=probability, default=0.0, metavar="SHARE",
                   help="blackjack: the share of rounds, 0 to 1, in which the dealer misses a "
                   "press or makes it twice: each must end in an irregularity and a voided "
                   "round, never in a wrong settlement (default 0)")
    p.add_argument("--key", default="sabot.key",
                   help="the host command key file (signs commands; the virtual shoe is "
                   "provisioned for it), created mode 0600 if missing (default ./sabot.key)")
    p.add_argument("--capture", metavar="FILE", help="keep what the validator takes from the "
                   "shoe, for sabot replay (appended to a capture FILE)")
    p.add_argument("--registry", default=None, help=REGISTRY_HELP + "; the demo shoe is "
                   "registered there if it is not yet")
    p.add_argument("--json", action="store_true",
                   help="print one JSON summary object (rounds, verified, rejected, "
                   "irregularities, lost, alarms, ...) instead of progress")
    p.add_argument("--board", choices=["virtual", "rpi_pico", "esp32"], default="virtual",
                   help=BOARD_HELP)
    add_witness_args(p)


@commands("demo", demo_args,
          help="the main job: a virtual shoe streams signed results to the validator",
          example="sabot demo --seed 7 --db audit.db --key host.pem  (or --board rpi_pico)")
def cmd_demo(args: argparse.Namespace) -> int:
    import tempfile

    from sabot.audit.store import refuse_unwritable
    from sabot.virtual.demo import run_demo

    # before the key, the shoe's flash and the registry are touched: a store in use, or a file
    # that is not a sabot store, refuses the demo with nothing provisioned or registered
    if args.mistakes and args.game != "blackjack":
        raise SabotError("--mistakes is the blackjack dealer's (add --game blackjack)")
    if args.game == "blackjack":
        refuse_without_bet_spots(args.board)
    args.db = args.db or ("sabot.db" if args.game == "baccarat" else f"sabot-{args.game}.db")
    refuse_unwritable(args.db)
    with tempfile.TemporaryDirectory(prefix="sabot-demo-") as tmp:
        summary, _ = run_demo(args.shoe, args.seed, args.db, args.key, args.capture,
                              quiet=args.json, registry=args.registry,
                              on_alarm=None if args.json else alarm_below, board=args.board,
                              code=board_code(args.board, None, tmp),
                              cosigner=cosigner(args, say), game=args.game,
                              mistakes=args.mistakes)
    if args.json:
        print(json.dumps(summary))
    elif args.game == "blackjack":
        print(f"blackjack shoe {summary['shoe']}: {summary['rounds']} rounds dealt, verified and "
              f"settled ({summary['expected_rounds']} confirmed at the table), "
              f"{summary['voided']} voided, {summary['wrong']} settled otherwise than the "
              f"table, ${summary['won_cents'] / 100:,.2f} won on $5 side wagers; "
              f"{verified_text(summary)}, {summary['rejected']} rejected, "
              f"{summary['irregularities']} irregularities, {len(summary['alarms'])} alarms, "
              f"{summary['lost']} lost, in {summary['seconds']} s")
    else:
        print(f"shoe {summary['shoe']}: {summary['rounds']} rounds dealt and verified "
              f"({summary['expected_rounds']} expected), {verified_text(summary)}, "
              f"{summary['rejected']} rejected, {summary['irregularities']} irregularities, "
              f"{len(summary['alarms'])} alarms, {summary['lost']} lost, "
              f"in {summary['seconds']} s")
    if not args.json:
        if summary["checkpoint"] or args.witness:
            print(witnessed_line(summary, bool(args.witness)))
        print(f"audit log: {args.db}   history: sabot history --db {args.db}")
    lost = f"{summary['lost']} rounds lost" if summary["lost"] else ""
    if summary.get("wrong"):
        lost = f"{summary['wrong']} rounds settled otherwise than the table"
    elif summary.get("game") == "blackjack" and not summary["rounds"]:
        lost = "no round was dealt, verified and settled"
    fail_on(summary["rejections"], summary["alarms"], lost, fail_on_notice=args.fail_on_notice)
    return 0


def say(line: str) -> None:
    print("\n" + line, file=sys.stderr, flush=True)  # below the progress line (it ends in \r)


def refuse_without_bet_spots(board: str) -> None:
    """A blackjack shoe takes each round's seats from the table's bet spots: a board whose data
    has none (an ESP32's pins are taken) cannot deal it. The virtual board's come over its
    dealer channel."""
    from sabot.release.build import board_data

    if board != "virtual" and not getattr(board_data(board), "BET_SPOTS", ()):
        raise SabotError(f"the {board} board has no bet-spot sensors (its board data names none): "
                         "it cannot deal blackjack; a Pico's or the virtual board can")


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
                   help="run this built code tree (sabot firmware --board virtual, or the "
                   "--board's) with its integrity check, instead of the repository's source "
                   "(an emulated board without --code runs a fresh build of it)")
    p.add_argument("--board", choices=["virtual", "rpi_pico", "esp32"], default="virtual",
                   help=BOARD_HELP + "; its flash is --flash, mounted at the board's /data")
    p.add_argument("--root", metavar="DIR",
                   help="the board's whole filesystem, as on a Pico: it runs the "
                   "firmware deployed there (sabot deploy); only while its element is blank "
                   "(never provisioned) does its port serve the REPL")
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
          "line per change; what the board does, on stderr. A shoe provisioned for blackjack "
          "(provision --game blackjack) is dealt to a simulated table of basic-strategy players "
          "(the bet spots, cards, presses and the confirm of its hands), whose supervisor voids "
          "a held round; it needs bet spots: the virtual board's or a Pico's.",
          example="sabot board --listen 127.0.0.1:7000 --flash shoe-flash --key host.pem "
          "--shoe shoe1.txt --shoe shoe2.txt  (--board esp32: the ESP32's own code)")
def cmd_board(args: argparse.Namespace) -> int:
    import signal
    import tempfile

    from sabot.virtual.demo import run_board

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)  # stopped like Ctrl-C: the board process goes with it
    if args.nor_erase_ms is not None:  # the board process reads them (boards/virtual/main.py)
        os.environ["SABOT_NOR_ERASE_MS"] = str(args.nor_erase_ms)
        os.environ["SABOT_NOR_LOG"] = args.nor_log

    from sabot.virtual.demo import flash_table

    if flash_table(os.path.join(args.root, "data") if args.root else args.flash).get(
            "game") == "blackjack":
        refuse_without_bet_spots(args.board)
    with tempfile.TemporaryDirectory(prefix="sabot-board-") as tmp:
        code = args.code if args.root else board_code(args.board, args.code, tmp)
        run_board(args.listen, args.flash, args.shoe, args.key, code, args.root,
                  args.registry, board_name=args.board)
    return 0


def soak_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shoes", type=ranged(1, 10_000), default=1, help="shoes to deal (default 1)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed for the shoes, faults and mistakes: each is due at a card the "
                   "seed picks, so a seed deals the same schedule and rounds on any machine "
                   "(default 0)")
    p.add_argument("--fault-rate", type=probability, default=0.1,
                   help="chance of a fault before each card (0.1)")
    p.add_argument("--mistake-rate", type=probability, default=0.0,
                   help="chance of a dealer or supervisor mistake before each card: unreadable "
                   "cards, cards not due, missing confirms, extra cut cards, shoe-empty anywhere "
                   "including the burn, every resolution (default 0)")
    p.add_argument("--json", action="store_true",
                   help="one JSON summary: rounds, stored, lost, duplicated, unended, faults "
                   "(counts by kind), rejected (counts by reason), schedule ([shoe, card, fault "
                   "or mistake], in order)")


@commands("soak", soak_args,
          help="deal whole shoes while injecting faults; nothing may be lost",
          description="Deals shuffled 8-deck shoes through the virtual board and the validator "
          "while cutting power, restarting the validator, dropping the link, adding line noise "
          "and fragmenting reads, each at a card the seed picks.",
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
              "the host's recomputation"
              + (f", {s['unended']} shoes whose end was not stored" if s["unended"] else ""))
        print("faults injected: " + ", ".join(f"{k} {v}" for k, v in s["faults"].items()))
        print(f"schedule: {len(s['schedule'])} faults and mistakes, each at the card the seed "
              "picked (--json lists them; the same for this seed on any machine)")
        if s["mistakes"]:
            print("dealer and supervisor mistakes: "
                  + ", ".join(f"{k} {v}" for k, v in sorted(s["mistakes"].items())))
            print("alarms: " + (", ".join(f"{k} {v}" for k, v in s["alarms"].items()) or "none"))
        rejected = ", ".join(f"{k} {v}" for k, v in s["rejected"].items())
        print("frames rejected: " + (rejected or "none"))
    if s["lost"] or s["duplicated"] or s["mismatched"] or s["unended"]:
        raise NotVerified("results were lost, duplicated or wrong under faults")
    if s["audit_verify"] != "ok":
        raise NotVerified(f"the soak's audit store does not pass audit verify: "
                          f"{s['audit_verify']}")
    if not args.fault_rate and s["rejected"]:  # no line faults: an authentic shoe is never refused
        raise NotVerified("frames of an authentic shoe were rejected: "
                          + ", ".join(f"{k} {v}" for k, v in s["rejected"].items()))
    return 0

"""Commands on a shoe's port: validate its link, ask its status, start a new shoe, resolve an
irregularity."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from sabot.cli.options import (
    KEY_HELP,
    REGISTRY_HELP,
    SHOE_ID,
    SHOE_ID_HELP,
    Commands,
    add_baud,
    add_fail_on_notice,
    add_operation_args,
    seconds_arg,
)
from sabot.cli.output import (
    fail_on,
    format_event,
    format_round,
    print_alarm,
    record_json,
)

commands = Commands()


def validate_args(p: argparse.ArgumentParser) -> None:
    add_fail_on_notice(p)
    p.add_argument("--port", required=True,
                   help="pyserial URL: /dev/ttyACM0, socket://127.0.0.1:7000, ...")
    p.add_argument("--key", required=True, help=KEY_HELP + "; verifying needs none of it")
    p.add_argument("--shoe-id", type=SHOE_ID, help=SHOE_ID_HELP)
    p.add_argument("--db", required=True, help="audit database (created if missing)")
    p.add_argument("--capture", metavar="FILE", help="keep what the validator takes, for sabot "
                   "replay (appended to a capture FILE, with a mark at each connection)")
    p.add_argument("--seconds", type=seconds_arg,
                   help="stop after this many seconds (default: until Ctrl-C or SIGTERM)")
    p.add_argument("--until", choices=["shoe-end", "irregularity"],
                   help="shoe-end: exit once the current shoe's shoe_end is stored (at once if "
                   "it has ended already); irregularity: also exit when an irregularity holds "
                   "the shoe, so it can be resolved (sabot resolve)")
    p.add_argument("--wait", type=seconds_arg, default=5.0,
                   help="seconds for the shoe to answer at all before giving up (default 5)")
    add_baud(p)
    p.add_argument("--registry", default=None, help=REGISTRY_HELP)
    p.add_argument("--json", action="store_true",
                   help="print each stored record as one JSON object a line (round records and "
                   "events, docs/INTERFACES.md) instead of text")


@commands("validate", validate_args,
          help="validate a shoe's link: verify, recompute, store, acknowledge",
          example="sabot validate --port /dev/ttyACM0 --key host.pem --shoe-id 7 --db audit.db "
          "--until shoe-end")
def cmd_validate(args: argparse.Namespace) -> int:
    from sabot import keys
    from sabot.link.session import registry_entry, validate

    def show(kind: str, rec: dict[str, Any]) -> None:
        if args.json:
            print(record_json(kind, rec), flush=True)
        elif kind == "result":
            print(format_round(rec, config.variant), flush=True)
        elif kind != "initial_cards":
            print(format_event(rec), flush=True)

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    key = keys.load(args.key)
    config = registry_entry(args.registry, args.shoe_id, args.port, args.baud)
    s, ended = validate(args.port, key, config, args.db, capture=args.capture, baud=args.baud,
                        wait=args.wait, until=args.until, seconds=args.seconds, on_record=show,
                        on_alarm=print_alarm, say=say)
    print(f"validated: {s['verified']} frames verified, {s['rounds']} rounds, "
          f"{s['rejected']} rejected, {len(s['alarms'])} alarms"
          + (f"; shoe {ended[0]} ended" if ended else ""), file=sys.stderr)
    fail_on(s["rejections"], s["alarms"], fail_on_notice=args.fail_on_notice)
    return 0


def _operation(args: argparse.Namespace) -> Any:
    from sabot import keys
    from sabot.link.operate import Operation
    from sabot.link.session import registry_entry

    key = keys.load(args.key)
    config = registry_entry(args.registry, args.shoe_id, args.port, args.baud)
    return Operation(args.port, key, args.db, config, args.baud, on_alarm=print_alarm)


def status_args(p: argparse.ArgumentParser) -> None:
    add_operation_args(p)
    p.add_argument("--wait", type=seconds_arg, default=5.0,
                   help="seconds to wait for the answer (default 5)")
    p.add_argument("--json", action="store_true",
                   help="one JSON object: phase, shoe, round, position, due, unacknowledged, "
                   "integrity, boot, shoe_id, acked, host_counter, refused (and pending when "
                   "an irregularity holds the shoe)")


@commands("status", status_args, help="the shoe's live state over its port",
          description="Asks the shoe where it stands (an authenticated hello) and prints its "
          "phase, shoe, round, card position, unacknowledged frames, integrity and boot counter.",
          example="sabot status --port /dev/ttyACM0 --key host.pem --db audit.db")
def cmd_status(args: argparse.Namespace) -> int:
    from sabot.link.operate import format_status

    op = _operation(args)
    try:
        st = op.status(args.wait)
    finally:
        op.close()
    print(json.dumps(st) if args.json else format_status(st))
    return 0


def new_shoe_args(p: argparse.ArgumentParser) -> None:
    add_operation_args(p)
    p.add_argument("--by", help="who starts it, for the operator log (default: your login)")
    p.add_argument("--json", action="store_true",
                   help="print the shoe's status afterwards as one JSON object")


@commands("new-shoe", new_shoe_args, help="start the next shoe after the current one ended",
          description="Sends the authenticated new-shoe command once the shoe reports its shoe "
          "ended (refused mid-shoe), waits until the shoe has started the next one and logs who "
          "did it in the operator log.",
          example="sabot new-shoe --port /dev/ttyACM0 --key host.pem --db audit.db --by alice")
def cmd_new_shoe(args: argparse.Namespace) -> int:
    from sabot.link.operate import format_status, user_name

    op = _operation(args)
    try:
        st = op.new_shoe(args.by or user_name())
    finally:
        op.close()
    if args.json:
        print(json.dumps(st))
    elif st["started"]:
        print(f"shoe {st['shoe']} started: {format_status(st)}")
        print("deal the new shoe's first card (it is exposed and burned)")
    else:
        print(f"shoe {st['shoe']} is fresh and waits for its first card: nothing to do")
    return 0


def resolve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("resolution", choices=["void-card", "keep-dummy", "void-round", "end-shoe"])
    add_operation_args(p)
    p.add_argument("--by", required=True, help="the supervisor giving the resolution")
    p.add_argument("--json", action="store_true",
                   help="print the shoe's status afterwards and the signed resolution record "
                   "as one JSON object")


@commands("resolve", resolve_args,
          help="a supervisor's resolution of the pending irregularity",
          description="Resolves the irregularity holding the shoe: void-card (discard the "
          "offending card), keep-dummy (keep it as a no-bet dummy hand), void-round, or end-shoe "
          "(the shoe ends here and is reshuffled). The shoe signs the resolution (source host); "
          "who gave it, and from which host, goes to the operator log (sabot history "
          "--operations).",
          example="sabot resolve --port /dev/ttyACM0 --key host.pem --db audit.db void-card "
          "--by alice")
def cmd_resolve(args: argparse.Namespace) -> int:
    from sabot.link.operate import format_status

    op = _operation(args)
    try:
        st = op.resolve(args.resolution, args.by)
    finally:
        op.close()
    rec = st["resolution"]
    if args.json:
        print(json.dumps(st))
    else:
        voided = f", voided {' '.join(rec['voided_cards'])}" if rec["voided_cards"] else ""
        card = f" ({rec['card']})" if rec["card"] else ""
        print(f"resolved {rec['kind']}{card} in shoe {rec['shoe']}: "
              f"{rec['resolution']}{voided}; logged as given by {args.by}")
        print(format_status(st))
    return 0

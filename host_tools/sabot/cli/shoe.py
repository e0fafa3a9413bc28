"""Commands on a shoe's port: validate its link, ask its status, start a new shoe, resolve an
irregularity."""

from __future__ import annotations

import argparse
import json
import sys

from sabot.cli.options import (
    DB_HELP,
    KEY_HELP,
    REGISTRY_HELP,
    SHOE_ID,
    SHOE_ID_HELP,
    Commands,
    add_baud,
    add_fail_on_notice,
    add_operation_args,
    add_witness_args,
    cosigner,
    seconds_arg,
)
from sabot.cli.output import (
    fail_on,
    format_blackjack_round,
    format_event,
    format_round,
    print_alarm,
    record_json,
    shoe_id_text,
    validated_line,
    witnessed_line,
)
from sabot.errors import SabotError

TYPE_CHECKING = False  # not typing's: importing typing would slow every command's start
if TYPE_CHECKING:
    from typing import Any

commands = Commands()


def validate_args(p: argparse.ArgumentParser) -> None:
    add_fail_on_notice(p)
    p.add_argument("--port", required=True,
                   help="pyserial URL: /dev/ttyACM0, socket://127.0.0.1:7000, ...")
    p.add_argument("--key", required=True, help=KEY_HELP + "; verifying needs none of it")
    p.add_argument("--shoe-id", type=SHOE_ID, help=SHOE_ID_HELP)
    p.add_argument("--db", required=True, help=DB_HELP)
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
    add_witness_args(p)


@commands("validate", validate_args,
          help="validate a shoe's link: verify, recompute, store, acknowledge",
          description="Validates a shoe's link: every frame verified with the registry's public "
          "keys, recomputed with the host's rules, stored in --db and acknowledged. A shoe that "
          "refuses --key (its status counts our signed acknowledgements refused and takes none) "
          "is said within seconds; validation goes on storing what it verifies, and exits 2 "
          "at the end: nothing was acknowledged.",
          example="sabot validate --port /dev/ttyACM0 --key host.pem --shoe-id 7 --db audit.db "
          "--until shoe-end")
def cmd_validate(args: argparse.Namespace) -> int:
    from sabot import keys
    from sabot.link.session import validate

    def show(kind: str, rec: dict[str, Any]) -> None:
        if args.json:
            print(record_json(kind, rec), flush=True)
        elif kind == "result":
            print(format_round(rec, config.variant), flush=True)
        elif kind == "blackjack_result":
            print(format_blackjack_round(rec), flush=True)
        elif kind != "initial_cards":
            print(format_event(rec), flush=True)

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    co = cosigner(args, say)
    config = _shoe(args)
    s, ended = validate(args.port, keys.load(args.key), config, args.db, capture=args.capture,
                        baud=args.baud, wait=args.wait, until=args.until, seconds=args.seconds,
                        on_record=show, on_alarm=print_alarm, say=say, cosigner=co)
    refused = s["command_key"] == "refused"
    print(validated_line(s, ended), file=sys.stderr)
    if s["checkpoint"] or args.witness:
        print(witnessed_line(s, bool(args.witness)), file=sys.stderr)
    fail_on(s["rejections"], s["alarms"], fail_on_notice=args.fail_on_notice)
    if refused:
        raise SabotError(f"nothing acknowledged: shoe {shoe_id_text(config.shoe_id)} refused "
                         f"every command signed with {args.key} (not the command key it was "
                         "provisioned with); what was verified is stored")
    return 0


def _shoe(args: argparse.Namespace) -> Any:
    """The registered shoe on --port, after every check that can refuse without it: the key
    file, the registry and the audit database are all tried before the port is opened (a
    command that cannot go on never touches the shoe)."""
    from sabot import keys
    from sabot.audit.store import refuse_unwritable
    from sabot.link.answering import ANSWER_WAIT, identify
    from sabot.registry import Registry

    keys.load(args.key)
    refuse_unwritable(args.db)
    reg = Registry.load(args.registry, must_exist=True)
    if args.shoe_id is None and len(reg.shoes) > 1:  # the shoe on the port says which it is
        return identify(args.port, reg, args.baud, getattr(args, "wait", ANSWER_WAIT))
    return reg.pick(args.shoe_id)


def _operation(args: argparse.Namespace) -> Any:
    from sabot import keys
    from sabot.link.operate import Operation

    config = _shoe(args)
    return Operation(args.port, keys.load(args.key), args.db, config, args.baud,
                     on_alarm=print_alarm)


def status_args(p: argparse.ArgumentParser) -> None:
    add_operation_args(p)
    p.add_argument("--wait", type=seconds_arg, default=5.0,
                   help="seconds to wait for the answer (default 5)")
    p.add_argument("--json", action="store_true",
                   help="one JSON object: phase, shoe, round, position, due, unacknowledged, "
                   "integrity, boot, shoe_id, acked, host_counter, refused, command_key "
                   "(accepted, refused or untested; and pending when an irregularity holds the "
                   "shoe)")


@commands("status", status_args, help="the shoe's live state over its port",
          description="Asks the shoe where it stands (an authenticated hello) and prints its "
          "phase, shoe, round, card position, unacknowledged frames, integrity and boot counter. "
          "It also tells whether the shoe takes our command key: a signed ack of what the store "
          "holds, judged by the shoe's count of refused commands; a shoe that refuses --key "
          "(not the one it was provisioned with) is said in one line and exits 2, its status "
          "printed all the same.",
          example="sabot status --port /dev/ttyACM0 --key host.pem --db audit.db")
def cmd_status(args: argparse.Namespace) -> int:
    from sabot.link.operate import format_status

    op = _operation(args)
    try:
        st = op.status(args.wait)
        refusal = op.link.key_refusal()
    finally:
        op.close()
    print(json.dumps(st) if args.json else format_status(st), flush=True)
    if st["command_key"] == "refused":  # the status is authentic; nothing was acknowledged
        raise SabotError(refusal)
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
        if st.get("phase") == "held":  # the dealer was quicker: an irregularity holds it now
            print("an irregularity holds the shoe: resolve it (sabot resolve RESOLUTION --by "
                  "NAME)")
        else:
            print("deal the new shoe's first card (it is burned: at a baccarat table exposed, "
                  "and as many more burned as its value says)")
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

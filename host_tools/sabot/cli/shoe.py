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
    add_operation_args,
    seconds_arg,
)
from sabot.cli.output import (
    fail_on,
    format_event,
    format_round,
    group_rejections,
    print_alarm,
    record_json,
)
from sabot.errors import SabotError

commands = Commands()


def registry_entry(path: str | None, shoe_id: int | None, port: str | None = None,
                   baud: int = 115200) -> Any:
    """The registry's entry of a shoe: its configuration (the validator's, never the shoe's own
    word) and the public keys its frames are verified with. With several shoes registered and
    no --shoe-id, the shoe on `port` says which it is (a signed status)."""
    from sabot.registry import Registry

    reg = Registry.load(path, must_exist=True)
    if shoe_id is None and port is not None and len(reg.shoes) > 1:
        from sabot.link.operate import identify

        return identify(port, reg, baud)
    return reg.pick(shoe_id)


def link_back(link: Any, end: float | None) -> bool:
    """One try (of up to 30 s, or to `end`) to get a lost link back."""
    import time

    try:
        link.reconnect(timeout=30 if end is None else max(0.1, min(30, end - time.monotonic())))
    except SabotError:
        return False
    return True


def _open_capture(path: str | None) -> Any:
    if not path:
        return None
    try:
        return open(path, "ab")
    except OSError as e:
        raise SabotError(f"cannot write capture {path}: {e.strerror}") from None


def validate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--port", required=True,
                   help="pyserial URL: /dev/ttyACM0, socket://127.0.0.1:7000, ...")
    p.add_argument("--key", required=True, help=KEY_HELP + "; verifying needs none of it")
    p.add_argument("--shoe-id", type=SHOE_ID, help=SHOE_ID_HELP)
    p.add_argument("--db", required=True, help="audit database (created if missing)")
    p.add_argument("--capture", metavar="FILE", help="keep the raw bytes received")
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
                   help="print each stored record as one JSON object a line (CONTRACTS round "
                   "records and events) instead of text")


@commands("validate", validate_args,
          help="validate a shoe's link: verify, recompute, store, acknowledge",
          example="sabot validate --port /dev/ttyACM0 --key host.pem --shoe-id 7 --db audit.db "
          "--until shoe-end")
def cmd_validate(args: argparse.Namespace) -> int:
    import signal
    import time

    from sabot import keys
    from sabot.audit.validator import Validator
    from sabot.link.host import HostLink
    from sabot.link.operate import first_status, open_port
    from sabot.protocol import HOLDS

    key = keys.load(args.key)
    config = registry_entry(args.registry, args.shoe_id, args.port, args.baud)
    capture = _open_capture(args.capture)
    ended: list[int] = []
    held: list[dict[str, Any]] = []

    def show(kind: str, rec: dict[str, Any]) -> None:
        if kind == "shoe_end":
            ended.append(rec["shoe"])
        elif kind == "irregularity" and rec["kind"] in HOLDS:
            held.append(rec)
        elif kind == "resolution":
            held.clear()
        if args.json:
            print(record_json(kind, rec), flush=True)
        elif kind == "result":
            print(format_round(rec), flush=True)
        elif kind != "initial_cards":
            print(format_event(rec), flush=True)

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)  # a service manager's stop prints the summary too
    try:
        port = open_port(args.port, args.baud, capture=capture)  # before any database is made
    except BaseException:
        if capture:
            capture.close()
        raise
    try:
        validator = Validator(config, args.db, on_record=show, on_alarm=print_alarm)
    except BaseException:
        port.close()
        raise
    end = time.monotonic() + args.seconds if args.seconds else None
    refused: list[dict[str, Any]] = []
    try:
        link = HostLink(port, validator, key, capture)
        first_status(link, args.port, args.wait, any_frame=True)
        while end is None or time.monotonic() < end:
            # the shoe's own word counts too: what happened before this validator came is stored
            st = validator.status or {}
            if args.until and st.get("phase") == "ended" and not st.get("unacked_to"):
                ended.append(st["shoe"])
            if args.until and ended:
                break
            if args.until == "irregularity" and (held or st.get("phase") == "held"):
                what = f"{held[-1]['kind']} holds" if held else "an irregularity holds"
                print(f"{what} shoe {st.get('shoe', held[-1]['shoe'] if held else '?')}: "
                      "resolve it with sabot resolve, then validate again", file=sys.stderr)
                break
            burst = 0
            try:
                for _, verdict, reason in link.pump():
                    if verdict == "rejected":
                        refused.append({"reason": reason})
                        burst += 1
            except ConnectionError:
                # The audit never stops on its own: a shoe off for a minute (a power cut) is
                # waited for; it keeps everything it has not delivered.
                print("link lost; reconnecting (the shoe keeps what it has not delivered)",
                      file=sys.stderr, flush=True)
                while not link_back(link, end):
                    if end is not None and time.monotonic() >= end:
                        break
                else:
                    print("link back", file=sys.stderr, flush=True)
            if refused and (len(refused) >= 1000 or not burst):  # one line per burst
                print(f"rejected frames: {group_rejections(refused)}", file=sys.stderr, flush=True)
                refused = []
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        port.close()
        validator.store.close()
        if capture:
            capture.close()
    s = validator.summary()
    print(f"validated: {s['verified']} frames verified, {s['rounds']} rounds, "
          f"{s['rejected']} rejected, {len(s['alarms'])} alarms"
          + (f"; shoe {ended[0]} ended" if ended else ""), file=sys.stderr)
    fail_on(s["rejections"], s["alarms"])
    return 0


def _operation(args: argparse.Namespace) -> Any:
    from sabot import keys
    from sabot.link.operate import Operation

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
    from sabot.link.operate import _user, format_status

    op = _operation(args)
    try:
        st = op.new_shoe(args.by or _user())
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

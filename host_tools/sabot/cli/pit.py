"""`sabot serve`: validate a pit's shoes and serve its live pages."""

from __future__ import annotations

import argparse
import sys

from sabot.cli.options import (
    DB_HELP,
    KEY_HELP,
    REGISTRY_HELP,
    Commands,
    add_baud,
    add_fail_on_notice,
    listen_arg,
)
from sabot.cli.output import fail_on, print_alarm
from sabot.errors import SabotError

commands = Commands()


def serve_args(p: argparse.ArgumentParser) -> None:
    add_fail_on_notice(p)
    p.add_argument("--listen", type=listen_arg, default="127.0.0.1:8000",
                   help="HOST:PORT of the web server")
    p.add_argument("--db", required=True, help=DB_HELP)
    p.add_argument("--registry", default=None, help=REGISTRY_HELP)
    add_baud(p)
    p.add_argument("--key", metavar="FILE", default="sabot.key",
                   help=KEY_HELP + " (default ./sabot.key)")
    p.add_argument("--shoe", action="append", metavar="URL[=SHOE_ID]",
                   help="a shoe's port and its registered id, e.g. socket://127.0.0.1:7000=7 "
                   "(repeat for every shoe; a plain URL: the shoe on it says which it is)")


@commands("serve", serve_args, help="validate several shoes and serve the pit's live pages",
          description="Validates every --shoe (each on its own port, as `sabot validate`) into "
          "one audit store and serves from it: / (pit dashboard), /table/NAME (the players' "
          "scoreboard, live), /api/tables, /api/tables/NAME.",
          example="sabot serve --listen 127.0.0.1:8000 --db pit.db --shoe "
          "socket://127.0.0.1:7000=7 --shoe /dev/ttyACM0=9 --key host.pem")
def cmd_serve(args: argparse.Namespace) -> int:
    """Validate every --shoe (as `sabot validate` does, one thread each, one shared writer store)
    and serve the pit dashboard, the tables' scoreboards and the API from that store."""
    from sabot.link.session import registry_entry, sigterm_interrupts
    from sabot.pit.pages import Pit, build_app, web_server
    from sabot.pit.serve import Validation, load_shoes

    host, port = args.listen
    import socket

    try:  # say "address in use" in one line before any shoe is opened
        with socket.create_server((host, port)):
            pass
    except OSError as e:
        raise SabotError(f"cannot listen on {host}:{port}: {e.strerror}") from None
    from sabot import keys
    from sabot.audit.store import refuse_unwritable

    key = keys.load(args.key) if args.shoe else None
    refuse_unwritable(args.db)  # before any shoe's port is opened (or asked which shoe it is)
    shoes = load_shoes(args.shoe or [], args.registry, registry_entry, key, args.baud)
    for shoe in shoes:
        shoe.baud = args.baud
    states = {s.config.shoe_id: s for s in shoes}
    pit = Pit(args.db, [s.config for s in shoes], lambda sid: states[sid].link)
    app, hub = build_app(pit)
    validation = Validation(args.db, shoes, hub.notify, print_alarm)
    validation.start()
    print(f"sabot serve: http://{host}:{port}/ ({len(shoes)} shoe"
          f"{'' if len(shoes) == 1 else 's'}, audit "
          f"{args.db})", file=sys.stderr, flush=True)
    server = web_server(app, hub, host, port)
    try:
        # uvicorn shuts the web side down on Ctrl-C or SIGTERM (a service manager's stop), then
        # passes the signal on: either is a KeyboardInterrupt here, and serve ends with its summary
        with sigterm_interrupts():
            server.run()
    except KeyboardInterrupt:
        pass
    finally:
        validation.stop()
    s = validation.summary()
    print(f"served: {s['verified']} frames verified, {s['rounds']} rounds, "
          f"{len(s['rejections'])} rejected, {len(s['alarms'])} alarms", file=sys.stderr)
    fail_on(s["rejections"], s["alarms"], fail_on_notice=args.fail_on_notice)
    return 0

"""`sabot serve`: validate a pit's shoes and serve its live pages."""

from __future__ import annotations

import argparse
import os
import sys

from sabot.cli.options import (
    DB_HELP,
    KEY_HELP,
    REGISTRY_HELP,
    Commands,
    add_baud,
    add_fail_on_notice,
    add_service_args,
    add_witness_args,
    cosigner,
    listen_arg,
    seconds_arg,
)
from sabot.cli.output import fail_on, print_alarm, served_line, witnessed_line
from sabot.errors import SabotError

TYPE_CHECKING = False  # not typing's: importing typing would slow every command's start
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

commands = Commands()


def serve_args(p: argparse.ArgumentParser) -> None:
    add_service_args(p, "db = \"pit.db\", store-alarm = 10, shoe = [\"/dev/ttyACM0=7\"]")
    add_fail_on_notice(p, switch=True)
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
    p.add_argument("--pit", metavar="NAME", default=None,
                   help="this pit's name on the floor page (default: this host's name)")
    p.add_argument("--floor", action=argparse.BooleanOptionalAction, default=False,
                   help="validate no shoe: serve the floor (/floor, /api/floor: every pit and "
                   "table of the shared --db) and every table's pages, read-only (--no-floor: "
                   "not, whatever the --config file says)")
    p.add_argument("--accounts", metavar="FILE", default=None,
                   help="the operator accounts (sabot accounts add): with it, a supervisor "
                   "logged in at /login resolves a held table and starts its next shoe from the "
                   "dashboard or POST /api/operate; without it the pages are read-only")
    add_witness_args(p)
    p.add_argument("--checker", metavar="URL", default=None,
                   help="the receipt checker the scoreboard's QR code sends players to: a copy "
                   "of verify.html the regulator publishes (the QR carries this URL, then # and "
                   "the round's receipt address here); default this server's own /verify, which "
                   "whoever runs this host could change")
    p.add_argument("--store-alarm", metavar="SECONDS", type=seconds_arg, default=5.0,
                   help="how long the audit database may take to confirm a commit before serve "
                   "says it is not recording: one line in its log, NOT RECORDING on every page, "
                   "503 from /api/health (default 5)")
    p.add_argument("--silent-alarm", metavar="SECONDS", type=silent_arg, default=30.0,
                   help="how long a shoe may send nothing, its link up or lost, before serve "
                   "raises link_silent (default 30, at least 5: a live shoe answers the host's "
                   "hello every 2 s)")
    p.add_argument("--commit-wait", metavar="SECONDS", type=commit_wait_arg, default=0.02,
                   help="how long a shoe's read may wait for the other shoes' reads queued "
                   "behind it, so that one durable commit stores them all (default 0.02, 0 to "
                   "1): a read is acknowledged only once its commit is confirmed, and waits "
                   "only while another shoe's read is ready to join it")
    p.add_argument("--shifts", metavar="HH:MM,...", type=shifts_arg,
                   default=["06:00", "14:00", "22:00"],
                   help="when the pit's shifts begin, the server's local time (default "
                   "06:00,14:00,22:00): the dashboard counts shoes per shift, /shift reports one")
    p.add_argument("--public-url", metavar="URL", default=None,
                   help="this server's address as players' phones reach it (http(s)://HOST[:PORT]"
                   "), which the scoreboards' receipt QR codes link to; without it the "
                   "scoreboards show no QR code (an address a request's Host header chose "
                   "could send players anywhere)")


@commands("serve", serve_args, help="validate several shoes and serve the pit's live pages",
          description="Validates every --shoe (each on its own port, as `sabot validate`) into "
          "one audit store and serves from it: / (pit dashboard), /table/NAME (the players' "
          "scoreboard, live), /api/tables, /api/tables/NAME, /floor and /api/floor (every pit "
          "writing the same --db; ?pit=NAME for one); with --accounts, /login, "
          "/operations (the operator log) and POST /api/login, /api/operate (a supervisor's "
          "resolve and new-shoe, sent on serve's own link to the shoe).",
          example="sabot serve --listen 127.0.0.1:8000 --db pit.db --shoe "
          "socket://127.0.0.1:7000=7 --shoe /dev/ttyACM0=9 --key host.pem")
def cmd_serve(args: argparse.Namespace) -> int:
    """Validate every --shoe (as `sabot validate` does, one thread each, one shared writer store)
    and serve the pit dashboard, the tables' scoreboards and the API from that store."""
    from collections import Counter

    from sabot.link.session import registry_entry
    from sabot.pit.accounts import Accounts
    from sabot.pit.console import Console, operations_of
    from sabot.pit.duties import Duties
    from sabot.pit.pages import Pit, build_app, html_response, page
    from sabot.pit.recording import serve_line
    from sabot.pit.serve import Validation, load_shoes

    host, port = args.listen
    # the addresses given, checked before anything is opened
    args.checker, args.public_url = checker_url(args.checker), public_url(args.public_url)
    import socket

    try:  # say "address in use" in one line before any shoe is opened
        with socket.create_server((host, port)):
            pass
    except OSError as e:
        raise SabotError(f"cannot listen on {host}:{port}: {e.strerror}") from None
    from sabot import keys
    from sabot.audit.store import refuse_unwritable, shown_db
    from sabot.registry import Registry

    if args.floor:
        return serve_floor(args, host, port)
    key = keys.load(args.key) if args.shoe else None
    accounts = Accounts.load(args.accounts) if args.accounts else None
    refuse_unwritable(args.db)  # before any shoe's port is opened (or asked which shoe it is)
    shoes = load_shoes(args.shoe or [], args.registry, registry_entry, key, args.baud)
    for shoe in shoes:
        shoe.baud = args.baud
    states = {s.config.shoe_id: s for s in shoes}
    name = pit_name(args.pit)
    pit = Pit(args.db, [s.config for s in shoes], lambda sid: states[sid].link, name,
              list(Registry.load(args.registry).shoes.values()), store_alarm=args.store_alarm,
              shifts=args.shifts)
    pit.checker, pit.public_url = args.checker, args.public_url
    from sabot.audit.cosign import check_quorum

    check_quorum(args.witness, args.quorum)  # before any shoe's port is opened
    validation = Validation(args.db, shoes, on_alarm=print_alarm, pit=name,
                            cosigner=lambda: cosigner(args, lambda line: print(
                                line, file=sys.stderr, flush=True)),
                            store_alarm=args.store_alarm, silent_alarm=args.silent_alarm,
                            commit_wait=args.commit_wait)
    pit.recording = validation.recording
    duties = Duties(pit, validation.log if accounts else None,
                    lambda: sorted(n for n, u in accounts.fresh().items()
                                   if u["role"] == "dealer") if accounts else [],
                    validation.ready)
    console = Console(accounts, validation.operate if accounts else None, pit.table,
                      operations_of(args.db), lambda title, body: html_response(
                          page(title, body, "")),
                      lambda sid: states[sid].config.table if sid in states else None,
                      lambda table: next((validation.applicable(s.config.shoe_id)
                                          for s in shoes if s.config.table == table), None),
                      duties=duties)
    app, hub = build_app(pit, console)
    validation.notify = hub.notify
    validation.start()
    taken = validation.taken()
    if taken and len(taken) == len(shoes):
        # one validator per shoe: not a second that would take turns on its link
        validation.stop()
        validation.store.discard_if_unused()  # a store this run made and wrote nothing in
        raise SabotError("; ".join(taken))
    for line in taken:  # the pit's other tables are served; these wait, their link taken
        serve_line(f"not validating yet: {line}", "warning")
    clean = False
    try:
        run_web(app, hub, host, port, f"http://{host}:{port}/ (pit {name}, {len(shoes)} shoe"
                f"{'' if len(shoes) == 1 else 's'}, audit {shown_db(args.db)})",
                validation.alive)
    finally:
        clean = validation.stop()
    own = Counter(a.kind for a in validation.recording.alarms)
    if own:  # none of them is in the frames' count of alarms: said apart
        print("serve's own alarms: " + ", ".join(f"{n} {k}" for k, n in sorted(own.items()))
              + " (each in the lines above and the operator log)", file=sys.stderr)
    return served(validation.summary(), args, clean)


def served(s: dict[str, Any], args: argparse.Namespace, clean: bool) -> int:
    """serve's last lines, and its exit status. Not `clean` (a validator's thread is still held
    by a database that does not answer, its read unacknowledged and said): the process ends
    now rather than wait for the database."""
    for table, v in s["logs"] if args.witness else ():
        print(f"{table}: {witnessed_line(v, True)}", file=sys.stderr)
    print(served_line(s), file=sys.stderr)
    code = 0
    try:
        fail_on(s["rejections"], s["alarms"], fail_on_notice=args.fail_on_notice)
    except SabotError as e:
        if clean:
            raise
        print(f"sabot serve: {e}", file=sys.stderr)
        code = e.exit_status
    if not clean:
        from sabot.errors import BAD_INPUT

        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code or BAD_INPUT)  # an I/O fault: the database's
    return 0


def silent_arg(text: str) -> float:
    """--silent-alarm: seconds, 5 or more (a live shoe is heard every 2 s: less would call a
    quiet table silent)."""
    import argparse

    value = seconds_arg(text)
    if value < 5:
        raise argparse.ArgumentTypeError(f"wants 5 seconds or more (a live shoe answers a hello "
                                         f"every 2 s), not {text}")
    return value


def commit_wait_arg(text: str) -> float:
    """--commit-wait: seconds from 0 to 1 (a read is acknowledged only after its commit: a
    longer wait would hold up acknowledgements for little gain)."""
    from sabot.cli.options import _finite

    return _finite(text, "number of seconds", lambda x: 0 <= x <= 1,
                   "a number of seconds from 0 to 1")


def shifts_arg(text: str) -> list[str]:
    """--shifts 06:00,14:00,22:00: each HH:MM, at least one, none twice."""
    import argparse

    out = []
    for part in text.split(","):
        hh, _, mm = part.strip().partition(":")
        if not (hh.isdigit() and mm.isdigit() and len(mm) == 2 and int(hh) < 24
                and int(mm) < 60):
            raise argparse.ArgumentTypeError(f"wants the shifts' starting times as HH:MM,... "
                                             f"(e.g. 06:00,14:00,22:00), not {text!r}")
        out.append(f"{int(hh):02d}:{mm}")
    if len(set(out)) != len(out):
        raise argparse.ArgumentTypeError(f"a shift starts twice in {text!r}")
    return sorted(out)


def public_url(given: str | None) -> str | None:
    if given is None:
        return None
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(given)
        parts.port  # noqa: B018 (a port that is no number raises here)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or (
            parts.path not in ("", "/") or "?" in given or "#" in given or "@" in parts.netloc
            or not given.isprintable() or " " in given):
        raise SabotError(f"--public-url takes this server's address, http(s)://HOST[:PORT] "
                         f"(nothing after), not {given!r}")
    return given.rstrip("/")


def checker_url(given: str | None) -> str | None:
    if given is None:
        return None
    if not given.startswith(("http://", "https://", "file://")) or "#" in given:
        raise SabotError(f"--checker takes the checker page's address (http(s):// or file://, "
                         f"no #), not {given!r}")
    return given


def pit_name(given: str | None) -> str:
    import socket

    from sabot.table_checks import table_name_problem

    name = given if given is not None else socket.gethostname().split(".")[0]
    problem = table_name_problem(name)
    if problem:
        raise SabotError(f"--pit: {problem.replace('table', 'pit')}")
    return name


def serve_floor(args: argparse.Namespace, host: str, port: int) -> int:
    """serve --floor: the pages of every table in the shared store, validating none (an
    empty one is served as it fills)."""
    from sabot.audit.store import refuse_unwritable, shown_db
    from sabot.pit.pages import Pit, build_app
    from sabot.registry import Registry

    for given, why in ((args.shoe, "--shoe"), (args.accounts, "--accounts")):
        if given:
            raise SabotError(f"--floor validates and operates no shoe: give {why} to a pit's "
                             "serve")
    refuse_unwritable(args.db)  # one line now for no server or another program's database
    pit = Pit(args.db, [], name=pit_name(args.pit) if args.pit else "",
              floor=list(Registry.load(args.registry).shoes.values()),
              store_alarm=args.store_alarm, shifts=args.shifts)
    pit.checker, pit.public_url = args.checker, args.public_url
    app, hub = build_app(pit)
    run_web(app, hub, host, port, f"http://{host}:{port}/floor (the floor, audit "
            f"{shown_db(args.db)}, read-only)")
    print(f"served the floor: {len(pit.by_id)} tables", file=sys.stderr)
    return 0


def run_web(app: Any, hub: Any, host: str, port: int, where: str,
            alive: Callable[[], bool] | None = None) -> None:
    """Say where serve is, then serve until Ctrl-C or SIGTERM (a service manager's stop):
    uvicorn shuts the web side down on either and passes the signal on, a KeyboardInterrupt
    here, and serve goes on to its summary. Under systemd (Type=notify) it is ready once the
    pages' socket listens, and pings the watchdog while `alive()`."""
    from sabot.link.session import sigterm_interrupts
    from sabot.pit.pages import web_server
    from sabot.service import say

    say("serve", where)
    server = web_server(app, hub, host, port, where, alive)
    try:
        with sigterm_interrupts():
            server.run()
    except KeyboardInterrupt:
        pass


def accounts_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=["add", "list", "remove"],
                   help="add: an account (or its new role and password); list: name and role "
                   "of each; remove: an account (its sessions end)")
    p.add_argument("--accounts", metavar="FILE", required=True,
                   help="the accounts file (created mode 0600; serve --accounts FILE reads it "
                   "again whenever it changes)")
    p.add_argument("--name", help="the operator's name, 1-16 printable ASCII characters (the "
                   "operator log names it with each command it gives)")
    p.add_argument("--role", choices=["dealer", "supervisor", "it"],
                   help="dealer: sees the pit; supervisor: also resolves irregularities and "
                   "starts shoes; it: reads the operator log")
    p.add_argument("--password-stdin", action="store_true",
                   help="read the password from standard input's first line (default: asked "
                   "twice at the terminal)")


@commands("accounts", accounts_args, help="the operators who may log in to sabot serve",
          description="Operator accounts for `sabot serve --accounts FILE`: each a name, a "
          "role and an argon2id hash of its password (never the password). A supervisor logs in "
          "at /login and resolves a held table or starts its next shoe from the dashboard. A "
          "running serve takes a change at once: the sessions of an account changed or removed "
          "end at their next request.",
          example="sabot accounts add --accounts pit-accounts.json --name alice --role "
          "supervisor")
def cmd_accounts(args: argparse.Namespace) -> int:
    from sabot.pit.accounts import Accounts

    if args.action == "list":
        accounts = Accounts.load(args.accounts)
        for name, user in sorted(accounts.users.items()):
            print(f"{name}\t{user['role']}")
        return 0
    if args.action == "remove":
        if not args.name:
            raise SabotError("accounts remove needs --name NAME")
        accounts = Accounts.load(args.accounts)
        accounts.remove(args.name)
        accounts.save()
        print(f"removed account {args.name} from {args.accounts}", file=sys.stderr)
        return 0
    if not args.name or not args.role:
        raise SabotError("accounts add needs --name NAME and --role dealer|supervisor|it")
    accounts = Accounts.load(args.accounts, must_exist=False)
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    elif not sys.stdin.isatty():
        raise SabotError("no terminal to ask the password at: give it on standard input's first "
                         "line with --password-stdin")
    else:
        import getpass

        password = getpass.getpass(f"password for {args.name}: ")
        if getpass.getpass("again: ") != password:
            raise SabotError("the two passwords differ: nothing written")
    new = accounts.add(args.name, args.role, password)
    accounts.save()
    print(f"{'added' if new else 'updated'} account {args.name} ({args.role}) in "
          f"{args.accounts}", file=sys.stderr)
    return 0

"""Commands on a floor's database servers, a primary and its synchronous standby (docs/FLOOR.md):
what each is and whether the floor records, a failover, the standby required again."""

from __future__ import annotations

import argparse
import json

from sabot.cli.options import Commands, HelpFormatter, seconds_arg
from sabot.errors import NotVerified, SabotError

commands = Commands()

URL_HELP = ("libpq's URL of the servers, e.g. postgresql://sabot@db1:5432,db2:5432/postgres (each "
            "host is asked on its own, whatever target_session_attrs says); its password in "
            "~/.pgpass, never printed")
GRANTS = ("The role needs what docs/FLOOR.md grants the floor's IT role (sabot): pg_monitor, "
          "pg_signal_backend, pg_checkpoint, ALTER SYSTEM on synchronous_standby_names and "
          "default_transaction_read_only, and EXECUTE on pg_promote and pg_reload_conf in the "
          "database the URL names (postgres, the servers' own, in docs/FLOOR.md).")


def floor_args(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", required=True, metavar="{status,promote,fence,sync}",
                           parser_class=type(p))

    def action(name: str, help: str, description: str, example: str) -> argparse.ArgumentParser:
        import textwrap

        text = "\n\n".join(textwrap.fill(t, 79) for t in (description, GRANTS))
        return sub.add_parser(name, help=help, description=text, epilog=f"example: {example}",
                              formatter_class=HelpFormatter)

    s = action("status", "each server: answering, primary or standby, its standbys; and whether "
               "the floor records",
               "Asks each server of --db (all of a multi-host URL) whether it answers, whether it "
               "is the primary or a standby (and where that streams from), whether it is fenced "
               "(refuses writes), its synchronous_standby_names and its standbys with their "
               "sync_state; then says in plain words whether the floor records: whether a commit "
               "on the one primary returns, or waits for a synchronous standby that is not "
               "connected. Exit 0: it records (a line says what it lacks, e.g. a standby); 1: it "
               "does NOT record (no primary, two primaries, or every commit waits for an absent "
               "standby); 2: no server answers, or the role may not see its standbys' states.",
               "sabot floor status --db 'postgresql://sabot@db1:5432,db2:5432/postgres'")
    s.add_argument("--db", required=True, metavar="URL", help=URL_HELP)
    s.add_argument("--json", action="store_true",
                   help="one JSON object: servers (each: server, answers, error, role, fenced, "
                   "synchronous_standby_names, standbys or upstream), recording, verdict")

    p2 = action("promote", "fail over: fence the old primary, promote the standby",
                "Fails over to the standby named by --db: first fences the old primary named by "
                "--old if it answers (ALTER SYSTEM SET default_transaction_read_only = on, kept "
                "across its restarts, so URLs with target_session_attrs=read-write skip it; its "
                "client sessions ended so the pits reconnect; the standby given up to 10 s to "
                "replay all it wrote); says so if it does not answer (it must then never start "
                "again as a primary). Then makes the standby commit without waiting for a "
                "synchronous standby, which it does not have until one rejoins "
                "(synchronous_standby_names = ''), promotes it (pg_promote) and checkpoints it "
                "(pg_rewind reads the new timeline from its control file). One line per step "
                "says what happened. Refused, nothing changed, when --db is not a standby.",
                "sabot floor promote --db postgresql://sabot@db2:5432/postgres "
                "--old postgresql://sabot@db1:5432/postgres")
    p2.add_argument("--db", required=True, metavar="URL",
                    help="the standby to promote: one server's URL")
    p2.add_argument("--old", metavar="URL", help="the old primary, to fence if it answers: one "
                    "server's URL (without it nothing is fenced, and a line says so)")

    f = action("fence", "make one server refuse writes: an old primary back on its own",
               "Fences the one server named by --db: ALTER SYSTEM SET "
               "default_transaction_read_only = on (kept across its restarts), its settings "
               "reread and its client sessions ended, so every pit reconnects through its URL "
               "to the server that takes writes. For two primaries (sabot floor status: the "
               "floor is NOT safe): fence the old primary that came back on its own, then "
               "rejoin it as the standby (docs/FLOOR.md). Refused, nothing changed, when --db "
               "is a standby or the floor's only server that takes writes.",
               "sabot floor fence --db postgresql://sabot@db1:5432/postgres --floor "
               "'postgresql://sabot@db1:5432,db2:5432/postgres'")
    f.add_argument("--db", required=True, metavar="URL", help="the server to fence: one "
                   "server's URL")
    f.add_argument("--floor", required=True, metavar="URL", help="every server of the floor "
                   "(the --db of sabot floor status): another must take writes")

    y = action("sync", "require the standby synchronously again, once it streams",
               "Makes the primary among --db's servers wait at each commit for a synchronous "
               "standby (ALTER SYSTEM SET synchronous_standby_names = '*') once a standby "
               "streams from it, waiting up to --wait seconds for one; then a round is "
               "acknowledged only once both servers hold it. With no standby streaming it "
               "refuses (exit 1) and changes nothing: requiring one then would make every "
               "commit wait, and the floor stop recording.",
               "sabot floor sync --db 'postgresql://sabot@db1:5432,db2:5432/postgres' --wait 60")
    y.add_argument("--db", required=True, metavar="URL", help=URL_HELP)
    y.add_argument("--wait", type=seconds_arg, default=30.0, metavar="SECONDS",
                   help="how long to wait for a standby to stream (default 30)")


@commands("floor", floor_args,
          help="the floor's database servers: status, failover, the standby required again",
          description="A floor's PostgreSQL primary and its synchronous hot standby "
          "(docs/FLOOR.md,\nthe runbook): `status` says what each server is and whether the "
          "floor records,\n`promote` fails over to the standby (the old primary fenced first), "
          "`sync` makes\nthe primary wait for its standby again once one streams, `fence` makes a "
          "server\nrefuse writes (two primaries). See\n"
          "`sabot floor ACTION --help` for each.",
          example="sabot floor status --db 'postgresql://sabot@db1:5432,db2:5432/postgres'")
def cmd_floor(args: argparse.Namespace) -> int:
    from sabot.audit import floor

    if args.action == "promote":
        floor.promote(args.db, args.old, print)
        return 0
    if args.action == "sync":
        floor.sync(args.db, args.wait, print)
        return 0
    if args.action == "fence":
        floor.fence_one(args.db, args.floor, print)
        return 0
    out = floor.status(args.db)
    if args.json:
        print(json.dumps(out))
    else:
        for s in out["servers"]:
            print(floor.describe(s))
        if out["verdict"]:
            print(out["verdict"])
    if out["verdict"] is None:
        raise SabotError("no server answers: " + "; ".join(
            f"{s['server']}: {s['error']}" for s in out["servers"]))
    if out["recording"] is None:
        raise SabotError(out["verdict"])
    if not out["recording"]:
        raise NotVerified(out["verdict"].split(":", 1)[0])
    return 0


UNITS = {"serve": "/etc/sabot/serve.toml", "witness": "/etc/sabot/witness.toml"}


def unit_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("service", choices=sorted(UNITS), help="which service's unit")
    p.add_argument("--settings", metavar="FILE", default=None,
                   help="the settings file (its --config) the service reads (default "
                   "/etc/sabot/serve.toml or /etc/sabot/witness.toml)")


@commands("unit", unit_args, help="print the systemd unit that runs serve or the witness",
          description="Prints the hardened systemd unit of `sabot serve` or the witness (a "
          "dedicated user, a read-only system, only its state directory writable; ready and "
          "watched by systemd's notify socket), with this installation's sabot command and the "
          "settings file it reads, for /etc/systemd/system (docs/INSTALL.md).",
          example="sabot unit serve | sudo tee /etc/systemd/system/sabot-serve.service")
def cmd_unit(args: argparse.Namespace) -> int:
    import shutil
    import sys
    from importlib.resources import files
    from pathlib import Path

    exe = Path(sys.argv[0])
    sabot = str(exe.resolve() if exe.name == "sabot" and exe.exists() else
                shutil.which("sabot") or Path(sys.executable).with_name("sabot"))
    if not Path(sabot).is_absolute() or not Path(sabot).exists():
        raise SabotError(f"cannot find the installed sabot command (tried {sabot})")
    template = files("sabot").joinpath("systemd", f"sabot-{args.service}.service").read_text()
    config = args.settings or UNITS[args.service]
    if not config.startswith("/"):
        raise SabotError(f"--settings wants an absolute path (the service runs in its state "
                         f"directory, not here), not {config!r}")
    print(template.replace("@SABOT@", unit_word(sabot)).replace("@CONFIG@", unit_word(config)),
          end="")
    hidden = hidden_from_service(sabot)
    if hidden:
        print(f"sabot unit: warning: {hidden[0]} is under a home directory, which the unit hides "
              "from its service (ProtectHome=true, user sabot): install sabot outside any home "
              "(docs/INSTALL.md) before using this unit", file=sys.stderr)
    return 0


def hidden_from_service(sabot: str) -> list[str]:
    """The sabot command, or the Python its first line names (a venv's, then the one that
    links to), where a service with ProtectHome= cannot reach it: under /home, /root or
    /run/user."""
    from pathlib import Path

    paths = [Path(sabot)]
    try:
        with open(sabot, "rb") as f:
            first = f.readline(4096)
    except OSError:
        first = b""
    if first.startswith(b"#!"):
        words = first[2:].decode(errors="replace").split()
        if words:
            paths.append(Path(words[0]))
    out = []
    for p in paths:
        for shown in dict.fromkeys((p, p.resolve())):
            if shown.parts[1:2] in (("home",), ("root",)) or shown.parts[1:3] == ("run", "user"):
                out.append(str(shown))
    return out


def unit_word(text: str) -> str:
    """One word of a unit's ExecStart= as systemd splits it: % and $ doubled (systemd's
    specifiers and environment variables), in double quotes when it holds a space, a quote or a
    backslash."""
    import re

    if any(c in text for c in "\n\r"):
        raise SabotError(f"a path with a line break cannot be in a unit: {text!r}")
    text = text.replace("%", "%%").replace("$", "$$")  # systemd's specifiers and variables
    if re.search(r"[\s\"'\\;]", text):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text

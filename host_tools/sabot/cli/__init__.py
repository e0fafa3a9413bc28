"""The `sabot` command line: each area module (offline, virtual, shoe, store, floor, pit,
release, witness) registers its own commands; this module puts them in one parser, in the order
`sabot --help` lists them, and runs the one asked for.

Starting is kept light for every command: the area modules import only argparse and what their
parsers need (a handler imports its work when it runs), and only the command being run gets its
options added."""

from __future__ import annotations

import sys

from sabot.errors import BAD_INPUT, INTERRUPTED, OK, SabotError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

__all__ = ["HelpFormatter", "build_parser", "main"]

# `sabot --help` lists the commands in this order; a command not named here comes last
ORDER = ("table", "analyze", "roads", "deal", "demo", "board", "validate", "serve", "replay",
         "audit", "settle", "firmware", "bench", "deploy", "verify-firmware", "provision", "soak",
         "history", "status", "new-shoe", "resolve", "accounts", "pit-role", "floor", "unit",
         "witness", "receipt", "bind", "protocol", "shuffle")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; with `command`, only that command's parser (any other word: every
    command by name and help line, for `sabot --help` and a misspelt name)."""
    from sabot.cli import floor, offline, pit, release, shoe, store, virtual, witness
    from sabot.cli.options import HelpFormatter, Parser, VersionAction

    areas = (offline, virtual, shoe, store, floor, pit, release, witness)
    p = Parser(
        prog="sabot", formatter_class=HelpFormatter,
        description="Host tools for the sabot smart baccarat shoe (58 Pa. Code rules).",
        epilog="example: sabot demo    (sabot COMMAND --help for each command)",
    )
    p.add_argument("--version", action=VersionAction)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND",
                           parser_class=Parser)
    every = {c.name: c for area in areas for c in area.commands}
    if command in every:  # the only one parse_args will meet (each parser costs its start time)
        every[command].add_to(sub)
        return p
    for name in sorted(every, key=lambda n: ORDER.index(n) if n in ORDER else len(ORDER)):
        every[name].add_to(sub, options=command is None)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run one command; its exit status (docs/INTERFACES.md): OK, NOT_VERIFIED when the
    record did not verify (errors.NotVerified), BAD_INPUT on bad input, usage or I/O (any other
    SabotError, a lost link, a file that will not do), INTERRUPTED on Ctrl-C or SIGTERM."""
    words = sys.argv[1:] if argv is None else argv
    if words[:1] == ["analyze"]:  # its plainest forms, without argparse (cli/quick.py)
        from sabot.cli import quick

        done = quick.analyze(list(words[1:]))
        if done is not None:
            return done
    # the command is the first word that is no option (`sabot --help`, `sabot --version`: none)
    command = next((w for w in words if not w.startswith("-")), None)
    parser = build_parser(command)
    from sabot.cli.config import command_parser, service_settings
    from sabot.service import failed

    fill = None
    own = command_parser(parser, command or "")
    if own is not None and "--config" in own._option_string_actions:
        try:  # a service's log format first, then the file's settings as its defaults
            fill = service_settings(own, command or "", words)
        except SabotError as e:
            failed(command or "", str(e))
            return e.exit_status
    args = parser.parse_args(argv)
    if fill is not None:
        fill(args)
    try:
        if getattr(args, "log_format", None):  # a service's lines (sabot.service)
            from sabot.service import configure

            configure(args.command, args.log_format)
        return args.func(args) or OK
    except SabotError as e:  # the error's class says what it means: e.exit_status
        failed(args.command, str(e))
        return e.exit_status
    except BrokenPipeError:  # `sabot history | head`: the reader has all it wanted (caught
        sys.stderr.close()  # before ConnectionError, of which it is a kind)
        return OK
    except ConnectionError as e:  # the shoe's port went away mid-conversation
        failed(args.command, f"link lost: {e}")
        return BAD_INPUT
    except OSError as e:  # a file or directory named on the command line that will not do
        where = f"{e.filename}: " if e.filename else ""
        failed(args.command, f"{where}{e.strerror or e}")
        return BAD_INPUT
    except KeyboardInterrupt:
        failed(args.command, "interrupted")
        return INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())


def __getattr__(name: str) -> object:
    """HelpFormatter, as before (imported only when asked: argparse is not every start's)."""
    if name == "HelpFormatter":
        from sabot.cli.options import HelpFormatter

        return HelpFormatter
    raise AttributeError(name)

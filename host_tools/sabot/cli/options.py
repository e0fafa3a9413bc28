"""What every area of the command line shares: the parser classes, the registration of a command
(its parser, handler and example in one call), argparse types, option sets and help strings."""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from collections.abc import Callable

from sabot.errors import BAD_INPUT, SabotError

TYPE_CHECKING = False  # not typing's: importing typing would slow every command's start
if TYPE_CHECKING:
    from typing import Any

Handler = Callable[[argparse.Namespace], int]
Options = Callable[[argparse.ArgumentParser], None]

REGISTRY_HELP = ("the shoe registry: each shoe's table, game, variant, decks and public keys "
                 "(default ./sabot-shoes.json)")
KEY_HELP = "the host command key file (PEM, mode 0600): it signs the commands and acknowledgements"
NO_KEY_HELP = ("accepted for compatibility and not needed: frames are verified with the "
               "registry's public keys (no secret)")
SHOE_ID_HELP = ("which registered shoe (decimal or 0x hex; default: the registry's only shoe, or "
                "with several the one that answers on the port)")
# One rule for every command that validates a shoe's link (validate, serve, status, new-shoe,
# resolve, bench --port): the store is named, never defaulted, so a forgotten --db cannot split a
# shoe's audit chain across two stores. Only demo, whose virtual shoe is its own, has a default.
DB_RULE = ("every command that validates a shoe's link (validate, serve, status, new-shoe, "
           "resolve, bench --port) needs --db: no default, so one shoe's audit chain never "
           "splits across two stores; only demo, whose virtual shoe is its own, defaults to "
           "./sabot.db")
DB_HELP = ("the audit database: a SQLite file, created if missing, or a PostgreSQL database's "
           "URL (postgresql://USER@HOST:PORT/DB, its tables made if it has none); required: "
           + DB_RULE)
RELEASE_KEY_HELP = ("the release key that signs MANIFEST, created mode 0600 if missing "
                    "(default ./sabot-release.pem)")


# argparse's words for a value its type refused with a ValueError, named by the type's __name__
# ("invalid int value: 'x'", "invalid <lambda> value: 'x'"): said in plain words instead
INVALID_VALUE = re.compile(r"invalid (\S+) value: ")
VALUE_WANTED = {"int": "not a whole number: ", "float": "not a number: "}


def plain_usage(message: str) -> str:
    """A usage error as the person at the terminal reads it: what the option wants."""
    return INVALID_VALUE.sub(lambda m: VALUE_WANTED.get(m[1], "not a value this option takes: "),
                             message)


class Parser(argparse.ArgumentParser):
    """Usage errors in one line, like every other error (the usage is one --help away)."""

    def error(self, message: str) -> Any:
        from sabot import service

        said = f"{plain_usage(message)} (see {self.prog} --help)"
        if service.structured():  # a service's log: an error record like its other lines
            service.log(said, "error")
            self.exit(BAD_INPUT)
        self.exit(BAD_INPUT, f"{self.prog}: {said}\n")


def terminal_columns() -> int:
    """shutil.get_terminal_size().columns, without importing shutil (and the compression modules
    it imports) for every command: argparse makes a formatter at every add_argument."""
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):  # no stdout (None) or not a terminal
            columns = 0
    return columns or 80


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Every option's default in its help, unless the help already says it."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position,
                         terminal_columns() - 2 if width is None else width)

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if ("default" not in text and action.default not in (None, False, argparse.SUPPRESS)
                and action.option_strings):
            text += " (default: none)" if action.default == [] else " (default: %(default)s)"
        return text


def version_text() -> str:
    """The package version and the firmware it carries: the SHA-256 of firmware/ (the code tree
    `sabot firmware` builds from) and the frame protocol version."""
    from sabot import __version__
    from sabot.paths import FIRMWARE
    from sabot.protocol import VERSION
    from sabot.release.build import code_digest

    try:
        fw = code_digest(FIRMWARE / "shoe", source=True)[:16]
    except OSError:
        fw = "missing"
    return f"sabot {__version__} (firmware source sha256 {fw}..., frame protocol {VERSION})"


class VersionAction(argparse.Action):
    """--version, computed only when asked for (it hashes the firmware)."""

    def __init__(self, option_strings: list[str], dest: str, **kw: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print the package version and the firmware build it carries")

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kw: Any) -> None:
        print(version_text())
        parser.exit()


class Command:
    """One subcommand: its name, the options its parser takes, its handler, its help line, its
    --help description (default: the help line) and an example for the --help epilog. (A plain
    class: a dataclass would import inspect for every command run.)"""

    def __init__(self, name: str, options: Options, handler: Handler, help: str, example: str,
                 description: str | None = None) -> None:
        self.name = name
        self.options = options
        self.handler = handler
        self.help = help
        self.example = example
        self.description = description

    def add_to(self, sub: Any, options: bool = True) -> argparse.ArgumentParser:
        """Its parser, added to the `sub` subparsers; options=False: its name and help line
        only (a command not run this time: `sabot --help` lists it)."""
        p: argparse.ArgumentParser = sub.add_parser(
            self.name, help=self.help, formatter_class=HelpFormatter,
            description=self.description or self.help[0].upper() + self.help[1:],
            epilog=f"example: {self.example}")
        if options:
            self.options(p)
        p.set_defaults(func=self.handler)
        return p


class Commands(list[Command]):
    """An area's commands, each registered by decorating its handler:

        def table_args(p): p.add_argument(...)

        @commands("table", table_args, help="...", example="sabot table check")
        def cmd_table(args): ...
    """

    def __call__(self, name: str, options: Options, *, help: str, example: str,
                 description: str | None = None) -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            self.append(Command(name, options, handler, help, example, description))
            return handler

        return register


def decks_arg(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


def cores(most: int = 64) -> int:
    """The cores this process may run on (its affinity: taskset, a cgroup), at most `most`: a
    --jobs default."""
    import os

    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, min(most, n))


def ranged(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: a whole number from low to high (decimal, or 0x hex)."""

    def parse(text: str) -> int:
        try:
            n = int(text, 0)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if not low <= n <= high:
            raise argparse.ArgumentTypeError(f"must be from {low} to {high}, got {n}")
        return n

    return parse


SHOE_ID = ranged(0, 0xFFFFFFFF)


def _finite(text: str, what: str, fits: Callable[[float], bool], wanted: str) -> float:
    """A finite number that `fits`, or an argparse error naming what was wanted."""
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a {what}: {text!r}") from None
    if not math.isfinite(x) or not fits(x):
        raise argparse.ArgumentTypeError(f"must be {wanted}, got {text!r}")
    return x


def probability(text: str) -> float:
    return _finite(text, "number", lambda x: 0 <= x <= 1, "a probability from 0 to 1")


def seconds_arg(text: str) -> float:
    return _finite(text, "number of seconds", lambda x: x > 0, "a positive number of seconds")


def baud_arg(text: str) -> int:
    if not text.isdigit() or not 50 <= int(text) <= 4_000_000:
        raise argparse.ArgumentTypeError(f"not a baud rate: {text!r} (e.g. 115200)")
    return int(text)


def listen_arg(text: str) -> tuple[str, int]:
    """`--listen HOST:PORT` (an empty HOST: 127.0.0.1), as (host, port)."""
    host, _, port = text.rpartition(":")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"wants HOST:PORT with a port from 1 to 65535, "
                                         f"got {text!r}")
    return host or "127.0.0.1", int(port)


def add_fail_on_notice(parser: argparse.ArgumentParser, switch: bool = False) -> None:
    """--fail-on-notice; `switch`: a service's, with --no-fail-on-notice to turn off what its
    --config file turns on."""
    parser.add_argument("--fail-on-notice", default=False,
                        action=argparse.BooleanOptionalAction if switch else "store_true",
                        help="exit 1 on a game-protection notice too (player_advantage, "
                        "repeated_sequence: printed, stored and shown either way)")


def dollars_to_cents(text: str) -> int:
    """"25" or "2.50" dollars as whole cents (no float: 0.1 + 0.2 is not money)."""
    whole, _, frac = text.strip().partition(".")
    # (ASCII digits only: str.isdigit takes "²", which int() refuses; a dozen at most)
    if not (whole.isascii() and whole.isdigit() and len(whole) <= 12) or not (
            frac == "" or (frac.isascii() and frac.isdigit() and len(frac) <= 2)):
        raise argparse.ArgumentTypeError(f"not an amount in dollars: {text!r}")
    return int(whole) * 100 + int(frac.ljust(2, "0") or 0)


def witness_arg(text: str) -> Any:
    from sabot.audit.cosign import parse_witness

    try:
        return parse_witness(text)
    except SabotError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


WITNESS_HELP = ("a witness of the shoes' logs (sabot witness, run by a regulator or a test lab): "
                "every checkpoint a shoe signs is sent to it with a consistency proof, and its "
                "cosignature stored; URL its address (http://HOST:PORT), VKEY its verifier key "
                "(sabot witness --key FILE --vkey); repeat it for several")
QUORUM_HELP = ("the cosignatures a checkpoint needs before receipts are made to it (default: "
               "every --witness)")


def add_witness_args(parser: argparse.ArgumentParser, witness_help: str = WITNESS_HELP,
                     quorum_help: str = QUORUM_HELP) -> None:
    parser.add_argument("--witness", metavar="URL=VKEY", type=witness_arg, action="append",
                        default=[], help=witness_help)
    parser.add_argument("--quorum", metavar="K", type=ranged(1, 64), default=None,
                        help=quorum_help)


def cosigner(args: argparse.Namespace, say: Callable[[str], None]) -> Any:
    """The Cosigner for --witness/--quorum, or None when no witness is named."""
    from sabot.audit.cosign import Cosigner, check_quorum

    quorum = check_quorum(args.witness, args.quorum)
    return Cosigner(args.witness, quorum, say) if args.witness else None


def add_baud(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--baud", type=baud_arg, default=115200,
                        help="the port's baud rate (default 115200; a Pico's USB CDC ignores it, "
                        "an ESP32's USB-UART bridge needs it)")


def add_operation_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", required=True,
                        help="the shoe's port: /dev/ttyACM0, socket://127.0.0.1:7000, ...")
    parser.add_argument("--key", required=True, help=KEY_HELP)
    parser.add_argument("--shoe-id", type=SHOE_ID, help=SHOE_ID_HELP)
    parser.add_argument("--db", required=True,
                        help="the audit database: frames arriving meanwhile are verified and "
                        "stored there, the operation in its operator log; required: " + DB_RULE)
    parser.add_argument("--registry", default=None, help=REGISTRY_HELP)
    add_baud(parser)


def add_service_args(parser: argparse.ArgumentParser, example: str) -> None:
    """--config and --log-format: what a service's unit gives (docs/INSTALL.md)."""
    parser.add_argument("--config", metavar="FILE", default=None,
                        help="settings from a TOML file: each key one of this command's long "
                        f"options without its dashes ({example}); a relative path in it is "
                        "taken from the directory the command runs in; an option given on the "
                        "command line wins over the file's (a repeated one replaces the file's "
                        "list)")
    parser.add_argument("--log-format", choices=("text", "logfmt", "json"), default="text",
                        help="its log lines on standard error: text (for people), logfmt "
                        "(time=... level=... program=... msg=...) or json (one object a line), "
                        "each with its severity (default text)")

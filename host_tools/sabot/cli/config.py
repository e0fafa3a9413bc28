"""A command's settings from a TOML file (`--config FILE`, for the services: serve and the
witness): each key is one of the command's long options without its dashes, its value what the
option takes (`store-alarm = 10`, `shoe = ["socket://10.0.0.7:7000=7"]`, `fail-on-notice = true`).
An option given on the command line wins over the file's: a single value replaces it, a repeated
option's values replace the file's list."""

from __future__ import annotations

import argparse

from sabot.cli.options import plain_usage
from sabot.errors import SabotError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

# not settings but things to do (--vkey: print the key and exit)
NOT_SETTABLE = {"help", "config", "version", "vkey"}


def config_path(words: list[str]) -> str | None:
    """The FILE of `--config FILE` or `--config=FILE` in a command line, if any."""
    for i, word in enumerate(words):
        if word == "--config" and i + 1 < len(words):
            return words[i + 1]
        if word.startswith("--config="):
            return word.split("=", 1)[1]
    return None


def command_parser(parser: argparse.ArgumentParser, command: str
                   ) -> argparse.ArgumentParser | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found: argparse.ArgumentParser | None = action.choices.get(command)
            return found
    return None


def read(path: str) -> dict[str, Any]:
    import tomllib

    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8-sig")  # a BOM (an editor's) is no TOML error
        return tomllib.loads(text)
    except OSError as e:
        raise SabotError(f"--config {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise SabotError(f"--config {path}: not TOML: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as e:
        raise SabotError(f"--config {path}: not TOML: {e}") from None
    except RecursionError:  # arrays nested past the parser's depth
        raise SabotError(f"--config {path}: not TOML: nested too deep") from None


def log_format(words: list[str], settings: dict[str, Any]) -> str | None:
    """The --log-format a service's command line or settings give, if a valid one."""
    from sabot.service import FORMATS

    given = None
    for i, word in enumerate(words):
        if word == "--log-format" and i + 1 < len(words):
            given = words[i + 1]
        elif word.startswith("--log-format="):
            given = word.split("=", 1)[1]
    given = given or settings.get("log-format")
    return given if given in FORMATS else None


def service_settings(parser: argparse.ArgumentParser, command: str, words: list[str]
                     ) -> Callable[[argparse.Namespace], None] | None:
    """Before a service's command line is parsed: its log format (so even a refused setting or
    a usage error is a record of it), then its settings file's values as its defaults."""
    from sabot.service import configure

    path = config_path(words)
    try:
        settings = read(path) if path is not None else {}
    except SabotError as refused:  # said in the format the command line asks for
        fmt = log_format(words, {})
        if fmt is not None:
            configure(command, fmt)
        raise refused from None
    fmt = log_format(words, settings)
    if fmt is not None:
        configure(command, fmt)
    return apply(parser, path, settings) if path is not None else None


def _value(action: argparse.Action, path: str, key: str, value: Any) -> Any:
    """`value` as the option's own type makes it (its checks included); booleans for switches."""
    where = f"--config {path}: {key}"
    if isinstance(action, argparse._StoreTrueAction | argparse._StoreFalseAction
                  | argparse.BooleanOptionalAction):
        if not isinstance(value, bool):
            raise SabotError(f"{where} is a switch: true or false, not {value!r}")
        return value if not isinstance(action, argparse._StoreFalseAction) else not value
    if isinstance(value, bool | dict) or (isinstance(value, list) and not isinstance(
            action, argparse._AppendAction)):
        raise SabotError(f"{where} takes one value, as --{key} does, not {value!r}")
    values = value if isinstance(value, list) else [value]
    out = []
    for one in values:
        if not isinstance(one, str) and action.type in (None, str):  # a path, a URL, a name
            raise SabotError(f"{where} takes text, in quotes (as --{key} takes it), not "
                             f"{one!r}")
        text = str(one)
        try:
            converted = action.type(text) if callable(action.type) else text
        except (argparse.ArgumentTypeError, ValueError, TypeError) as e:
            said = plain_usage(str(e)) if str(e) else "not a value this option takes"
            raise SabotError(f"{where}: {said}" + ("" if repr(text) in said or text in said
                                                   else f": {text!r}")) from None
        if action.choices is not None and converted not in action.choices:
            raise SabotError(f"{where} takes one of {', '.join(map(str, action.choices))}, "
                             f"not {text!r}")
        out.append(converted)
    return out if isinstance(action, argparse._AppendAction) else out[0]


def apply(parser: argparse.ArgumentParser, path: str, settings: dict[str, Any]
          ) -> Callable[[argparse.Namespace], None]:
    """Make the file's settings the command's defaults (a required option it sets is no longer
    required); the function returned fills in, after parsing, the repeated options the command
    line did not give."""
    # each option by its long name (a switch's, not its --no- form)
    actions = {longs[0][2:]: a for a in parser._actions
               if (longs := [o for o in a.option_strings if o.startswith("--")])}
    lists: dict[str, tuple[Any, list[Any]]] = {}  # dest: (its default, the file's values)
    for key, value in settings.items():
        action = actions.get(key)
        if action is None or key in NOT_SETTABLE:
            known = ", ".join(sorted(k for k in actions if k not in NOT_SETTABLE))
            raise SabotError(f"--config {path}: {key!r} is no setting of {parser.prog} (its "
                             f"settings: {known})")
        converted = _value(action, path, key, value)
        action.required = False
        if isinstance(action, argparse._AppendAction):
            lists[action.dest] = (action.default, converted)
        else:
            action.default = converted

    def fill(args: argparse.Namespace) -> None:
        for dest, (default, values) in lists.items():
            if getattr(args, dest, None) is default:  # argparse appends to a copy
                setattr(args, dest, values)

    return fill

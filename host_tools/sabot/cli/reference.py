"""docs/CLI.md, written from the command line's own parsers: every command and subcommand with
its description, usage, every option with its help and default (as --help words them) and its
example. Written, not kept by hand, so it cannot say a flag that is not there:
tests/test_cli_reference.py fails when the committed page differs from what this writes now.

    .venv/bin/python -m sabot.cli.reference --write docs/CLI.md

The output depends on nothing but the parsers: the usage lines are wrapped at a fixed width, not
the terminal's."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from sabot.cli import build_parser
from sabot.cli.options import HelpFormatter

__all__ = ["WIDTH", "main", "render"]

WIDTH = 100  # the usage lines' width, whatever the terminal's
COMMAND = "python -m sabot.cli.reference --write docs/CLI.md"


def _formatter(prog: str) -> HelpFormatter:
    return HelpFormatter(prog, width=WIDTH)


def _subparsers(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    """A parser's subcommands, in the order --help lists them."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return list(action.choices.items())
    return []


def _anchor(title: str) -> str:
    """The heading's anchor, as GitHub and the site's slugify both make it."""
    return re.sub(r"[^a-z0-9 -]", "", title.lower()).replace(" ", "-")


def _text(text: str) -> str:
    """Help or description text as Markdown: lines joined into paragraphs, and the characters
    Markdown would take for markup (outside `code`) escaped."""
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text.strip())]
    out = []
    for p in paragraphs:
        parts = re.split(r"(`[^`]*`)", p)
        out.append("".join(part if part.startswith("`") else
                           part.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
                           .replace("*", r"\*")
                           for part in parts))
    return "\n\n".join(out)


def _usage(parser: argparse.ArgumentParser) -> str:
    f = _formatter(parser.prog)
    f.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups, prefix="")
    return f.format_help().strip()


def _options(parser: argparse.ArgumentParser) -> list[str]:
    """One list item per argument and option, help and default as --help words them."""
    f = _formatter(parser.prog)
    items = []
    # the arguments first, then the options (as --help groups them), each in its own order
    for action in sorted(parser._actions, key=lambda a: bool(a.option_strings)):
        if isinstance(action, argparse._SubParsersAction) or action.help == argparse.SUPPRESS:
            continue
        if isinstance(action, argparse._HelpAction):
            continue
        invocation = f._format_action_invocation(action)
        help_text = _text(f._expand_help(action)) if action.help else ""
        required = " (required)" if action.required and action.option_strings else ""
        items.append(f"- `{invocation}`{required}" + (f": {help_text}" if help_text else ""))
    return items


def _example(parser: argparse.ArgumentParser) -> list[str]:
    """The parser's example (the Commands registry's, in its --help epilog), one command a
    line."""
    epilog = parser.epilog or ""
    if not epilog.startswith("example: "):
        return []
    text = epilog.removeprefix("example: ").split("    (")[0]
    return [e.strip() for e in re.split(r";\s+(?=sabot )", text)]


def _section(parser: argparse.ArgumentParser, level: int, help_line: str | None,
             subcommands: bool = True) -> list[str]:
    """A parser's heading, description, usage, options and example; then its subcommands', a
    level down."""
    title = parser.prog
    lines = [f"{'#' * level} {title}", ""]
    description = parser.description or help_line or ""
    if description:
        lines += [_text(description), ""]
    lines += ["```text", _usage(parser), "```", ""]
    options = _options(parser)
    if options:
        lines += options + [""]
    example = _example(parser)
    if example:
        lines += ["Example:", "", "```sh", *example, "```", ""]
    if not subcommands:
        return lines
    helps = _help_lines(parser)
    for _, sub in _subparsers(parser):
        lines += _section(sub, level + 1, helps.get(sub.prog.rsplit(" ", 1)[-1]))
    return lines


def _help_lines(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Each subcommand's help line, as its parent's --help lists it."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return {a.dest: a.help or "" for a in action._choices_actions}
    return {}


def _contents(parser: argparse.ArgumentParser, depth: int = 0) -> list[str]:
    lines = []
    helps = _help_lines(parser)
    for name, sub in _subparsers(parser):
        help_line = _text(helps.get(name, ""))
        lines.append(f"{'  ' * depth}- [{sub.prog}](#{_anchor(sub.prog)})"
                     + (f": {help_line}" if help_line else ""))
        lines += _contents(sub, depth + 1)
    return lines


def render() -> str:
    """The whole page."""
    parser = build_parser()
    lines = [
        "# sabot's command line: every command and option",
        "",
        "<!-- Written by `" + COMMAND + "` from the commands' own parsers: "
        "edit the parsers' help, not this page. -->",
        "",
        "Every command, subcommand and option of `sabot`, as the parsers define them and `--help` "
        "says them, with each command's example. The page is written from the parsers "
        f"(`.venv/bin/{COMMAND}`), and the tests fail when it differs from what they say now. "
        "What the commands are for, and the rules they share, are in "
        "[COMMANDS.md](COMMANDS.md); their outputs and JSON in [INTERFACES.md](INTERFACES.md).",
        "",
        "## Contents",
        "",
        f"- [{parser.prog}](#{_anchor(parser.prog)}): the options every invocation takes",
        *_contents(parser),
        "",
    ]
    lines += _section(parser, 2, None, subcommands=False)
    helps = _help_lines(parser)
    for name, sub in _subparsers(parser):
        lines += _section(sub, 2, helps.get(name))
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m sabot.cli.reference",
                                description="Write the command-line reference (docs/CLI.md) "
                                "from the parsers.")
    p.add_argument("--write", metavar="FILE", help="write it there (default: stdout)")
    args = p.parse_args(argv)
    text = render()
    if args.write:
        Path(args.write).write_text(text, encoding="utf-8")
        print(f"wrote {args.write}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""docs/CLI.md is what the parsers say now: a flag added, renamed or reworded without writing the
page again fails here, naming the command that writes it. The page does not depend on the
terminal's width."""

import difflib

from sabot.cli import reference

from kit import ROOT

PAGE = ROOT / "docs" / "CLI.md"


def test_the_committed_page_is_what_the_parsers_say():
    written = reference.render()
    committed = PAGE.read_text(encoding="utf-8") if PAGE.exists() else ""
    if committed != written:
        diff = "".join(list(difflib.unified_diff(
            committed.splitlines(keepends=True), written.splitlines(keepends=True),
            "docs/CLI.md (committed)", "docs/CLI.md (from the parsers now)", n=1))[:60])
        raise AssertionError(
            "docs/CLI.md differs from what the parsers say: write it again with\n"
            f"    .venv/bin/{reference.COMMAND}\nand commit it. The difference:\n{diff}")


def test_the_page_does_not_depend_on_the_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    narrow = reference.render()
    monkeypatch.setenv("COLUMNS", "300")
    assert reference.render() == narrow


def test_every_command_and_option_is_on_the_page():
    from sabot.cli import build_parser

    page = reference.render()
    for name, sub in reference._subparsers(build_parser()):
        assert f"\n## sabot {name}\n" in page, name
        for action in sub._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert f"`{option}" in page or f", {option}" in page, (name, option)

"""The commands run so often that their start is a goal of its own, without argparse: `sabot
analyze --decks N [--json]` (the whole command in 30 ms, of which the interpreter's
start takes half; argparse and the modules every parser needs take another 15).

Only the plainest forms are taken here, each meaning exactly what the full parser makes of it
(tests/test_analyze.py compares the two); anything else — another option, a value out of range,
--help, a misspelling — returns None, and the full command line parses it, with its errors."""

from __future__ import annotations


def analyze(words: list[str]) -> int | None:
    """`analyze [--decks N] [--json]` (N 1-8, each once, in any order), else None."""
    decks, as_json, i = None, False, 0
    while i < len(words):
        w = words[i]
        if w == "--json" and not as_json:
            as_json = True
            i += 1
        elif w == "--decks" and decks is None and i + 1 < len(words) and words[i + 1] in (
                "1", "2", "3", "4", "5", "6", "7", "8"):
            decks = int(words[i + 1])
            i += 2
        else:
            return None
    from sabot.game.analyze import analyze as analyzed
    from sabot.game.analyze import report_text

    result = analyzed(8 if decks is None else decks, (), 8)
    if as_json:
        import json

        print(json.dumps(result))
    else:
        print(report_text(result))
    return 0

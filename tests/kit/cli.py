"""The sabot command line run in this process: `sabot.cli.main(argv)` with its output captured,
answering like subprocess.run (returncode, stdout, stderr) so a test reads the same either way.
Every line it printed is held to docs/INTERFACES.md's rules for text (plain_line_problems)."""

import io
import json
import re
import signal
import sys
from dataclasses import dataclass

# A Python value printed as such ("shoe None", "['AS', '2H']", "{'game': ...}"; a JSON example,
# double-quoted, is not one), and a shoe id in decimal where every line names it in hex (shoe
# numbers stay below 65536, so 6 digits and more after "shoe" can only be an id)
PYTHON_VALUE = re.compile(r"\bNone\b|\['|\{'|\('[^)]*',|\[\d+, \d+")
DECIMAL_SHOE_ID = re.compile(r"\bshoe(?:[ _]id)?[ =:]+\d{6,}\b")
# audit/verify.py's lines still name a shoe in decimal where a store lacks it; until they name it
# in hex, this exception stands
NOT_YET_HEX = "the audit store does not hold: "


def plain_line_problems(text):
    """The lines of a command's text output (JSON lines aside) that print a Python value or a shoe
    id in decimal."""
    bad = []
    for line in text.splitlines():
        try:
            if isinstance(json.loads(line), (dict, list)):
                continue  # a JSON record: its own notation
        except ValueError:
            pass
        if PYTHON_VALUE.search(line) or (DECIMAL_SHOE_ID.search(line)
                                         and NOT_YET_HEX not in line):
            bad.append(line)
    return bad


@dataclass
class Ran:
    args: list[str]
    returncode: int
    stdout: str
    stderr: str


def run_cli(capsys, *args, stdin=""):
    """`sabot ARGS` in this process, `stdin` its standard input; what it printed and its exit
    status (argparse's usage errors included). Signal handlers a command installs (board and
    validate stop on SIGTERM) are put back afterwards."""
    from sabot.cli import main

    argv = [str(a) for a in args]
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    before = capsys.readouterr()  # what the test printed before this, given back below
    saved_stdin = sys.stdin
    sys.stdin = io.StringIO(stdin or "")
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    finally:
        sys.stdin = saved_stdin
        for s, h in handlers.items():
            signal.signal(s, h)
    out, err = capsys.readouterr()
    sys.stdout.write(before.out)
    sys.stderr.write(before.err)
    bad = plain_line_problems(out) + plain_line_problems(err)
    assert not bad, f"sabot {' '.join(argv)} printed a Python value or a decimal shoe id: {bad}"
    return Ran(argv, code, out, err)

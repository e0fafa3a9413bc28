"""The sabot command line run in this process: `sabot.cli.main(argv)` with its output captured,
answering like subprocess.run (returncode, stdout, stderr) so a test reads the same either way."""

import io
import signal
import sys
from dataclasses import dataclass


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
    return Ran(argv, code, out, err)

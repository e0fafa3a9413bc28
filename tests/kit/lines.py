"""Which statements of a MicroPython module a run executes, without sys.settrace (the unix port's
standard build has none): a copy of the module with a probe, `__hit__(LINE)`, before every
statement of every block, LINE the statement's line in the original. The copy runs on real
MicroPython in place of the module; the probes' module (`_lines`, written beside it) collects the
lines and prints them at exit."""

import ast
from pathlib import Path

PROBES = '''import sys
hits = set()


def hit(line):
    hits.add(line)


def report():
    sys.stdout.write("LINES %s\\n" % " ".join(str(n) for n in sorted(hits)))
'''


def statements(source):
    """The line of every statement in `source` (what a line-coverage tool counts as executable)."""
    return {n.lineno for n in ast.walk(ast.parse(source)) if isinstance(n, ast.stmt)}


def instrumented(source):
    """`source` with a probe before each statement (and the probes imported first)."""
    tree = ast.parse(source)

    def probe(line):
        return ast.Expr(ast.Call(ast.Name("__hit__", ast.Load()), [ast.Constant(line)], []))

    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                setattr(node, field, [x for s in block for x in (probe(s.lineno), s)])
    tree.body.insert(0, ast.ImportFrom("_lines", [ast.alias("hit", "__hit__")], 0))
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def write_instrumented(module, out_dir):
    """The instrumented copy of `module` (a path) as out_dir/<same relative name>, and the probes'
    module out_dir/_lines.py; returns the module's statement lines."""
    source = Path(module).read_text()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "_lines.py").write_text(PROBES)
    (out / Path(module).name).write_text(instrumented(source))
    return statements(source)

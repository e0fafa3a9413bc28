"""The `sabot` command line."""

import argparse
import sys

from .errors import SabotError


def cmd_table(args):
    from . import table_gen

    if args.action == "generate":
        path = table_gen.generate()
        print(f"wrote {path}")
        return 0
    problem = table_gen.check()
    if problem:
        raise SabotError(problem)
    print("table check: the committed table equals a fresh generation from the rule")
    return 0


def cmd_analyze(args):
    import json

    from .analyze import analyze
    from .cards import read_shoe_file

    seen = [t for t in read_shoe_file(args.seen) if t != "CUT"] if args.seen else []
    result = analyze(args.decks, seen)
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"{result['decks']} decks, {result['cards']} cards left, {result['sequences']:,} sequences")
    for name, count in result["outcomes"].items():
        print(f"  {name:<7} {count:>26,}  {count / result['sequences']:.6%}")
    print("house edge by wager:")
    for name, w in result["wagers"].items():
        print(f"  {name:<22} {w['house_edge']:>10.4%}")
    return 0


def decks_arg(text):
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


def build_parser():
    p = argparse.ArgumentParser(
        prog="sabot",
        description="Host tools for the sabot smart baccarat shoe (58 Pa. Code rules).",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    t = sub.add_parser("table", help="generate or check the shoe's decision table")
    t.add_argument("action", choices=["generate", "check"],
                   help="generate: rewrite firmware/shoe/table.py; check: fail if it differs")
    t.set_defaults(func=cmd_table)

    a = sub.add_parser("analyze", help="exact odds and house edges of every wager for a shoe",
                       description="Exact combinatorial analysis: every ordered six-card sequence "
                       "P1 B1 P2 B2 P3 B3 of the shoe is counted once.")
    a.add_argument("--decks", type=decks_arg, default=8, help="decks in the shoe, 1-8 (default 8)")
    a.add_argument("--seen", metavar="FILE", help="shoe file of cards already dealt, removed from the shoe")
    a.add_argument("--json", action="store_true", help="one JSON object, as CONTRACTS.md describes")
    a.set_defaults(func=cmd_analyze)
    return p


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args) or 0
    except SabotError as e:
        print(f"sabot {args.command}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"sabot {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

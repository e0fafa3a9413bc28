"""Commands that need no shoe, board or store: the decision table, the exact analysis, roads,
settling wagers and shuffling a shoe file."""

from __future__ import annotations

import argparse
import sys

from sabot.cli.options import REGISTRY_HELP, SHOE_ID, Commands, decks_arg, dollars_to_cents
from sabot.errors import NotVerified, SabotError, parse_json

commands = Commands()


def table_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=["generate", "check"],
                   help="generate: rewrite firmware/shoe/table.py; check: fail if it differs")


@commands("table", table_args, help="generate or check the shoe's decision table",
          example="sabot table check")
def cmd_table(args: argparse.Namespace) -> int:
    from sabot.release import table_gen

    if args.action == "generate":
        path = table_gen.generate()
        print(f"wrote {path}")
        return 0
    problem = table_gen.check()
    if problem:
        raise NotVerified(problem)
    print("table check: the committed table equals a fresh generation from the rule")
    return 0


def analyze_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--game", choices=["baccarat", "blackjack", "21-baccarat"],
                   default="baccarat",
                   help="baccarat (default): every wager's edge; blackjack: the dealer's final "
                   "card count and Blackjack, and the side wagers that depend on them; "
                   "21-baccarat: each hand's win and the Tie, the bonus hands, every wager's edge")
    p.add_argument("--decks", type=decks_arg, default=8, help="decks in the shoe, 1-8 (default 8)")
    p.add_argument("--seen", metavar="FILE",
                   help="shoe file of cards already dealt, removed from the shoe")
    p.add_argument("--tie-odds", type=decks_arg, default=None,
                   help="baccarat: the table's Tie odds, to 1 (default 8)")
    p.add_argument("--dealer", choices=["s17", "h17"], default=None,
                   help="blackjack: the dealer stands on all 17s (s17, default) or draws to a "
                   "soft 17 (h17), as the table's Rules Submission says")
    p.add_argument("--hit-and-run-meter", type=dollars_to_cents, default=None, metavar="DOLLARS",
                   help="blackjack: the Hit and Run meter's reset amount, at least 1000 "
                   "(633a.13(l)(2); default 1000)")
    p.add_argument("--hit-and-run-wager", type=dollars_to_cents, default=None, metavar="DOLLARS",
                   help="blackjack: the Hit and Run wager (default 1)")
    p.add_argument("--rules", metavar="JSON", default=None,
                   help="21-baccarat: the table's settings as one JSON object, as sabot settle's "
                   "table takes them (docs/RULES.md, \"21 Baccarat\"; default: every default)")
    p.add_argument("--json", action="store_true",
                   help="one JSON object (docs/INTERFACES.md)")


@commands("analyze", analyze_args,
          help="exact odds and house edges of every wager for a shoe",
          description="Exact combinatorial analysis. Baccarat: every ordered six-card sequence "
          "P1 B1 P2 B2 P3 B3 of the shoe is counted once. Blackjack (--game blackjack): every "
          "ordered sequence of the dealer's cards until the hand is complete (Blackjack, or "
          "standing or busting under --dealer), weighted by its orderings of the shoe: the "
          "dealer's final number of cards (the busting card counted), its totals, Blackjack, "
          "and the house edge of Hit and Run with its meter at the reset amount. 21 Baccarat "
          "(--game 21-baccarat): each hand's win and the Tie, exactly (every sequence each hand "
          "can end with, by the table's --rules), the bonus hands, and every wager's edge.",
          example="sabot analyze --decks 8 --seen dealt.txt --json; sabot analyze --game "
          "blackjack --decks 6 --dealer h17 --json; sabot analyze --game 21-baccarat --rules "
          "'{\"banker_rule\": \"beat_player\"}'")
def cmd_analyze(args: argparse.Namespace) -> int:
    import json  # here, not at the top: no command's start pays for it

    from sabot.game.cards import read_shoe_file

    seen = [t for t in read_shoe_file(args.seen) if t != "CUT"] if args.seen else []
    if args.game == "blackjack":
        return analyze_blackjack(args, seen)
    if args.game == "21-baccarat":
        return analyze_21(args, seen)
    if args.rules is not None:
        raise SabotError("--rules is 21 Baccarat's (add --game 21-baccarat)")
    given = _blackjacks(args)
    if given:
        raise SabotError(f"{', '.join(given)}: blackjack's (add --game blackjack); baccarat's "
                         "analysis takes --tie-odds only")
    from sabot.game.analyze import analyze, report_text

    result = analyze(args.decks, seen, 8 if args.tie_odds is None else args.tie_odds)
    print(json.dumps(result) if args.json else report_text(result))
    return 0


def _blackjacks(args: argparse.Namespace) -> list[str]:
    """The blackjack-only options given."""
    return [o for o, v in (("--dealer", args.dealer), ("--hit-and-run-meter",
            args.hit_and_run_meter), ("--hit-and-run-wager", args.hit_and_run_wager))
            if v is not None]


def analyze_blackjack(args: argparse.Namespace, seen: list[str]) -> int:
    import json

    from sabot.game.blackjack_analyze import analyze

    if args.tie_odds is not None:
        raise SabotError("--tie-odds is baccarat's: a blackjack table has no Tie wager")
    result = analyze(args.decks, seen, args.dealer or "s17",
                     100_000 if args.hit_and_run_meter is None else args.hit_and_run_meter,
                     100 if args.hit_and_run_wager is None else args.hit_and_run_wager)
    if args.json:
        print(json.dumps(result))
        return 0
    rule = {"s17": "stands on all 17s", "h17": "draws to a soft 17"}[result["dealer"]]
    decks = f"{result['decks']} deck{'s' if result['decks'] > 1 else ''}"
    print(f"blackjack, {decks}, {result['cards']} cards left; the dealer {rule}")
    print(f"  Blackjack      {result['blackjack']:.6%}")
    print("the dealer's cards when the hand is complete (the busting card counted):")
    for n, p in result["dealer_cards"].items():
        print(f"  {n:<3} cards      {p:.6%}")
    print("the dealer's total:")
    for t, p in result["dealer_totals"].items():
        print(f"  {t:<4}           {p:.6%}")
    hr = result["wagers"]["hit_and_run"]
    print(f"house edge of Hit and Run (a ${hr['wager_cents'] / 100:,.2f} wager, the meter at "
          f"${hr['meter_cents'] / 100:,.2f}): {hr['house_edge']:.4%}")
    print(f"house edge of House Money: {result['wagers']['house_money']['house_edge']:.4%}")
    return 0


def analyze_21(args: argparse.Namespace, seen: list[str]) -> int:
    import json

    from sabot.game import baccarat21 as b21
    from sabot.game.baccarat21_analyze import analyze

    given = _blackjacks(args)
    if given:
        raise SabotError(f"{', '.join(given)}: blackjack's, not 21 Baccarat's")
    cfg = parse_json(args.rules, "--rules") if args.rules is not None else {}
    if isinstance(cfg, dict) and "decks" in cfg:
        raise SabotError("--rules: give the shoe's decks with --decks")
    if args.tie_odds is not None:
        raise SabotError("--tie-odds is baccarat's: a 21 Baccarat table's Tie odds are its "
                         "--rules' tie_odds")
    result = analyze(args.decks, seen, b21.Rules.from_config(cfg))
    if args.json:
        print(json.dumps(result))
        return 0
    decks = f"{result['decks']} deck{'s' if result['decks'] > 1 else ''}"
    print(f"21 Baccarat, {decks}, {result['cards']} cards left")
    for who, p in result["outcomes"].items():
        print(f"  {who:<8} wins  {p:.6%}" if who != "tie" else f"  a tie          {p:.6%}")
    for hand, p in result["bonus_hands"].items():
        name = "suited pair" if hand == "suited_pair" else "pair, not suited"
        print(f"  {name:<16} {p:.6%} (a hand's first two cards)")
    print("house edges:")
    for wager, e in result["house_edges"].items():
        e = 0.0 if abs(e) < 5e-7 else e  # a rounding's sign is no edge
        print(f"  {wager.replace('_', ' '):<14} {e:.4%}")
    return 0


def protocol_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("frames", nargs="*", metavar="HEX",
                   help="frames as hex, before COBS (e.g. from a capture or a logic analyser); "
                   "none: list the frame types")
    p.add_argument("--json", action="store_true", help="one JSON object a frame")


@commands("protocol", protocol_args, help="the shoe protocol's frame types, or what frames say",
          description="Without HEX: the frame types of the sabot protocol (docs/PROTOCOL.md), "
          "shoe to host and host to shoe, and which are chained and signed. With HEX: each "
          "frame's header (type, key version, shoe id, boot, seq) and what its payload says. "
          "The signature is not checked here: sabot replay CAPTURE --registry FILE verifies "
          "a capture's frames with the shoe's public key.",
          example="sabot protocol; sabot protocol 0201000100000007...")
def cmd_protocol(args: argparse.Namespace) -> int:
    import json

    from sabot import protocol as pr

    if not args.frames:
        commands_ = {pr.C_HELLO: "hello", pr.C_ACK: "ack", pr.C_RESOLVE: "resolve",
                     pr.C_NEW_SHOE: "new_shoe", pr.C_VERIFY: "integrity", pr.C_UPDATE: "update",
                     pr.C_UPDATE_DATA: "update_data", pr.C_REKEY: "rekey",
                     pr.C_CHECKPOINT: "checkpoint"}
        rows = [(t, n, "shoe to host") for t, n in pr.TYPES.items()] + [
            (t, n, "host to shoe") for t, n in commands_.items()]
        for t, name, way in sorted(rows):
            kind = ("chained" if t in pr.CHAINED else "not chained") + (
                ", unsigned" if t in pr.UNSIGNED else ", signed")
            print(f"0x{t:02x}  {name:<17} {way}, {kind}")
        print("(the layouts: docs/PROTOCOL.md)")
        return 0
    for text in args.frames:
        try:
            f = pr.parse(bytes.fromhex(text))
        except ValueError:
            raise SabotError(f"not a frame in hex: {text[:40]!r}") from None
        except pr.FrameError as e:
            raise SabotError(f"not a frame of the protocol ({e.reason}): {text[:40]}") from None
        out: dict[str, object] = {"type": pr.TYPES.get(f.type, f"0x{f.type:02x}"),
                                  "key_id": f.key_id, "shoe_id": pr.shoe_id_text(f.shoe_id),
                                  "boot": f.boot, "seq": f.seq,
                                  "signature": "not checked" if f.signed else "none"}
        try:
            if f.type in pr.CHAINED:
                out["record"] = pr.decode_payload(f)[1]
            elif f.type == pr.T_STATUS:
                out["record"] = pr.decode_status(f.payload)
            elif f.type == pr.T_CHECKPOINT:
                out["record"] = {"size": f.seq, "root": f.payload.hex()}
        except pr.FrameError as e:
            out["problem"] = e.reason
        if args.json:
            print(json.dumps(out))
        else:
            said = {k: v for k, v in out.items() if k not in ("record", "problem")}
            print(" ".join(f"{k} {v}" for k, v in said.items()) + (
                f": {json.dumps(out['record'])}" if "record" in out else "") + (
                f" (payload: {out['problem']})" if "problem" in out else ""))
    return 0


def roads_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", nargs="?", help="round records (default: stdin)")
    p.add_argument("--json", action="store_true",
                   help="one JSON object (docs/INTERFACES.md)")


@commands("roads", roads_args,
          help="bead plate, big road and derived roads from round records",
          description="Reads round records (one JSON object a line, as `sabot deal --json` "
          "prints them) from FILE or stdin; events are skipped.",
          example="sabot roads rounds.jsonl --json   (rounds from: sabot history --db audit.db "
          "--json)")
def cmd_roads(args: argparse.Namespace) -> int:
    import json

    from sabot.game.roads import format_roads, roads, winners_from_lines

    try:
        if args.file and args.file != "-":
            with open(args.file, encoding="utf-8") as f:
                winners = winners_from_lines(f, args.file)
        else:
            winners = winners_from_lines(sys.stdin, "stdin")
    except OSError as e:
        raise SabotError(f"cannot read {args.file}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise SabotError(f"{args.file or 'stdin'} is not UTF-8 text") from None
    result = roads(winners)
    print(json.dumps(result) if args.json else format_roads(result))
    return 0


def settle_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", nargs="?", help="request file (default: stdin)")
    at = p.add_mutually_exclusive_group()
    at.add_argument("--table", metavar="NAME",
                    help="a table of the shoe registry: its game, variant, tie odds, side wagers "
                    "and Dragon Bonus paytable are the request's table; what the request's own "
                    "table says must agree")
    at.add_argument("--shoe-id", type=SHOE_ID, help="the same, for the table of this registered "
                    "shoe (decimal or 0x hex)")
    p.add_argument("--registry", default=None, help=REGISTRY_HELP + "; with --table or --shoe-id")


@commands("settle", settle_args, help="settle a round's wagers (JSON in, JSON out)",
          description="Reads {table, round, wagers} as JSON from FILE or stdin and prints the "
          "settlements in the order the dealer makes them. Baccarat: losing wagers first, then "
          "seats from the highest number down. Blackjack (table.game \"blackjack\"): the side "
          "wagers Hit and Run, Straight Jack and House Money, seat by seat from the dealer's "
          "right; the request also carries \"meters\" (the progressive meters in cents, for "
          "the wagers placed) and the answer the meters after. 21 Baccarat (table.game "
          "\"21-baccarat\", § 681a.6): the Player and Banker wagers, the Tie and the two Bonus "
          "Wagers, by the table's configured rules (docs/RULES.md, \"21 Baccarat\"); the answer "
          "also carries the round's totals and winner. Money is integer cents. See "
          "docs/INTERFACES.md. With --table (or --shoe-id) the table is the one registered for "
          "that shoe (sabot provision), checked against any the request names.",
          example="sabot settle --table BAC-07 request.json; echo '{\"table\": {\"game\": "
          "\"blackjack\", \"side_wagers\": [\"hit_and_run\"]}, \"round\": {\"dealer\": "
          "[\"AS\", \"KH\"], \"hands\": []}, \"meters\": {\"hit_and_run\": 100000}, "
          "\"wagers\": [{\"seat\": 1, \"wager\": \"hit_and_run\", \"amount_cents\": 500}]}' "
          "| sabot settle")
def cmd_settle(args: argparse.Namespace) -> int:
    import json

    from sabot.game.settle import registered_table, settle

    registered = None
    if args.table is not None or args.shoe_id is not None:  # before the request is read
        from sabot.registry import Registry

        reg = Registry.load(args.registry, must_exist=True)
        entry = reg.at_table(args.table) if args.table is not None else reg.get(args.shoe_id)
        registered = entry
    elif args.registry is not None:
        raise SabotError("--registry is for --table or --shoe-id: name the registered table "
                         "to settle at")
    try:
        if args.file and args.file != "-":
            with open(args.file, encoding="utf-8") as f:
                text = f.read()
        else:
            text = sys.stdin.read()
    except OSError as e:
        raise SabotError(f"cannot read {args.file or 'stdin'}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise SabotError(f"{args.file or 'stdin'} is not UTF-8 text (a binary file?)") from None
    request = parse_json(text, "input")
    try:
        if registered is not None:
            if not isinstance(request, dict):
                raise SabotError("expected a JSON object with table, round and wagers")
            request = dict(request, table=registered_table(
                request.get("table"), registered.table_config(), registered.table))
            dealt_by = request.get("round", {}).get("shoe_id") if isinstance(
                request.get("round"), dict) else None
            if dealt_by is not None and dealt_by != registered.shoe_id:
                from sabot.protocol import shoe_id_text

                said = shoe_id_text(dealt_by) if isinstance(dealt_by, int) else repr(dealt_by)
                raise SabotError(f"round: dealt by shoe {said}, not by table "
                                 f"{registered.table}'s shoe {shoe_id_text(registered.shoe_id)}")
        out = settle(request)
    except SabotError:
        raise
    except (TypeError, ValueError, AttributeError, KeyError, IndexError) as e:
        # a value of the wrong kind somewhere in the request: one line, never a traceback
        raise SabotError(f"the request does not fit the settle format ({type(e).__name__}: "
                         f"{' '.join(str(e).split())}); see docs/INTERFACES.md") from None
    print(json.dumps(out))
    return 0


def shuffle_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--decks", type=decks_arg, default=8, help="decks, 1-8 (default 8)")
    p.add_argument("--seed", type=int, help="seed for a repeatable shuffle (default: random)")
    p.add_argument("--cut", type=decks_arg, metavar="POS",
                   help="the cut card's position, in cards from the end of the shoe (default: "
                   "about a sixth of the cards); 0: no cut card, the shoe is dealt until it runs "
                   "out: mid-round it holds (cards_exhausted) until the supervisor ends it "
                   "(sabot resolve end-shoe); at a round's end it ends there")
    p.add_argument("-o", "--output", metavar="FILE", help="file to write (default: stdout)")


@commands("shuffle", shuffle_args, help="write a freshly shuffled shoe file",
          description="Shuffles N decks, places the cut card and writes the shoe file (cards in "
          "dealing order, CUT for the cut card).",
          example="sabot shuffle --decks 8 --seed 42 -o shoe2.txt")
def cmd_shuffle(args: argparse.Namespace) -> int:
    from sabot.game.cards import format_shoe, shuffled_shoe

    n = args.decks * 52
    if not 1 <= args.decks <= 8:
        raise SabotError(f"--decks must be a whole number from 1 to 8 (got {args.decks})")
    if args.cut is not None and not 0 <= args.cut < n:
        raise SabotError(f"--cut must be between 0 and {n - 1} cards from the end")
    tokens = shuffled_shoe(args.decks, args.seed, args.cut or None)
    if args.cut == 0:
        tokens.remove("CUT")
    text = format_shoe(tokens)
    if not args.output:
        sys.stdout.write(text)
        return 0
    try:
        with open(args.output, "x", encoding="utf-8") as f:
            f.write(text)
    except FileExistsError:
        raise SabotError(f"{args.output} exists: a shoe file is never overwritten") from None
    except OSError as e:
        raise SabotError(f"cannot write {args.output}: {e.strerror}") from None
    print(f"wrote a shuffled {args.decks}-deck shoe to {args.output}", file=sys.stderr)
    return 0

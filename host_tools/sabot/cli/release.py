"""Commands that build firmware and put it on a shoe, and check a shoe against a build or the
rules: firmware, bench, deploy, provision, verify-firmware."""

from __future__ import annotations

import argparse
import json
import sys

from sabot.cli.options import (
    DB_RULE,
    KEY_HELP,
    NO_KEY_HELP,
    REGISTRY_HELP,
    RELEASE_KEY_HELP,
    SHOE_ID,
    SHOE_ID_HELP,
    Commands,
    add_baud,
    add_witness_args,
    dollars_to_cents,
    ranged,
)
from sabot.cli.output import shoe_id_text
from sabot.errors import NotVerified, SabotError

TYPE_CHECKING = False  # not typing's: importing typing would slow every command's start
if TYPE_CHECKING:
    from typing import Any

    from sabot.registry import Registry, ShoeEntry

commands = Commands()


def firmware_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--board", default="virtual",
                   help="rpi_pico, esp32 or virtual (default virtual)")
    p.add_argument("--out", help="output directory (default build/BOARD)")
    p.add_argument("--release-key", metavar="FILE", default="sabot-release.pem",
                   help=RELEASE_KEY_HELP)
    p.add_argument("--json", action="store_true",
                   help="one JSON object: board, arch, files and sizes, flash and RAM budgets, "
                   "manifest")


@commands("firmware", firmware_args,
          help="build a board's .mpy set, sizes and MANIFEST (make firmware)",
          example="sabot firmware --board rpi_pico")
def cmd_firmware(args: argparse.Namespace) -> int:
    from sabot.release.build import build

    r = build(args.board, args.out, release=args.release_key)
    if args.json:
        print(json.dumps(r))
        return 0
    print(f"{r['board']} ({r['arch']}): {len(r['files'])} files in {r['dir']}")
    for name, size in r["files"].items():
        print(f"  {name:<28} {size:>7,} B")
    if r["flash_bytes"]:
        print(f"code {r['code_bytes']:,} B of {r['flash_bytes']:,} B flash "
              f"({r['flash_used']:.1%}); "
              f"decision table {r['table_bytes']:,} B")
        print(f"heap needed {r['heap_needed_bytes']:,} B of {r['ram_bytes']:,} B RAM "
              f"({r['ram_used']:.1%})")
    print(f"MANIFEST sha256 {r['manifest']}, signed with the release key")
    return 0


def bench_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("shoefile", help="the scripted shoe (shoe file format)")
    p.add_argument("--port",
                   help="the shoe's port (/dev/ttyACM0, socket://HOST:PORT); default: a virtual "
                   "board")
    p.add_argument("--key", help="with --port: the host command key file, to acknowledge "
                   "what the shoe sends (verifying needs only the registry)")
    p.add_argument("--registry", default=None, help=REGISTRY_HELP + " (with --port)")
    p.add_argument("--shoe-id", type=SHOE_ID, help=SHOE_ID_HELP)
    p.add_argument("--db",
                   help="with --port: the shoe's audit database, so its chain goes on; "
                   "required with --port: " + DB_RULE)
    add_baud(p)
    p.add_argument("--json", action="store_true",
                   help="print {\"verdict\", \"rounds\": [{round, verdict, detail}]} instead "
                   "of the report")


@commands("bench", bench_args,
          help="push a scripted shoe through a shoe; per-round pass/fail",
          description="Deals SHOEFILE through a shoe and judges every round against the host's "
          "rules. With --port a technician draws each card by hand when prompted; without it a "
          "virtual board and a simulated dealer are used.",
          example="sabot bench myshoe.txt --port /dev/ttyACM0 --key host.pem")
def cmd_bench(args: argparse.Namespace) -> int:
    from sabot.release.bench import run_bench

    if args.port:
        from sabot import keys
        from sabot.audit.store import refuse_unwritable
        from sabot.registry import Registry

        if not args.db:
            raise SabotError("bench --port validates the shoe's link: name its audit database "
                             "with --db (" + DB_RULE + ")")
        if args.key:  # every check that can refuse, before the port is opened
            keys.load(args.key)
        refuse_unwritable(args.db)
        Registry.load(args.registry, must_exist=True).pick(args.shoe_id)
    passed, verdicts = run_bench(args.shoefile, args.port, args.key, args.db, args.json,
                                 baud=args.baud, registry=args.registry, shoe_id=args.shoe_id)
    if args.json:
        rounds = [{"round": r, "verdict": v, "detail": d} for r, v, d in verdicts]
        print(json.dumps({"verdict": "PASS" if passed else "FAIL", "rounds": rounds}))
    else:
        for rnd, verdict, detail in verdicts:
            print(f"{'round ' + str(rnd) if rnd else 'link':>9}: {verdict:<7} {detail}")
        n_pass = sum(1 for _, v, _ in verdicts if v == "PASS")
        print(f"verdict: {'PASS' if passed else 'FAIL'} ({n_pass} of {len(verdicts)} rounds "
              "as the rules deal)")
    if not passed:
        raise NotVerified("the shoe did not deal the scripted shoe as the rules do")
    return 0


def deploy_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--port", required=True,
                   help="the shoe's port: /dev/ttyACM0, socket://127.0.0.1:7000")
    p.add_argument("--board", default="virtual", help="rpi_pico, esp32 or virtual")
    p.add_argument("--key", required=True,
                   help=KEY_HELP + " (it signs the update and rekey commands)")
    p.add_argument("--shoe-id", type=SHOE_ID, help=SHOE_ID_HELP + " (default: whichever "
                   "registered shoe answers on the port)")
    add_baud(p)
    p.add_argument("--rekey", action="store_true",
                   help="after the update, have the shoe's secure element make its next result "
                   "key version, certified by its attestation key, and register it (the old "
                   "versions stay registered for old frames; the audit chain goes on)")
    p.add_argument("--by", metavar="NAME", help="who updates the shoe: signed into the command "
                   "and recorded in the shoe's chain (default: your login name; 16 characters)")
    p.add_argument("--release-key", metavar="FILE", default="sabot-release.pem",
                   help=RELEASE_KEY_HELP)
    p.add_argument("--table", default="", help="the table's name in the shoe registry (default: "
                   "kept, or shoe-<shoe id> for a shoe not registered yet)")
    p.add_argument("--registry", default=None, help=REGISTRY_HELP + "; the shoe is registered "
                   "there if it is not yet")


@commands("deploy", deploy_args,
          help="build the firmware and put it on a shoe: a signed update, or a blank shoe's copy",
          description="Builds BOARD's firmware (MANIFEST signed with the release key). A "
          "provisioned shoe is updated through the sabot protocol: the files and the MANIFEST "
          "go in authenticated commands; the shoe checks them against the release key it "
          "trusts, records the update as a signed frame, switches and boots it; then a seeded "
          "challenge proves it runs the build. Another release key's build is refused and the "
          "shoe deals on with its firmware. A blank shoe (element never provisioned) gets the "
          "build copied at its REPL with mpremote; provision it next.",
          example="sabot deploy --port /dev/ttyACM0 --board rpi_pico --key host.pem --rekey")
def cmd_deploy(args: argparse.Namespace) -> int:
    from sabot.registry import Registry
    from sabot.release.deploy import deploy

    reg = Registry.load(args.registry)
    config = reg.pick(args.shoe_id) if args.shoe_id is not None else None
    info = deploy(args.port, args.board, args.key, log=lambda m: print(m, file=sys.stderr),
                  baud=args.baud, rekey=args.rekey, config=config, release=args.release_key,
                  registry=reg, by=args.by or "")
    how = "updated" if info.get("updated") else "copied"
    print(f"{how} {info['board']} firmware ({info['code_bytes']:,} B, "
          f"MANIFEST {info['manifest']}) on {args.port}")
    shoe_id = info["shoe_id"]
    if shoe_id is None:
        print(f"the shoe is blank (its element was never provisioned): it deals once "
              f"provisioned: sabot provision --port {args.port} --key {args.key}", file=sys.stderr)
        return 0
    entry, changed = reg.register(shoe_id, info["key_version"], info["public_key"],
                                  info["certificate"], table=args.table)  # a clash: SabotError
    if changed:  # the validator takes its table and keys from here
        print(f"registered shoe {shoe_id_text(shoe_id)} (table {entry.table}, result key versions "
              f"{entry.key_versions_text}) in {reg.path}", file=sys.stderr)
    else:
        print(f"shoe {shoe_id_text(shoe_id)} result key {info['key_version']}: as the registry "
              "holds it",
              file=sys.stderr)
    return 0


def side_wagers(text: str) -> list[str]:
    from sabot.game import blackjack_settle
    from sabot.game.baccarat21_settle import OPTIONAL
    from sabot.game.settle import SIDE_WAGERS

    known = tuple(dict.fromkeys((*SIDE_WAGERS, *blackjack_settle.SIDE_WAGERS, *OPTIONAL)))
    names = [w.strip() for w in text.split(",") if w.strip()]
    if len(set(names)) < len(names):
        raise argparse.ArgumentTypeError("a side wager is named twice")
    for w in names:
        if w not in known:
            raise argparse.ArgumentTypeError(f"unknown side wager {w!r}; the known ones are "
                                             f"{', '.join(known)}")
    return names


def meter_reset(text: str) -> tuple[str, int]:
    """--meter-reset WAGER=DOLLARS: (wager, cents), at least the regulation's reset amount."""
    from sabot.game.blackjack_settle import HIT_AND_RUN_MIN_RESET, STRAIGHT_JACK_MIN_RESET

    name, sep, amount = text.partition("=")
    least = {"hit_and_run": (HIT_AND_RUN_MIN_RESET, "§ 633a.13(l)(2)"),
             "straight_jack": (STRAIGHT_JACK_MIN_RESET, "§ 633a.13(m)(2)")}.get(name)
    if not sep or least is None:
        raise argparse.ArgumentTypeError(f"want hit_and_run=DOLLARS or straight_jack=DOLLARS; "
                                         f"got {text!r}")
    cents = dollars_to_cents(amount)
    if cents < least[0]:
        raise argparse.ArgumentTypeError(f"{name}'s meter resets to at least "
                                         f"${least[0] // 100:,} ({least[1]}); got {text!r}")
    return name, cents


def provision_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--key", required=True,
                   help="the host command key file (created with mode 0600 if missing)")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--port", help="pyserial URL of a blank shoe holding deployed firmware "
                       "(its REPL: /dev/ttyACM0, socket://HOST:PORT)")
    where.add_argument("--flash", help="a virtual board's flash directory (its element is "
                       "DIR.element beside it)")
    p.add_argument("--shoe-id", type=ranged(0, 0xFFFFFFFF),
                   help="shoe id, 0-4294967295, decimal or 0x hex (default: kept, or random)")
    p.add_argument("--game", default="baccarat",
                   choices=["minibaccarat", "midibaccarat", "baccarat", "blackjack",
                            "21-baccarat"],
                   help="the game the shoe deals (default baccarat); blackjack: Chapter 633a, "
                   "with --dealer, --no-hole-card, --meter-reset; 21-baccarat: § 681a, with "
                   "--rules")
    variant = p.add_mutually_exclusive_group()
    variant.add_argument("--ez", action="store_true",
                         help="EZ Baccarat: announces Dragon 7 / Panda 8")
    variant.add_argument("--commission-free", action="store_true",
                         help="631c.5: announces Lucky Six")
    p.add_argument("--squeeze", action="store_true",
                   help="631a.9(d): card identities stay off the link until the dealer's reveal")
    p.add_argument("--decks", type=ranged(1, 8), default=8,
                   help="decks the shoe deals, 1-8 (default 8): written to the shoe, announced "
                   "in every shoe_start and registered")
    p.add_argument("--side-wagers", type=side_wagers, default=[], metavar="W,...",
                   help="side wagers the table offers, comma-separated: dragon7, panda8 (EZ), "
                   "lucky_six (commission-free), player_pair, banker_pair, house_money, "
                   "dragon_bonus_player, dragon_bonus_banker; at a blackjack table "
                   "hit_and_run, straight_jack, house_money; at a 21 Baccarat table tie, "
                   "player_bonus, banker_bonus; registered for the edges and settlement "
                   "(default: none)")
    p.add_argument("--rules", metavar="JSON", default=None,
                   help="21-baccarat: the table's settings as a JSON object, each one not named "
                   "at its default (docs/RULES.md, 21 Baccarat), e.g. '{\"player_draws_soft\": "
                   "true, \"tie_odds\": 8}': registered; those the dealing depends on written to "
                   "the shoe and announced in every shoe_start")
    p.add_argument("--dealer", choices=["s17", "h17"], default=None,
                   help="blackjack: the dealer's rule of the Rules Submission, s17 stands on "
                   "all 17s (the default), h17 draws to a soft 17: the shoe lights the draw lamp "
                   "by it")
    p.add_argument("--no-hole-card", action="store_true",
                   help="blackjack: the dealer takes no hole card (the second card at the "
                   "dealer's turn)")
    p.add_argument("--meter-reset", type=meter_reset, action="append", default=[],
                   metavar="W=DOLLARS", help="blackjack: a progressive meter's reset amount, "
                   "hit_and_run=DOLLARS (at least 1000, § 633a.13(l)) or straight_jack=DOLLARS "
                   "(at least 5000, § 633a.13(m)); repeat for both (default: those least "
                   "amounts)")
    p.add_argument("--tie-odds", type=ranged(1, 100), default=None, metavar="N",
                   help="baccarat: a winning Tie pays N to 1 (627a.12(b): at least 8, the "
                   "default; a commission-free table pays 8); a 21 Baccarat table's is its "
                   "--rules' tie_odds")
    p.add_argument("--dragon-bonus-paytable", type=str.upper, choices=["A", "B", "C"],
                   help="the Dragon Bonus paytable (627a.12(e)), needed when --side-wagers "
                   "offers Dragon Bonus")
    p.add_argument("--limits", type=table_limits, metavar="MIN-MAX", default=(None, None),
                   help="the table's minimum and maximum main wager in dollars, e.g. 25-5000 "
                   "or 2.50-500: registered, shown on the players' scoreboard (default: none)")
    p.add_argument("--languages", type=languages_arg, metavar="LANG,...", default=["en", "zh"],
                   help="the players' scoreboard's languages: en (English), zh (Chinese) or "
                   "both (default: en,zh, side by side)")
    p.add_argument("--table", default="", help="the table's name in the registry, 1-64 "
                   "printable characters (default shoe-<shoe id>)")
    p.add_argument("--registry", default=None, help=REGISTRY_HELP + "; the shoe's entry is "
                   "written there")
    add_witness_args(p, "a witness of the shoe's log (sabot witness, run by a regulator or a "
                     "test lab) to hand the shoe's first checkpoint, signed by result key 1 as "
                     "it is made: from then on the witness refuses a log signed by any other "
                     "key, so a key swapped in the registry later is caught; repeat for several "
                     "(or later: sabot bind)", "how many of the witnesses must take it "
                     "(default: every --witness); fewer: exit 2, the shoe provisioned and "
                     "registered all the same")
    add_baud(p)


def languages_arg(text: str) -> list[str]:
    """--languages en,zh: the scoreboard's languages, in order."""
    from sabot.table_checks import LANGUAGES, languages_ok

    got = [x.strip() for x in text.split(",") if x.strip()]
    if not languages_ok(got):
        raise argparse.ArgumentTypeError(f"want one or both of {', '.join(LANGUAGES)}, "
                                         f"comma-separated; got {text!r}")
    return got


def table_limits(text: str) -> tuple[int, int]:
    """--limits MIN-MAX in dollars: (min_bet_cents, max_bet_cents)."""
    low, sep, high = text.partition("-")
    if not sep:
        raise argparse.ArgumentTypeError(f"want MIN-MAX in dollars, e.g. 25-5000; got {text!r}")
    cents = dollars_to_cents(low), dollars_to_cents(high)
    if not 1 <= cents[0] <= cents[1]:
        raise argparse.ArgumentTypeError(f"the minimum must be at least 1 cent and no more than "
                                         f"the maximum; got {text!r}")
    return cents


def new_shoe(reg: Registry, shoe_id: int | None) -> None:
    """A shoe id provisioning may give a new element: one the registry does not list yet."""
    if shoe_id is not None and shoe_id in reg.shoes:
        old = reg.shoes[shoe_id]
        raise SabotError(f"shoe {shoe_id_text(shoe_id)} is registered already (table {old.table}"
                         f"{', element ' + old.serial if old.serial else ''}): a new element is "
                         "a new shoe: give it another --shoe-id, or none for a free one (the old "
                         f"entry stays in {reg.path} for its frames: docs/TECHNICIAN.md, "
                         "replacing a shoe)")


def table_of(args: argparse.Namespace) -> tuple[int, dict[str, Any], bytes]:
    """provision's table: the shoe's variant byte, the registry entry's configuration and the
    rule bytes the shoe keeps after them (21 Baccarat's; none for the other games), or a
    SabotError for anything the registry would refuse, before the shoe is touched (provisioning
    cannot be undone): a name that is no table name, a wager the game does not offer, an option
    of another game."""
    from sabot.registry import ShoeEntry
    from sabot.table_checks import table_name_problem, wagers_problem

    if args.game == "21-baccarat":
        variant, config = table21_of(args)
    else:
        variant, config = _baccarat_or_blackjack(args)
    try:
        entry = ShoeEntry(0, **{k: v for k, v in config.items() if v is not None})
        problem = (table_name_problem(args.table) if args.table else None) or wagers_problem(
            entry.table_config())
    except SabotError as e:
        problem = str(e).removeprefix("registry entry for shoe 0x00000000: ")
    if problem:
        raise SabotError(f"not provisioned: {problem}")
    return variant, config, entry.rule_bytes


def table21_of(args: argparse.Namespace) -> tuple[int, dict[str, Any]]:
    """A 21 Baccarat table's variant byte and configuration (its --rules the entry's rules21)."""
    from sabot.errors import parse_json
    from sabot.frames21 import VARIANT

    other = [o for o, given in (("--ez", args.ez), ("--commission-free", args.commission_free),
                                ("--squeeze", args.squeeze), ("--dealer", args.dealer),
                                ("--no-hole-card", args.no_hole_card),
                                ("--meter-reset", args.meter_reset),
                                ("--dragon-bonus-paytable", args.dragon_bonus_paytable),
                                ("--tie-odds", args.tie_odds is not None)) if given]
    if other:
        raise SabotError(f"{', '.join(other)}: not a 21 Baccarat table's (its settings go in "
                         "--rules" + (", the Tie's odds as tie_odds)" if "--tie-odds" in other
                                      else ")"))
    rules = parse_json(args.rules, "--rules") if args.rules is not None else {}
    if not isinstance(rules, dict):
        raise SabotError("--rules: expected a JSON object of settings")
    if "decks" in rules:
        raise SabotError("--rules: give the shoe's decks with --decks")
    return VARIANT, {"game": args.game, "decks": args.decks, "side_wagers": args.side_wagers,
                     "rules21": rules, "min_bet_cents": args.limits[0],
                     "max_bet_cents": args.limits[1], "languages": args.languages}


def _baccarat_or_blackjack(args: argparse.Namespace) -> tuple[int, dict[str, Any]]:
    from sabot.protocol import variant_byte

    if args.rules is not None:
        raise SabotError("--rules is 21 Baccarat's (add --game 21-baccarat)")
    blackjack = args.game == "blackjack"
    if blackjack and (args.ez or args.commission_free or args.squeeze
                      or args.dragon_bonus_paytable or args.tie_odds is not None):
        raise SabotError("--ez, --commission-free, --squeeze, --tie-odds and "
                         "--dragon-bonus-paytable are baccarat's, not blackjack's")
    if args.tie_odds is not None and args.tie_odds < 8:
        raise SabotError(f"--tie-odds must be from 8 to 100 (627a.12(b): a Tie pays at least 8 "
                         f"to 1), got {args.tie_odds}")
    args.tie_odds = 8 if args.tie_odds is None else args.tie_odds
    if not blackjack and (args.dealer or args.no_hole_card or args.meter_reset):
        raise SabotError("--dealer, --no-hole-card and --meter-reset are blackjack's (add "
                         "--game blackjack)")
    if blackjack:
        from sabot.protocol import blackjack_variant_byte

        variant = blackjack_variant_byte(args.dealer or "s17", not args.no_hole_card)
    else:
        variant = variant_byte(args.game, args.ez, args.commission_free, args.squeeze)
    dragon_bonus = [w for w in args.side_wagers if w.startswith("dragon_bonus")]
    if dragon_bonus and args.dragon_bonus_paytable is None:
        raise SabotError(f"--side-wagers offers {', '.join(dragon_bonus)}: name its paytable "
                         "with --dragon-bonus-paytable A, B or C (627a.12(e))")
    if args.dragon_bonus_paytable and not dragon_bonus:
        raise SabotError("--dragon-bonus-paytable is for a table offering Dragon Bonus "
                         "(dragon_bonus_player, dragon_bonus_banker in --side-wagers)")
    config = {"game": args.game, "ez": args.ez, "commission_free": args.commission_free,
              "squeeze": args.squeeze, "decks": args.decks, "side_wagers": args.side_wagers,
              "tie_odds": args.tie_odds, "dragon_bonus_paytable": args.dragon_bonus_paytable,
              "min_bet_cents": args.limits[0], "max_bet_cents": args.limits[1],
              "languages": args.languages}
    if blackjack:
        resets = dict(args.meter_reset)
        if len(resets) < len(args.meter_reset):
            raise SabotError("--meter-reset names a meter twice")
        config.update(dealer=args.dealer or "s17", hole_card=not args.no_hole_card,
                      meter_reset_cents=resets)
    return variant, config


@commands("provision", provision_args,
          help="set up a blank shoe: its secure element, identity, registry entry",
          description="Factory provisioning. The shoe writes sabot's configuration into its "
          "factory-fresh secure element (ATECC608) and locks it, the element makes result key 1 "
          "inside, the shoe writes the command key's public half and its identity, then locks the "
          "element's data zone: from then on the shoe has no REPL. The registry gets the shoe's "
          "entry with the result key's public half and the chip's serial number. --port: a "
          "blank shoe that holds deployed firmware (sabot deploy first); --flash: a virtual "
          "board (the same chip commands, on its emulated element). No secret travels over "
          "the port.",
          example="sabot provision --port /dev/ttyACM0 --key host.pem --table BAC-07")
def cmd_provision(args: argparse.Namespace) -> int:
    import os

    from sabot import keys
    from sabot.registry import Registry

    variant, config, rules = table_of(args)
    from sabot.audit.cosign import check_quorum

    quorum = check_quorum(args.witness, args.quorum)
    if args.flash and os.path.exists(args.flash) and not os.path.isdir(args.flash):
        raise SabotError(f"--flash {args.flash} is a file: it must name the virtual board's "
                         "flash directory")
    reg = Registry.load(args.registry)
    reg.check_writable()  # the shoe's entry must be written once its element is locked
    existed = os.path.exists(args.key)
    if args.port or not existed:
        new_shoe(reg, args.shoe_id)  # a new element for sure: refused before anything is touched
    key = keys.load_or_create(args.key)
    if not existed:
        print(f"created command key {args.key} (mode 600)", file=sys.stderr)
    if args.port:
        from sabot.release.provision import provision_over_port

        shoe_id, pem, serial, attestation, certificate, first = provision_over_port(
            args.port, key, args.shoe_id if args.shoe_id is not None else reg.free_id(), variant,
            args.baud, log=lambda m: print(m, file=sys.stderr), decks=args.decks, rules=rules)
        version, where = 1, args.port
    else:
        from sabot.virtual.element import element_store
        from sabot.virtual.provisioning import kept, provision, set_variant

        sid = args.shoe_id
        if not kept(args.flash, key, sid):  # a new element: a new shoe
            new_shoe(reg, sid)
            sid = reg.free_id() if sid is None else sid
        shoe_id, version, pem, serial, first = provision(args.flash, key, sid, variant=variant,
                                                         rules=rules)
        set_variant(args.flash, variant, args.decks, rules)  # a kept shoe takes the new one too
        from sabot.virtual.factory import attested

        attestation, certificate = attested(element_store(args.flash), shoe_id, version)
        where = f"{args.flash} (element {element_store(args.flash)})"
    entry = _register(reg, args.table, shoe_id, version, pem, certificate, attestation, serial,
                      first, config)
    wagers = ", ".join(entry.side_wagers) or "none"
    if entry.dragon_bonus_paytable:
        wagers += f" (Dragon Bonus paytable {entry.dragon_bonus_paytable})"
    if entry.game == "21-baccarat":
        settings = ", ".join(f"{k} {v if isinstance(v, str) else json.dumps(v)}"
                             for k, v in entry.rules21.items())
        table = (f"21-baccarat, {args.decks} decks, {settings or 'every setting its default'}, "
                 f"side wagers {wagers}")
    elif entry.game == "blackjack":
        resets = "".join(f", {w} meter resets to ${c / 100:,.2f}"
                         for w, c in entry.meter_reset_cents.items())
        table = (f"blackjack, {args.decks} decks, dealer {entry.dealer}"
                 f"{'' if entry.hole_card else ', no hole card'}, side wagers {wagers}{resets}")
    else:
        table = (f"{args.game}{', EZ' if args.ez else ''}"
                 f"{', commission-free' if args.commission_free else ''}"
                 f"{', squeeze' if args.squeeze else ''}, {args.decks} decks, tie "
                 f"{args.tie_odds} to 1, side wagers {wagers}")
    print(f"provisioned shoe {shoe_id_text(shoe_id)} result key {version} ({table}) on {where}, "
          f"element serial {serial}; registered as table {entry.table} with its public key in "
          f"{reg.path}")
    if args.witness:
        from sabot.audit.cosign import bind

        bind(args.witness, quorum, entry, lambda m: print(m, file=sys.stderr))
        reg.witnessed(entry.shoe_id)
    return 0


def _register(reg: Registry, table: str, shoe_id: int, version: int, pem: str,
              certificate: str, attestation: str, serial: str, first: str,
              config: dict[str, Any]) -> ShoeEntry:
    """A shoe just provisioned, into the registry; its element is locked by now, so where the
    registry cannot be written the registry with its entry goes to standard output, to be saved
    by hand (TECHNICIAN.md)."""
    for other in reg.shoes.values():
        if serial and other.serial == serial and other.shoe_id != shoe_id:
            raise SabotError(f"element {serial} is registered already as shoe "
                             f"{shoe_id_text(other.shoe_id)} (table {other.table}): one chip, "
                             "one shoe; not registered")
    if first:  # (a virtual shoe kept as it was keeps the one it was registered with)
        config["first_checkpoint"] = first
    try:
        return reg.register(shoe_id, version, pem, certificate or None, table=table,
                            fresh_element=True, attestation_key=attestation, serial=serial,
                            **config)[0]
    except SabotError as e:  # its element is locked: provisioning it again is refused
        if reg.unwritten:
            print(reg.unwritten, end="")
        raise SabotError(f"shoe {shoe_id_text(shoe_id)} is provisioned (its element locked) but "
                         f"not registered: {e}" + (
                             "; the registry with its entry is on standard output: save it as "
                             f"{reg.path} once that can be written" if reg.unwritten else "")
                         ) from None


def verify_firmware_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--port", required=True, help="pyserial URL of the shoe")
    p.add_argument("--seed", required=True,
                   help="a fresh random seed, hex (e.g. from `openssl rand -hex 16`)")
    p.add_argument("--key", metavar="FILE", help=NO_KEY_HELP)
    p.add_argument("--registry", default=None, help=REGISTRY_HELP)
    p.add_argument("--shoe-id", type=SHOE_ID, help=SHOE_ID_HELP)
    p.add_argument("--board", default="virtual", help="board whose build/BOARD to compare with")
    p.add_argument("--build", help="build directory to compare with (default build/BOARD)")
    p.add_argument("--db", help="log the check in this audit database")
    add_baud(p)
    p.add_argument("--json", action="store_true",
                   help="print the check as one JSON object (result, integrity, seed, expected, "
                   "answer, shoe_id, boot)")


@commands("verify-firmware", verify_firmware_args,
          help="challenge a shoe: seeded HMAC of its code against the build",
          description="Sends the shoe an unsigned verify challenge with the seed; checks its "
          "integrity answer's signature with the shoe's public key from the registry (no secret "
          "needed) and its seeded HMAC against the build's.",
          example="sabot verify-firmware --port /dev/ttyACM0 --seed $(openssl rand -hex 16) "
          "--registry sabot-shoes.json --board rpi_pico")
def cmd_verify_firmware(args: argparse.Namespace) -> int:
    import os

    from sabot.link.session import registry_entry
    from sabot.release.build import BUILD
    from sabot.release.verify_firmware import NoIntegrityAnswer, verify_firmware

    seed = args.seed.lower().removeprefix("0x")
    if len(seed) < 32 or len(seed) > 128 or any(c not in "0123456789abcdef" for c in seed):
        raise SabotError("--seed must be 16 to 64 random bytes in hex (32 to 128 hex digits), "
                         "e.g. $(openssl rand -hex 16): a short seed makes recorded answers "
                         "reusable")
    build_dir = args.build or str(BUILD / args.board)
    if not os.path.exists(os.path.join(build_dir, "MANIFEST")):
        raise SabotError(f"no build in {build_dir}: run `make firmware BOARD={args.board}` first")
    if args.db:  # the check's log refuses before the shoe is asked, not after
        from sabot.audit.store import refuse_unwritable

        refuse_unwritable(args.db)
    try:
        config = registry_entry(args.registry, args.shoe_id, args.port, args.baud)
        r = verify_firmware(args.port, args.seed, config, build_dir, baud=args.baud)
    except NoIntegrityAnswer as e:  # a shoe ignores a challenge naming another shoe
        raise NoIntegrityAnswer(f"{e} (a shoe ignores a challenge for another shoe id: is it "
                                "the registered shoe? sabot status tells)") from None
    if args.db:
        from sabot.audit.store import open_store

        store = open_store(args.db)
        store.log_integrity(r)
        store.close()
    if args.json:
        print(json.dumps(r))
    else:
        matches = "matches" if r["result"] == "pass" else "does not match"
        print(f"{r['result'].upper()}: shoe {shoe_id_text(r['shoe_id'])} integrity "
              f"{r['integrity']}; seeded HMAC {matches} the build in {build_dir}")
    if r["result"] != "pass":
        if r["integrity"] == "unchecked":
            raise NotVerified("firmware verification failed: the shoe runs unbuilt source, "
                              "with no MANIFEST to check (a virtual board started without --code "
                              "or --root); deploy the build, or start it with --code "
                              "build/virtual")
        raise NotVerified("firmware verification failed")
    return 0

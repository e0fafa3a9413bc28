"""Commands on the audit record: reconstruct hands, replay a capture, verify a store."""

from __future__ import annotations

import argparse
import json
import time

from sabot.cli.options import (
    NO_KEY_HELP,
    REGISTRY_HELP,
    SHOE_ID,
    Commands,
    add_fail_on_notice,
    cores,
    ranged,
)
from sabot.cli.output import (
    alarm_text,
    fail_on,
    group_rejections,
    print_records,
    shoe_id_text,
    stored_text,
)
from sabot.errors import NotVerified, SabotError

TYPE_CHECKING = False  # (typing is not imported at every command's start)
if TYPE_CHECKING:
    from typing import Any

    from sabot.note import Verifier

commands = Commands()


def history_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", default="sabot.db", help="audit database (default ./sabot.db)")
    p.add_argument("--shoe-id", type=SHOE_ID,
                   help="only the shoe with this id (decimal or 0x hex)")
    p.add_argument("--shoe", type=ranged(0, 0xFFFF), help="only this shoe")
    p.add_argument("--round", type=ranged(0, 0xFFFF), help="only this round")
    p.add_argument("--alarms", action="store_true",
                   help="list the stored alarms instead, one JSON object per line")
    p.add_argument("--operations", action="store_true",
                   help="list the operator log instead (who started shoes and gave resolutions, "
                   "signed dealers on and off, acknowledged alarms, and the alarms serve raised "
                   "itself; kept in the audit store), one JSON object per line")
    p.add_argument("--json", action="store_true",
                   help="one JSON round record or event per line (docs/INTERFACES.md) instead of "
                   "text")


@commands("history", history_args, help="reconstruct hands from the audit store",
          example="sabot history --db audit.db --shoe 1 --round 12")
def cmd_history(args: argparse.Namespace) -> int:
    from sabot.audit.store import open_store

    store = open_store(args.db, writer=False)  # never writes, and refuses a foreign file
    try:
        if args.operations:
            for op in store.operations(args.shoe_id):
                print(json.dumps(op))
            return 0
        if args.alarms:
            for a in store.alarms(args.shoe_id, args.shoe):
                if args.round is None or a["round"] == args.round:
                    print(json.dumps({k: v for k, v in a.items() if k != "frame_id"}))
            return 0
        kinds: tuple[str, ...] = ("result", "blackjack_result", "initial_cards",
                                  "irregularity", "resolution")
        if args.round is None:
            kinds += ("shoe_start", "burn", "shoe_end")
        recs = store.records(kinds, args.shoe, args.round, args.shoe_id)
        # each shoe's own shoe_start names its variant: what its round lines show
        starts = [] if args.json or args.round is None else store.records(
            ("shoe_start",), args.shoe, None, args.shoe_id)
    finally:
        store.close()
    if not args.json and args.round is None:
        recs = [(k, r) for k, r in recs if k != "initial_cards"]
    if not recs:
        raise SabotError("no such hand in the audit log")
    print_records(starts + recs, args.json, shown=None if args.round is None else kinds)
    return 0


def replay_args(p: argparse.ArgumentParser) -> None:
    add_fail_on_notice(p)
    p.add_argument("capture", nargs="+", help="what validate --capture (or demo --capture) "
                   "kept: the bytes the validator took, with a mark at each connection; sessions "
                   "appended to one file replay as their validators took them; several files: "
                   "each replayed on its own (a shoe each, or sessions of their own), side by "
                   "side, with one verdict")
    p.add_argument("--key", metavar="FILE", help=NO_KEY_HELP)
    p.add_argument("--shoe-id", type=ranged(0, 0xFFFFFFFF),
                   help="which registered shoe (default: the registry's only shoe, or the one "
                   "the capture's first frame names)")
    p.add_argument("--registry", default=None, help=REGISTRY_HELP + "; its public keys verify "
                   "the capture")
    p.add_argument("--jobs", type=ranged(1, 64), default=None, metavar="N",
                   help="several captures: how many are replayed at once, each in a process of "
                   "its own (default: the cores this process may run on)")
    p.add_argument("--json", action="store_true",
                   help="one JSON object: frames (each in exactly one of verified, resent, "
                   "rejected, deferred, pending), rounds, rejections (each with its reason), "
                   "alarms, sessions, connections, uncaptured (seq ranges the live validators "
                   "had stored that the capture does not hold); several captures: those summed, "
                   "each rejection, alarm and uncaptured range naming its capture, and captures, "
                   "each one's own")


@commands("replay", replay_args, help="verify a capture offline",
          example="sabot replay cap.bin --registry sabot-shoes.json --json")
def cmd_replay(args: argparse.Namespace) -> int:
    from sabot.audit.replay import capture_shoe, read_capture, replay_all
    from sabot.registry import Registry

    registry = Registry.load(args.registry, must_exist=True)
    captures = [(path, read_capture(path)) for path in args.capture]
    configs = [capture_shoe(registry, args.shoe_id, data) for _, data in captures]
    outs = replay_all([data for _, data in captures], configs,
                      args.jobs or cores())
    for (path, _), out in zip(captures, outs, strict=True):
        torn = sum(1 for r in out["rejections"] if r["reason"] == "truncated")
        if out["frames"] == torn:  # nothing framed: the wrong file, not a record that failed
            raise SabotError(f"{path} holds no sabot frame: not a capture kept by "
                             "sabot validate --capture?")
    several = len(outs) > 1
    if args.json:
        print(json.dumps(replay_total(args.capture, outs) if several else outs[0]))
    for (path, _), out in zip(captures, outs, strict=True):
        if not args.json:
            print_replay(out, f"{path}: " if several else "")
    missing = [f"no frame of shoe {shoe_id_text(c.shoe_id)} in {path}"
               for (path, _), c, out in zip(captures, configs, outs, strict=True)
               if not out["verified"]]
    fail_on([r for o in outs for r in o["rejections"]], [a for o in outs for a in o["alarms"]],
            "; ".join(missing), fail_on_notice=args.fail_on_notice)
    return 0


def print_replay(out: dict[str, Any], head: str) -> None:
    """A replay's summary, a line, then what it rejected and alarmed."""
    print(f"{head}{out['frames']} frames: {out['verified']} verified, {out['resent']} resent "
          f"(already verified), {out['rejected']} rejected, {out['deferred']} deferred (met "
          f"before the status answering a hello: sent again), {out['pending']} pending; "
          f"{out['rounds']} rounds, {len(out['alarms'])} alarms; {out['sessions']} sessions, "
          f"{out['connections']} connections")
    for u in out["uncaptured"]:
        print(f"  not in the capture: frames {u['first']}..{u['last']} (the live validator "
              "had stored them before it began, or in a session it does not hold)")
    if out["rejections"]:
        print(f"  rejected: {group_rejections(out['rejections'])}")
    for a in out["alarms"]:
        print(f"  alarm {alarm_text(a)}")


def replay_total(paths: list[str], outs: list[dict[str, Any]]) -> dict[str, Any]:
    """Several captures' replays as one object: the counts summed, each listed item naming its
    capture, and each capture's own summary."""
    from sabot.audit.replay import COUNTED

    total: dict[str, Any] = {k: sum(o[k] for o in outs) for k in (*COUNTED, "sessions",
                                                                   "connections")}
    for key in ("rejections", "alarms", "uncaptured"):
        total[key] = [dict(item, capture=p) for p, o in zip(paths, outs, strict=True)
                      for item in o[key]]
    total["captures"] = [dict(o, capture=p) for p, o in zip(paths, outs, strict=True)]
    return total


def audit_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=["verify"])
    p.add_argument("--db", default="sabot.db", help="audit database (default ./sabot.db)")
    p.add_argument("--key", action="append", metavar="FILE", help=NO_KEY_HELP)
    p.add_argument("--allow-holes", action="store_true",
                   help="exit 0 although the store has seq holes the shoe's own status explains "
                   "as acknowledged to another host, or ends before frames a status named "
                   "(named in the output either way)")
    p.add_argument("--registry", default=None, help=REGISTRY_HELP + "; its public keys verify "
                   "every signature, and the alarms are derived again with each shoe's entry")
    p.add_argument("--json", action="store_true",
                   help="one JSON object: ok, frames (the shoe frames), rounds, rows, the other "
                   "frames stored by kind, wrong_registry and the problem found, if any")
    p.add_argument("--witness-state", metavar="FILE|URL", action="append", default=[],
                   help="a witness's state (its GET /logs, or a saved copy): the store must hold "
                   "every shoe log it cosigned, frame for frame, and the registry the key that "
                   "signed each log's first checkpoint there — what no store shows about itself "
                   "(a tail deleted, a shoe's history swapped, frames signed again under a "
                   "replaced key); repeatable; needs --witness")
    p.add_argument("--only-stored-shoes", action="store_true",
                   help="with --witness-state: a witnessed log of a shoe this store holds no "
                   "frame of is named, not required (a casino whose shoes write to several "
                   "stores: check each shoe in its own; a shoe deleted whole from this store "
                   "then passes: name its store's shoes with care)")
    p.add_argument("--witness", metavar="VKEY", action="append", default=[],
                   help="a witness's verifier key: every cosignature of that witness the store "
                   "holds must verify with it, and its --witness-state is checked with it "
                   "(its cosignatures make a copy of its state worth something); repeatable")
    p.add_argument("--jobs", type=ranged(1, 64), default=None, metavar="N",
                   help="processes that check the frames' signatures ahead of the walk over the "
                   "store, the bulk of its work (default: the cores this process may run on; "
                   "1: none, the walk checks each itself); the verdict is the same")


@commands("audit", audit_args, help="check an audit store: sabot audit verify",
          description="verify: re-verifies every stored frame from its raw bytes (signature, "
          "sealing, sequence, digest chain) and derives everything else again from the frames "
          "and the shoe's signed statuses: every record and its columns, every alarm (gaps and "
          "tilts included), the validator's link state, each rejected frame's reason, the "
          "operator log against the frames and alarms it names; it checks the store's own row "
          "chain and append-only triggers. Exit 0 and 'ok: F frames, R rounds' (F the shoe "
          "frames, each once; the statuses, checkpoints and copies stored besides are counted "
          "apart) when all holds; otherwise 1 and the first broken row, or 2 when the registry "
          "is not this store's. It needs the shoe registry's public keys only. "
          "What no store can prove about itself: docs/SECURITY.md. Example: sabot audit verify "
          "--db audit.db --registry sabot-shoes.json",
          example="sabot audit verify --db audit.db --registry sabot-shoes.json")
def cmd_audit(args: argparse.Namespace) -> int:
    from sabot.audit.verify import verify
    from sabot.note import COSIGNATURE, Verifier
    from sabot.registry import Registry

    witnessed = []
    verifiers = [Verifier.parse(v) for v in args.witness]
    for v in verifiers:
        if v.kind != COSIGNATURE:
            raise SabotError(f"--witness {v.name}: not a witness's key (sabot witness --key "
                             "FILE --vkey prints one)")
    if args.witness_state:
        from sabot.audit.cosign import load_witness_state

        if not args.witness:
            raise SabotError("--witness-state needs the witness's verifier key: --witness VKEY")
        for source in args.witness_state:
            witnessed += load_witness_state(source, verifiers)
    if args.only_stored_shoes and not args.witness_state:
        raise SabotError("--only-stored-shoes is for --witness-state")
    registry = Registry.load(args.registry, must_exist=True)
    r = verify(args.db, registry.shoes, witnessed, verifiers, args.only_stored_shoes,
               registry.path, jobs=args.jobs or cores())

    def seqs(holes: list[dict[str, int]]) -> str:
        return ", ".join(f"shoe {shoe_id_text(h['shoe_id'])} seq {h['first']}..{h['last']}"
                         for h in holes)

    holes, unstored = seqs(r["holes"]), seqs(r["unstored"])
    if args.json:
        print(json.dumps(r))
    elif r["ok"]:
        notes = audit_notes(r, verifiers, holes, unstored)
        print(f"ok: {stored_text(r)}" + "".join(f"; {n}" for n in notes))
    if r["wrong_registry"]:  # bad input: the store was not checked against its own registry
        raise SabotError(r["problem"])
    if not r["ok"]:
        raise NotVerified(f"the audit store does not hold: {r['problem']}")
    if holes and not args.allow_holes:
        raise NotVerified(f"holes in the store ({holes}): the shoe said another host "
                          "acknowledged them, which a store alone cannot tell from a deletion; "
                          "check that host's store, then pass --allow-holes")
    if unstored and not args.allow_holes:
        raise NotVerified(f"frames missing at the store's end ({unstored}): the shoe's own "
                          "status named them, but they were never stored here (the session "
                          "ended before they came, or they were deleted); check the store that "
                          "took them, then pass --allow-holes")
    return 0


def audit_notes(r: dict[str, Any], verifiers: list[Verifier], holes: str, unstored: str
                ) -> list[str]:
    """What `audit verify` says beside its ok: holes explained, the witnesses, what lies beyond
    them."""
    notes = [f"holes the shoe said were acknowledged elsewhere: {holes}" if holes else "",
             f"frames a status named that never reached this store: {unstored}"
             if unstored else "",
             "first met mid-way: " + ", ".join(f"shoe {shoe_id_text(s['shoe_id'])} at seq "
                                              f"{s['seq']}" for s in r["starts"])
             if r["starts"] else "",
             "no frame here of registered shoe " + ", ".join(shoe_id_text(s)
                                                             for s in r["absent"])
             if r["absent"] else ""]
    if r["witnessed"]:
        notes.append("as witnessed: " + ", ".join(
            f"shoe {shoe_id_text(w['shoe_id'])}'s log at {w['size']} frames by "
            f"{w['witness']} (its state of "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(w['state_at']))})"
            for w in r["witnessed"]))
    checked, unchecked = (r["cosignatures"][k] for k in ("checked", "unchecked"))
    if checked or unchecked:
        notes.append(f"{checked} stored cosignatures verified with the witnesses' keys"
                     + (f", {unchecked} by witnesses not given (--witness VKEY) matched to "
                        "their checkpoints only" if unchecked else ""))
    by = r["cosignatures"]["by_witness"]
    for v in verifiers:  # a witness given, of which the store holds nothing, is said
        if not by.get(v.name):
            notes.append(f"no stored cosignature of witness {v.name}")
    if r["elsewhere"]:
        notes.append("witnessed logs of shoes with no frame here, not checked "
                     "(--only-stored-shoes): " + ", ".join(
                         shoe_id_text(s) for s in sorted(set(r["elsewhere"]))))
    past = [b for b in r["beyond"] if b["rounds"] or b["frames"]]
    if past:
        notes.append("beyond the last checkpoint a witness given cosigned (no witness has "
                     "seen these, so none would notice them deleted): " + ", ".join(
                         f"shoe {shoe_id_text(b['shoe_id'])} {b['rounds']} rounds, "
                         f"{b['frames']} frames"
                         + (f" (its witnessed table allows {b['bound']} rounds)"
                            if b["bound"] is not None else "") for b in past))
    if r["unwitnessed"]:
        notes.append("NOT witnessed (no witness given holds its log, so nothing here proves "
                     "its tail or history): " + ", ".join(
                         f"shoe {shoe_id_text(s)}" for s in r["unwitnessed"]))
    return [n for n in notes if n]


def pit_role_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", required=True, help="the floor's audit database (postgresql://...)")
    p.add_argument("--role", required=True, metavar="NAME",
                   help="the database role a pit's serve connects as (made beforehand: CREATE "
                   "ROLE NAME LOGIN PASSWORD '...')")
    p.add_argument("--shoe-id", type=ranged(0, 0xFFFFFFFF), action="append", default=[],
                   metavar="ID", help="a shoe of that pit (repeat for each; decimal or 0x hex); "
                   "a shoe with another pit moves here")


@commands("pit-role", pit_role_args, help="let a pit's database role insert its shoes' rows only",
          description="Row security per pit on a floor's PostgreSQL store: the role may read "
          "every row and insert the rows of the shoes named, and nothing else (no UPDATE, "
          "DELETE or TRUNCATE; no row of another pit's shoe). Run by IT with the store's "
          "owning role; prints every shoe's pit after.",
          example="sabot pit-role --db postgresql://it@db1/floor --role pit1 --shoe-id 0x5ab00001")
def cmd_pit_role(args: argparse.Namespace) -> int:
    from sabot.audit.store import is_server_url, open_store

    if not is_server_url(args.db):
        raise SabotError(f"{args.db} is a SQLite file, with one writer: row security per pit is "
                         "for a floor's PostgreSQL store (--db postgresql://...)")
    store = open_store(args.db)
    try:
        store.assign_pit(args.role, args.shoe_id)
        pits = store.pits()
    finally:
        store.close()
    for sid, role in sorted(pits.items()):
        print(f"shoe {shoe_id_text(sid)}: role {role}")
    return 0

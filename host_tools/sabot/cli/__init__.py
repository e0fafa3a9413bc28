"""The `sabot` command line."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from sabot.errors import SabotError


def cmd_table(args: argparse.Namespace) -> int:
    from sabot.release import table_gen

    if args.action == "generate":
        path = table_gen.generate()
        print(f"wrote {path}")
        return 0
    problem = table_gen.check()
    if problem:
        raise SabotError(problem)
    print("table check: the committed table equals a fresh generation from the rule")
    return 0


def cmd_analyze(args: argparse.Namespace) -> int:
    import json

    from sabot.game.analyze import analyze
    from sabot.game.cards import read_shoe_file

    seen = [t for t in read_shoe_file(args.seen) if t != "CUT"] if args.seen else []
    result = analyze(args.decks, seen, args.tie_odds)
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"{result['decks']} decks, {result['cards']} cards left, "
          f"{result['sequences']:,} sequences")
    for name, count in result["outcomes"].items():
        print(f"  {name:<7} {count:>26,}  {count / result['sequences']:.6%}")
    print("house edge by wager:")
    for name, w in result["wagers"].items():
        print(f"  {name:<22} {w['house_edge']:>10.4%}")
    return 0


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


def format_round(rec: dict[str, Any]) -> str:
    flags = f"  ({', '.join(rec['flags'])})" if rec["flags"] else ""
    dummy = "  [dummy hand, no bets]" if rec.get("dummy") else ""
    said = "".join(f'  "{a}"' for a in rec.get("announcements", []))
    device = f"[shoe id {rec['shoe_id']}] " if "shoe_id" in rec else ""
    return (f"{device}shoe {rec['shoe']} round {rec['round']:>3}: "
            f"player {' '.join(rec['player']):<9} "
            f"{rec['player_total']}  banker {' '.join(rec['banker']):<9} {rec['banker_total']}  "
            f"-> {rec['winner']}{flags}{dummy}{said}")


def record_json(kind: str, rec: dict[str, Any]) -> str:
    import json

    from sabot.audit.validator import contract_round

    return json.dumps(contract_round(rec) if kind == "result" else rec)


def format_event(rec: dict[str, Any]) -> str:
    rest = {k: v for k, v in rec.items() if k not in ("event", "inventory") and v is not None}
    return f"{rec['event']}: " + " ".join(f"{k}={v}" for k, v in rest.items())


def print_records(records: list[tuple[str, dict[str, Any]]], as_json: bool) -> None:
    for kind, rec in records:
        if as_json:
            print(record_json(kind, rec))
        elif kind == "result":
            print(format_round(rec))
        else:
            print(format_event(rec))


def cmd_deal(args: argparse.Namespace) -> int:
    from sabot.virtual.demo import run_deal

    records = run_deal(args.shoefile)
    wanted = ("result", "irregularity", "resolution") if not args.events else None
    print_records([(k, r) for k, r in records if wanted is None or k in wanted], args.json)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    import json

    from sabot.virtual.demo import run_demo

    summary, _ = run_demo(args.shoe, args.seed, args.db, args.key, args.capture, quiet=args.json,
                          registry=args.registry, on_alarm=None if args.json else alarm_below)
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"shoe {summary['shoe']}: {summary['rounds']} rounds dealt and verified "
              f"({summary['expected_rounds']} expected), {summary['verified']} frames verified, "
              f"{summary['rejected']} rejected, {summary['irregularities']} irregularities, "
              f"{len(summary['alarms'])} alarms, {summary['lost']} lost, "
              f"in {summary['seconds']} s")
        print(f"audit log: {args.db}   history: sabot history --db {args.db}")
    fail_on(summary["rejections"], summary["alarms"], f"{summary['lost']} rounds lost"
            if summary["lost"] else "")
    return 0


def print_alarm(alarm: dict[str, Any]) -> None:
    """An alarm, as it happens, for the supervisor watching the terminal."""
    where = (f"shoe {alarm['shoe']}" if alarm.get("shoe") is not None else "shoe ?") + (
        f" round {alarm['round']}" if alarm.get("round") else "")
    print(f"ALARM {alarm['kind']} ({where}, shoe id {alarm['shoe_id']}): {alarm['detail']}",
          file=sys.stderr, flush=True)


def alarm_below(alarm: dict[str, Any]) -> None:
    """An alarm on a line of its own, below the demo's progress line (which ends in \r)."""
    sys.stderr.write("\n")
    print_alarm(alarm)


def group_rejections(rejections: list[dict[str, Any]]) -> str:
    """"193 x unknown_shoe_or_key, 2 x bad_signature": one line however many frames were
    refused."""
    from collections import Counter

    counted = Counter(r["reason"] for r in rejections)
    return ", ".join(f"{n} x {reason}" for reason, n in counted.most_common())


def fail_on(rejections: list[dict[str, Any]], alarms: list[dict[str, Any]],
            more: str = "") -> None:
    """Exit non-zero, with one line, on any rejected frame or alarm (CONTRACTS)."""
    parts = []
    if rejections:
        parts.append(f"{len(rejections)} frames rejected ({group_rejections(rejections)})")
    if alarms:
        kinds = sorted({a["kind"] for a in alarms})
        parts.append(f"{len(alarms)} alarms ({', '.join(kinds)})")
    if more:
        parts.append(more)
    if parts:
        raise SabotError("; ".join(parts))


def cmd_board(args: argparse.Namespace) -> int:
    import signal

    from sabot.virtual.demo import run_board

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)  # stopped like Ctrl-C: the board process goes with it

    run_board(args.listen, args.flash, args.shoe, args.key, args.code, args.root, args.maintenance,
              args.registry)
    return 0


REGISTRY_HELP = ("the shoe registry: each shoe's table, game, variant, decks and public keys "
                 "(default ./sabot-shoes.json)")
KEY_HELP = "the host command key file (PEM, mode 0600): it signs the commands and acknowledgements"
NO_KEY_HELP = ("accepted for compatibility and not needed: frames are verified with the "
               "registry's public keys (no secret)")
SHOE_ID_HELP = ("which registered shoe (decimal or 0x hex; default: the registry's only shoe, or "
                "with several the one that answers on the port)")


def registry_entry(path: str | None, shoe_id: int | None, port: str | None = None,
                   baud: int = 115200) -> Any:
    """The registry's entry of a shoe: its configuration (the validator's, never the shoe's own
    word) and the public keys its frames are verified with. With several shoes registered and
    no --shoe-id, the shoe on `port` says which it is (a signed status)."""
    from sabot.registry import Registry

    reg = Registry.load(path, must_exist=True)
    if shoe_id is None and port is not None and len(reg.shoes) > 1:
        from sabot.link.operate import identify

        return identify(port, reg, baud)
    return reg.pick(shoe_id)


def cmd_validate(args: argparse.Namespace) -> int:
    import signal
    import time

    from sabot import keys
    from sabot.audit.validator import Validator
    from sabot.link.host import HostLink
    from sabot.link.operate import first_status, open_port
    from sabot.protocol import HOLDS

    key = keys.load(args.key)
    config = registry_entry(args.registry, args.shoe_id, args.port, args.baud)
    capture = _open_capture(args.capture)
    ended: list[int] = []
    held: list[dict[str, Any]] = []

    def show(kind: str, rec: dict[str, Any]) -> None:
        if kind == "shoe_end":
            ended.append(rec["shoe"])
        elif kind == "irregularity" and rec["kind"] in HOLDS:
            held.append(rec)
        elif kind == "resolution":
            held.clear()
        if args.json:
            print(record_json(kind, rec), flush=True)
        elif kind == "result":
            print(format_round(rec), flush=True)
        elif kind != "initial_cards":
            print(format_event(rec), flush=True)

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)  # a service manager's stop prints the summary too
    try:
        port = open_port(args.port, args.baud, capture=capture)  # before any database is made
    except BaseException:
        if capture:
            capture.close()
        raise
    try:
        validator = Validator(config, args.db, on_record=show, on_alarm=print_alarm)
    except BaseException:
        port.close()
        raise
    end = time.monotonic() + args.seconds if args.seconds else None
    refused: list[dict[str, Any]] = []
    try:
        link = HostLink(port, validator, key, capture)
        first_status(link, args.port, args.wait, any_frame=True)
        while end is None or time.monotonic() < end:
            # the shoe's own word counts too: what happened before this validator came is stored
            st = validator.status or {}
            if args.until and st.get("phase") == "ended" and not st.get("unacked_to"):
                ended.append(st["shoe"])
            if args.until and ended:
                break
            if args.until == "irregularity" and (held or st.get("phase") == "held"):
                what = f"{held[-1]['kind']} holds" if held else "an irregularity holds"
                print(f"{what} shoe {st.get('shoe', held[-1]['shoe'] if held else '?')}: "
                      "resolve it with sabot resolve, then validate again", file=sys.stderr)
                break
            burst = 0
            try:
                for _, verdict, reason in link.pump():
                    if verdict == "rejected":
                        refused.append({"reason": reason})
                        burst += 1
            except ConnectionError:
                # The audit never stops on its own: a shoe off for a minute (a power cut) is
                # waited for; it keeps everything it has not delivered.
                print("link lost; reconnecting (the shoe keeps what it has not delivered)",
                      file=sys.stderr, flush=True)
                while not link_back(link, end):
                    if end is not None and time.monotonic() >= end:
                        break
                else:
                    print("link back", file=sys.stderr, flush=True)
            if refused and (len(refused) >= 1000 or not burst):  # one line per burst
                print(f"rejected frames: {group_rejections(refused)}", file=sys.stderr, flush=True)
                refused = []
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        port.close()
        validator.store.close()
        if capture:
            capture.close()
    s = validator.summary()
    print(f"validated: {s['verified']} frames verified, {s['rounds']} rounds, "
          f"{s['rejected']} rejected, {len(s['alarms'])} alarms"
          + (f"; shoe {ended[0]} ended" if ended else ""), file=sys.stderr)
    fail_on(s["rejections"], s["alarms"])
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    """Validate every --shoe (as `sabot validate` does, one thread each, one shared writer store)
    and serve the pit dashboard, the tables' scoreboards and the API from that store."""
    import uvicorn

    from sabot.pit.pages import Pit, build_app
    from sabot.pit.serve import Validation, load_shoes

    host, _, port = args.listen.rpartition(":")
    if not port.isdigit():
        raise SabotError(f"--listen wants HOST:PORT, got {args.listen!r}")
    import socket

    try:  # say "address in use" in one line before any shoe is opened
        with socket.create_server((host or "127.0.0.1", int(port))):
            pass
    except OSError as e:
        raise SabotError(f"cannot listen on {args.listen}: {e.strerror}") from None
    from sabot import keys

    shoes = load_shoes(args.shoe or [], args.registry, registry_entry,
                       keys.load(args.key) if args.shoe else None, args.baud)
    for shoe in shoes:
        shoe.baud = args.baud
    states = {s.config.shoe_id: s for s in shoes}
    pit = Pit(args.db, [s.config for s in shoes],
              lambda sid: states[sid].link_state if sid in states else "up")
    app, hub = build_app(pit)
    validation = Validation(args.db, shoes, hub.notify, print_alarm)
    validation.start()
    print(f"sabot serve: http://{host or '127.0.0.1'}:{port}/ ({len(shoes)} shoe"
          f"{'' if len(shoes) == 1 else 's'}, audit "
          f"{args.db})", file=sys.stderr, flush=True)
    server = uvicorn.Server(uvicorn.Config(app, host=host or "127.0.0.1", port=int(port),
                                           log_level="warning", lifespan="on",
                                           timeout_graceful_shutdown=1))
    try:
        server.run()
    except KeyboardInterrupt:  # uvicorn has shut the web side down and passes Ctrl-C on
        pass
    finally:
        validation.stop()
    s = validation.summary()
    print(f"served: {s['verified']} frames verified, {s['rounds']} rounds, "
          f"{len(s['rejections'])} rejected, {len(s['alarms'])} alarms", file=sys.stderr)
    fail_on(s["rejections"], s["alarms"])
    return 0


def _operation(args: argparse.Namespace) -> Any:
    from sabot import keys
    from sabot.link.operate import Operation

    key = keys.load(args.key)
    config = registry_entry(args.registry, args.shoe_id, args.port, args.baud)
    return Operation(args.port, key, args.db, config, args.baud, on_alarm=print_alarm)


def cmd_status(args: argparse.Namespace) -> int:
    import json

    from sabot.link.operate import format_status

    op = _operation(args)
    try:
        st = op.status(args.wait)
    finally:
        op.close()
    print(json.dumps(st) if args.json else format_status(st))
    return 0


def cmd_new_shoe(args: argparse.Namespace) -> int:
    import json

    from sabot.link.operate import format_status

    op = _operation(args)
    try:
        st = op.new_shoe(args.by or _whoami())
    finally:
        op.close()
    if args.json:
        print(json.dumps(st))
    elif st["started"]:
        print(f"shoe {st['shoe']} started: {format_status(st)}")
        print("deal the new shoe's first card (it is exposed and burned)")
    else:
        print(f"shoe {st['shoe']} is fresh and waits for its first card: nothing to do")
    return 0


def cmd_resolve(args: argparse.Namespace) -> int:
    import json

    from sabot.link.operate import format_status

    op = _operation(args)
    try:
        st = op.resolve(args.resolution, args.by)
    finally:
        op.close()
    rec = st["resolution"]
    if args.json:
        print(json.dumps(st))
    else:
        voided = f", voided {' '.join(rec['voided_cards'])}" if rec["voided_cards"] else ""
        card = f" ({rec['card']})" if rec["card"] else ""
        print(f"resolved {rec['kind']}{card} in shoe {rec['shoe']}: "
              f"{rec['resolution']}{voided}; logged as given by {args.by}")
        print(format_status(st))
    return 0


def _whoami() -> str:
    from sabot.link.operate import _user

    return _user()


def link_back(link: Any, end: float | None) -> bool:
    """One try (of up to 30 s, or to `end`) to get a lost link back."""
    import time

    try:
        link.reconnect(timeout=30 if end is None else max(0.1, min(30, end - time.monotonic())))
    except SabotError:
        return False
    return True


def _open_capture(path: str | None) -> Any:
    if not path:
        return None
    try:
        return open(path, "ab")
    except OSError as e:
        raise SabotError(f"cannot write capture {path}: {e.strerror}") from None


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


def _has_status(capture: bytes) -> bool:
    from sabot.protocol import T_STATUS, FrameError, decode_frame, parse

    for part in capture.split(b"\x00"):
        try:
            if part and parse(decode_frame(part)).type == T_STATUS:
                return True
        except FrameError:
            continue
    return False


def cmd_replay(args: argparse.Namespace) -> int:
    import json
    import os
    import tempfile

    from sabot.audit.validator import Validator
    from sabot.registry import Registry

    try:
        with open(args.capture, "rb") as f:
            data = f.read()
    except OSError as e:
        raise SabotError(f"cannot read capture {args.capture}: {e.strerror}") from None
    reg = Registry.load(args.registry, must_exist=True)
    shoe_id = args.shoe_id
    if shoe_id is None and len(reg.shoes) != 1:
        shoe_id = _first_shoe_id(data)  # the capture names its shoe in every frame
    config = reg.pick(shoe_id)
    with tempfile.TemporaryDirectory() as tmp:
        v = Validator(config, os.path.join(tmp, "replay.db"))
        # A capture kept by a live link starts with whatever the shoe was sending when the link
        # opened, then the status answering its hello and the resends: replay it as the live
        # validator took it, anchoring at that status.
        v.live = v.awaiting_status = _has_status(data)
        v.receive(data)
        v.finish()
        s = v.summary()
        v.store.close()
    out = {k: s[k] for k in ("frames", "verified", "rejected", "resent", "rounds", "rejections",
                             "alarms")}
    if args.json:
        print(json.dumps(out))
    else:
        print(f"{out['frames']} frames: {out['verified']} verified, {out['resent']} resent "
              f"(already verified), {out['rejected']} rejected, {out['rounds']} rounds, "
              f"{len(out['alarms'])} alarms")
        if out["rejections"]:
            print(f"  rejected: {group_rejections(out['rejections'])}")
        for a in out["alarms"]:
            print(f"  alarm {a['kind']} (shoe {a['shoe']}): {a['detail']}")
    fail_on(out["rejections"], out["alarms"],
            "" if out["verified"] else f"no frame of shoe {config.shoe_id} in {args.capture}")
    return 0


def _first_shoe_id(data: bytes) -> int | None:
    from sabot import protocol as pr

    for encoded in pr.Deframer().feed(data):
        try:
            return pr.parse(pr.decode_frame(encoded)).shoe_id
        except pr.FrameError:
            continue
    return None


def cmd_history(args: argparse.Namespace) -> int:
    import json

    from sabot.audit.store import AuditStore

    if args.operations:
        import os

        from sabot.link.operate import read_operations

        if not os.path.exists(args.db):
            raise SabotError(f"no audit database at {args.db}")
        for op in read_operations(args.db):
            if args.shoe_id is None or op.get("shoe_id") == args.shoe_id:
                print(json.dumps(op))
        return 0
    store = AuditStore(args.db, writer=False)  # never writes, and refuses a foreign file
    try:
        if args.alarms:
            for a in store.alarms(args.shoe_id, args.shoe):
                if args.round is None or a["round"] == args.round:
                    print(json.dumps({k: v for k, v in a.items() if k != "frame_id"}))
            return 0
        kinds: tuple[str, ...] = ("result", "initial_cards", "irregularity", "resolution")
        if args.round is None:
            kinds += ("shoe_start", "burn", "shoe_end")
        recs = store.records(kinds, args.shoe, args.round, args.shoe_id)
    finally:
        store.close()
    if not args.json and args.round is None:
        recs = [(k, r) for k, r in recs if k != "initial_cards"]
    if not recs:
        raise SabotError("no such hand in the audit log")
    print_records(recs, args.json)
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    import json

    from sabot.audit.verify import verify
    from sabot.registry import Registry

    r = verify(args.db, Registry.load(args.registry, must_exist=True).shoes)
    holes = ", ".join(f"shoe {h['shoe_id']:#010x} seq {h['first']}..{h['last']}"
                      for h in r["holes"])
    if args.json:
        print(json.dumps(r))
    elif r["ok"]:
        print(f"ok: {r['frames']} frames, {r['rounds']} rounds ({r['rows']} rows chained)"
              + (f"; holes the shoe said were acknowledged elsewhere: {holes}" if holes else ""))
    if not r["ok"]:
        raise SabotError(f"the audit store does not hold: {r['problem']}")
    if holes and not args.allow_holes:
        raise SabotError(f"holes in the store ({holes}): the shoe said another host acknowledged "
                         "them, which a store alone cannot tell from a deletion; check that "
                         "host's store, then pass --allow-holes")
    return 0


def cmd_soak(args: argparse.Namespace) -> int:
    import json

    from sabot.virtual.soak import progress_line, run_soak

    s = run_soak(args.shoes, args.seed, args.fault_rate,
                 progress=None if args.json else progress_line, mistake_rate=args.mistake_rate)
    if args.json:
        print(json.dumps(s))
    else:
        print(f"\n{s['shoes']} shoes, {s['rounds']} rounds: {s['stored']} stored, "
              f"{s['lost']} lost, {s['duplicated']} duplicated, {s['mismatched']} differing from "
              "the host's recomputation")
        print("faults injected: " + ", ".join(f"{k} {v}" for k, v in s["faults"].items()))
        if s["mistakes"]:
            print("dealer and supervisor mistakes: "
                  + ", ".join(f"{k} {v}" for k, v in sorted(s["mistakes"].items())))
            print("alarms: " + (", ".join(f"{k} {v}" for k, v in s["alarms"].items()) or "none"))
        rejected = ", ".join(f"{k} {v}" for k, v in s["rejected"].items())
        print("frames rejected: " + (rejected or "none"))
    if s["lost"] or s["duplicated"] or s["mismatched"]:
        raise SabotError("results were lost, duplicated or wrong under faults")
    if not args.fault_rate and s["rejected"]:  # no line faults: an authentic shoe is never refused
        raise SabotError(f"frames of an authentic shoe were rejected: {s['rejected']}")
    return 0


def cmd_provision(args: argparse.Namespace) -> int:
    import os

    from sabot import keys
    from sabot.protocol import variant_byte
    from sabot.registry import ALGORITHM, Registry, ShoeEntry
    from sabot.virtual.board import element_store, provision, set_variant

    variant = variant_byte(args.game, args.ez, args.commission_free, args.squeeze)
    if os.path.exists(args.flash) and not os.path.isdir(args.flash):
        raise SabotError(f"--flash {args.flash} is a file: it must name the virtual board's "
                         "flash directory")
    existed = os.path.exists(args.key)
    key = keys.load_or_create(args.key)
    if not existed:
        print(f"created command key {args.key} (mode 600)", file=sys.stderr)
    reg = Registry.load(args.registry)
    shoe_id, version, pem = provision(args.flash, key, args.shoe_id)
    old = reg.shoes.get(shoe_id)
    # a fresh element replaces what the registry held for its version; other versions stay
    kept = [k for k in (old.public_keys if old else []) if k["version"] != version]
    entry = ShoeEntry(shoe_id, table=args.table or (old.table if old else ""), game=args.game,
                      ez=args.ez, commission_free=args.commission_free, squeeze=args.squeeze,
                      decks=args.decks, side_wagers=old.side_wagers if old else [],
                      public_keys=kept + [{"version": version, "algorithm": ALGORITHM,
                                           "key": pem}])
    entry.public_keys.sort(key=lambda k: k["version"])
    set_variant(args.flash, variant)
    reg.put(entry)
    print(f"provisioned shoe {shoe_id:#010x} result key {version} ({args.game}"
          f"{', EZ' if args.ez else ''}{', commission-free' if args.commission_free else ''}"
          f"{', squeeze' if args.squeeze else ''}) into {args.flash} (element "
          f"{element_store(args.flash)}); registered as table {entry.table} with its public key "
          f"in {reg.path}")
    return 0


def cmd_settle(args: argparse.Namespace) -> int:
    import json

    from sabot.game.settle import settle

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
    try:
        request = json.loads(text)
    except json.JSONDecodeError as e:
        raise SabotError(f"input is not JSON: {e.msg} at line {e.lineno} column {e.colno}"
                         ) from None
    try:
        out = settle(request)
    except SabotError:
        raise
    except (TypeError, ValueError, AttributeError, KeyError, IndexError) as e:
        # a value of the wrong kind somewhere in the request: one line, never a traceback
        raise SabotError(f"the request does not fit the settle format ({type(e).__name__}: "
                         f"{' '.join(str(e).split())}); see CONTRACTS.md") from None
    print(json.dumps(out))
    return 0


def cmd_firmware(args: argparse.Namespace) -> int:
    import json

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


def cmd_verify_firmware(args: argparse.Namespace) -> int:
    import json
    import os

    from sabot.release.build import BUILD
    from sabot.release.verify_firmware import verify_firmware

    seed = args.seed.lower().removeprefix("0x")
    if len(seed) < 32 or len(seed) > 128 or any(c not in "0123456789abcdef" for c in seed):
        raise SabotError("--seed must be 16 to 64 random bytes in hex (32 to 128 hex digits), "
                         "e.g. $(openssl rand -hex 16): a short seed makes recorded answers "
                         "reusable")
    build_dir = args.build or str(BUILD / args.board)
    if not os.path.exists(os.path.join(build_dir, "MANIFEST")):
        raise SabotError(f"no build in {build_dir}: run `make firmware BOARD={args.board}` first")
    try:
        config = registry_entry(args.registry, args.shoe_id, args.port, args.baud)
        r = verify_firmware(args.port, args.seed, config, build_dir, baud=args.baud)
    except SabotError as e:
        if "no integrity answer" in str(e):  # a shoe ignores a challenge naming another shoe
            raise SabotError(f"{e} (a shoe ignores a challenge for another shoe id: is it the "
                             "registered shoe? sabot status tells)") from None
        raise
    if args.db:
        from sabot.audit.store import AuditStore

        store = AuditStore(args.db)
        store.log_integrity(r)
        store.close()
    if args.json:
        print(json.dumps(r))
    else:
        matches = "matches" if r["result"] == "pass" else "does not match"
        print(f"{r['result'].upper()}: shoe {r['shoe_id']:#010x} integrity {r['integrity']}; "
              f"seeded HMAC {matches} the build in {build_dir}")
    if r["result"] != "pass":
        if r["integrity"] == "unchecked":
            raise SabotError("firmware verification failed: the shoe runs unbuilt source, with "
                             "no MANIFEST to check (a virtual board started without --code or "
                             "--root); deploy the build, or start it with --code build/virtual")
        raise SabotError("firmware verification failed")
    return 0


def cmd_deploy(args: argparse.Namespace) -> int:
    from sabot.registry import Registry, ShoeEntry
    from sabot.release.deploy import deploy

    reg = Registry.load(args.registry)
    config = None
    if args.shoe_id is not None or len(reg.shoes) == 1:
        config = reg.pick(args.shoe_id)  # a dealing shoe is sent to maintenance by its id
    info = deploy(args.port, args.board, args.key, log=lambda m: print(m, file=sys.stderr),
                  baud=args.baud, rekey=args.rekey, config=config, release=args.release_key)
    print(f"deployed {info['board']} firmware ({info['code_bytes']:,} B, "
          f"MANIFEST {info['manifest']}) to {args.port}")
    shoe_id = info["shoe_id"]
    entry = reg.shoes.get(shoe_id) or ShoeEntry(shoe_id)
    added = entry.add_public_key(info["key_version"], info["public_key"],  # a clash: SabotError
                                 info["certificate"])
    if added or shoe_id not in reg.shoes or args.table:  # the validator takes its table here
        entry.table = args.table or entry.table
        reg.put(entry)
        print(f"registered shoe {shoe_id:#010x} (table {entry.table}, result key versions "
              f"{entry.key_versions}) in {reg.path}", file=sys.stderr)
    else:
        print(f"shoe {shoe_id:#010x} result key {info['key_version']}: as the registry holds it",
              file=sys.stderr)
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    import json

    from sabot.release.bench import run_bench

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
        raise SabotError("the shoe did not deal the scripted shoe as the rules do")
    return 0


def decks_arg(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


def ranged(low: int, high: int) -> Any:
    """An argparse type: a whole number from low to high (decimal, or 0x hex)."""

    def parse(text: str) -> int:
        try:
            n = int(text, 0)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if not low <= n <= high:
            raise argparse.ArgumentTypeError(f"must be from {low} to {high}, got {n}")
        return n

    return parse


def _finite(text: str, what: str, fits: Any, wanted: str) -> float:
    """A finite number that `fits`, or an argparse error naming what was wanted."""
    import math

    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a {what}: {text!r}") from None
    if not math.isfinite(x) or not fits(x):
        raise argparse.ArgumentTypeError(f"must be {wanted}, got {text!r}")
    return x


def probability(text: str) -> float:
    return _finite(text, "number", lambda x: 0 <= x <= 1, "a probability from 0 to 1")


def seconds_arg(text: str) -> float:
    return _finite(text, "number of seconds", lambda x: x > 0, "a positive number of seconds")


def baud_arg(text: str) -> int:
    if not text.isdigit() or not 50 <= int(text) <= 4_000_000:
        raise argparse.ArgumentTypeError(f"not a baud rate: {text!r} (e.g. 115200)")
    return int(text)


def add_baud(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--baud", type=baud_arg, default=115200,
                        help="the port's baud rate (default 115200; a Pico's USB CDC ignores it, "
                        "an ESP32's USB-UART bridge needs it)")


def add_operation_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", required=True,
                        help="the shoe's port: /dev/ttyACM0, socket://127.0.0.1:7000, ...")
    parser.add_argument("--key", required=True, help=KEY_HELP)
    parser.add_argument("--shoe-id", type=ranged(0, 0xFFFFFFFF), help=SHOE_ID_HELP)
    parser.add_argument("--db", default="sabot.db",
                        help="audit database: frames arriving meanwhile are verified and stored "
                        "there, the operation in its operator log (default ./sabot.db)")
    parser.add_argument("--registry", default=None, help=REGISTRY_HELP)
    add_baud(parser)


class Parser(argparse.ArgumentParser):
    """Usage errors in one line, like every other error (the usage is one --help away)."""

    def error(self, message: str) -> Any:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Every option's default in its help, unless the help already says it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if ("default" not in text and action.default not in (None, False, argparse.SUPPRESS)
                and action.option_strings):
            text += " (default: %(default)s)"
        return text


EXAMPLES = {
    "table": "sabot table check",
    "analyze": "sabot analyze --decks 8 --seen dealt.txt --json",
    "deal": "sabot deal myshoe.txt --json",
    "demo": "sabot demo --seed 7 --db audit.db --key host.pem",
    "board": "sabot board --listen 127.0.0.1:7000 --flash shoe-flash --key host.pem "
             "--shoe shoe1.txt --shoe shoe2.txt",
    "validate": "sabot validate --port /dev/ttyACM0 --key host.pem --shoe-id 7 --db audit.db "
                "--until shoe-end",
    "status": "sabot status --port /dev/ttyACM0 --key host.pem --db audit.db",
    "new-shoe": "sabot new-shoe --port /dev/ttyACM0 --key host.pem --db audit.db --by alice",
    "resolve": "sabot resolve --port /dev/ttyACM0 --key host.pem --db audit.db void-card "
               "--by alice",
    "shuffle": "sabot shuffle --decks 8 --seed 42 -o shoe2.txt",
    "replay": "sabot replay cap.bin --registry sabot-shoes.json --json",
    "audit": "sabot audit verify --db audit.db --registry sabot-shoes.json",
    "settle": "sabot settle request.json",
    "firmware": "sabot firmware --board rpi_pico",
    "bench": "sabot bench myshoe.txt --port /dev/ttyACM0 --key host.pem",
    "deploy": "sabot deploy --port /dev/ttyACM0 --board rpi_pico --key host.pem --rekey",
    "verify-firmware": "sabot verify-firmware --port /dev/ttyACM0 --seed $(openssl rand -hex 16) "
                       "--registry sabot-shoes.json --board rpi_pico",
    "provision": "sabot provision --key host.pem --flash shoe-flash --table BAC-07",
    "soak": "sabot soak --shoes 5 --seed 1 --json",
    "history": "sabot history --db audit.db --shoe 1 --round 12",
    "roads": "sabot roads rounds.jsonl --json   (rounds from: sabot history --db audit.db --json)",
    "serve": "sabot serve --listen 127.0.0.1:8000 --db pit.db --shoe "
             "socket://127.0.0.1:7000=7 --shoe /dev/ttyACM0=9 --key host.pem",
}


def version_text() -> str:
    """The package version and the firmware it carries: the SHA-256 of firmware/ (the code tree
    `sabot firmware` builds from) and the frame protocol version."""
    from sabot import __version__
    from sabot.paths import FIRMWARE
    from sabot.protocol import VERSION
    from sabot.release.build import code_digest

    try:
        fw = code_digest(FIRMWARE / "shoe")[:16]
    except OSError:
        fw = "missing"
    return f"sabot {__version__} (firmware source sha256 {fw}..., frame protocol {VERSION})"


class VersionAction(argparse.Action):
    """--version, computed only when asked for (it hashes the firmware)."""

    def __init__(self, option_strings: list[str], dest: str, **kw: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print the package version and the firmware build it carries")

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kw: Any) -> None:
        print(version_text())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="sabot", formatter_class=HelpFormatter,
        description="Host tools for the sabot smart baccarat shoe (58 Pa. Code rules).",
        epilog="example: sabot demo    (sabot COMMAND --help for each command)",
    )
    p.add_argument("--version", action=VersionAction)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND",
                           parser_class=Parser)

    t = sub.add_parser("table", help="generate or check the shoe's decision table")
    t.add_argument("action", choices=["generate", "check"],
                   help="generate: rewrite firmware/shoe/table.py; check: fail if it differs")
    t.set_defaults(func=cmd_table)

    a = sub.add_parser("analyze", help="exact odds and house edges of every wager for a shoe",
                       description="Exact combinatorial analysis: every ordered six-card sequence "
                       "P1 B1 P2 B2 P3 B3 of the shoe is counted once.")
    a.add_argument("--decks", type=decks_arg, default=8, help="decks in the shoe, 1-8 (default 8)")
    a.add_argument("--seen", metavar="FILE",
                   help="shoe file of cards already dealt, removed from the shoe")
    a.add_argument("--tie-odds", type=decks_arg, default=8,
                   help="the table's Tie odds, to 1 (default 8)")
    a.add_argument("--json", action="store_true",
                   help="one JSON object, as CONTRACTS.md describes")
    a.set_defaults(func=cmd_analyze)

    rd = sub.add_parser("roads", help="bead plate, big road and derived roads from round records",
                        description="Reads round records (one JSON object a line, as `sabot deal "
                        "--json` prints them) from FILE or stdin; events are skipped.")
    rd.add_argument("file", nargs="?", help="round records (default: stdin)")
    rd.add_argument("--json", action="store_true",
                    help="one JSON object, as CONTRACTS.md describes")
    rd.set_defaults(func=cmd_roads)

    d = sub.add_parser("deal", help="deal a shoe file through the firmware on the virtual board",
                       description="Runs SHOEFILE through the shoe firmware on real MicroPython "
                       "and prints the round records the firmware produced (signed, verified by "
                       "the validator).")
    d.add_argument("shoefile",
                   help="shoe file: cards in dealing order, CUT for the cut card, # comments")
    d.add_argument("--json", action="store_true",
                   help="one JSON round record per line, as CONTRACTS.md describes")
    d.add_argument("--events", action="store_true",
                   help="also print shoe events (burn, initial cards, end)")
    d.set_defaults(func=cmd_deal)

    m = sub.add_parser("demo",
                       help="the main job: a virtual shoe streams signed results to the validator")
    m.add_argument("--shoe", metavar="FILE",
                   help="shoe file to deal (default: a freshly shuffled 8-deck shoe)")
    m.add_argument("--seed", type=int, help="seed for the shuffle (repeatable demos)")
    m.add_argument("--db", default="sabot.db", help="audit database (default ./sabot.db)")
    m.add_argument("--key", default="sabot.key",
                   help="the host command key file (signs commands; the virtual shoe is "
                   "provisioned for it), created mode 0600 if missing (default ./sabot.key)")
    m.add_argument("--capture", metavar="FILE", help="keep the raw bytes received from the shoe")
    m.add_argument("--registry", default=None, help=REGISTRY_HELP + "; the demo shoe is "
                   "registered there if it is not yet")
    m.add_argument("--json", action="store_true",
                   help="print one JSON summary object (rounds, verified, rejected, "
                   "irregularities, lost, alarms, ...) instead of progress")
    m.set_defaults(func=cmd_demo)

    b = sub.add_parser("board",
                       help="run the virtual board (firmware on MicroPython) until stopped",
                       description="Runs the shoe firmware on the MicroPython unix port, its "
                       "host link on socket://HOST:PORT, until Ctrl-C. Its lamps and display are "
                       "printed on stdout, one line per change; what the board does, on stderr.")
    b.add_argument("--listen", default="127.0.0.1:7000",
                   help="HOST:PORT of its host link (socket://)")
    b.add_argument("--flash", default="sabot-flash", help="directory that is its persistent flash")
    b.add_argument("--shoe", metavar="FILE", action="append",
                   help="let a simulated dealer draw this shoe file; repeat it for several "
                   "shoes, each dealt after the host's new-shoe (sabot new-shoe)")
    b.add_argument("--key", metavar="FILE", help="provision the virtual shoe for this host "
                   "command key file (created mode 0600 if missing) and register its result key")
    b.add_argument("--registry", default=None, help=REGISTRY_HELP + "; with --key the shoe is "
                   "registered there")
    b.add_argument("--code", metavar="DIR",
                   help="run this built code tree (sabot firmware --board virtual) "
                   "with its integrity check, instead of the repository's source")
    b.add_argument("--root", metavar="DIR",
                   help="the board's whole filesystem, as on a Pico: it runs the "
                   "firmware deployed there (sabot deploy), or serves the REPL when there is none")
    b.add_argument("--maintenance", action="store_true",
                   help="with --root: start in the REPL without running main.py, as a board "
                   "on the bench with its case open (BOOTSEL / SWD); no button does this")
    b.set_defaults(func=cmd_board)

    v = sub.add_parser("validate",
                       help="validate a shoe's link: verify, recompute, store, acknowledge")
    v.add_argument("--port", required=True,
                   help="pyserial URL: /dev/ttyACM0, socket://127.0.0.1:7000, ...")
    v.add_argument("--key", required=True, help=KEY_HELP + "; verifying needs none of it")
    v.add_argument("--shoe-id", type=ranged(0, 0xFFFFFFFF), help=SHOE_ID_HELP)
    v.add_argument("--db", required=True, help="audit database (created if missing)")
    v.add_argument("--capture", metavar="FILE", help="keep the raw bytes received")
    v.add_argument("--seconds", type=seconds_arg,
                   help="stop after this many seconds (default: until Ctrl-C or SIGTERM)")
    v.add_argument("--until", choices=["shoe-end", "irregularity"],
                   help="shoe-end: exit once the current shoe's shoe_end is stored (at once if "
                   "it has ended already); irregularity: also exit when an irregularity holds "
                   "the shoe, so it can be resolved (sabot resolve)")
    v.add_argument("--wait", type=seconds_arg, default=5.0,
                   help="seconds for the shoe to answer at all before giving up (default 5)")
    add_baud(v)
    v.add_argument("--registry", default=None, help=REGISTRY_HELP)
    v.add_argument("--json", action="store_true",
                   help="print each stored record as one JSON object a line (CONTRACTS round "
                   "records and events) instead of text")
    v.set_defaults(func=cmd_validate)

    sv = sub.add_parser("serve", help="validate several shoes and serve the pit's live pages",
                        description="Validates every --shoe (each on its own port, as `sabot "
                        "validate`) into one audit store and serves from it: / (pit dashboard), "
                        "/table/NAME (the players' scoreboard, live), /api/tables, "
                        "/api/tables/NAME.")
    sv.add_argument("--listen", default="127.0.0.1:8000", help="HOST:PORT of the web server")
    sv.add_argument("--db", required=True, help="audit database (created if missing)")
    sv.add_argument("--registry", default=None, help=REGISTRY_HELP)
    add_baud(sv)
    sv.add_argument("--key", metavar="FILE", default="sabot.key",
                    help=KEY_HELP + " (default ./sabot.key)")
    sv.add_argument("--shoe", action="append", metavar="URL[=SHOE_ID]",
                    help="a shoe's port and its registered id, e.g. socket://127.0.0.1:7000=7 "
                    "(repeat for every shoe; a plain URL: the shoe on it says which it is)")
    sv.set_defaults(func=cmd_serve)

    r = sub.add_parser("replay", help="verify a capture offline")
    r.add_argument("capture", help="raw bytes kept by --capture")
    r.add_argument("--key", metavar="FILE", help=NO_KEY_HELP)
    r.add_argument("--shoe-id", type=ranged(0, 0xFFFFFFFF),
                   help="which registered shoe (default: the registry's only shoe, or the one "
                   "the capture's first frame names)")
    r.add_argument("--registry", default=None, help=REGISTRY_HELP + "; its public keys verify "
                   "the capture")
    r.add_argument("--json", action="store_true",
                   help="one JSON object: frames, verified, rejected, rounds, rejections (each "
                   "with its reason), alarms")
    r.set_defaults(func=cmd_replay)

    au = sub.add_parser("audit", help="check an audit store: sabot audit verify",
                        description="verify: re-verifies every stored frame from its raw bytes "
                        "(signature, sealing, sequence, digest chain), recomputes every round "
                        "with the host's rules and checks the store's own row chain and "
                        "append-only triggers. Exit 0 and 'ok: F frames, R rounds' when all "
                        "holds; otherwise non-zero and the first broken row. It needs the shoe "
                        "registry's public keys only. Example: sabot audit verify --db audit.db "
                        "--registry sabot-shoes.json")
    au.add_argument("action", choices=["verify"])
    au.add_argument("--db", default="sabot.db", help="audit database (default ./sabot.db)")
    au.add_argument("--key", action="append", metavar="FILE", help=NO_KEY_HELP)
    au.add_argument("--allow-holes", action="store_true",
                    help="exit 0 although the store has seq holes the shoe's own status explains "
                    "as acknowledged to another host (named in the output either way)")
    au.add_argument("--registry", default=None, help=REGISTRY_HELP + "; its public keys verify "
                    "every signature, and the alarms are derived again with each shoe's entry")
    au.add_argument("--json", action="store_true",
                    help="one JSON object: ok, frames, rounds, rows and the problem found, if any")
    au.set_defaults(func=cmd_audit)

    st = sub.add_parser("settle", help="settle a round's wagers (JSON in, JSON out)",
                        description="Reads {table, round, wagers} as JSON from FILE or stdin and "
                        "prints the settlements in the order the dealer makes them: losing wagers "
                        "first, then seats from the highest number down. Money is integer cents. "
                        "See CONTRACTS.md.")
    st.add_argument("file", nargs="?", help="request file (default: stdin)")
    st.set_defaults(func=cmd_settle)

    fw = sub.add_parser("firmware",
                        help="build a board's .mpy set, sizes and MANIFEST (make firmware)")
    fw.add_argument("--board", default="virtual",
                    help="rpi_pico, esp32 or virtual (default virtual)")
    fw.add_argument("--out", help="output directory (default build/BOARD)")
    fw.add_argument("--release-key", metavar="FILE", default="sabot-release.pem",
                    help="the release key that signs MANIFEST, created mode 0600 if missing "
                    "(default ./sabot-release.pem)")
    fw.add_argument("--json", action="store_true",
                    help="one JSON object: board, arch, files and sizes, flash and RAM budgets, "
                    "manifest")
    fw.set_defaults(func=cmd_firmware)

    bn = sub.add_parser("bench", help="push a scripted shoe through a shoe; per-round pass/fail",
                        description="Deals SHOEFILE through a shoe and judges every round against "
                        "the host's rules. With --port a technician draws each card by hand when "
                        "prompted; without it a virtual board and a simulated dealer are used.")
    bn.add_argument("shoefile", help="the scripted shoe (shoe file format)")
    bn.add_argument("--port",
                    help="the shoe's port (/dev/ttyACM0, socket://HOST:PORT); default: a virtual "
                    "board")
    bn.add_argument("--key", help="with --port: the host command key file, to acknowledge "
                    "what the shoe sends (verifying needs only the registry)")
    bn.add_argument("--registry", default=None, help=REGISTRY_HELP + " (with --port)")
    bn.add_argument("--shoe-id", type=ranged(0, 0xFFFFFFFF), help=SHOE_ID_HELP)
    bn.add_argument("--db",
                    help="the shoe's audit database, so its chain goes on (default ./sabot.db, "
                    "as status, new-shoe and resolve)")
    add_baud(bn)
    bn.add_argument("--json", action="store_true",
                    help="print {\"verdict\", \"rounds\": [{round, verdict, detail}]} instead "
                    "of the report")
    bn.set_defaults(func=cmd_bench)

    dp = sub.add_parser("deploy",
                        help="build, copy to the shoe with mpremote, check, register its key",
                        description="Builds BOARD's firmware (MANIFEST signed with the release "
                        "key), sends a dealing shoe to maintenance (a command signed with the "
                        "command key), copies the build with mpremote, checks on the shoe that "
                        "its code tree matches the MANIFEST, and registers the result key its "
                        "secure element holds (with --rekey: a new version made there).")
    dp.add_argument("--port", required=True,
                    help="the shoe's port: /dev/ttyACM0, socket://127.0.0.1:7000")
    dp.add_argument("--board", default="virtual", help="rpi_pico, esp32 or virtual")
    dp.add_argument("--key", required=True,
                    help=KEY_HELP + " (a dealing shoe is sent to maintenance with it)")
    dp.add_argument("--shoe-id", type=ranged(0, 0xFFFFFFFF), help=SHOE_ID_HELP + "; needed to "
                    "send a dealing shoe to maintenance")
    add_baud(dp)
    dp.add_argument("--rekey", action="store_true",
                    help="have the shoe's secure element make its next result key version and "
                    "register it (the old versions stay registered for old frames; the audit "
                    "chain goes on)")
    dp.add_argument("--release-key", metavar="FILE", default="sabot-release.pem",
                    help="the release key that signs MANIFEST, created mode 0600 if missing "
                    "(default ./sabot-release.pem)")
    dp.add_argument("--table", default="", help="the table's name in the shoe registry (default: "
                    "kept, or shoe-<shoe id> for a shoe not registered yet)")
    dp.add_argument("--registry", default=None, help=REGISTRY_HELP + "; the shoe is registered "
                    "there if it is not yet")
    dp.set_defaults(func=cmd_deploy)

    vf = sub.add_parser("verify-firmware",
                        help="challenge a shoe: seeded HMAC of its code against the build",
                        description="Sends the shoe an unsigned verify challenge with the seed; "
                        "checks its integrity answer's signature with the shoe's public key "
                        "from the registry (no secret needed) and its seeded HMAC against the "
                        "build's.")
    vf.add_argument("--port", required=True, help="pyserial URL of the shoe")
    vf.add_argument("--seed", required=True,
                    help="a fresh random seed, hex (e.g. from `openssl rand -hex 16`)")
    vf.add_argument("--key", metavar="FILE", help=NO_KEY_HELP)
    vf.add_argument("--registry", default=None, help=REGISTRY_HELP)
    vf.add_argument("--shoe-id", type=ranged(0, 0xFFFFFFFF), help=SHOE_ID_HELP)
    vf.add_argument("--board", default="virtual", help="board whose build/BOARD to compare with")
    vf.add_argument("--build", help="build directory to compare with (default build/BOARD)")
    vf.add_argument("--db", help="log the check in this audit database")
    add_baud(vf)
    vf.add_argument("--json", action="store_true",
                    help="print the check as one JSON object (result, integrity, seed, expected, "
                    "answer, shoe_id, boot)")
    vf.set_defaults(func=cmd_verify_firmware)

    pv = sub.add_parser("provision",
                        help="provision a virtual shoe: its secure element, identity, registry "
                        "entry",
                        description="Factory provisioning of a virtual shoe: a fresh secure "
                        "element (emulator store DIR.element beside the flash) makes result key "
                        "1 inside and takes the host command key's public half; the flash gets "
                        "the shoe's identity (no key); the registry gets its entry with the "
                        "result key's public half. No secret travels over the shoe link.")
    pv.add_argument("--key", required=True,
                    help="the host command key file (created with mode 0600 if missing)")
    pv.add_argument("--flash", required=True, help="the virtual board's flash directory")
    pv.add_argument("--shoe-id", type=ranged(0, 0xFFFFFFFF),
                    help="shoe id, 0-4294967295, decimal or 0x hex (default: kept, or random)")
    pv.add_argument("--game", default="baccarat",
                    choices=["minibaccarat", "midibaccarat", "baccarat"])
    pv.add_argument("--ez", action="store_true", help="EZ Baccarat: announces Dragon 7 / Panda 8")
    pv.add_argument("--commission-free", action="store_true", help="631c.5: announces Lucky Six")
    pv.add_argument("--squeeze", action="store_true",
                    help="631a.9(d): card identities stay off the link until the dealer's reveal")
    pv.add_argument("--decks", type=ranged(1, 8), default=8,
                    help="decks the shoe holds, 1-8 (default 8)")
    pv.add_argument("--table", default="", help="the table's name in the registry "
                    "(default shoe-<shoe id>)")
    pv.add_argument("--registry", default=None, help=REGISTRY_HELP + "; the shoe's entry is "
                    "written there")
    pv.set_defaults(func=cmd_provision)

    k = sub.add_parser("soak", help="deal whole shoes while injecting faults; nothing may be lost",
                       description="Deals shuffled 8-deck shoes through the virtual board and the "
                       "validator while cutting power, restarting the validator, dropping the "
                       "link, adding line noise and fragmenting reads at random instants.")
    k.add_argument("--shoes", type=ranged(1, 10_000), default=1, help="shoes to deal (default 1)")
    k.add_argument("--seed", type=int, default=0, help="seed for shoes and faults (default 0)")
    k.add_argument("--fault-rate", type=probability, default=0.1,
                   help="chance of a fault before each card (0.1)")
    k.add_argument("--mistake-rate", type=probability, default=0.0,
                   help="chance of a dealer or supervisor mistake before each card: unreadable "
                   "cards, cards not due, missing confirms, extra cut cards, shoe-empty anywhere "
                   "including the burn, every resolution (default 0)")
    k.add_argument("--json", action="store_true",
                   help="one JSON summary: rounds, stored, lost, duplicated, faults (counts by "
                   "kind), rejected (counts by reason)")
    k.set_defaults(func=cmd_soak)

    h = sub.add_parser("history", help="reconstruct hands from the audit store")
    h.add_argument("--db", default="sabot.db", help="audit database (default ./sabot.db)")
    h.add_argument("--shoe-id", type=lambda t: int(t, 0), help="only the shoe with this id")
    h.add_argument("--shoe", type=int, help="only this shoe")
    h.add_argument("--round", type=int, help="only this round")
    h.add_argument("--alarms", action="store_true",
                   help="list the stored alarms instead, one JSON object per line")
    h.add_argument("--operations", action="store_true",
                   help="list the operator log instead (who started shoes and gave resolutions, "
                   "from which host), one JSON object per line")
    h.add_argument("--json", action="store_true",
                   help="one JSON round record or event per line (CONTRACTS) instead of text")
    h.set_defaults(func=cmd_history)

    so = sub.add_parser("status", help="the shoe's live state over its port",
                        description="Asks the shoe where it stands (an authenticated hello) and "
                        "prints its phase, shoe, round, card position, unacknowledged frames, "
                        "integrity and boot counter.")
    add_operation_args(so)
    so.add_argument("--wait", type=seconds_arg, default=5.0,
                    help="seconds to wait for the answer (default 5)")
    so.add_argument("--json", action="store_true",
                    help="one JSON object: phase, shoe, round, position, due, unacknowledged, "
                    "integrity, boot, shoe_id, acked, host_counter, refused (and pending when "
                    "an irregularity holds the shoe)")
    so.set_defaults(func=cmd_status)

    ns = sub.add_parser("new-shoe", help="start the next shoe after the current one ended",
                        description="Sends the authenticated new-shoe command once the shoe "
                        "reports its shoe ended (refused mid-shoe), waits until the shoe has "
                        "started the next one and logs who did it in the operator log.")
    add_operation_args(ns)
    ns.add_argument("--by", help="who starts it, for the operator log (default: your login)")
    ns.add_argument("--json", action="store_true",
                    help="print the shoe's status afterwards as one JSON object")
    ns.set_defaults(func=cmd_new_shoe)

    rs = sub.add_parser("resolve", help="a supervisor's resolution of the pending irregularity",
                        description="Resolves the irregularity holding the shoe: void-card "
                        "(discard the offending card), keep-dummy (keep it as a no-bet dummy "
                        "hand), void-round, or end-shoe (the shoe ends here and is reshuffled). "
                        "The shoe signs the resolution (source host); who gave it, and from "
                        "which host, goes to the operator log (sabot history --operations).")
    rs.add_argument("resolution", choices=["void-card", "keep-dummy", "void-round", "end-shoe"])
    add_operation_args(rs)
    rs.add_argument("--by", required=True, help="the supervisor giving the resolution")
    rs.add_argument("--json", action="store_true",
                    help="print the shoe's status afterwards and the signed resolution record "
                    "as one JSON object")
    rs.set_defaults(func=cmd_resolve)

    sh = sub.add_parser("shuffle", help="write a freshly shuffled shoe file",
                        description="Shuffles N decks, places the cut card and writes the shoe "
                        "file (cards in dealing order, CUT for the cut card).")
    sh.add_argument("--decks", type=decks_arg, default=8, help="decks, 1-8 (default 8)")
    sh.add_argument("--seed", type=int, help="seed for a repeatable shuffle (default: random)")
    sh.add_argument("--cut", type=decks_arg, metavar="POS",
                    help="the cut card's position, in cards from the end of the shoe (default: "
                    "about a sixth of the cards); 0: no cut card, the shoe is dealt until it runs "
                    "out and the supervisor ends it (sabot resolve end-shoe)")
    sh.add_argument("-o", "--output", metavar="FILE", help="file to write (default: stdout)")
    sh.set_defaults(func=cmd_shuffle)

    for name, parser in sub.choices.items():
        parser.formatter_class = HelpFormatter
        parser.epilog = f"example: {EXAMPLES[name]}"
        if parser.description is None:
            helps = {a.dest: a.help for a in sub._choices_actions}
            parser.description = (helps.get(name) or name)[0].upper() + (helps.get(name) or "")[1:]
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args) or 0
    except SabotError as e:
        print(f"sabot {args.command}: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `sabot history | head`: the reader has all it wanted (caught
        sys.stderr.close()  # before ConnectionError, of which it is a kind)
        return 0
    except ConnectionError as e:  # the shoe's port went away mid-conversation
        print(f"sabot {args.command}: link lost: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # a file or directory named on the command line that will not do
        where = f"{e.filename}: " if e.filename else ""
        print(f"sabot {args.command}: {where}{e.strerror or e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"sabot {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

"""`sabot witness`: a transparency-log witness for shoes' logs (C2SP tlog-witness)."""

from __future__ import annotations

import argparse
import os
import sys

from sabot.cli.options import (
    REGISTRY_HELP,
    SHOE_ID,
    Commands,
    add_service_args,
    listen_arg,
    ranged,
    witness_arg,
)
from sabot.cli.output import shoe_id_text
from sabot.errors import SabotError

TYPE_CHECKING = False  # (typing is not imported at every command's start)
if TYPE_CHECKING:
    from sabot.registry import ShoeEntry

commands = Commands()


def witness_args(p: argparse.ArgumentParser) -> None:
    add_service_args(p, "key = \"regulator.key\", db = \"witness.db\", listen = \"0.0.0.0:8700\"")
    p.add_argument("--key", metavar="FILE", required=True,
                   help="the witness's Ed25519 key (created mode 0600 when missing)")
    p.add_argument("--vkey", action="store_true",
                   help="print the witness's verifier key (NAME+KEYID+BASE64, C2SP signed-note) "
                   "and exit: what pits (--witness URL=VKEY) and players' receipts trust")
    p.add_argument("--name", default=None,
                   help="the witness's name in its cosignatures (default: sabot.witness/ and "
                   "the first 16 hex digits of its key's hash, the same on every host)")
    p.add_argument("--listen", type=listen_arg, default="127.0.0.1:8700",
                   help="HOST:PORT of its HTTP service (default 127.0.0.1:8700)")
    p.add_argument("--db", metavar="FILE", default="witness.db",
                   help="its state: each log's latest cosigned checkpoint, and the evidence of "
                   "each refused one (SQLite; default ./witness.db)")
    p.add_argument("--registry", default=None,
                   help=REGISTRY_HELP + "; the shoes whose logs it witnesses, and their keys")


@commands("witness", witness_args, help="witness shoes' transparency logs (C2SP tlog-witness)",
          description="Runs a witness: POST /add-checkpoint takes a shoe's checkpoint with a "
          "consistency proof from the last one this witness cosigned, checks the shoe's "
          "signature against the registry's key (the one that signed the log's first "
          "checkpoint here), the proof, and answers a timestamped Ed25519 cosignature; a fork, "
          "a failed proof or another key is refused and kept as evidence. GET /logs lists "
          "what it holds. Run by someone the casino is not (a regulator, a test lab).",
          example="sabot witness --key regulator.key --db witness.db --registry shoes.json "
          "--listen 0.0.0.0:8700")
def cmd_witness(args: argparse.Namespace) -> int:
    from sabot import keys
    from sabot.note import check_name
    from sabot.witness.service import Witness, app, default_name

    key = keys.witness_key(args.key)
    name = check_name(args.name) if args.name else default_name(key)
    if args.vkey:
        from sabot.note import COSIGNATURE, Ed25519Signer

        print(Ed25519Signer(name, key, COSIGNATURE).verifier.vkey())
        return 0
    import socket

    from sabot.registry import Registry

    host, port = args.listen
    try:
        with socket.create_server((host, port)):
            pass
    except OSError as e:
        raise SabotError(f"cannot listen on {host}:{port}: {e.strerror}") from None
    # (a registry not written yet is read once it is: a witness may start before the first
    # shoe is provisioned, to take its first checkpoint)
    registry = Registry.load(args.registry)
    if not os.path.exists(registry.path):
        print(f"sabot witness: registry {registry.path} does not exist yet: no shoe is "
              "known until it is written", file=sys.stderr)
    witness = Witness(args.db, key, registry.shoes, name)
    from sabot.service import log, say

    def answered(line: str) -> None:  # each request answered, for the witness's operator
        log(line, "info", "witness")

    witness.say = answered
    def stamp() -> tuple[int, ...] | None:
        """What changes with any write of the file: a copy that keeps the old modification
        time (cp -p) still changes its inode change time, which no one can set."""
        try:
            st = os.stat(registry.path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_size)

    read_at = [stamp()]

    def refresh() -> dict[int, ShoeEntry] | None:  # a shoe provisioned since
        changed = stamp()
        if changed is None:
            return None
        if changed == read_at[0]:
            return None
        read_at[0] = changed
        try:
            shoes = Registry.load(registry.path, must_exist=True).shoes
        except SabotError as e:
            answered(f"registry {registry.path} not read again: {e}")
            return None
        answered(f"registry {registry.path} read again: {len(shoes)} shoes")
        return shoes

    witness.refresh = refresh
    where = (f"http://{host}:{port}/add-checkpoint ({witness.vkey}; {len(witness.logs)} shoe "
             f"logs, state {args.db})")
    say("witness", where)
    from sabot.link.session import sigterm_interrupts
    from sabot.service import uvicorn_server

    server = uvicorn_server(app(witness), host, port, where)
    try:
        with sigterm_interrupts():
            server.run()
    except KeyboardInterrupt:
        pass
    finally:
        witness.close()
    print("witness stopped", file=sys.stderr)
    return 0


def bind_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--registry", default=None, help=REGISTRY_HELP + "; the shoe's entry holds "
                   "its first checkpoint")
    p.add_argument("--shoe-id", type=SHOE_ID, help="the registered shoe (decimal or 0x hex, as "
                   "sabot provision prints it; default: the registry's only shoe)")
    p.add_argument("--witness", metavar="URL=VKEY", type=witness_arg, action="append",
                   required=True, help="a witness to hand the shoe's first checkpoint: URL its "
                   "address (http://HOST:PORT), VKEY its verifier key (sabot witness --key FILE "
                   "--vkey); repeat for several")
    p.add_argument("--quorum", metavar="K", type=ranged(1, 64), default=None,
                   help="how many must hold the shoe's key 1 afterwards (default: every "
                   "--witness); fewer: exit 2")


@commands("bind", bind_args, help="hand witnesses a shoe's first checkpoint (its key 1)",
          description="Sends the shoe's first checkpoint, which result key 1 signed at "
          "provisioning (kept in its registry entry), to each witness: from then on the witness "
          "refuses the shoe's log signed by any other key, so a key swapped in the registry "
          "afterwards is caught at the next checkpoint. sabot provision --witness does this as "
          "the shoe is provisioned; this is for a witness that could not take it then. Exit 2 "
          "when fewer than the quorum took it.",
          example="sabot bind --registry shoes.json --shoe-id 0x1a2b3c4d --witness "
          "http://regulator.example:8700=regulator.example/w1+1a2b3c4d+BA...")
def cmd_bind(args: argparse.Namespace) -> int:
    from sabot.audit.cosign import bind, check_quorum
    from sabot.registry import Registry

    quorum = check_quorum(args.witness, args.quorum)
    registry = Registry.load(args.registry, must_exist=True)
    entry = registry.pick(args.shoe_id)
    bound = bind(args.witness, quorum, entry, lambda m: print(m, file=sys.stderr))
    registry.witnessed(entry.shoe_id)
    print(f"shoe {shoe_id_text(entry.shoe_id)}: {bound} of {len(args.witness)} witnesses hold "
          "its key")
    return 0


def receipt_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", help="the pit's audit store (validated with --witness), to make a "
                   "receipt from")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--shoe-id", type=SHOE_ID,
                       help="which registered shoe (decimal or 0x hex, as sabot provision prints "
                       "it; default: the registry's only shoe)")
    which.add_argument("--table", metavar="NAME", help="the same, by the shoe's table name in "
                       "the registry (as the pit's pages show it)")
    p.add_argument("--shoe", type=ranged(1, 0xFFFF), metavar="N", help="the round's shoe number")
    p.add_argument("--round", type=ranged(1, 0xFFFF), metavar="R", help="the round's number")
    p.add_argument("-o", "--out", metavar="FILE",
                   help="write the receipt there (default: stdout); an existing file is "
                   "replaced only if it is a receipt")
    p.add_argument("--registry", default=None, help=REGISTRY_HELP)
    p.add_argument("--quorum", type=ranged(1, 64), default=1, metavar="K",
                   help="the cosignatures the receipt's checkpoint carries at least (default 1)")
    sub = p.add_subparsers(dest="action", metavar="verify", parser_class=type(p))
    v = sub.add_parser("verify", help="check a round's receipt offline",
                       description="Checks a receipt with no server's word: the round's result "
                       "is signed by the registered shoe's key, its initial cards are the ones "
                       "the result seals, the result is in the shoe's log (an inclusion proof to "
                       "a checkpoint the shoe signed) and at least K of the witnesses given "
                       "cosigned that checkpoint; exit 0 and what it proves in plain words, or "
                       "non-zero and the part that does not hold.")
    v.add_argument("file", metavar="FILE", help="the receipt (a C2SP tlog-proof, .tlog-proof)")
    v.add_argument("--registry", dest="verify_registry", required=True, metavar="FILE",
                   help="the shoe registry whose public keys the shoe's signatures must be")
    v.add_argument("--witness", dest="verify_witness", action="append", default=[],
                   metavar="VKEY",
                   help="a witness the player trusts, by its verifier key (repeat for each; or "
                   "--policy)")
    v.add_argument("--policy", dest="verify_policy", metavar="FILE",
                   help="the witnesses trusted and the quorum, as a C2SP tlog-policy file: "
                   "`witness NAME VKEY [URL]`, `group NAME K|all|any MEMBER...`, `quorum NAME` "
                   "lines (`log` lines are ignored: the registry holds the shoe's keys)")
    v.add_argument("--quorum", dest="verify_quorum", type=ranged(1, 64), default=None,
                   metavar="K", help="how many of those witnesses must have cosigned (default: "
                   "all)")


@commands("receipt", receipt_args, help="make or check a round's receipt",
          description="Without an action: writes round R of shoe N's receipt from the audit "
          "store — the round's initial cards and signed result, their entry's inclusion proof "
          "in the shoe's log and the smallest checkpoint covering it that the shoe signed and "
          "witnesses cosigned — once one is cosigned. verify: checks a receipt with no "
          "server's word: the round's result is signed by the registered shoe's key, its "
          "initial cards are the ones the result seals, the result is in the shoe's log (an "
          "inclusion proof to a checkpoint the shoe signed) and at least K of the witnesses "
          "given cosigned that checkpoint; exit 0 and what it proves in plain words, or "
          "non-zero and the part that does not hold.",
          example="sabot receipt --db pit.db --shoe 1 --round 10 -o round10.tlog-proof; "
          "sabot receipt verify round10.tlog-proof --registry shoes.json --witness "
          "regulator.example/w1+1a2b3c4d+BA...")
def cmd_receipt(args: argparse.Namespace) -> int:
    if args.action == "verify":
        return verify_receipt(args)
    from sabot import receipt
    from sabot.audit.receipts import make_receipt
    from sabot.audit.store import open_store
    from sabot.registry import Registry

    missing = [o for o, v in (("--db", args.db), ("--shoe", args.shoe), ("--round", args.round))
               if v is None]
    if missing:
        raise SabotError(f"making a receipt needs {', '.join(missing)} (or `sabot receipt "
                         "verify FILE` to check one)")
    reg = Registry.load(args.registry, must_exist=True)
    # (a receipt is of one shoe's log)
    entry = reg.at_table(args.table, one=True) if args.table is not None else reg.pick(
        args.shoe_id)
    if args.out and os.path.exists(args.out):
        try:
            with open(args.out, encoding="utf-8") as f:
                head = f.read(len(receipt.HEADER))
        except (OSError, UnicodeDecodeError):
            head = ""
        if head != receipt.HEADER:
            raise SabotError(f"{args.out} exists and is not a receipt: not replaced")
    store = open_store(args.db, writer=False)  # never writes, and refuses a foreign file
    try:
        text = make_receipt(store, entry, args.shoe, args.round, args.quorum)
    finally:
        store.close()
    if args.out:
        import tempfile

        try:  # written beside it under a name of its own, then moved over it whole
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(args.out)),
                                       prefix=".receipt-")
            from sabot.registry import public_mode

            public_mode(fd)  # a receipt is for anyone
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, args.out)
        except OSError as e:
            raise SabotError(f"cannot write {args.out}: {e.strerror or e}") from None
        print(f"wrote {args.out}: the receipt of round {args.round} of shoe {args.shoe} "
              f"({len(text.encode())} bytes)", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def verify_receipt(args: argparse.Namespace) -> int:
    from sabot import receipt
    from sabot.note import Verifier
    from sabot.registry import Registry

    policy = None
    if args.verify_policy:
        if args.verify_witness or args.verify_quorum:
            raise SabotError("--policy names the witnesses and their quorum: give it without "
                             "--witness and --quorum")
        try:
            with open(args.verify_policy, encoding="utf-8") as f:
                policy = receipt.Policy.parse(f.read(64 * 1024))
        except (OSError, UnicodeDecodeError) as e:
            raise SabotError(f"cannot read policy {args.verify_policy}: "
                             f"{getattr(e, 'strerror', None) or 'not UTF-8 text'}") from None
    elif not args.verify_witness:
        raise SabotError("sabot receipt verify needs the witnesses the player trusts: "
                         "--witness VKEY (repeatable) or --policy FILE")
    witnesses = [Verifier.parse(v) for v in args.verify_witness]
    try:
        with open(args.file, encoding="utf-8") as f:
            text = f.read(receipt.MAX_BYTES + 1)
    except (OSError, UnicodeDecodeError) as e:
        raise SabotError(f"cannot read receipt {args.file}: "
                         f"{getattr(e, 'strerror', None) or 'not UTF-8 text'}") from None
    if len(text) > receipt.MAX_BYTES:
        raise SabotError(f"{args.file} is not a receipt (over {receipt.MAX_BYTES} bytes)")
    got = receipt.verify(text, Registry.load(args.verify_registry, must_exist=True).shoes,
                         witnesses, args.verify_quorum, policy)
    print(got["explanation"])
    return 0

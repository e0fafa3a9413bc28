"""`sabot witness`: a transparency-log witness for shoes' logs (C2SP tlog-witness)."""

from __future__ import annotations

import argparse
import sys

from sabot.cli.options import REGISTRY_HELP, Commands, listen_arg
from sabot.errors import SabotError

commands = Commands()


def witness_args(p: argparse.ArgumentParser) -> None:
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
    registry = Registry.load(args.registry, must_exist=True)
    witness = Witness(args.db, key, registry.shoes, name)
    print(f"sabot witness: http://{host}:{port}/add-checkpoint ({witness.vkey}; "
          f"{len(witness.logs)} shoe logs, state {args.db})", file=sys.stderr, flush=True)
    import uvicorn

    from sabot.link.session import sigterm_interrupts

    server = uvicorn.Server(uvicorn.Config(app(witness), host=host, port=port,
                                           log_level="warning", proxy_headers=False))
    try:
        with sigterm_interrupts():
            server.run()
    except KeyboardInterrupt:
        pass
    finally:
        witness.close()
    print("witness stopped", file=sys.stderr)
    return 0


def receipt_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=["verify"],
                   help="verify: check a round's receipt offline")
    p.add_argument("file", metavar="FILE", help="the receipt (a C2SP tlog-proof, .tlog-proof)")
    p.add_argument("--registry", required=True,
                   help="the shoe registry whose public keys the shoe's signatures must be")
    p.add_argument("--witness", action="append", required=True, metavar="VKEY",
                   help="a witness the player trusts, by its verifier key (repeat for each)")
    p.add_argument("--quorum", type=int, default=None, metavar="K",
                   help="how many of those witnesses must have cosigned (default: all)")


@commands("receipt", receipt_args, help="check a round's receipt offline",
          description="verify: checks a receipt with no server's word: the round's result is "
          "signed by the registered shoe's key, its initial cards are the ones the result "
          "seals, the result is in the shoe's log (an inclusion proof to a checkpoint the shoe "
          "signed) and at least K of the witnesses given cosigned that checkpoint; exit 0 and "
          "what it proves in plain words, or non-zero and the part that does not hold.",
          example="sabot receipt verify round10.tlog-proof --registry shoes.json --witness "
          "regulator.example/w1+1a2b3c4d+BA...")
def cmd_receipt(args: argparse.Namespace) -> int:
    from sabot import receipt
    from sabot.note import Verifier
    from sabot.registry import Registry

    witnesses = [Verifier.parse(v) for v in args.witness]
    try:
        with open(args.file, encoding="utf-8") as f:
            text = f.read(receipt.MAX_BYTES + 1)
    except (OSError, UnicodeDecodeError) as e:
        raise SabotError(f"cannot read receipt {args.file}: "
                         f"{getattr(e, 'strerror', None) or 'not UTF-8 text'}") from None
    if len(text) > receipt.MAX_BYTES:
        raise SabotError(f"{args.file} is not a receipt (over {receipt.MAX_BYTES} bytes)")
    got = receipt.verify(text, Registry.load(args.registry, must_exist=True).shoes, witnesses,
                         args.quorum)
    print(got["explanation"])
    return 0

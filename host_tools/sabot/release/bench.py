"""`sabot bench`: push a scripted shoe through a shoe and judge every round against the host's
rules.

With --port, a technician draws the cards by hand into a real shoe (or any shoe on that port): the
tool prompts for each card and waits until the shoe has taken it. Without --port, a virtual board
is started and a simulated dealer draws them. Either way the validator verifies every frame, and
each round the rules expect is reported PASS (the shoe signed exactly that round), FAIL (it signed
something else, or the validator rejected it) or MISSING."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable
from typing import Any

from sabot import keys
from sabot.audit.records import contract_round
from sabot.audit.validator import Validator
from sabot.errors import NOTICES, SabotError
from sabot.game import rules
from sabot.game.cards import CUT
from sabot.keys import CommandKey
from sabot.link.host import HostLink
from sabot.link.transport import DEFAULT_BAUD
from sabot.registry import ShoeEntry
from sabot.virtual.demo import Session

ANSWER_WAIT = 5.0  # seconds for a shoe on the port to answer the first hello
DRAIN_WAIT = 5.0  # seconds for the shoe to deliver what it still holds after the last card


def progress_bar(done: int, total: int, label: str, width: int = 30) -> None:
    filled = int(width * done / max(total, 1))
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label}   ")
    sys.stderr.flush()


def judge(expected: list[dict[str, Any]], records: list[tuple[str, dict[str, Any]]],
          rejections: list[dict[str, Any]]) -> list[tuple[int | None, str, str]]:
    """Per-round verdicts: (round, verdict, detail)."""
    signed = {}
    for kind, rec in records:
        if kind == "result":
            signed[(rec["shoe"], rec["round"])] = contract_round(rec)
    shoes = sorted({s for s, _ in signed}) or [1]
    shoe = shoes[-1]
    out = []
    for want in expected:
        got = signed.get((shoe, want["round"]))
        want = dict(want, shoe=shoe)
        if got == want:
            out.append((want["round"], "PASS", _hand(want)))
        elif got is None:
            out.append((want["round"], "MISSING", f"rules deal {_hand(want)}"))
        else:
            out.append((want["round"], "FAIL",
                        f"shoe signed {_hand(got)}; rules deal {_hand(want)}"))
    for r in rejections:  # alarms on a round make it FAIL, whatever the shoe signed
        # (a game-protection notice — the players ahead, a shuffle repeated — is no fault of
        # the shoe's dealing: the round stands as the shoe signed it)
        if r.get("round") is not None and r.get("kind") and r["kind"] not in NOTICES:
            i = next((i for i, v in enumerate(out) if v[0] == r["round"]), None)
            if i is not None:
                out[i] = (r["round"], "FAIL", f"{r['kind']}: {r['detail']}; {out[i][2]}")
    rejected = [r for r in rejections if "reason" in r]
    alarms = [r for r in rejections if "kind" in r and r.get("round") is None
              and r["kind"] not in NOTICES]
    if rejected:
        reasons = ", ".join(sorted({r["reason"] for r in rejected}))
        out.append((None, "FAIL", "frames rejected: " + reasons))
    if alarms:
        out.append((None, "FAIL", "alarms: " + ", ".join(sorted({a["kind"] for a in alarms}))))
    return out


def _hand(r: dict[str, Any]) -> str:
    return f"P {' '.join(r['player'])} B {' '.join(r['banker'])} -> {r['winner']}"


def bench_virtual(tokens: list[str], progress: bool = True
                  ) -> tuple[list[tuple[str, dict[str, Any]]], list[dict[str, Any]]]:
    with tempfile.TemporaryDirectory(prefix="sabot-bench-") as tmp:
        key = keys.create(os.path.join(tmp, "command.pem"))

        def show(session: Session, final: bool = False) -> None:
            if progress:
                ind = session.board.indicator if session.board else None
                pos = ind[2] if ind else 0
                progress_bar(pos, len(tokens), f"cards, {len(session.rounds())} rounds")

        s = Session(tokens, key, os.path.join(tmp, "audit.db"), os.path.join(tmp, "flash"),
                    progress=show)
        try:
            s.run()
        finally:
            s.close()
        return s.records, s.validator.rejections + s.validator.alarms


def bench_port(tokens: list[str], url: str, key: CommandKey | None, config: ShoeEntry, db: str,
               ask: Callable[[str], Any] = input, progress: bool = True,
               card_timeout: float | None = None,
               baud: int = DEFAULT_BAUD
               ) -> tuple[list[tuple[str, dict[str, Any]]], list[dict[str, Any]]]:
    """A shoe on a port; the technician draws each card when prompted."""
    from sabot.link.answering import first_status, open_port

    port = open_port(url, baud)  # before the database: a port that fails leaves none behind
    try:
        v = Validator(config, db)
    except BaseException:
        port.close()
        raise
    link = HostLink(port, v, key, hello_every=0.3)
    records: list[tuple[str, dict[str, Any]]] = []
    v.on_record = lambda k, r: records.append((k, r))
    try:
        status = first_status(link, url, ANSWER_WAIT)
        assert status is not None
        ended = (f"shoe {status['shoe']} on {url} has ended: start the next one with sabot "
                 "new-shoe, then bench it")
        if status["phase"] == "ended" and not status["unacked_to"] and not records:
            # ended and all of it delivered elsewhere: nothing of it can be benched here (frames
            # this link took and acknowledged while its first status came late are judged below)
            raise SabotError(ended)
        ended_before = status["phase"] == "ended"
        for i, token in enumerate(tokens):
            if status["phase"] == "ended":
                break
            if status["position"] > i:
                continue  # already out of the shoe
            name = "the cut card" if token == CUT else token
            if progress:
                progress_bar(i, len(tokens), f"cards: draw {name}")
            try:
                ask(f"\ndraw card {i + 1}: {name} — press Enter when it is out ")
            except EOFError:
                raise SabotError("stdin is closed: sabot bench --port waits for Enter after each "
                                 "card, so it needs a technician at the terminal") from None
            taken = link.ask_until(lambda st: st["position"] > i or st["phase"] == "ended",
                                   card_timeout or 1e9)
            if taken is None:
                raise SabotError(f"the shoe did not take card {i + 1} ({name})")
            status = taken
        link.drain(DRAIN_WAIT)
        if ended_before and not any(k == "shoe_start" for k, _ in records):
            # ended before this bench, and only its tail still unacknowledged (a validator's
            # last acks on their way): a part of a shoe cannot be benched
            raise SabotError(ended)
    finally:
        link.close()
        v.store.close()
    return records, v.rejections + v.alarms


def ask_on_stderr(prompt: str) -> str:
    """input(), with the prompt on stderr: stdout carries only the verdicts (--json)."""
    sys.stderr.write(prompt)
    sys.stderr.flush()
    line = sys.stdin.readline()
    if not line:
        raise EOFError
    return line


def run_bench(shoe_file: str, port: str | None = None, key_file: str | None = None,
              db: str | None = None, as_json: bool = False,
              ask: Callable[[str], Any] = ask_on_stderr,
              baud: int = DEFAULT_BAUD, registry: str | None = None,
              shoe_id: int | None = None) -> tuple[bool, list[tuple[int | None, str, str]]]:
    from sabot.virtual.demo import load_shoe

    tokens = load_shoe(shoe_file)  # an impossible, empty or too short shoe: refused before a run
    expected = rules.deal_shoe(tokens)
    if port:
        from sabot.registry import Registry

        config = Registry.load(registry, must_exist=True).pick(shoe_id)
        key = keys.load(key_file) if key_file else None  # acknowledgements only
        records, rejections = bench_port(tokens, port, key, config, db or "sabot.db", ask,
                                         progress=not as_json, baud=baud)
    else:
        records, rejections = bench_virtual(tokens, progress=not as_json)
    if not as_json:
        sys.stderr.write("\n")
    verdicts = judge(expected, records, rejections)
    passed = all(v == "PASS" for _, v, _ in verdicts) and bool(verdicts)
    return passed, verdicts

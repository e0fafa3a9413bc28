"""The main job: a virtual shoe streams signed results over a serial link to the validator.

Also `sabot deal` (the same path, printing the rounds the firmware produced) and `sabot board`."""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

from sabot import keys
from sabot.audit.cosign import Cosigner
from sabot.audit.records import contract_round
from sabot.audit.replay import open_capture
from sabot.audit.validator import Validator
from sabot.errors import NotVerified, SabotError
from sabot.game import baccarat21 as b21
from sabot.game import rules
from sabot.game.cards import read_shoe_file, shuffled_shoe
from sabot.keys import CommandKey
from sabot.link.host import HostLink
from sabot.link.session import COSIGN_WAIT
from sabot.link.transport import DEFAULT_BAUD
from sabot.protocol import PH_ENDED, PH_HELD, shoe_id_text
from sabot.registry import Registry, ShoeEntry
from sabot.virtual.board import VirtualBoard
from sabot.virtual.dealer import Dealer
from sabot.virtual.element import SIGN_MS
from sabot.virtual.provisioning import provision, set_variant

DRAIN_WAIT = 10.0  # seconds for the shoe to deliver what it still holds once the dealing is over
# seconds the dealer waits for the shoe to show it has started the next shoe, however loaded the
# host (dealing on before it shows would deal the next shoe file's cards into the ended one)
NEW_SHOE_WAIT = 30.0


class Session:
    """Board + dealer + validator over a real pyserial link (socket://)."""

    def __init__(self, tokens: list[str], key: CommandKey, db: str, flash_dir: str,
                 capture: str | None = None, progress: Callable[..., None] | None = None,
                 baud: int = DEFAULT_BAUD, config: ShoeEntry | None = None,
                 on_alarm: Callable[[dict[str, Any]], None] | None = None,
                 sign_ms: int = SIGN_MS, board: str = "virtual", code: str | None = None,
                 chunk: int = 0, cosigner: Cosigner | None = None, seed: int | None = None,
                 mistakes: float = 0.0) -> None:
        """`key` is the host command key; the virtual shoe in `flash_dir` is provisioned for it
        (kept when it already is) and its result key registered in `config` (a fresh entry when
        None: the caller writes the registry). `board`, `code`, `chunk`: which board's code runs
        (VirtualBoard)."""
        self.board_name, self.code, self.chunk = board, code, chunk
        self.tokens = tokens
        self.key = key
        self.flash_dir = flash_dir
        self.sign_ms = sign_ms
        shoe_id, version, pem = provision(flash_dir, key, config.shoe_id if config else None)[:3]
        self.config = config or ShoeEntry(shoe_id)
        self.config.add_public_key(version, pem)
        self.records: list[tuple[str, dict[str, Any]]] = []
        # before the database: a capture that cannot be written leaves none behind
        self.capture = open_capture(capture)
        self.validator = Validator(self.config, db, on_record=self._record, on_alarm=on_alarm,
                                   cosigner=cosigner)
        self.progress = progress
        self.baud = baud
        self.board: VirtualBoard | None = None
        self.link: HostLink | None = None
        self.error: BaseException | None = None
        self.shoe_no: int | None = None
        self.seed, self.mistakes = seed, mistakes  # blackjack: its dealer's
        self.dealer: Any = None

    def _record(self, kind: str, rec: dict[str, Any]) -> None:
        self.records.append((kind, rec))
        if kind == "shoe_start":
            self.shoe_no = rec["shoe"]

    def start_board(self) -> tuple[VirtualBoard, HostLink]:
        set_variant(self.flash_dir, self.config.variant_byte, self.config.decks,
                    self.config.rule_bytes)
        self.board = VirtualBoard(self.flash_dir, sign_ms=self.sign_ms, board=self.board_name,
                                  code=self.code, chunk=self.chunk).start()
        if self.link is None:
            self.link = HostLink(self.board.url, self.validator, self.key, self.capture,
                                 baud=self.baud)
        else:
            self.link.reconnect()
        return self.board, self.link

    def ensure_new_shoe(self, board: VirtualBoard, link: HostLink) -> None:
        """A board whose last shoe has ended needs the host's new-shoe command before dealing.
        The shoe takes a signed command only while its element is free (one checking an
        acknowledgement, on a loaded host, refuses it with a count and no frame): sent again,
        each time with the counter of a fresh status, until the shoe shows its new shoe."""
        if not board.wait(lambda s: True, NEW_SHOE_WAIT):
            raise SabotError(f"the shoe showed nothing within {NEW_SHOE_WAIT:g} s")
        end = time.monotonic() + NEW_SHOE_WAIT
        sent = 0  # the counter the last new-shoe carried (0: none sent)
        mark = len(self.records)
        while board.indicator and board.indicator[0] == PH_ENDED:
            refused = [r for k, r in self.records[mark:] if k == "command_rejected"]
            if refused:
                raise SabotError(f"the shoe refused new-shoe ({refused[0]['reason']})")
            if time.monotonic() >= end:
                raise SabotError(f"the shoe did not show a new shoe within {NEW_SHOE_WAIT:g} s "
                                 "of the host's new-shoe commands")
            st = link.ask(min(5.0, max(0.1, end - time.monotonic())))
            if st is not None and st["host_counter"] < sent:
                sent = 0  # not taken: its counter is still to come
            if not sent:  # (taken, it is under way: not sent again)
                link.new_shoe()
                sent = link.counter
            board.wait(lambda s: s[0] != PH_ENDED, min(3.0, max(0.1, end - time.monotonic())))

    def run(self) -> None:
        board, link = self.start_board()
        self.ensure_new_shoe(board, link)
        if self.config.game == "blackjack":
            from sabot.virtual.blackjack_dealer import TableDealer

            self.dealer = TableDealer(board, self.tokens, self.config.dealer,
                                      self.config.hole_card, self.seed, self.mistakes)
        else:
            self.dealer = Dealer(board, self.tokens)
        dealer = self.dealer
        finished = threading.Event()

        def deal() -> None:
            try:
                dealer.deal()
            except Exception as e:
                self.error = e
            finished.set()

        threading.Thread(target=deal, daemon=True).start()
        last_report = 0.0
        while not finished.is_set():
            link.pump()
            if self.progress and time.monotonic() - last_report > 0.2:
                last_report = time.monotonic()
                self.progress(self)
        if self.error:
            raise self.error
        link.drain(DRAIN_WAIT)
        link.checkpoint()  # the shoe's own head of its log, checked against what was stored
        self.validator.store_cosignatures(wait=COSIGN_WAIT)  # and the witnesses' answers
        if self.progress:
            self.progress(self, final=True)

    def close(self) -> None:
        if self.link:
            self.link.close()
        if self.board:
            self.board.stop()
        if self.capture:
            self.capture.close()
        self.validator.store.close()  # and its lock: the store is another's to open now

    def rounds(self) -> list[dict[str, Any]]:
        return [contract_round(r) for k, r in self.records if k == "result"]

    def summary(self) -> dict[str, Any]:
        v = self.validator.summary()
        if self.config.game == "blackjack":
            return dict(self.blackjack_summary(), shoe=self.shoe_no, verified=v["verified"],
                        rejected=v["rejected"], irregularities=v["irregularities"],
                        resent=v["resent"], rejections=v["rejections"], alarms=v["alarms"],
                        checkpoint=v["checkpoint"], cosigned=v["cosigned"])
        if self.config.game == b21.GAME:
            expected = b21.deal_shoe(self.tokens, self.config.rules21_rules, self.shoe_no or 1)
        else:
            expected = rules.deal_shoe(self.tokens, shoe=self.shoe_no or 1)
        stored = self.rounds()
        lost = sum(1 for r in expected if r not in stored)
        return {"shoe": self.shoe_no, "rounds": len(stored), "expected_rounds": len(expected),
                "verified": v["verified"], "rejected": v["rejected"],
                "irregularities": v["irregularities"], "lost": lost, "resent": v["resent"],
                "rejections": v["rejections"], "alarms": v["alarms"],
                "checkpoint": v["checkpoint"], "cosigned": v["cosigned"]}


    def blackjack_summary(self) -> dict[str, Any]:
        """Every verified round settled by the registry's table (each offered side wager at each
        seat of the round, $5), and held to what the table really dealt (the dealer's truth):
        a round the shoe got otherwise than the table and that settles otherwise, or one the
        table never confirmed, is `wrong`."""
        from sabot.game.blackjack import round_of
        from sabot.game.settle import settle

        truth = self.dealer.truth if self.dealer else {}
        table = self.config.table_config()
        results = [r for k, r in self.records if k == "blackjack_result"]
        kept = [r for r in results if not r["voided"]]
        wrong = won = 0
        for rec in kept:
            t = truth.get(rec["round"])
            request = {"table": table, "meters": {"hit_and_run": 150_000,
                                                  "straight_jack": 600_000},
                       "wagers": [{"seat": s, "wager": w, "amount_cents": 500}
                                  for s in rec["seats"] for w in table["side_wagers"]]}
            got = settle(dict(request, round=round_of(rec)))
            won += sum(x["win_cents"] for x in got["settlements"])  # every wager's win
            if t is None or t["status"] != "confirmed" or got != settle(dict(
                    request, round=round_of(dict(rec, seats=t["seats"], events=t["events"])))):
                wrong += 1
        confirmed = {r for r, t in truth.items() if t["status"] == "confirmed"}
        lost = len(confirmed - {r["round"] for r in kept})
        return {"game": "blackjack", "rounds": len(kept), "expected_rounds": len(confirmed),
                "voided": len(results) - len(kept), "settled": len(kept), "wrong": wrong,
                "won_cents": won, "lost": lost}


def load_tokens(shoe: str | None, seed: int | None) -> list[str]:
    if shoe:
        return load_shoe(shoe)
    return shuffled_shoe(8, seed)


def load_shoe(path: str, decks: int = 8) -> list[str]:
    """A shoe file that can be dealt: no more copies of a card than `decks` decks hold, not empty,
    and long enough for the burn and one round (the checks `analyze --seen` makes)."""
    from sabot.game.cards import BURN_VALUES, CUT, RANKS

    tokens = read_shoe_file(path)
    cards = [t for t in tokens if t != CUT]
    if not cards:
        raise SabotError(f"{path}: the shoe file holds no cards")
    from collections import Counter

    for card, n in sorted(Counter(cards).items()):
        if n > decks:
            raise SabotError(f"{path}: {n} copies of {card}, but {decks} decks hold only "
                             f"{decks}: an impossible shoe")
    burn = 1 + BURN_VALUES[cards[0][0]] if cards[0][0] in RANKS else 1
    if len(cards) < burn + 4:
        raise SabotError(f"{path}: {len(cards)} cards is too short a shoe: the burn takes "
                         f"{burn} and a round at least 4 more")
    return tokens


def progress_line(session: Session, final: bool = False) -> None:
    ind = session.board.indicator if session.board else None
    pos = ind[2] if ind else 0
    v = session.validator.counts
    rounds = sum(k in ("result", "blackjack_result") for k, _ in session.records)
    sys.stderr.write(f"\rdealing: card {pos}/{len(session.tokens)}  rounds {rounds}  "
                     f"verified frames {v['verified']}  rejected {v['rejected']}   ")
    if final:
        sys.stderr.write("\n")
    sys.stderr.flush()


def run_demo(shoe: str | None = None, seed: int | None = None, db: str = "sabot.db",
             key_file: str = "sabot.key", capture: str | None = None,
             quiet: bool = False, registry: str | None = None,
             on_alarm: Callable[[dict[str, Any]], None] | None = None,
             board: str = "virtual", code: str | None = None,
             cosigner: Cosigner | None = None, game: str = "baccarat",
             mistakes: float = 0.0) -> tuple[dict[str, Any], Session]:
    """`board`: "virtual", or "rpi_pico" / "esp32" with `code`, that board's built tree, run
    over the emulated machine. `game` "blackjack": a six-deck blackjack shoe dealt to a table of
    basic-strategy players (`mistakes`: the share of rounds with a press missed or doubled)."""
    blackjack = game == "blackjack"
    if blackjack:
        tokens = load_shoe(shoe, 6) if shoe else shuffled_shoe(6, seed)
        table: dict[str, Any] = {"game": "blackjack", "decks": 6,
                                 "side_wagers": ["hit_and_run", "straight_jack", "house_money"]}
    elif game == b21.GAME:
        tokens = load_tokens(shoe, seed)
        table = {"game": b21.GAME, "side_wagers": ["tie", "player_bonus", "banker_bonus"]}
    else:
        tokens = load_tokens(shoe, seed)
        table = {}
    from sabot.paths import micropython

    micropython()  # missing: said before a command key is made for nothing
    existed = os.path.exists(key_file)
    key = keys.load_or_create(key_file)
    if not existed and not quiet:
        print(f"created command key {key_file} (mode 600)", file=sys.stderr)
    reg = Registry.load(registry)
    flash_dir = db + ".flash"
    # the demo's shoe is provisioned for this command key (kept when it is) and registered like
    # any other, with its result key
    shoe_id, version, pem, serial, first = provision(flash_dir, key)
    kept: dict[str, Any] = {"first_checkpoint": first} if first else {}
    name = "demo" if game == "baccarat" else f"demo-{game}"
    entry, _ = reg.register(shoe_id, version, pem, table="" if shoe_id in reg.shoes else name,
                            serial=serial, **kept, **table)
    if first and cosigner is not None:  # a fresh shoe: its key to the witnesses first
        from sabot.audit.cosign import bind

        try:
            bind(cosigner.witnesses, cosigner.quorum, entry, cosigner.say)
            reg.witnessed(shoe_id)  # a witnessed table now, as `sabot bind` makes it
            entry = reg.get(shoe_id)
        except SabotError as e:  # the demo goes on: said, as a witness that is not reached
            cosigner.say(str(e))
    t0 = time.monotonic()
    session = Session(tokens, key, db, flash_dir, capture, None if quiet else progress_line,
                      config=entry, on_alarm=on_alarm, board=board, code=code,
                      cosigner=cosigner, seed=seed, mistakes=mistakes)
    try:
        session.run()
    finally:
        session.close()
    s = session.summary()
    s["seconds"] = round(time.monotonic() - t0, 2)
    return s, session


def run_deal(shoe_file: str) -> list[tuple[str, dict[str, Any]]]:
    """Deal a shoe file through the firmware on the virtual board; the round records it made."""
    tokens = load_shoe(shoe_file)
    with tempfile.TemporaryDirectory(prefix="sabot-deal-") as tmp:
        key = keys.create(os.path.join(tmp, "command.pem"))
        session = Session(tokens, key, os.path.join(tmp, "audit.db"), os.path.join(tmp, "flash"))
        try:
            session.run()
        finally:
            session.close()
        if session.validator.counts["rejected"]:
            reasons = sorted({r["reason"] for r in session.validator.rejections})
            raise NotVerified(f"the validator rejected frames from the shoe: {', '.join(reasons)}")
        return [(k, contract_round(r) if k == "result" else r) for k, r in session.records]


def show_on_stdout(board: VirtualBoard) -> None:
    """The board's lamps and display as lines on stdout, as a technician watching the shoe sees
    them (docs/COMMANDS.md, `sabot board`)."""
    from sabot.virtual.dealer import describe_show

    blackjack = flash_table(board.flash_dir).get("game") == "blackjack"

    def show(what: str, values: tuple[int, ...]) -> None:
        try:
            print(describe_show(what, values, blackjack), flush=True)
        except (BrokenPipeError, ValueError):
            pass  # nobody reads the board's stdout any more

    board.on_show = show


def wait_for_resolution(board: VirtualBoard, state: tuple[int, ...]) -> None:
    """An irregularity holds the shoe: the technician resolves it from the host (sabot resolve);
    the simulated dealer waits, as a dealer waits for the supervisor."""
    from sabot.protocol import IRREGULARITIES

    kind = IRREGULARITIES[state[5]] if state[5] < len(IRREGULARITIES) else state[5]
    print(f"virtual board: {kind} holds the shoe; waiting for a resolution (sabot resolve)",
          file=sys.stderr, flush=True)
    while not board.wait(lambda s: s[0] != PH_HELD, 1.0):
        if not board.alive():
            return


def deal_shoes(board: VirtualBoard, shoes: list[list[str]]) -> None:
    """The simulated dealer draws each shoe in turn; between shoes it waits, as a dealer does, for
    the host's new-shoe (the shoe leaves its ended phase). A shoe is taken off the front of
    `shoes` once it has ended; when the board goes off (a reset after an update) the dealer
    stops, and the rest — the shoe it was dealing, resumed at the shoe's own position — is dealt
    after the next power-on."""
    while shoes:
        board.wait(lambda s: True, 10)
        if board.indicator and board.indicator[0] == PH_ENDED:
            print("virtual board: the shoe has ended; waiting for the host's new-shoe "
                  "(sabot new-shoe)", file=sys.stderr, flush=True)
            while not board.wait(lambda s: s[0] != PH_ENDED, 1.0):
                if not board.alive():
                    return
        print(f"virtual board: dealing a shoe file ({len(shoes)} to go)", file=sys.stderr,
              flush=True)
        table = flash_table(board.flash_dir)
        if table.get("game") == "blackjack":
            # a table of basic-strategy players; the simulated supervisor voids a held round
            from sabot.virtual.blackjack_dealer import TableDealer

            TableDealer(board, shoes[0], table["dealer"], table["hole_card"]).deal()
            if not board.alive():
                return
        else:
            dealer = Dealer(board, shoes[0], on_held=wait_for_resolution)
            while dealer.step():
                if not board.alive():
                    return
        shoes.pop(0)
    print("virtual board: the last shoe file has ended; the board stays up until Ctrl-C",
          file=sys.stderr, flush=True)


def flash_table(flash_dir: str) -> dict[str, Any]:
    """The game a shoe's flash directory was provisioned for (its `variant`: the variant byte,
    the deck count, 21 Baccarat's rule bytes); {} for none, or for bytes no game has."""
    from sabot.protocol import decode_variant

    try:
        with open(os.path.join(flash_dir, "variant"), "rb") as f:
            raw = f.read()
    except OSError:
        return {}
    try:
        return decode_variant(raw[0], raw[2:]) if raw else {}
    except ValueError:
        return {}


def run_board_root(host: str, port: int, root: str, shoes: list[list[str]] | None = None
                   ) -> None:
    """A virtual board whose filesystem is `root` (code at the top, data in root/data), as a Pico's
    is, and whose element is `root.element` (an empty or missing one: a factory-fresh chip). As a
    Pico's main.py decides (firmware/main.py): only while its element is blank does its port serve
    the MicroPython REPL (mpremote deploys and `sabot provision --port` provisions through it; the
    session ends with a hard reset, and it boots again, running whatever was deployed). A
    provisioned board runs root/main.py — a failed start tilts, a reset (after an update) boots
    again — and never offers the REPL, not even with no firmware at all."""
    from sabot.virtual import factory
    from sabot.virtual.board import RESET_EXIT, Blank
    from sabot.virtual.element import Element, element_store
    from sabot.virtual.repl_bridge import serve_repl

    os.makedirs(root, exist_ok=True)  # an empty one: a blank shoe's filesystem
    store = element_store(root)  # outside the board's filesystem: a factory-fresh chip if new
    os.makedirs(store, mode=0o700, exist_ok=True)
    while True:
        blank = factory.state(store) in ("blank", "configured")
        if blank:
            print(f"virtual board: REPL on socket://{host}:{port} (a blank shoe: deploy, then "
                  "provision)", file=sys.stderr, flush=True)
            element = Element(store)
            try:
                address = element.start()
                serve_repl(host, port, root, address)
            finally:
                element.stop()
            continue
        if not os.path.exists(os.path.join(root, "main.py")):
            print(f"virtual board: a provisioned element and no firmware in {root}: nothing runs "
                  "and no REPL is offered (sabot never leaves a provisioned board without "
                  "main.py: an update replaces it by a rename)", file=sys.stderr, flush=True)
            while True:
                time.sleep(3600)
        board = VirtualBoard(os.path.join(root, "data"), host, port, code=root, element=store)
        show_on_stdout(board)
        try:
            board.start()
        except Blank:
            continue
        print(f"virtual board: firmware running on socket://{host}:{port}", file=sys.stderr,
              flush=True)
        try:
            if shoes:
                deal_shoes(board, shoes)  # what it could not deal before a reset: after it
            status = board.wait_off()
        finally:
            board.stop()
        if status != RESET_EXIT:
            return  # powered off (the dealer channel closed)
        print("virtual board: reset: booting again", file=sys.stderr, flush=True)


def _provision_board(flash_dir: str, key: CommandKey, registry: str | None,
                     store: str | None = None) -> None:
    """`sabot board --key FILE`: provision the virtual shoe for this command key (kept when it
    is) and register its result key."""
    from sabot.virtual.element import element_store
    from sabot.virtual.factory import attested

    shoe_id, version, pem, serial, first = provision(flash_dir, key, store=store)
    attestation, certificate = attested(store or element_store(flash_dir), shoe_id, version)
    reg = Registry.load(registry)
    kept: dict[str, Any] = {"first_checkpoint": first} if first else {}
    if reg.register(shoe_id, version, pem, certificate, attestation_key=attestation,
                    serial=serial, **kept)[1]:
        print(f"virtual shoe {shoe_id_text(shoe_id)} registered in {reg.path}", file=sys.stderr)


def run_board(listen: tuple[str, int], flash_dir: str, shoe: list[str] | None = None,
              key_file: str | None = None, code: str | None = None, root: str | None = None,
              registry: str | None = None,
              board_name: str = "virtual") -> None:
    """Run the virtual board, its host link on `listen` (host, port), until stopped (Ctrl-C);
    with --shoe a simulated dealer draws those shoes, one after another, each after the host's
    new-shoe. `board_name` "rpi_pico" / "esp32": that board's code tree `code` over the emulated
    machine."""
    host, port = listen
    if root and board_name != "virtual":
        raise SabotError("--root runs the virtual board; an emulated board takes --flash DIR "
                         "(and --code DIR)")
    shoes = [load_shoe(f) for f in shoe or []]  # every file checked before the board starts
    _check_listen(host, port)
    if root:
        if key_file:
            from sabot.virtual.element import element_store

            os.makedirs(os.path.join(root, "data"), exist_ok=True)
            _provision_board(os.path.join(root, "data"), keys.load_or_create(key_file), registry,
                             element_store(root))
        return run_board_root(host, port, root, shoes)
    if key_file:
        _provision_board(flash_dir, keys.load_or_create(key_file), registry)
    elif not os.path.exists(os.path.join(flash_dir, "identity")):
        raise SabotError(f"no identity in {flash_dir}: provision the virtual shoe (sabot "
                         "provision --flash DIR, or --key FILE here)")
    board = VirtualBoard(flash_dir, host, port, code=code, board=board_name)
    show_on_stdout(board)
    board.start()
    print(f"virtual board listening on {board.url} (flash {flash_dir}); Ctrl-C stops it",
          file=sys.stderr, flush=True)
    try:
        while True:
            if shoes:
                deal_shoes(board, shoes)  # resumes where the shoe's own log says it stood
            while board.alive():
                time.sleep(0.2)
            if not _powered_on_again(board):
                return
    finally:
        board.stop()


def _powered_on_again(board: VirtualBoard) -> bool:
    """A board whose firmware ended: after machine.reset() (a crash: the shoe resets, as a Pico
    does) it is powered on again and said so; any other end is one line and a non-zero exit."""
    from sabot.virtual.board import RESET_EXIT

    code = board.proc.returncode if board.proc is not None else None
    if code == RESET_EXIT:
        print("virtual board: the shoe reset (machine.reset()); powering it on again",
              file=sys.stderr, flush=True)
        board.start()
        return True
    if code in (0, None):
        return False
    raise SabotError(f"the virtual board's firmware ended with exit status {code} (see its "
                     "lines above)")


def _check_listen(host: str, port: int) -> None:
    """A port already in use, or a host that is not this machine's, in one line before any board
    starts."""
    import socket

    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind((host, port))
    except OSError as e:
        raise SabotError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    finally:
        s.close()

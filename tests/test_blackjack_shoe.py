"""The shoe's blackjack dealing mode, in-process under CPython: ShoeApp with a
blackjack variant, the element the real driver on the emulated chip (tests/kit/fw.py), fed by the
simulated table of basic-strategy players (virtual/blackjack_dealer.py): the bet spots as each
round's first card leaves, every card, the dealer's presses, and the confirm once the dealer has
checked the shoe's hands against the table. Its frames are checked with the host's independent
follower (game/blackjack.py check_result); a dealer's missing or extra press ends in an
irregularity and a voided round, never in a result that settles otherwise than the table."""

import random
import re
import sys

import pytest

from sabot import protocol
from sabot.game import blackjack, blackjack_settle, cards
from sabot.virtual.blackjack_dealer import deal_round

from kit import FIRMWARE, ROOT
from kit.fw import Link, ProvisionedShoe, split

sys.path.insert(0, str(FIRMWARE))

from shoe import frames
from shoe.app import ShoeApp
from shoe.dealing import PH_ENDED, PH_HELD
from shoe.sensor import encode
from shoe.store import Flash

PRESS = {name: kind for kind, name in protocol.PRESSES.items()}  # the shoe's press kinds


class Table(Link):
    """The link, and the display the dealer reads: the hands the shoe shows at the dealer's
    hand's end (`placed`)."""

    def __init__(self):
        super().__init__()
        self.shown = None

    def placed(self, rnd):
        self.shown = ["dealer" if rnd.hand_of[i] == 0xFE else rnd.hand_of[i]
                      for i in range(rnd.cards)]


def variant(rule="s17", hole=True):
    return frames.V_BLACKJACK | (frames.V_H17 if rule == "h17" else 0) | (
        0 if hole else frames.V_NO_HOLE)


def start(tmp_path, rule="s17", hole=True, decks=6):
    shoe = ProvisionedShoe(tmp_path, variant=variant(rule, hole), decks=decks)
    table = Table()
    app = ShoeApp(Flash(str(shoe.flash)), table, table, shoe.element())
    app.start()
    return shoe, table, app


def settle_each(drain):
    while drain.busy():
        drain.service()


def card(app, token):
    for b in encode(ord("C")) if token == "CUT" else encode(ord("R"), token.encode()):
        app.sensor_byte(b)
    app.exit_edge()
    settle_each(app)


def bets(seats):
    return sum(1 << (s - 1) for s in seats)


def play(app, table, events, seats):
    """The dealer deals `events` (what the shoe is given: a mistake may be among them); stops
    at a held shoe. True when the shoe holds."""
    app.bets = bets(seats)
    for kind, what in events:
        if kind in ("card", "cut"):
            card(app, what)
        else:
            app.blackjack_press(PRESS[what])
            settle_each(app)
        if app.shoe.phase == PH_HELD:
            return True
    return False


def results(table):
    out = []
    for f in split(table.data):
        if f[1] == frames.T_BLACKJACK_RESULT:
            out.append(protocol.decode_payload(protocol.parse(f))[1])
    return out


def settlement(rec, rule, hole, decks):
    """Every side wager at every seat, $5 each: what the table would pay for this round."""
    got = blackjack.follow_round(rec["seats"], rec["events"], rule, hole)
    hands = [{"seat": h["seat"], "cards": h["cards"], "split": h["split"]} for h in got["hands"]]
    wagers = [{"seat": s, "wager": w, "amount_cents": 500} for s in rec["seats"]
              for w in ("hit_and_run", "straight_jack", "house_money")]
    return blackjack_settle.settle({
        "table": {"game": "blackjack", "decks": decks, "dealer": rule, "hole_card": hole,
                  "side_wagers": ["hit_and_run", "straight_jack", "house_money"]},
        "round": {"dealer": got["dealer"], "hands": hands},
        "meters": {"hit_and_run": 150000, "straight_jack": 600000}, "wagers": wagers})


def deal_shoe(app, table, rng, rule, hole, decks, mistakes=0.0):
    """A whole shoe dealt as a careful dealer does, a press missed or doubled in a share
    `mistakes` of the rounds: (the truth of each round, by number; the rounds voided)."""
    tokens = cards.shuffled_shoe(decks, seed=rng.randrange(1 << 30))
    cut = rng.randrange(len(tokens) * 2 // 3, len(tokens) * 5 // 6)
    tokens = [t for t in tokens if t != "CUT"]
    tokens.insert(cut, "CUT")
    it = iter(tokens)
    card(app, next(t for t in it if t != "CUT"))  # the burn card
    truth = {}
    voided = set()
    while app.shoe.phase != PH_ENDED:
        seats = sorted(rng.sample(range(1, 8), rng.randint(1, 7)))
        cut = []
        try:
            events = deal_round(_skip_cut(it, cut), seats, rule, hole)
        except StopIteration:
            break
        given = list(events)
        if cut:  # the cut card came out before the round's card number cut[0]
            at = [i for i, (k, _) in enumerate(given) if k == "card"][cut[0]]
            given.insert(at, ("cut", "CUT"))
        presses = [i for i, (k, _) in enumerate(given) if k == "press"]
        if presses and rng.random() < mistakes and not cut:
            i = rng.choice(presses)
            if rng.random() < 0.5:
                del given[i]  # a press missed
            else:
                given.insert(i, given[i])  # a press made twice
        number = app.shoe.round_no + 1
        truth[number] = (seats, events)
        held = play(app, table, given, seats)
        if not held:
            want = blackjack.follow_round(seats, events, rule, hole)["placed"]
            want = [p for (k, _), p in zip(events, want) if k == "card"]
            if table.shown is not None and table.shown == want:
                app.confirm_button()  # the shoe's hands are the table's
            elif table.shown is not None:
                app.supervisor(3)  # disputed: void
            else:
                assert mistakes  # the shoe shows every round's hands when its cards are out
                app.confirm_button()  # the table's round is over, the shoe's is not: held
        table.shown = None
        settle_each(app)
        if app.shoe.phase == PH_HELD:
            app.supervisor(3)  # the supervisor voids the round
            voided.add(number)
            settle_each(app)
        assert app.shoe.phase != PH_HELD
    return truth, voided


def _skip_cut(it, cut):
    """The round's cards as they come; where the cut card lies, noted in `cut`."""
    n = 0
    for t in it:
        if t == "CUT":
            cut.append(n)
            continue
        n += 1
        yield t


@pytest.mark.parametrize("rule,hole", [("s17", True), ("h17", False)])
def test_a_blackjack_shoe_deals_each_round_as_the_host_follows_it(tmp_path, rule, hole):
    _, table, app = start(tmp_path, rule, hole)
    truth, voided = deal_shoe(app, table, random.Random(rule), rule, hole, 6)
    assert app.shoe.phase == PH_ENDED and not voided
    got = results(table)
    assert [r["round"] for r in got] == sorted(truth) and len(got) > 8
    for rec in got:
        seats, events = truth[rec["round"]]
        assert rec["seats"] == seats and rec["events"] == events and not rec["voided"]
        assert (rec["dealer_rule"], rec["hole_card"]) == (rule, hole)
        assert blackjack.check_result(rec)[1] is None
    sent = split(table.data)
    start_frame = next(f for f in sent if f[1] == frames.T_SHOE_START)
    assert protocol.decode_variant(start_frame[frames.HEADER_LEN + 3]) == {
        "game": "blackjack", "dealer": rule, "hole_card": hole}
    end = next(f for f in sent if f[1] == frames.T_SHOE_END)
    inventory = protocol.decode_payload(protocol.parse(end))[1]
    dealt = sum(sum(1 for k, _ in truth[r][1] if k == "card") for r in truth) + 1  # + the burn
    assert sum(inventory["inventory"].values()) == dealt


def test_a_missing_or_extra_press_ends_in_an_irregularity_never_in_a_wrong_settlement(tmp_path):
    shoe, table, app = start(tmp_path)
    rng = random.Random(7)
    truth, voided = {}, set()
    for no in range(1, 4):
        t, v = deal_shoe(app, table, rng, "s17", True, 6, mistakes=0.5)
        truth.update({(no, r): e for r, e in t.items()})
        voided |= {(no, r) for r in v}
        if no == 3:
            break
        # (the counter: the element's, which each supervisor's resolution moves too)
        for command in (shoe.ack(app.outbox.done),
                        shoe.command(frames.C_NEW_SHOE, counter=app.port.counter + 1)):
            app.host_bytes(command + b"\x00")
            settle_each(app)
        assert app.shoe.shoe_no == no + 1
    got = results(table)
    kept = [r for r in got if not r["voided"]]
    assert voided and {(r["shoe"], r["round"]) for r in got if r["voided"]} == voided
    assert len(kept) > 20 and len(voided) > 10
    for rec in kept:
        seats, events = truth[rec["shoe"], rec["round"]]
        assert blackjack.check_result(rec)[1] is None
        assert settlement(rec, "s17", True, 6) == settlement(
            {"seats": seats, "events": events}, "s17", True, 6)
    kinds = {protocol.decode_payload(protocol.parse(f))[1]["kind"]
             for f in split(table.data) if f[1] == frames.T_IRREGULARITY}
    assert kinds & {"press_refused", "disputed", "card_missing", "card_not_due"}


def follower_state(app):
    bj = app.shoe.bj
    return (app.shoe.phase, app.shoe.round_no, app.shoe.complete, bj.phase, bj.cur, bj.hands,
            bytes(bj.events[: bj.n_events]), bytes(bj.hand_of[: bj.cards]),
            bytes(bj.flags[: bj.hands]), bj.d_count, app.outbox.seq)


def test_a_power_cut_mid_round_boots_to_the_same_round_bet_spots_and_presses_included(tmp_path):
    shoe, table, app = start(tmp_path, "h17", True)
    card(app, "9S")  # the burn card
    it = iter(t for t in cards.shuffled_shoe(6, seed=11) if t != "CUT")
    for seats in ([1, 4, 7], [2, 3], [1, 2, 3, 4, 5, 6, 7]):
        events = deal_round(it, seats, "h17")
        app.bets = bets(seats)
        for kind, what in events:
            if kind == "card":
                card(app, what)
            else:
                app.blackjack_press(PRESS[what])
                settle_each(app)
            app.bets = 0  # the round's seats were taken with its first card
            again = ShoeApp(Flash(str(shoe.flash)), Table(), Table(), shoe.element())
            again.start()
            assert follower_state(again) == follower_state(app)
        app.confirm_button()
        settle_each(app)
    assert [r["seats"] for r in results(table)] == [[1, 4, 7], [2, 3], [1, 2, 3, 4, 5, 6, 7]]


@pytest.mark.board
def test_the_blackjack_shoe_allocates_nothing_on_micropython(mpy, tmp_path):
    """A whole six-deck blackjack shoe, its cut card out of the way (the burn, then rounds), on
    the unix-port MicroPython, the heap locked around every card's, press's and confirm's whole
    path: the follower, the frames and the log allocate nothing."""
    from kit.fw import EmulatorProcess, write_acks

    shoe = ProvisionedShoe(tmp_path, variant=variant("h17", True), decks=6)
    rng = random.Random(24)
    it = iter(t for t in cards.shuffled_shoe(6, seed=24) if t != "CUT")
    stream = bytearray([2, cards.card_index(next(it))])  # the burn card
    rounds = 0
    try:
        while True:
            seats = sorted(rng.sample(range(1, 8), rng.randint(1, 7)))
            events = deal_round(it, seats, "h17")
            stream += bytes([1, bets(seats)])
            for kind, what in events:
                stream += bytes([2, cards.card_index(what)] if kind == "card"
                                else [3, PRESS[what]])
            stream += bytes([4, 0])
            rounds += 1
    except StopIteration:
        pass
    (tmp_path / "events").write_bytes(bytes(stream))
    write_acks(shoe, tmp_path / "acks.bin", 1200)
    em = EmulatorProcess(shoe.store, tmp_path / "el.sock", "--sign-ms", 0, "--ecc-ms", 0,
                         "--cmd-ms", 0)
    try:
        r = mpy(ROOT / "tests" / "mp" / "blackjack_shoe.py", tmp_path / "events", shoe.flash,
                em.spec, tmp_path / "acks.bin")
    finally:
        em.stop()
    assert r.returncode == 0, r.stderr.decode()
    got = {k.decode(): int(v) for k, v in re.findall(rb"(\w+) (\d+)", r.stdout)}
    assert got["alloc_failures"] == 0 and got["element_errors"] == 0
    assert got["rounds"] == got["placed"] == rounds > 10, (got, rounds)  # every round to its end
    assert got["signed"] >= rounds + 2  # shoe start, burn, a result per round


def test_a_disputed_round_is_only_voided_even_after_a_power_cut_between_its_two_records(
        tmp_path):
    """The void-round key on an unconfirmed round logs the dispute, then its voiding: a power cut
    between them boots held as disputed, and no resolution but voiding (or ending the shoe)
    lets the round go on to be confirmed."""
    from shoe.app import IN_DISPUTE

    shoe, _, app = start(tmp_path)
    card(app, "9S")  # the burn
    app.bets = bets([1, 2])
    for token in ("8S", "TD", "7H", "3H", "9C", "TS"):
        card(app, token)
    app.blackjack_press(1)  # seat 1 stands on 17... by mistake: it wanted to stand on 18
    settle_each(app)
    app._input(IN_DISPUTE)  # the supervisor's key: the dispute logged, then the power cut
    settle_each(app)
    again = ShoeApp(Flash(str(shoe.flash)), Table(), Table(), shoe.element())
    again.start()
    assert again.shoe.phase == PH_HELD and again.shoe.ir_kind == 12  # disputed
    again.supervisor(1)  # void card: refused (the hold stays)
    assert again.shoe.phase == PH_HELD
    again.supervisor(3)
    settle_each(again)
    assert again.shoe.phase != PH_HELD and again.shoe.complete
    assert [r["voided"] for r in results(again.link)] == [True]


@pytest.mark.parametrize("when", ["burn", "held between rounds", "held mid-round"])
def test_the_cut_card_ends_a_blackjack_shoe_after_its_round_held_or_not(tmp_path, when):
    """The cut card as the first card (the first round then the last), between rounds while a
    stray press holds the shoe (the shoe ends once the hold is resolved), or mid-round while a
    hold stands (the round goes on, and is the last)."""
    _, table, app = start(tmp_path)
    it = iter(t for t in cards.shuffled_shoe(6, seed=3) if t != "CUT")
    if when == "burn":
        card(app, "CUT")
        app.supervisor(1)  # go on
        settle_each(app)
    card(app, next(it))  # the burn card
    if when == "held between rounds":
        app.blackjack_press(1)  # no round: refused, held
        card(app, "CUT")
        app.supervisor(1)
        settle_each(app)
        assert app.shoe.phase == PH_ENDED and results(table) == []
        return
    events = deal_round(it, [3, 4], "s17")
    app.bets = bets([3, 4])
    for i, (kind, what) in enumerate(events):
        if when == "held mid-round" and i == 5:
            app.blackjack_press(3)  # a split no hand can take here: held
            assert app.shoe.phase == PH_HELD
            card(app, "CUT")
            app.supervisor(1)  # go on
            settle_each(app)
        if kind == "card":
            card(app, what)
        else:
            app.blackjack_press(PRESS[what])
            settle_each(app)
    app.confirm_button()
    settle_each(app)
    assert app.shoe.phase == PH_ENDED and [r["round"] for r in results(table)] == [1]


def test_a_doubled_hand_takes_its_card_before_any_stand():
    """NEXT on a doubled hand before its one card is refused, by the shoe and by the host."""
    from sabot.game.blackjack import follow_round
    from shoe.blackjack import Round

    rnd = Round()
    rnd.begin(1, 0, 1)
    for code in (cards.card_index(c) for c in ("5S", "9H", "6D", "TC")):
        rnd.card(code)
    assert rnd.press(2) and not rnd.press(1)  # double, then a stand before its card: refused
    got = follow_round([1], [("card", "5S"), ("card", "9H"), ("card", "6D"), ("card", "TC"),
                             ("press", "double"), ("press", "next")], "s17")
    assert got["owner"][-2:] == [True, False]


def test_the_shoe_says_the_seat_whose_hand_draws_then_the_dealer_then_the_confirm(tmp_path):
    """What the lamps, the display and a status say is due: the seat (as the table numbers
    them, not the hands' order of play), the dealer, the confirm; the host names them so."""
    _, _, app = start(tmp_path)
    card(app, "9S")  # the burn
    app.bets = bets([2, 6])
    said = []
    for token in ("TS", "5H", "6C", "7D", "4S"):  # seat 2, seat 6, the dealer, seats 2 and 6
        said.append(protocol.blackjack_due(app.shoe.due()))
        card(app, token)
    said.append(protocol.blackjack_due(app.shoe.due()))  # the hole card
    card(app, "QD")  # the dealer's 16
    said.append(protocol.blackjack_due(app.shoe.due()))  # seat 2 stands? its 17: NEXT
    app.blackjack_press(1)
    settle_each(app)
    said.append(protocol.blackjack_due(app.shoe.due()))  # seat 6's 9: it draws
    card(app, "KH")  # 19: NEXT
    app.blackjack_press(1)
    settle_each(app)
    said.append(protocol.blackjack_due(app.shoe.due()))  # the dealer's 16 draws
    card(app, "5C")  # 21
    said.append(protocol.blackjack_due(app.shoe.due()))
    # (before a round's first card none is due: the bet spots open the round with it)
    assert said == ["none", "seat 6", "dealer", "seat 2", "seat 6", "dealer", "seat 2",
                    "seat 6", "dealer", "confirm"]

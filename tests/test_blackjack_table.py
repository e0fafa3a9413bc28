"""A blackjack table end to end: `sabot provision --game blackjack` registers the
table; `sabot demo --game blackjack` deals a six-deck shoe on the virtual board (the firmware on
the unix-port MicroPython, its element the emulator process) to a table of basic-strategy
players, over a real pyserial link to the validator, every round verified, followed again by the
host's own rules and settled; a dealer's missed or doubled presses end in irregularities and
voided rounds, never in a settlement other than the table's; `sabot history` shows the hands,
`sabot settle --table` takes a stored round, and `sabot audit verify` derives the same. The
validator's second opinion is shown against a round the rules deal otherwise."""

import json

import pytest

from sabot.audit.accounts import ShoeAccounts, new_shoe_accounts
from sabot.registry import Registry, ShoeEntry

from kit.browser import as_shown


@pytest.mark.long
@pytest.mark.board
def test_a_blackjack_shoe_is_dealt_verified_and_settled_on_the_virtual_board(cli, tmp_path):
    db, reg = tmp_path / "bj.db", tmp_path / "shoes.json"
    r = cli("demo", "--game", "blackjack", "--seed", "5", "--mistakes", "0.3", "--db", db,
            "--key", tmp_path / "k.pem", "--registry", reg, "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["game"] == "blackjack" and s["rejected"] == 0 and s["alarms"] == []
    assert s["rounds"] == s["settled"] == s["expected_rounds"] > 8 and s["lost"] == 0
    assert s["voided"] >= 2 and s["irregularities"] >= s["voided"]  # the dealer's slips
    assert s["wrong"] == 0  # no round settled otherwise than the table dealt it
    entry = Registry.load(str(reg)).at_table("demo-blackjack")
    assert (entry.game, entry.decks, entry.dealer, entry.hole_card) == ("blackjack", 6, "s17",
                                                                        True)

    history = cli("history", "--db", db).stdout
    lines = [line for line in history.splitlines() if " round " in line]
    assert sum("dealer " in line for line in lines) == s["rounds"]
    assert sum("voided by the supervisor" in line for line in lines) == s["voided"]
    assert "variant=blackjack, s17" in history

    rounds = [json.loads(line) for line in cli("history", "--db", db, "--json").stdout.splitlines()
              if '"blackjack_result"' in line]
    played = next(x for x in rounds if not x["voided"])
    request = {"round": played, "meters": {"hit_and_run": 100_000},
               "wagers": [{"seat": seat, "wager": "hit_and_run", "amount_cents": 500}
                          for seat in played["seats"]]}
    r = cli("settle", "--table", "demo-blackjack", "--registry", reg, stdin=json.dumps(request))
    assert r.returncode == 0, r.stderr
    settled = json.loads(r.stdout)["settlements"]
    assert sorted(x["seat"] for x in settled) == played["seats"]
    voided = next(x for x in rounds if x["voided"])
    r = cli("settle", "--table", "demo-blackjack", "--registry", reg,
            stdin=json.dumps(dict(request, round=voided)))
    assert r.returncode == 2 and "a voided round settles no wager" in r.stderr
    for bad, said in ((dict(played, placed=[0] * len(played["placed"])),
                       "the shoe's hands are not the rules'"),
                      (dict(played, shoe_id=played["shoe_id"] ^ 1), "not by table"),
                      (dict(played, events=[["card", "next"]] + played["events"][1:]),
                       "unknown card 'next'"),
                      (dict(played, hole_card="x"), "hole_card true or false")):
        r = cli("settle", "--table", "demo-blackjack", "--registry", reg,
                stdin=json.dumps(dict(request, round=bad)))
        assert r.returncode == 2 and said in r.stderr and len(r.stderr.splitlines()) == 1, (
            said, r.stderr)

    r = cli("audit", "verify", "--db", db, "--registry", reg)
    assert r.returncode == 0 and f"{s['rounds']} rounds" in r.stdout, r.stdout + r.stderr

    # the scoreboard: the newest round's dealer's hand and each seat's, as followed by the host
    from sabot.game.blackjack import round_of, total_text
    from sabot.pit.pages import Pit, dashboard_html, scoreboard_html

    pit = Pit(str(db), [entry])
    pit.refresh()
    board = scoreboard_html(pit, pit.tables()[0])
    newest = rounds[-1]
    assert f"Round {newest['round']}" in board
    if not newest["voided"]:
        import re

        text = re.sub(r"<(?!/?(td|tr|th)\b)[^>]*>", "", board)  # the cells' text, tags of theirs
        dealt = round_of(newest)
        assert f"<td>{as_shown(dealt['dealer'])}</td>" in text
        for hand in dealt["hands"]:
            row = (f'<tr data-seat="{hand["seat"]}"><th>Seat {hand["seat"]}</th><td>'
                   f"{as_shown(hand['cards'])}</td>")
            assert row in text
        assert f"dealer {total_text(dealt['dealer'], True)}" in dashboard_html(pit)
    in_a_browser(tmp_path, db, reg, newest)



def in_a_browser(tmp_path, db, reg, newest):
    """`sabot serve` on the store, the blackjack scoreboard in Debian's headless Chromium: the
    newest round's dealer's hand and each seat's as drawn, under the pages' Content-Security-
    Policy (nothing refused)."""
    import subprocess

    from sabot.game.blackjack import round_of

    from kit import SABOT
    from kit.browser import browser, csp_violations
    from kit.procs import free_port_for_tests, wait_until_served

    url = f"http://127.0.0.1:{free_port_for_tests()}"
    proc = subprocess.Popen([*SABOT, "serve", "--db", str(db), "--registry", str(reg),
                             "--listen", url.removeprefix("http://")], stderr=subprocess.PIPE)
    driver = browser(tmp_path)
    try:
        if proc.poll() is not None:
            raise AssertionError(proc.stderr.read().decode())
        wait_until_served(url + "/")
        driver.get(url + "/table/demo-blackjack")
        rows = driver.execute_script(
            "return [...document.querySelectorAll('#hands tr')].map(r => [...r.children]"
            ".map(c => c.innerText))")
        if newest["voided"]:
            assert rows == []
        else:
            dealt = round_of(newest)
            assert rows[0][:2] == ["Dealer", as_shown(dealt["dealer"])]
            assert [r[:2] for r in rows[1:]] == [[f"Seat {h['seat']}", as_shown(h["cards"])]
                                                 for h in dealt["hands"]]
        # the side wagers the registry offers, each with its paytable as the settlement holds it
        from sabot.game import blackjack_settle as bj
        from sabot.registry import Registry

        offered = next(e for e in Registry.load(str(reg)).shoes.values()
                       if e.table == "demo-blackjack").side_wagers
        pays = dict(driver.execute_script(
            "return [...document.querySelectorAll('#payouts li')]"
            ".map(e => [e.dataset.wager, e.dataset.pays])"))
        assert list(pays) == offered and offered, pays
        if "hit_and_run" in pays:
            assert f"7 cards {bj.HIT_AND_RUN_FOR_ONE[7]} for 1" in pays["hit_and_run"], pays
        if "house_money" in pays:
            assert f"A K suited {bj.house_money_hand(['AS', 'KS'], 6)[1]} to 1" in pays[
                "house_money"], pays
        assert csp_violations(driver) == []
    finally:
        driver.quit()
        proc.terminate()
        proc.wait(10)


def test_provisioning_a_blackjack_table_refuses_what_is_not_blackjack_s(cli, tmp_path):
    common = ("provision", "--flash", tmp_path / "flash", "--key", tmp_path / "k.pem",
              "--registry", tmp_path / "shoes.json")
    for extra, said in (
            (("--game", "blackjack", "--ez"), "baccarat's, not blackjack's"),
            (("--dealer", "h17"), "are blackjack's (add --game blackjack)"),
            (("--game", "blackjack", "--side-wagers", "dragon7"), "dragon7"),
            (("--game", "blackjack", "--meter-reset", "hit_and_run=500"),
             "hit_and_run's meter resets to at least $1,000 (§ 633a.13(l)(2))"),
            (("--game", "blackjack", "--meter-reset", "hit_and_run=2000", "--meter-reset",
              "hit_and_run=3000"), "names a meter twice")):
        r = cli(*common, *extra)
        assert r.returncode != 0 and said in r.stderr, (extra, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "flash").exists()  # nothing provisioned


@pytest.mark.board
def test_provision_registers_a_blackjack_table_and_writes_its_variant(cli, tmp_path):
    reg = tmp_path / "shoes.json"
    r = cli("provision", "--flash", tmp_path / "flash", "--key", tmp_path / "k.pem",
            "--registry", reg, "--game", "blackjack", "--decks", "6", "--dealer", "h17",
            "--no-hole-card", "--side-wagers", "hit_and_run,house_money",
            "--meter-reset", "hit_and_run=2500", "--table", "BJ-3")
    assert r.returncode == 0, r.stderr
    entry = Registry.load(str(reg)).at_table("BJ-3")
    assert entry.table_config() == {"game": "blackjack", "decks": 6, "dealer": "h17",
                                    "hole_card": False,
                                    "side_wagers": ["hit_and_run", "house_money"],
                                    "hit_and_run_reset_cents": 250_000}
    assert (tmp_path / "flash" / "variant").read_bytes() == bytes([3 | 32 | 64, 6])
    assert entry.variant == {"game": "blackjack", "dealer": "h17", "hole_card": False}


def test_the_validators_second_opinion_on_a_blackjack_round():
    """A round whose signed hands the host's rules deal otherwise (the dealer's draw given to
    seat 1), a round under another dealer's rule than the registry's, and a result's cards beyond
    the decks are each an alarm; a round the rules deal so is none."""
    alarms = []
    entry = ShoeEntry(7, game="blackjack", decks=2, dealer="s17")
    acc = ShoeAccounts(entry, {"inventory": new_shoe_accounts(1)}, lambda kind, detail, **w:
                       alarms.append(kind))
    acc.state["inventory"]["burned"] = True
    good = {"shoe": 1, "round": 1, "seats": [1], "dealer_rule": "s17", "hole_card": True,
            "voided": False,
            "events": [("card", "TS"), ("card", "6H"), ("card", "9C"), ("card", "TD"),
                       ("press", "next"), ("card", "8S")],
            "placed": [0, "dealer", 0, "dealer", "dealer"]}
    acc.account("blackjack_result", good)
    assert alarms == []
    acc.account("blackjack_result", dict(good, round=2, placed=[0, "dealer", 0, "dealer", 0]))
    assert alarms == ["rules_mismatch"]
    acc.account("blackjack_result", dict(good, round=3, dealer_rule="h17"))
    assert alarms[1:] == ["config_mismatch"] + ["inventory_exceeded"] * 5  # its five cards


@pytest.mark.board
def test_a_power_cut_mid_round_on_the_virtual_board_voids_that_round_and_loses_nothing(
        cli, tmp_path):
    """The virtual board (real MicroPython) killed as a round's cards come out, powered on
    again: the shoe boots to the round it was dealing, the table's dealer finds it under way and
    has the supervisor void it, and the shoe goes on. Every frame is verified, no round is lost,
    every kept round is the one the table dealt, and the store passes audit verify."""
    import threading

    from sabot import keys
    from sabot.game.cards import shuffled_shoe
    from sabot.protocol import PH_ENDED
    from sabot.virtual.blackjack_dealer import TableDealer
    from sabot.virtual.demo import Session

    class Cut(Exception):
        pass

    class Cutting(TableDealer):
        """A dealer whose shoe loses power as the `at`th card of the shoe comes out."""

        def __init__(self, *a, at=None, **kw):
            super().__init__(*a, **kw)
            self.cut_at = at

        def _card(self, token):
            if self.at == self.cut_at:
                self.board.kill()
                raise Cut
            super()._card(token)

    tokens = shuffled_shoe(6, seed=8)
    key = keys.create(str(tmp_path / "k.pem"))
    entry = ShoeEntry(0x5AB0_0031, table="BJ-cut", game="blackjack", decks=6,
                      side_wagers=["hit_and_run", "straight_jack", "house_money"])
    db = tmp_path / "cut.db"
    s = Session(tokens, key, str(db), str(tmp_path / "flash"), config=entry)
    board, link = s.start_board()
    truth = {}
    try:
        for cut in (37, 118, None):  # mid-round twice (cards 37 and 118), then to the end
            dealer = Cutting(board, tokens, "s17", True, seed=cut, at=cut)
            done = threading.Event()
            errors = []

            def deal(dealer=dealer, done=done, errors=errors):
                try:
                    dealer.deal()
                except Cut:
                    pass
                except Exception as e:
                    errors.append(e)
                done.set()

            threading.Thread(target=deal, daemon=True).start()
            while not done.is_set():
                try:
                    link.pump(0.05)
                except ConnectionError:  # the power cut: the board's link went with it
                    done.wait(5)
            assert not errors, errors
            truth.update(dealer.truth)
            if cut is not None:
                assert board.indicator[1] != 0xFF  # a round was under way
                board.start()  # powered on again
                link.reconnect()
        assert link.drain(20) and board.indicator[0] == PH_ENDED
    finally:
        s.close()
    results = [r for k, r in s.records if k == "blackjack_result"]
    kept = [r for r in results if not r["voided"]]
    assert sum(r["voided"] for r in results) >= 2  # the rounds the cuts broke off
    assert len(kept) > 10 and all((r["seats"], r["events"]) == (
        truth[r["round"]]["seats"], truth[r["round"]]["events"]) for r in kept)
    v = s.validator.summary()
    assert v["rejected"] == 0 and not [a for a in v["alarms"] if a["kind"] != "repeated_sequence"]
    registry = tmp_path / "shoes.json"
    Registry(str(registry), {entry.shoe_id: entry}).put(entry)
    r = cli("audit", "verify", "--db", db, "--registry", registry)
    assert r.returncode == 0, r.stdout + r.stderr

"""What the pit's pages say, in process: plain words for results, edges, holds and states; only
the table's own side wagers among a result's flags; since when a table is in its state, and a
table that should speak turning silent; the shift a time falls in; a database's error in one
short line."""

import time

from sabot.audit.store_pg import short_reason
from sabot.pit.dashboard import last_result
from sabot.pit.tables import STALE, Pit, TableView, shift_bounds
from sabot.pit.words import ago, edge_words, iso, result_words, since, state_words
from sabot.registry import ShoeEntry


def test_results_edges_and_states_are_said_in_words():
    rec = {"winner": "player", "player_total": 9, "banker_total": 3, "flags": ["player_natural"]}
    assert result_words(rec) == "Player 9 beats Banker 3 — Player natural"
    rec = {"winner": "banker", "player_total": 3, "banker_total": 7, "flags": ["dragon7"]}
    assert result_words(rec) == "Banker 7 beats Player 3 — Dragon 7"
    assert result_words({"winner": "tie", "player_total": 5, "banker_total": 5,
                         "flags": ["banker_pair"]}) == "Tie at 5 — Banker pair"
    assert edge_words("banker", 0.0105791) == "Banker edge 1.06%"
    assert edge_words("dragon7", -0.01593016) == "Dragon 7: players ahead by 1.59%"
    assert state_words("held", "cards_exhausted") == "held: no cards left — resolve"
    assert ago(12) == "12 s" and ago(180) == "3 min" and ago(7500) == "2 h 05 min"
    now = time.time()
    hhmmss = time.strftime("%H:%M:%S", time.localtime(now - 180))
    assert since(now - 180, now) == f"since {hhmmss}, 3 min"
    assert iso(0.0).endswith(("+00:00", "Z")) or iso(0.0)[-6] in "+-"
    assert iso(1e300) is None  # a time no validator stores: nothing, never an error


def test_a_plain_table_shows_no_side_wager_it_does_not_offer():
    rec = {"round": 1, "winner": "banker", "player_total": 3, "banker_total": 6,
           "flags": ["banker_pair", "lucky_six"]}
    plain = TableView(1, ShoeEntry(1, table="plain"), shoe=1, rounds=[rec])
    assert last_result(plain) == "Banker 6 beats Player 3 — Banker pair"
    lucky = TableView(2, ShoeEntry(2, table="lucky", side_wagers=["lucky_six"],
                                   commission_free=True), shoe=1, rounds=[rec])
    assert last_result(lucky) == "Banker 6 beats Player 3 — Banker pair, Lucky Six"


def test_a_table_says_since_when_and_turns_silent_when_nothing_is_stored():
    entry = ShoeEntry(7, table="BAC-07")
    up = {"state": "up", "reason": "", "since": 1000.0, "heard": 1005.0}
    pit = Pit(":memory:", [entry], link=lambda sid: up)
    t = pit.by_id[7]
    t.shoe, t.started_at, t.frame_at = 1, 1000.0, 1005.0
    assert pit.status(t, now=1006.0) == ("dealing", 1000.0, "")
    t.held, t.held_at = "card_missing", 1003.0
    assert pit.status(t, now=1006.0) == ("held", 1003.0, "")
    state, at, why = pit.status(t, now=1005.0 + STALE)  # nothing stored since 1005
    assert (state, at) == ("silent", 1005.0) and why
    up["state"], up["reason"], up["since"] = "lost", "connection refused", 1010.0
    assert pit.status(t, now=1020.0) == ("link lost", 1010.0, "connection refused")
    # the floor: a writer the database holds (its commit waiting for a standby)
    floor = Pit(":memory:", [], floor=[entry])
    ft = floor.by_id[7]
    floor.claims, floor.stalls = {7: "sabot serve pit-1"}, {
        "sabot serve pit-1": (1002.0, "its commit waits for a synchronous standby")}
    state, at, why = floor.status(ft, now=1010.0)
    assert (state, at) == ("not recording", 1002.0) and "pit-1" in why and "standby" in why
    floor.stalls, floor.claims = {}, {}
    ft.unclaimed_since = 1009.0
    assert floor.status(ft, now=1010.0)[:2] == ("no validator", 1009.0)


def test_a_store_the_pages_cannot_open_is_said_and_turns_the_tables_not_recording(tmp_path):
    """A store the pages cannot open (no server there, no file) is no empty pit: the pages say
    why, and after --store-alarm seconds every table reads not recording."""
    pit = Pit(str(tmp_path / "none.db"), [ShoeEntry(7, table="BAC-07")], store_alarm=5.0)
    pit.refresh()
    assert "no audit database" in pit.problem and pit.unreadable_since is not None
    t = pit.by_id[7]
    state, at, why = pit.status(t, now=pit.unreadable_since + 5.0)
    assert (state, at) == ("not recording", pit.unreadable_since) and "cannot be read" in why


def test_the_shift_a_time_falls_in():
    day = time.mktime((2026, 12, 5, 0, 0, 0, 0, 0, -1))
    start, end = shift_bounds(["06:00", "14:00", "22:00"], day + 3 * 3600)  # 03:00
    assert (start, end) == (day - 2 * 3600, day + 6 * 3600)  # 22:00 the day before to 06:00
    assert shift_bounds(["06:00", "14:00", "22:00"], day + 14 * 3600) == (
        day + 14 * 3600, day + 22 * 3600)  # a shift begins at its own start


def test_a_database_error_is_one_short_line_naming_each_server():
    said = ('connection failed: connection to server at "127.0.0.1", port 20115 failed: session '
            "is read-only\nMultiple connection attempts failed. All failures were:\n- host: "
            "'127.0.0.1', port: '21115', hostaddr: '127.0.0.1': connection failed: connection "
            'to server at "127.0.0.1", port 21115 failed: Connection refused\n\tIs the server '
            "running on that host and accepting TCP/IP connections?\n- host: '127.0.0.1', port:"
            " '20115', hostaddr: '127.0.0.1': connection failed: connection to server at "
            '"127.0.0.1", port 20115 failed: session is read-only')
    line = short_reason(Exception(said))
    assert line == ("127.0.0.1:20115 is read-only (a standby, or fenced); 127.0.0.1:21115 "
                    "refused the connection (no server there)"), line
    assert "\n" not in line and len(line) < len(said) / 2


def test_the_shift_csv_keeps_every_cell_text_in_a_spreadsheet():
    """A note or name a spreadsheet could take for a formula stays text: every cell quoted
    (a `;` list separator splits nothing), a formula's first character behind a `'`."""
    import csv
    import io

    from sabot.pit.shift import TableShift, as_csv

    t = TableShift("=HYPERLINK(\"x\")", 1, rounds=1)
    t.alarms.append({"raised": None, "cleared": None, "kind": "link_silent", "shoe": 1,
                     "round": None, "detail": "d", "by": "@alice", "at": None,
                     "note": "x;=1+1"})
    text = as_csv([t], 0.0, 3600.0)
    assert all(line.startswith('"') for line in text.splitlines())
    rows = list(csv.DictReader(io.StringIO(text)))
    alarm = next(r for r in rows if r["section"] == "alarm")
    assert rows[0]["table"] == "'=HYPERLINK(\"x\")" and alarm["acknowledged_by"] == "'@alice"
    assert alarm["note"] == "x;=1+1" and '"x;=1+1"' in text


def test_a_status_replayed_byte_for_byte_is_not_the_shoe_heard(tmp_path):
    """A box on the cable answering each hello with the shoe's newest status, the shoe cut off:
    each status the shoe makes is signed afresh, so the same bytes again are a recording, said
    once, and the shoe is not counted as heard (serve's silent state, its link_silent alarm)."""
    from sabot import protocol as pr
    from sabot.audit.validator import Validator
    from sabot.link.session import ValidationSession
    from sabot.virtual.capture_gen import status_payload

    from kit import signing_shoe

    shoe, entry = signing_shoe()
    said = []
    session = ValidationSession(Validator(entry, str(tmp_path / "a.db")), "socket://x:1", None,
                                say=said.append)
    first = pr.parse(shoe.status(status_payload()))
    again = pr.parse(shoe.status(status_payload()))  # the same status, signed once more
    assert first.raw != again.raw  # ECDSA: a fresh signature each time
    assert session._heard([(first, "accepted", None)])
    assert not session._heard([(first, "accepted", None)])  # its bytes again: a recording
    assert not session._heard([(first, "accepted", None)]) and len(said) == 1, said
    assert "byte for byte" in said[0]
    assert session._heard([(again, "accepted", None)])  # the shoe itself, speaking again
    assert not session._heard([(first, "rejected", "replayed")])
    session.validator.store.close()


def test_players_read_place_your_bets_no_more_bets_and_the_result(tmp_path):
    """The scoreboard's phase for players, from the records as the store gives them: place your
    bets between rounds, no more bets once the round's first cards are stored, the result in
    words for a few seconds, then place your bets again; nothing once the shoe is not dealing."""
    from sabot.audit.store import open_store
    from sabot.audit.store_queries import StoredRecord
    from sabot.pit.scoreboard import RESULT_SHOWN_S, scoreboard_html
    from sabot.pit.tables import Rows

    db = str(tmp_path / "a.db")
    open_store(db).close()
    pit = Pit(db, [ShoeEntry(0x51, table="t1", ez=True, side_wagers=["dragon7"])])
    now = time.time()

    def stored(n, kind, rec, at=now):
        pit.apply(Rows(records=[StoredRecord(n, kind, {"shoe": 1, **rec}, 0x51, at)]))
        return scoreboard_html(pit, pit.tables()[0])

    assert 'data-phase="place_bets"' in stored(1, "shoe_start", {})
    assert "Place your bets" in stored(2, "burn", {})
    page = stored(3, "initial_cards", {"round": 1})
    assert 'data-phase="no_more_bets"' in page and "No more bets" in page and "停止下注" in page
    result = {"round": 1, "winner": "banker", "player_total": 3, "banker_total": 7,
              "flags": ["dragon7"], "player": ["2S", "AH"], "banker": ["3D", "4C", "KS"]}
    page = stored(4, "result", result)
    assert 'data-phase="result"' in page and "Banker 7 beats Player 3 — Dragon 7" in page
    page = stored(5, "result", {**result, "round": 2}, at=now - RESULT_SHOWN_S - 1)
    assert 'data-phase="place_bets"' in page  # shown its seconds: bets again
    assert 'id="phase"' not in stored(6, "shoe_end", {})


def test_a_table_shows_the_languages_its_registry_entry_names(tmp_path):
    """Both languages side by side by default; a table registered with one shows only that one
    (the page's style hides the other: a marker the stylesheet reads); anything else is
    refused in one line, in the registry and on the command line."""
    import argparse
    from pathlib import Path

    import pytest

    import sabot.pit
    from sabot.cli.release import languages_arg
    from sabot.errors import SabotError
    from sabot.pit.scoreboard import scoreboard_html

    db = str(tmp_path / "a.db")
    from sabot.audit.store import open_store

    open_store(db).close()
    both = ShoeEntry(0x51, table="t1")
    english = ShoeEntry(0x52, table="t2", languages=["en"])
    pit = Pit(db, [both, english])
    pages = {t.table: scoreboard_html(pit, t) for t in pit.tables()}
    assert both.languages == ["en", "zh"] and 'class="langs"' in pages["t1"]
    assert 'class="langs no-zh"' in pages["t2"] and "大路" in pages["t2"]  # there, hidden
    css = (Path(sabot.pit.__file__).parent / "static" / "pages.css").read_text()
    assert "#live:has(>.langs.no-zh) .zh" in css and "#live:has(>.langs.no-en) .en" in css
    with pytest.raises(SabotError, match="languages must list one or both of en, zh"):
        ShoeEntry(0x53, languages=["fr"])
    assert languages_arg("zh") == ["zh"]
    with pytest.raises(argparse.ArgumentTypeError, match="want one or both of en, zh"):
        languages_arg("en,en")


def test_the_payouts_are_the_settlement_rules_own_dragon_bonus_included():
    """Each payout line is what the rules pay a round that wins it: a Dragon Bonus table's
    paytable figure by figure, the commission-free Banker's six."""
    from sabot.game.wagers import DRAGON_BONUS_PAYTABLES
    from sabot.pit.payouts import payout_lines

    for paytable in ("A", "B", "C"):
        entry = ShoeEntry(0x61, side_wagers=["dragon_bonus_player", "dragon_bonus_banker"],
                          dragon_bonus_paytable=paytable)
        pays = {w: p for w, _, p, _ in payout_lines(entry)}
        want = ", ".join(f"{m}: {DRAGON_BONUS_PAYTABLES[paytable.lower()][m]} to 1"
                         for m in range(9, 3, -1))
        assert pays["dragon_bonus_player"] == pays["dragon_bonus_banker"] == \
            f"natural win 1 to 1; win by {want}", pays
    free = {w: p for w, _, p, _ in payout_lines(ShoeEntry(0x62, commission_free=True))}
    assert free["banker"] == "1 to 1; a win with 6 pays 1 to 2" and free["tie"] == "8 to 1"


def test_no_more_bets_while_the_shoe_has_sent_a_rounds_first_cards_and_not_its_result(tmp_path):
    """Live, a round's initial cards are stored only with the result that seals them, so the
    store alone never shows a round open: the scoreboard takes it from the frame the validator
    holds for its seal (serve's link), says no more bets while it waits, and the result after."""
    from cryptography.hazmat.primitives.asymmetric import ec

    from sabot import keys
    from sabot import protocol as pr
    from sabot.audit.store import open_store
    from sabot.audit.validator import Validator
    from sabot.pit.scoreboard import scoreboard_html
    from sabot.pit.serve import ServedShoe
    from sabot.virtual.capture_gen import ShoeSigner, shoe_frames

    key = ec.generate_private_key(ec.SECP256R1())
    entry = ShoeEntry(0x52, table="t2")
    entry.add_public_key(1, keys.public_pem(key.public_key()))
    raw, _ = shoe_frames(ShoeSigner(key, 0x52), ["AD", "5H", "AS", "2D", "3H", "2C", "2H", "3S",
                                                 "CUT", "KS", "AH", "QS", "2S", "4D", "3C"], 1)
    db = str(tmp_path / "a.db")
    v = Validator(entry, open_store(db), watch=False)
    served = ServedShoe("socket://127.0.0.1:9", None, entry, validator=v)
    pit = Pit(db, [entry], link=lambda sid: {"state": "up", "reason": "", "since": None,
                                              "round_open": served.round_open()})
    first = next(i for i, f in enumerate(raw) if f[1] == pr.T_INITIAL_CARDS)
    v.receive(b"".join(pr.encode_frame(f) for f in raw[:first + 1]))  # the first cards, unsealed
    pit.refresh()
    assert served.round_open() == 1
    page = scoreboard_html(pit, pit.tables()[0])
    assert 'data-phase="no_more_bets"' in page, page
    v.receive(pr.encode_frame(raw[first + 1]))  # its result seals them: both stored
    pit.refresh()
    assert served.round_open() is None
    assert 'data-phase="result"' in scoreboard_html(pit, pit.tables()[0])
    v.store.close()


def test_an_alarm_nobody_acknowledged_stays_in_view_when_the_next_shoe_starts(tmp_path):
    """The next shoe clears its table's row of the shoe before's acknowledged alarms (the shift
    report keeps them); one nobody acknowledged stays until someone does."""
    from sabot.audit.store import open_store
    from sabot.audit.store_queries import StoredRecord
    from sabot.pit.tables import Rows

    db = str(tmp_path / "a.db")
    open_store(db).close()
    pit = Pit(db, [ShoeEntry(0x51, table="t1")])
    now = time.time()
    pit.apply(Rows(records=[StoredRecord(1, "shoe_start", {"shoe": 1}, 0x51, now)]))
    alarms = [{"id": i, "kind": "player_advantage", "shoe_id": 0x51, "shoe": 1, "round": 40 + i,
               "detail": f"tie (tie) edge {i}", "seq": 90 + i, "raised_at": now} for i in (1, 2)]
    pit.apply(Rows(alarms=alarms, operations=[
        {"operation": "acknowledge", "shoe_id": 0x51, "alarm": {"id": 1}, "by": "alice"}]))
    t = pit.tables()[0]
    assert [a["id"] for a in pit.alarms_of(t)] == [1, 2]
    pit.apply(Rows(records=[StoredRecord(2, "shoe_start", {"shoe": 2}, 0x51, now)]))
    assert [(a["id"], a["ack"]) for a in pit.alarms_of(pit.tables()[0])] == [(2, None)]


def test_the_players_edge_alarm_reads_as_the_edges_column_does():
    """The watch's stored detail (kept as it is: audit verify derives it) in the pit's words;
    any other detail as stored."""
    from sabot.audit.watch import advantage_detail
    from sabot.pit.words import alarm_detail_words

    for wager, name, edge, cards, said in (
            ("tie", "tie", -0.4, 6, "Tie: players ahead by 40.00% with 6 cards left"),
            ("dragon7", "dragon7", -0.0159, 88, "Dragon 7: players ahead by 1.59% with 88 cards "
                                                "left")):
        detail = advantage_detail(wager, name, edge, cards)
        assert alarm_detail_words("player_advantage", detail) == said
    assert alarm_detail_words("tilt", "the shoe tilted") == "the shoe tilted"
    assert alarm_detail_words("player_advantage", "edited") == "edited"


def test_the_operator_log_says_which_alarm_an_acknowledgement_answered_and_when_in_words():
    from datetime import datetime

    from sabot.audit.watch import advantage_detail
    from sabot.pit.console import entry_words
    from sabot.pit.words import clock

    at = 1733400000.0
    raised = datetime.fromtimestamp(at).astimezone().isoformat(timespec="seconds")
    said = entry_words({"operation": "acknowledge", "note": "dealer warned", "alarm": {
        "kind": "player_advantage", "raised_at": raised,
        "detail": advantage_detail("tie", "tie", -0.4, 6)}})
    words = f"raised {clock(at)} (Tie: players ahead by 40.00% with 6 cards left): dealer warned"
    assert words in said and raised not in said, said
    said = entry_words({"operation": "serve_alarm", "kind": "link_silent", "raised_at": raised,
                        "cleared_at": None})
    assert said.endswith(f"{clock(at)} to serve stopping") and raised not in said, said

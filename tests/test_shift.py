"""A pit supervisor runs and reports a shift from the dashboard (`sabot serve --accounts`), in
headless Chromium: a dealer signs on from the API, the supervisor signs the next dealer on from
the dashboard, the shoe runs out of cards and the supervisor ends it, another process holds the
store's write lock long enough for serve to say it is not recording, the supervisor
acknowledges that alarm with a note, and the shift report — the page and its CSV — gives each
dealer's rounds, the irregularity and who resolved it, the alarm and who acknowledged it; roles
are held to what they may do, and audit verify passes over the operator log's new entries."""

import csv
import io
import json
import re
import socket
import sqlite3
import time
import urllib.error
import urllib.request

import pytest
from selenium.webdriver.support.ui import Select

from sabot.game import cards, rules
from sabot.protocol import PH_HELD
from sabot.virtual.dealer import Dealer

from kit.browser import browser, csp_violations, screenshot
from kit.pit import (
    PASSWORDS,
    Client,
    act,
    assert_audit_verifies,
    held_tokens,
    make_accounts,
    operator_log,
    press,
    text_of,
    wait_state,
)
from kit.serve_rig import ServeRig

pytestmark = pytest.mark.board
LINK_IDLE_S = 3.0  # the board's: a host silent this long gives its link up


def cell(driver, table, css):
    return text_of(driver, f'tr[data-table="{table}"] {css}')


class Shift:
    """One shoe that runs out of cards after five rounds, served with accounts, dealt a round
    at a time."""

    def __init__(self, tmp_path):
        self.tokens = held_tokens(seed=21, rounds_before=5)
        self.rig = ServeRig(tmp_path, shoes=1, seed=21, accounts=make_accounts(tmp_path),
                            tokens=self.tokens, extra=["--store-alarm", "1"])
        self.table = self.rig.tables[0]
        self.board = self.rig.boards[0]
        self.dealer = Dealer(self.board, self.tokens, on_held=lambda b, ind: None)
        shoe = [t for t in cards.shuffled_shoe(8, 21) if t != "CUT"]  # as held_tokens has it
        self.burn = 1 + cards.BURN_VALUES[shoe[0][0]]
        self.dealt = rules.deal_shoe(shoe[:self.burn + 60])

    def deal_to(self, rounds):
        """The dealer draws the cards of the first `rounds` rounds; until serve has them."""
        out = self.burn + sum(len(r["player"]) + len(r["banker"]) for r in self.dealt[:rounds])
        while self.board.indicator[2] < out:
            self.dealer.step(timeout=2)
        end = time.monotonic() + 30
        while self.rig.get("/api/tables")[0]["round"] < rounds:
            assert time.monotonic() < end, self.rig.get("/api/tables")
            time.sleep(0.1)

    def until_held(self):
        while self.board.indicator[0] != PH_HELD:
            self.dealer.step(timeout=2)
        wait_state(self.rig, "held")


def log_in(driver, url, name):
    driver.get(url + "/login")
    driver.find_element("name", "name").send_keys(name)
    driver.find_element("name", "password").send_keys(PASSWORDS[name])
    driver.find_element("css selector", "button[type=submit]").click()


def not_recording_while_locked(driver, db, board):
    """Another process takes the store's write lock: serve's commits wait, the page says NOT
    RECORDING; meanwhile serve keeps its link (a byte the shoe ignores), so another host that
    connects past the link's idle time is told it is taken; released, it records again."""
    lock = sqlite3.connect(db, isolation_level=None)
    lock.execute("BEGIN EXCLUSIVE")
    locked = time.monotonic()
    try:
        said = text_of(driver, "#not-recording", timeout=15)
        assert said and "NOT RECORDING" in said and "write lock is taken" in said, said
        assert "call IT" in said, said
        time.sleep(max(0.0, locked + 2 * LINK_IDLE_S - time.monotonic()))
        host, port = board.url.removeprefix("socket://").rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=5) as other:
            assert other.recv(200).startswith(b"sabot-link taken by 127.0.0.1:")
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    end = time.monotonic() + 30
    while text_of(driver, "#not-recording", wait=False) is not None:
        assert time.monotonic() < end
        time.sleep(0.2)


def check_report(rig, table, driver, dan):
    """The shift report: for supervisors and IT only; the page and its CSV say who dealt what,
    how the irregularity was resolved, and who acknowledged the alarm."""
    assert Client(rig.url).get("/shift")[0] == 401
    assert dan.get("/shift.csv")[0] == 403
    driver.get(rig.url + "/shift")
    page = text_of(driver, "#live")
    assert f"{table} — 5 rounds" in page and "dan, erin" in page, page
    assert "no cards left" in page and "the shoe ended" in page, page
    assert "not recording" in page and "IT released the lock" in page, page
    assert csp_violations(driver) == []
    driver.set_window_size(1300, 1100)
    screenshot(driver, "shift-report.png")
    alice = Client(rig.url)
    assert alice.login("alice", PASSWORDS["alice"])[0] == 200
    status, text = alice.get("/shift.csv")
    assert status == 200, text
    rows = list(csv.DictReader(io.StringIO(text)))
    by = {(r["section"], r["name"] or r["what"]): r for r in rows}
    summary = next(r for r in rows if r["section"] == "table")
    assert summary["table"] == table and summary["rounds"] == "5", summary
    assert by[("dealer", "dan")]["rounds"] == "3" and by[("dealer", "erin")]["rounds"] == "2"
    held = by[("irregularity", "no cards left")]
    assert held["resolved"] == "the shoe ended" and held["by"] == "alice", held
    assert held["code"] == "cards_exhausted"
    alarm = by[("alarm", "not recording")]
    assert alarm["acknowledged_by"] == "alice" and alarm["note"] == "IT released the lock"
    assert alarm["start"] and alarm["end"], alarm  # raised and cleared, with the offset


@pytest.mark.long
def test_a_supervisor_runs_and_reports_a_shift_from_the_dashboard(tmp_path, monkeypatch):
    monkeypatch.setenv("SABOT_LINK_IDLE_MS", str(int(LINK_IDLE_S * 1000)))  # for the board
    shift = Shift(tmp_path)
    rig, table = shift.rig, shift.table
    driver = browser(tmp_path)
    try:
        dan = Client(rig.url)
        assert dan.login("dan", PASSWORDS["dan"])[0] == 200
        status, out = dan.post("/api/operate", {"table": table, "action": "sign-on",
                                                "dealer": "erin"})
        assert status == 403 and "only themself" in out["error"], out
        status, out = dan.post("/api/operate", {"table": table, "action": "sign-on"})
        assert status == 200 and out["dealer"] == "dan", out
        assert rig.get("/api/tables")[0]["dealer"] == "dan"
        shift.deal_to(3)

        log_in(driver, rig.url, "alice")
        assert "dan" in cell(driver, table, "span.dealer")
        act(driver, "select[name=dealer]", lambda e: Select(e).select_by_value("erin"))
        done = press(driver, "button[data-action=sign-on]")
        assert "erin signed on (logged as alice)" in done, done
        driver.get(rig.url + "/")
        assert "erin" in cell(driver, table, "span.dealer")
        shift.until_held()  # rounds 4 and 5, then the cards run out
        assert "no cards left" in cell(driver, table, "td.state")
        not_recording_while_locked(driver, rig.db, shift.board)

        press(driver, "button[data-resolution=end-shoe]", until=("Confirm end-shoe",))
        done = press(driver, "button[data-confirm=end-shoe]")
        assert "resolved end-shoe" in done, done
        wait_state(rig, "ended")

        status, out = dan.post("/api/operate", {"table": table, "action": "acknowledge",
                                                "alarm": "x", "note": "x"})
        assert status == 403 and "acknowledge" in out["error"], out
        driver.get(rig.url + "/")
        alarm = f'tr[data-table="{table}"] li[data-kind=not_recording]'
        act(driver, f"{alarm} input[name=note]", lambda e: e.send_keys("IT released the lock"))
        done = press(driver, f"{alarm} button[data-action=acknowledge]")
        assert "acknowledged not recording" in done and "alice" in done, done
        driver.get(rig.url + "/")
        acked = cell(driver, table, "li[data-kind=not_recording] .ack")
        assert "acknowledged by alice" in acked and "IT released the lock" in acked, acked
        assert cell(driver, table, "td.hands-hour") == "5"
        driver.set_window_size(1500, 520)
        screenshot(driver, "dashboard-shift.png")
        done = press(driver, "button[data-action=sign-off]")
        assert "erin signed off" in done, done
        check_report(rig, table, driver, dan)
    finally:
        driver.quit()
        code = rig.stop()
    assert code == 0, rig.log_text()
    kinds = [e["operation"] for e in operator_log(rig)]
    assert kinds == ["sign_on", "sign_off", "sign_on", "serve_alarm", "resolve",
                     "acknowledge", "sign_off"], kinds  # dan signed off as erin is signed on
    assert_audit_verifies(rig)


@pytest.mark.long
def test_two_tables_dealers_moving_a_pit_wide_alarm_and_a_silent_shoe(tmp_path):
    """A dealer deals at one table: signing on at another signs them off the first; a dealer may
    not take a table another dealer is signed on at; signing on twice, or off a table they are
    not at, is refused. A pit-wide alarm (the store not recording) is acknowledged once, at
    every table. A shoe gone quiet is link_silent; a dealer is not signed on at a table whose
    link is lost (its rounds would count to the wrong dealer); serve stopping with that alarm
    open logs it open."""
    rig = ServeRig(tmp_path, shoes=2, seed=31, accounts=make_accounts(tmp_path),
                   extra=["--store-alarm", "1", "--silent-alarm", "5"])
    try:
        dan, erin, alice = Client(rig.url), Client(rig.url), Client(rig.url)
        for who, client in (("dan", dan), ("erin", erin), ("alice", alice)):
            assert client.login(who, PASSWORDS[who])[0] == 200
        assert dan.post("/api/operate", {"table": "BAC-01", "action": "sign-on"})[0] == 200
        status, out = dan.post("/api/operate", {"table": "BAC-01", "action": "sign-on"})
        assert status == 409 and "already" in out["error"], out
        assert dan.post("/api/operate", {"table": "BAC-02", "action": "sign-on"})[0] == 200
        tables = {t["table"]: t for t in rig.get("/api/tables")}
        assert tables["BAC-01"]["dealer"] is None and tables["BAC-02"]["dealer"] == "dan"
        status, out = dan.post("/api/operate", {"table": "BAC-01", "action": "sign-off"})
        assert status == 409 and "not signed on at BAC-01" in out["error"], out
        status, out = erin.post("/api/operate", {"table": "BAC-02", "action": "sign-on"})
        assert status == 409 and "dan is signed on at BAC-02" in out["error"], out
        # no button is offered that serve would refuse: not another dealer's table
        rows = dealer_buttons(erin)
        assert rows["BAC-01"] == ["sign-on"] and rows["BAC-02"] == [], rows

        acknowledged_once_for_the_pit(rig, alice)

        # a shoe gone quiet
        rig.boards[1].stop()
        end = time.monotonic() + 20
        while "BAC-02" not in (health := rig_health(rig))["attention"] or not [
                a for a in rig.get("/api/tables/BAC-02")["alarms"] if a["kind"] == "link_silent"]:
            assert time.monotonic() < end, health
            time.sleep(0.2)
        status, out = alice.post("/api/operate", {"table": "BAC-02", "action": "sign-on",
                                                  "dealer": "erin"})
        assert status == 409 and "its link is lost" in out["error"], out
        assert dealer_buttons(dan)["BAC-02"] == [], dealer_buttons(dan)  # nor a lost link's
    finally:
        code = rig.stop()
    assert code == 0, rig.log_text()
    assert "serve's own alarms: 1 link_silent, 1 not_recording" in rig.log_text()
    entries = operator_log(rig)
    assert [(e["operation"], e["table"]) for e in entries[:3]] == [
        ("sign_on", "BAC-01"), ("sign_off", "BAC-01"), ("sign_on", "BAC-02")]
    assert entries[1]["moved_to"] == "BAC-02" and entries[1]["dealer"] == "dan"
    acks = [e for e in entries if e["operation"] == "acknowledge"]
    assert sorted(e["table"] for e in acks) == ["BAC-01", "BAC-02"]
    silent = [e for e in entries if e["operation"] == "serve_alarm" and e["kind"] ==
              "link_silent"]
    assert len(silent) == 1 and silent[0]["cleared_at"] is None, entries  # open at the stop
    assert_audit_verifies(rig)


def dealer_buttons(client):
    """The sign-on and sign-off buttons each table's row offers this session, by table."""
    status, page = client.get("/")
    assert status == 200
    return {m.group(1): re.findall(r'data-action="(sign-on|sign-off)"', m.group(2))
            for m in re.finditer(r'<tr data-table="([^"]+)">(.*?)</tr>', page, re.S)}


def acknowledged_once_for_the_pit(rig, alice):
    """The store not recording (another process holds its write lock): one alarm of the whole
    pit, acknowledged once, at every table."""
    lock = sqlite3.connect(rig.db, isolation_level=None)
    lock.execute("BEGIN EXCLUSIVE")
    try:
        end = time.monotonic() + 15
        while rig.get("/api/tables")[0]["state"] != "not recording":
            assert time.monotonic() < end
            time.sleep(0.1)
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    end = time.monotonic() + 15
    while not (alarms := [a for a in rig.get("/api/tables/BAC-01")["alarms"]
                          if a["kind"] == "not_recording" and a["cleared_at"]]):
        assert time.monotonic() < end
        time.sleep(0.1)
    ref = f"serve:not_recording:{alarms[0]['raised_at']}"
    for empty in ("", "   "):  # an acknowledgement says what was done
        status, out = alice.post("/api/operate", {"table": "BAC-01", "action": "acknowledge",
                                                  "note": empty, "alarm": ref})
        assert status == 400 and "what was done" in out["error"], out
    status, out = alice.post("/api/operate", {
        "table": "BAC-01", "action": "acknowledge", "note": "backup held the lock",
        "alarm": ref})
    assert status == 200, out
    for table in ("BAC-01", "BAC-02"):
        acked = [a["acknowledged"] for a in rig.get(f"/api/tables/{table}")["alarms"]
                 if a["kind"] == "not_recording"]
        assert acked and acked[0]["by"] == "alice", (table, acked)



def rig_health(rig):
    try:
        with urllib.request.urlopen(rig.url + "/api/health", timeout=10) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        return json.loads(e.read())

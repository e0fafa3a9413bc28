"""Operating the pit from `sabot serve` (pit/console.py): a supervisor logs in in a real browser,
resolves a held table and starts its next shoe from the dashboard, each sent by serve's own
session on the shoe's link, signed with serve's command key and in the chained operator log with
the account and where it came from; a dealer's account, a request without the session's CSRF
token and one with no session are refused before the shoe is asked; failed logins are limited;
the read-only pages and API change nothing."""

import json
import re
import signal
import subprocess
import time

import pytest

from kit import SABOT
from kit.browser import browser, csp_violations, screenshot
from kit.pit import (
    PASSWORDS,
    Client,
    assert_audit_verifies,
    held_rig,
    operator_log,
    press,
    text_of,
    wait_state,
)

pytestmark = pytest.mark.board  # every test here starts a process


@pytest.mark.long
def test_a_supervisor_resolves_a_held_table_and_starts_the_next_shoe_in_a_browser(tmp_path):
    rig = held_rig(tmp_path)
    driver = browser(tmp_path)
    try:
        driver.get(rig.url + "/")
        assert "log in" in text_of(driver, "p.who")
        assert text_of(driver, "form.operate", wait=False) is None  # nobody logged in: no buttons
        driver.get(rig.url + "/login")
        driver.find_element("name", "name").send_keys("alice")
        driver.find_element("name", "password").send_keys(PASSWORDS["alice"])
        driver.find_element("css selector", "button[type=submit]").click()
        assert "alice (supervisor)" in text_of(driver, "form.who")
        # only what fits the hold is offered: cards exhausted mid-round is voided or ends the shoe
        offered = driver.execute_script(
            "return [...document.querySelectorAll('button[data-resolution]')]"
            ".map(b => b.dataset.resolution)")
        assert offered == ["void-round", "end-shoe"], offered
        driver.set_window_size(1400, 450)
        screenshot(driver, "dashboard-supervisor.png")  # docs/SERVE.md's
        # end-shoe cannot be taken back: a second page asks first, and cancelling sends nothing
        page = press(driver, "button[data-resolution=end-shoe]", until=("Confirm end-shoe",))
        assert "held by no cards left in shoe 1" in page and "cannot be taken back" in page, page
        driver.find_element("link text", "cancel: back to the pit").click()
        assert rig.get("/api/tables")[0]["state"] == "held"
        press(driver, "button[data-resolution=end-shoe]", until=("Confirm end-shoe",))
        done = press(driver, "button[data-confirm=end-shoe]")
        assert "resolved end-shoe" in done and "the shoe is now ended" in done, done
        wait_state(rig, "ended")
        driver.get(rig.url + "/")
        done = press(driver, "button[data-action=new-shoe]")
        assert "started the next shoe" in done and "shoe 2" in done, done
        assert csp_violations(driver) == []
        driver.get(rig.url + "/operations")
        log = text_of(driver, "table.pit")
        assert "new-shoe" in log and "end-shoe" in log and log.count("alice") == 2
        assert log.count("supervisor") == 2 and log.count("127.0.0.1") == 2 and "BAC-01" in log
        # serve frozen: within 5 s the page says so, and the table's age goes on from its last word
        driver.get(rig.url + "/")
        text_of(driver, ".age")
        rig.proc.send_signal(signal.SIGSTOP)
        try:
            banner = text_of(driver, "#stale", timeout=15)  # once 5 s went by unheard
            time.sleep(1)  # the page's next second
            age = text_of(driver, ".age")
        finally:
            rig.proc.send_signal(signal.SIGCONT)
        assert banner.startswith("NO WORD FROM THE SERVER for "), banner
        assert int(re.search(r"knows of stored (\d+) s ago", age).group(1)) >= 5, age
    finally:
        driver.quit()
        code = rig.stop()
    assert code == 0, rig.log_text()
    entries = operator_log(rig)
    assert [e["operation"] for e in entries] == ["resolve", "new_shoe"]
    assert all(e["account"] == "alice" and e["by"] == "alice" and e["via"] == "serve"
               and e["from"] == "127.0.0.1" and e["role"] == "supervisor" for e in entries)
    assert entries[0]["resolution"] == "end_shoe" and entries[1]["shoe"] == 2
    assert_audit_verifies(rig)


@pytest.mark.long
def test_a_dealer_no_token_and_no_session_are_refused_and_logins_are_limited(tmp_path):
    rig = held_rig(tmp_path)
    try:
        before = rig.get("/api/tables")
        anonymous = Client(rig.url)
        assert anonymous.post("/api/operate", {"table": rig.tables[0], "action": "resolve",
                                                "resolution": "end-shoe"})[0] == 401
        dealer = Client(rig.url)
        assert dealer.login("dan", PASSWORDS["dan"])[0] == 200
        status, out = dealer.post("/api/operate", {"table": rig.tables[0], "action": "resolve",
                                                   "resolution": "end-shoe"})
        assert status == 403 and "dan's account (dealer) may not operate" in out["error"]
        alice = Client(rig.url)
        assert alice.login("alice", PASSWORDS["alice"])[0] == 200
        status, out = alice.post("/api/operate", {"table": rig.tables[0], "action": "resolve",
                                                  "resolution": "end-shoe"}, csrf=False)
        assert status == 403 and "CSRF" in out["error"]
        for wrong in (["end-shoe"], {"a": 1}, "end_shoe", 7):  # a 400, never a fault
            status, out = alice.post("/api/operate", {"table": rig.tables[0],
                                                      "action": "resolve", "resolution": wrong})
            assert status == 400 and "resolution" in out["error"], (wrong, status, out)
        # another site's form can post text/plain, never JSON: not a login either way
        status, out = Client(rig.url).post("/api/login", b'{"name": "dan", "password": "x"}',
                                           **{"Content-Type": "text/plain"})
        assert status == 415
        # nothing refused reached the shoe: still held, nothing logged
        stable = ("table", "shoe", "round", "state", "state_since", "dealer", "alarms_open")
        now = rig.get("/api/tables")
        assert [{k: t[k] for k in stable} for t in now] == \
            [{k: t[k] for k in stable} for t in before] and now[0]["state"] == "held"
        # the shoe itself still decides: a resolution that does not fit its hold is refused
        status, out = alice.post("/api/operate", {"table": rig.tables[0], "action": "resolve",
                                                  "resolution": "keep-dummy"})
        assert status == 409 and "does not apply" in out["error"], out
        status, out = alice.post("/api/operate", {"table": rig.tables[0], "action": "resolve",
                                                  "resolution": "end-shoe"},
                                 **{"X-Forwarded-For": "203.0.113.66"})  # not the address
        assert status == 200 and out["shoe"]["phase"] == "ended", out
        # twelve wrong passwords at once for an account (an address given in X-Forwarded-For
        # changes nothing): five are checked, the rest wait, and so does the right one after
        from concurrent.futures import ThreadPoolExecutor

        def guess(i):
            return Client(rig.url).post("/api/login", {"name": "alice", "password": f"guess {i}"},
                                        **{"X-Forwarded-For": f"10.0.0.{i}"})[0]

        with ThreadPoolExecutor(12) as pool:
            answers = sorted(pool.map(guess, range(12)))
        assert answers == [401] * 5 + [429] * 7, answers
        status, out = Client(rig.url).login("alice", PASSWORDS["alice"])
        assert status == 429 and "too many failed logins" in out["error"]
    finally:
        rig.stop()
    ops = subprocess.run([*SABOT, "history", "--db", str(rig.db), "--operations"],
                         capture_output=True, text=True, timeout=60)
    entries = [json.loads(x) for x in ops.stdout.splitlines()]
    assert [e["operation"] for e in entries] == ["resolve"] and entries[0]["from"] == "127.0.0.1"


def accounts_cli(rig, *args, password=None):
    return subprocess.run([*SABOT, "accounts", *args, "--accounts", str(rig.tmp / "accounts.json"),
                           *(["--password-stdin"] if password else [])],
                          input=f"{password}\n" if password else None, capture_output=True,
                          text=True, timeout=60)


@pytest.mark.long
def test_an_account_changed_or_removed_takes_effect_at_once_in_a_running_serve(tmp_path):
    """serve read its accounts file once: a supervisor demoted to dealer with a new password went
    on resolving with the session they had, and logged in again with the old password as
    supervisor, until serve restarted; nobody could be removed. Now serve reads the file again
    when it changes: the old session is logged out at its next request, the old password is
    wrong, and a removed account's session and login are refused."""
    rig = held_rig(tmp_path)
    try:
        alice, dan = Client(rig.url), Client(rig.url)
        assert alice.login("alice", PASSWORDS["alice"])[0] == 200
        assert dan.login("dan", PASSWORDS["dan"])[0] == 200
        assert "alice (supervisor)" in alice.get("/")[1]
        r = accounts_cli(rig, "add", "--name", "alice", "--role", "dealer",
                         password="a dealer now, new words")
        assert r.returncode == 0 and "updated account alice (dealer)" in r.stderr, r.stderr
        status, out = alice.post("/api/operate", {"table": rig.tables[0], "action": "resolve",
                                                  "resolution": "end-shoe"})
        assert status == 401 and "log in first" in out["error"], (status, out)
        assert "alice (supervisor)" not in alice.get("/")[1]
        assert Client(rig.url).login("alice", PASSWORDS["alice"])[0] == 401
        status, out = Client(rig.url).login("alice", "a dealer now, new words")
        assert status == 200 and out["role"] == "dealer", out
        # dan's session is untouched by alice's change; removed, it ends
        assert "dan (dealer)" in dan.get("/")[1]
        r = accounts_cli(rig, "remove", "--name", "dan")
        assert r.returncode == 0 and "removed account dan" in r.stderr, r.stderr
        assert "dan (dealer)" not in dan.get("/")[1]
        assert Client(rig.url).login("dan", PASSWORDS["dan"])[0] == 401
        r = accounts_cli(rig, "remove", "--name", "dan")
        assert r.returncode == 2 and "no account dan" in r.stderr and "Traceback" not in r.stderr
        assert [n.split("\t")[0] for n in accounts_cli(rig, "list").stdout.splitlines()] == \
            ["alice", "erin", "ivan"]
        assert rig.get("/api/tables")[0]["state"] == "held"  # nothing refused reached the shoe
    finally:
        rig.stop()
    assert operator_log(rig) == []


@pytest.mark.long
def test_a_resolution_the_database_cannot_store_yet_is_logged_with_it_once_it_can(tmp_path):
    """Another program refuses the shoe's signed resolution row while a supervisor resolves: the
    page says it is not done and why; once the database takes it again (the shoe sends it
    again), the operator entry is stored with it, once, and audit verify finds both."""
    import sqlite3

    rig = held_rig(tmp_path)
    con = sqlite3.connect(str(rig.db))
    try:
        alice = Client(rig.url)
        assert alice.login("alice", PASSWORDS["alice"])[0] == 200
        con.execute("CREATE TRIGGER refused BEFORE INSERT ON frames WHEN NEW.type = 'resolution'"
                    " BEGIN SELECT RAISE(ABORT, 'refused by another program'); END")
        con.commit()
        status, out = alice.post("/api/operate", {"table": rig.tables[0], "action": "resolve",
                                                  "resolution": "end-shoe"})
        assert status != 200 and "refused by another program" in out["error"], (status, out)
        con.execute("DROP TRIGGER refused")
        con.commit()
        end = time.monotonic() + 30
        while con.execute("SELECT COUNT(*) FROM frames WHERE type = 'resolution'"
                          ).fetchone()[0] == 0:
            assert time.monotonic() < end, "the shoe's resolution was never stored"
            time.sleep(0.2)
    finally:
        con.close()
        rig.stop()
    entries = operator_log(rig)
    assert [(e["operation"], e["by"], e["resolution"]) for e in entries] == \
        [("resolve", "alice", "end_shoe")], entries
    assert_audit_verifies(rig)

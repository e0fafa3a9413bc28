"""Operating the pit from `sabot serve` (pit/console.py): a supervisor logs in in a real browser,
resolves a held table and starts its next shoe from the dashboard, each sent by serve's own
session on the shoe's link, signed with serve's command key and in the chained operator log with
the account and where it came from; a dealer's account, a request without the session's CSRF
token and one with no session are refused before the shoe is asked; failed logins are limited;
the read-only pages and API change nothing."""

import http.cookiejar
import json
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from sabot.game import cards, rules
from sabot.virtual.board import PH_ENDED, PH_HELD

from kit import ROOT, SABOT
from kit.browser import browser, csp_violations
from kit.serve_rig import ServeRig

pytestmark = pytest.mark.board  # every test here starts a process

PASSWORDS = {"alice": "supervisor's passphrase", "dan": "dealer's passphrase!"}


def make_accounts(tmp_path):
    path = tmp_path / "accounts.json"
    for name, role in (("alice", "supervisor"), ("dan", "dealer")):
        r = subprocess.run([*SABOT, "accounts", "add", "--accounts", str(path), "--name", name,
                            "--role", role, "--password-stdin"], input=PASSWORDS[name] + "\n",
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
    assert "passphrase" not in path.read_text() and oct(path.stat().st_mode & 0o777) == "0o600"
    return path


def held_rig(tmp_path):
    """serve over one shoe that runs out of cards mid-shoe: held, cards_exhausted."""
    shoe = [t for t in cards.shuffled_shoe(8, 11) if t != "CUT"]
    burn = 1 + cards.BURN_VALUES[shoe[0][0]]
    rounds = rules.deal_shoe(shoe[:burn + 60])[:5]
    # the cards run out two cards into the sixth round
    tokens = shoe[:burn + sum(len(r["player"]) + len(r["banker"]) for r in rounds) + 2]
    rig = ServeRig(tmp_path, shoes=1, seed=11, accounts=make_accounts(tmp_path), tokens=tokens)
    board = rig.boards[0]
    from sabot.virtual.board import Dealer

    dealer = Dealer(board, tokens, on_held=lambda b, ind: None)  # no supervisor key: the host
    end = time.monotonic() + 60
    while board.indicator[0] != PH_HELD:
        assert time.monotonic() < end and board.indicator[0] != PH_ENDED, board.indicator
        dealer.step(timeout=2)
    wait_state(rig, "held")
    return rig


def wait_state(rig, state, timeout=20):
    end = time.monotonic() + timeout
    while rig.get("/api/tables")[0]["state"] != state:
        assert time.monotonic() < end, rig.get("/api/tables")
        time.sleep(0.1)


def press(driver, css, timeout=60, until=("Done", "Not done")):
    """Click a dashboard button (found again if a live update replaced it) and wait for the page
    its form brings (its title one of `until`); that page's text."""
    from selenium.common.exceptions import StaleElementReferenceException

    end = time.monotonic() + timeout
    while True:
        try:
            driver.find_element("css selector", css).click()
            break
        except StaleElementReferenceException:
            assert time.monotonic() < end
    while driver.title not in until:
        assert time.monotonic() < end, driver.title
        time.sleep(0.1)
    return text_of(driver, "body")


def text_of(driver, css, timeout=10, wait=True):
    """The text of the first element `css` finds, read in one script (a live update may replace
    it at any moment), once the page has it (at once with wait=False); None when it has none."""
    end = time.monotonic() + timeout
    while True:
        text = driver.execute_script(
            "const e = document.querySelector(arguments[0]); return e ? e.innerText : null", css)
        if text is not None or not wait or time.monotonic() > end:
            return text
        time.sleep(0.1)


class Client:
    """A script's session with serve's API (cookies kept)."""

    def __init__(self, url):
        self.url = url
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        self.csrf = None

    def post(self, path, doc, csrf=True, **headers):
        headers = {"Content-Type": "application/json", **headers}
        if csrf and self.csrf:
            headers["X-CSRF-Token"] = self.csrf
        body = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
        req = urllib.request.Request(self.url + path, body, headers)
        try:
            with self.opener.open(req, timeout=60) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def login(self, name, password):
        status, out = self.post("/api/login", {"name": name, "password": password})
        if status == 200:
            self.csrf = out["csrf"]
        return status, out


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
        driver.save_screenshot(str(ROOT / "docs" / "dashboard-supervisor.png"))  # README's
        # end-shoe cannot be taken back: a second page asks first, and cancelling sends nothing
        press(driver, "button[data-resolution=end-shoe]", until=("Confirm end-shoe",))
        driver.find_element("link text", "cancel: back to the pit").click()
        assert rig.get("/api/tables")[0]["state"] == "held"
        press(driver, "button[data-resolution=end-shoe]", until=("Confirm end-shoe",))
        done = press(driver, "button[data-confirm=end-shoe]")
        assert "resolved end-shoe" in done and "phase ended" in done, done
        wait_state(rig, "ended")
        driver.get(rig.url + "/")
        done = press(driver, "button[data-action=new-shoe]")
        assert "started the next shoe" in done and "shoe 2" in done, done
        assert csp_violations(driver) == []
        driver.get(rig.url + "/operations")
        log = text_of(driver, "table.pit")
        assert "new-shoe" in log and "end-shoe" in log and log.count("alice") == 2
        assert log.count("supervisor") == 2 and log.count("127.0.0.1") == 2 and "BAC-01" in log
    finally:
        driver.quit()
        code = rig.stop()
    assert code == 0, rig.log_text()
    ops = subprocess.run([*SABOT, "history", "--db", str(rig.db), "--operations"],
                         capture_output=True, text=True, timeout=60)
    assert ops.returncode == 0, ops.stderr
    entries = [json.loads(line) for line in ops.stdout.splitlines()]
    assert [e["operation"] for e in entries] == ["resolve", "new_shoe"]
    assert all(e["account"] == "alice" and e["by"] == "alice" and e["via"] == "serve"
               and e["from"] == "127.0.0.1" and e["role"] == "supervisor" for e in entries)
    assert entries[0]["resolution"] == "end_shoe" and entries[1]["shoe"] == 2
    verified = subprocess.run([*SABOT, "audit", "verify", "--db", str(rig.db), "--registry",
                               str(rig.registry)], capture_output=True, text=True, timeout=120)
    assert verified.returncode == 0, verified.stdout + verified.stderr


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
        assert rig.get("/api/tables") == before and rig.get("/api/tables")[0]["state"] == "held"
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

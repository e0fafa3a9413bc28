"""A pit for the tests: serve over a shoe that runs out of cards mid-shoe (held), operator
accounts, a script's API session, and the browser's presses on the dashboard."""

import http.cookiejar
import json
import subprocess
import time
import urllib.error
import urllib.request

from sabot.game import cards, rules
from sabot.protocol import PH_ENDED, PH_HELD

from kit.base import SABOT
from kit.serve_rig import ServeRig

PASSWORDS = {"alice": "supervisor's passphrase", "dan": "dealer's passphrase!",
             "erin": "another dealer's words", "ivan": "IT's own passphrase"}
ROLES = {"alice": "supervisor", "dan": "dealer", "erin": "dealer", "ivan": "it"}


def make_accounts(tmp_path):
    path = tmp_path / "accounts.json"
    for name, role in ROLES.items():
        r = subprocess.run([*SABOT, "accounts", "add", "--accounts", str(path), "--name", name,
                            "--role", role, "--password-stdin"], input=PASSWORDS[name] + "\n",
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
    assert "passphrase" not in path.read_text() and oct(path.stat().st_mode & 0o777) == "0o600"
    return path


def held_tokens(seed=11, rounds_before=5):
    """A shoe that runs out of cards two cards into round `rounds_before` + 1."""
    shoe = [t for t in cards.shuffled_shoe(8, seed) if t != "CUT"]
    burn = 1 + cards.BURN_VALUES[shoe[0][0]]
    rounds = rules.deal_shoe(shoe[:burn + 60])[:rounds_before]
    return shoe[:burn + sum(len(r["player"]) + len(r["banker"]) for r in rounds) + 2]


def held_rig(tmp_path):
    """serve over one shoe that runs out of cards mid-shoe: held, cards_exhausted."""
    shoe = [t for t in cards.shuffled_shoe(8, 11) if t != "CUT"]
    burn = 1 + cards.BURN_VALUES[shoe[0][0]]
    rounds = rules.deal_shoe(shoe[:burn + 60])[:5]
    # the cards run out two cards into the sixth round
    tokens = shoe[:burn + sum(len(r["player"]) + len(r["banker"]) for r in rounds) + 2]
    rig = ServeRig(tmp_path, shoes=1, seed=11, accounts=make_accounts(tmp_path), tokens=tokens)
    board = rig.boards[0]
    from sabot.virtual.dealer import Dealer

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


def act(driver, css, do, timeout=20):
    """do(the element `css` finds), found again if a live update replaced it meanwhile (found,
    then replaced before the keys reach it, it is stale or, caught mid-replacement, not
    interactable)."""
    from selenium.common.exceptions import (
        ElementNotInteractableException,
        NoSuchElementException,
        StaleElementReferenceException,
    )

    end = time.monotonic() + timeout
    while True:
        try:
            return do(driver.find_element("css selector", css))
        except (StaleElementReferenceException, NoSuchElementException,
                ElementNotInteractableException):
            if time.monotonic() > end:
                raise
            time.sleep(0.1)


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

    def get(self, path):
        """(status, text) of a GET with this session's cookie."""
        try:
            with self.opener.open(self.url + path, timeout=60) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()


def operator_log(rig):
    """The operator log of the rig's store, as `sabot history --operations` prints it: one
    entry a line, parsed."""
    ops = subprocess.run([*SABOT, "history", "--db", str(rig.db), "--operations"],
                         capture_output=True, text=True, timeout=60)
    assert ops.returncode == 0, ops.stderr
    return [json.loads(line) for line in ops.stdout.splitlines()]


def assert_audit_verifies(rig):
    """`sabot audit verify` over the rig's store and registry passes."""
    r = subprocess.run([*SABOT, "audit", "verify", "--db", str(rig.db), "--registry",
                        str(rig.registry)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr

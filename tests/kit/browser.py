"""Debian's headless Chromium through Selenium, for the pages of `sabot serve`: one browser with
its console kept, and the Content-Security-Policy violations that console reported."""

import os
import shutil
import tempfile

import pytest

from .base import ROOT

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


def browser(tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    if not (shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)):
        pytest.fail("chromium and chromium-driver are missing: run `make test` (it installs them)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
              "--disable-component-update", "--disable-sync", "--no-first-run",
              f"--user-data-dir={tmp_path / 'chromium-profile'}", "--window-size=1400,1000"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # the console, for CSP reports
    return webdriver.Chrome(options=opts, service=Service(CHROMEDRIVER))


def csp_violations(driver):
    """The console's Content-Security-Policy refusals since the last call (reading clears it)."""
    return [e["message"] for e in driver.get_log("browser")
            if "Content Security Policy" in e["message"]]


def as_shown(cards):
    """Cards as the players' pages show them: 10♠ Q♦ (the store's TS QD)."""
    return " ".join(("10" if c[0] == "T" else c[:-1]) + "♠♥♦♣"["SHDC".index(c[-1])]
                    for c in cards)


def cards_shown(words):
    """A sentence the CLI says with the store's card codes (TS QD), as the players' pages say
    it: each code a symbol card (10♠ Q♦)."""
    import re

    return re.sub(r"\b([A2-9TJQK][SHDC])\b", lambda m: as_shown([m.group(1)]), words)


def screenshot(driver, name):
    """The page as docs/NAME shows it: written there under `make screenshots`
    (SABOT_SCREENSHOTS=1), otherwise taken into a temporary file, so a test run leaves the
    checkout as it found it."""
    if os.environ.get("SABOT_SCREENSHOTS") == "1":
        assert driver.save_screenshot(str(ROOT / "docs" / name))
        return
    with tempfile.NamedTemporaryFile(suffix=".png") as f:
        assert driver.save_screenshot(f.name)

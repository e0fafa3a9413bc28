"""`sabot serve`, the pit's web server: shoes dealt through virtual boards into one serve process;
the players' scoreboard read in a real browser (Debian's headless Chromium through Selenium) and
its roads compared with `sabot roads` over the same rounds; a live update; a 4-shoe load with no
round lost."""

import json
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from kit import SABOT
from kit.browser import browser, csp_violations
from kit.serve_rig import ServeRig, SSEClient

pytestmark = pytest.mark.board  # every test here starts a process

ROOT = Path(__file__).resolve().parents[1]


READ_PAGE = """
const q = (css) => [...document.querySelectorAll(css)];
const marks = (css) => q(css).map(e => [+e.dataset.i, e.dataset.v]);
const where = document.getElementById("where");
return {version: +document.body.dataset.version, round: +where.dataset.round,
        bead_plate: marks("#bead_plate .bead"),
        big_road: q("#big_road span.big").map(
            e => [+e.dataset.col, +e.dataset.row, e.dataset.v, +e.dataset.ties]),
        big_eye_boy: marks("#big_eye_boy span"), small_road: marks("#small_road span"),
        cockroach_pig: marks("#cockroach_pig span")};
"""


def read_page(driver):
    """The page as drawn, read in one script (an event may replace it at any moment), the roads in
    `sabot roads --json` form."""
    page = driver.execute_script(READ_PAGE)
    columns = {}
    for col, row, v, ties in page["big_road"]:
        columns.setdefault(col, {})[row] = {"winner": v, "ties": ties}
    roads = {"big_road": [[rows[r] for r in sorted(rows)] for _, rows in sorted(columns.items())]}
    for name in ("bead_plate", "big_eye_boy", "small_road", "cockroach_pig"):
        roads[name] = [v for _, v in sorted(page[name])]
    return page["version"], page["round"], roads


def test_scoreboard_in_a_browser_draws_the_roads_sabot_roads_computes_and_updates_live(tmp_path):
    rig = ServeRig(tmp_path, shoes=1, seed=42)
    driver = browser(tmp_path)
    try:
        table = rig.tables[0]
        driver.get(f"{rig.url}/table/{table}")
        start_version, _, _ = read_page(driver)
        rig.deal()
        rig.wait_dealt()
        rig.wait_stored()
        # The open page took the rounds by server-sent events, without a reload.
        end = time.monotonic() + 10
        while True:
            version, shown, drawn = read_page(driver)
            if shown == len(rig.expected(0)) or time.monotonic() > end:
                break
            time.sleep(0.1)
        assert shown == len(rig.expected(0)) and version > start_version
        assert rig.stored(0) == rig.expected(0)
        lines = "".join(json.dumps(r) + "\n" for r in rig.get(f"/api/tables/{table}")["rounds"])
        r = subprocess.run([*SABOT, "roads", "--json"], input=lines, capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        want = json.loads(r.stdout)
        assert drawn == want
        assert rig.get(f"/api/tables/{table}")["roads"] == want
        docs = ROOT / "docs"
        driver.set_window_size(1400, 1000)
        driver.save_screenshot(str(docs / "scoreboard.png"))
        driver.get(rig.url + "/")
        pit = driver.execute_script("return document.querySelector('table.pit').innerText")
        assert table in pit and "ended" in pit and "banker" in pit
        driver.set_window_size(1400, 400)
        driver.save_screenshot(str(docs / "dashboard.png"))
        # The pages ran as served under their Content-Security-Policy: scripts and styles from
        # files, nothing refused (the live updates above are the script running).
        assert csp_violations(driver) == []
        with urllib.request.urlopen(f"{rig.url}/table/{table}", timeout=10) as r:
            assert "script-src 'self'" in r.headers["Content-Security-Policy"]
    finally:
        driver.quit()
        rig.stop()


def test_a_page_sees_every_round_within_a_second_of_its_frame_being_stored(tmp_path):
    rig = ServeRig(tmp_path, shoes=1, seed=43)
    try:
        sse = SSEClient(f"{rig.url}/table/{rig.tables[0]}/events")
        sse.start()
        assert sse.connected.wait(10)
        rig.deal()
        rig.wait_dealt()
        rig.wait_stored()
        time.sleep(0.5)
        assert sse.events and sse.events[-1][1]["round"] == len(rig.expected(0))
        assert max(sse.delays) < 1.0, sse.delays
        assert len(sse.delays) == len(rig.expected(0))  # every round reached the page
        # The shoe's port goes away: the pit sees the table's link lost, since when and why,
        # and serve's log says so with the time, the table and its port.
        rig.boards[0].stop()
        end = time.monotonic() + 10
        while rig.get("/api/tables")[0]["state"] != "link lost":
            assert time.monotonic() < end, rig.get("/api/tables")
            time.sleep(0.1)
        link = rig.get("/api/tables")[0]["link"]
        assert link["state"] == "lost" and link["reason"] and link["since"].endswith("Z"), link
        with urllib.request.urlopen(f"{rig.url}/", timeout=10) as r:
            page = r.read().decode()
        assert f"since {link['since']}: " in page
        lost = [line for line in rig.log_text().splitlines() if "link lost (" in line]
        assert lost and f"{rig.tables[0]} ({rig.boards[0].url}): link lost (" in lost[0], lost
    finally:
        code = rig.stop(signal.SIGTERM)
    # a service manager's stop: the summary, and the exit status of a clean audit
    assert code == 0, rig.log_text()
    assert "served: " in rig.log_text() and "frames verified" in rig.log_text()


def test_four_shoes_at_full_speed_lose_no_round_and_the_api_answers(tmp_path):
    rig = ServeRig(tmp_path, shoes=4, seed=7, side_wagers=["player_pair", "banker_pair"])
    try:
        rig.deal()
        rig.wait_dealt()
        tables = rig.wait_stored()
        assert [t["table"] for t in tables] == rig.tables
        for i in range(4):
            assert rig.stored(i) == rig.expected(i), rig.tables[i]
            d = rig.get(f"/api/tables/{rig.tables[i]}")
            assert set(d) >= {"table", "shoe_id", "shoe", "rounds", "roads", "remaining_cards",
                              "edges", "alarms"}
            assert set(d["edges"]) == {"banker", "player", "tie", "player_pair", "banker_pair"}
            assert d["remaining_cards"] < 416
    finally:
        code = rig.stop()
    h = subprocess.run([*SABOT, "history", "--db", rig.db, "--json"], capture_output=True,
                       text=True, timeout=60)
    assert sum('"winner"' in x for x in h.stdout.splitlines()) == sum(
        len(rig.expected(i)) for i in range(4))
    alarms = subprocess.run([*SABOT, "history", "--db", rig.db, "--alarms"], capture_output=True,
                            text=True, timeout=60).stdout
    # Exit status as `validate`: non-zero exactly when an alarm was raised that is no
    # game-protection notice (player_advantage and repeated_sequence fail only with
    # --fail-on-notice)
    kinds = {json.loads(x)["kind"] for x in alarms.splitlines() if x.strip()}
    assert (code != 0) == bool(kinds - {"player_advantage", "repeated_sequence"}), (code, alarms)
    a = subprocess.run([*SABOT, "audit", "verify", "--db", rig.db, "--registry", rig.registry],
                       capture_output=True, text=True, timeout=120)
    assert a.returncode == 0, a.stderr

"""`sabot serve`, the pit's web server: shoes dealt through virtual boards into one serve process;
the players' scoreboard read in a real browser (Debian's headless Chromium through Selenium) and
its roads compared with `sabot roads` over the same rounds; a live update; a 4-shoe load with no
round lost."""

import json
import signal
import subprocess
import time
import urllib.request
from datetime import datetime

import pytest

from kit import SABOT
from kit.browser import as_shown, browser, csp_violations, screenshot
from kit.procs import free_port_for_tests
from kit.serve_rig import ServeRig, SSEClient

pytestmark = pytest.mark.board  # every test here starts a process

READ_PAGE = """
const q = (css) => [...document.querySelectorAll(css)];
const marks = (css) => q(css).map(e => [+e.dataset.i, e.dataset.v]);
const where = document.getElementById("where");
return {version: +document.body.dataset.version, round: +where.dataset.round,
        bead_plate: marks("#bead_plate .bead"),
        big_road: q("#big_road span.big").map(
            e => [+e.dataset.col, +e.dataset.row, e.dataset.v, +e.dataset.ties]),
        big_eye_boy: marks("#big_eye_boy span"), small_road: marks("#small_road span"),
        cockroach_pig: marks("#cockroach_pig span"),
        ask: Object.fromEntries(["banker", "player"].map(side => [side, Object.fromEntries(
            q(`#ask_${side} .askmark`).map(e => [e.dataset.road, e.dataset.v]))]))};
"""

# Whether the scoreboard fills the window without scrolling: the page's own size against the
# viewport's, and the share of the width the Big Road takes.
LAYOUT = """
const root = document.scrollingElement, big = document.getElementById("big_road");
return {page_w: root.scrollWidth, page_h: root.scrollHeight, w: innerWidth, h: innerHeight,
        big_w: big.getBoundingClientRect().width, big_h: big.getBoundingClientRect().height,
        text: document.getElementById("live").innerText, cut: cut(),
        derived: [...document.querySelectorAll(".road.derived")].map(
          r => Math.round(r.getBoundingClientRect().height))};
// what is shown cut in half: a road's column at its left edge, a last result at its box's end
function cut() {
  const out = [];
  for (const road of document.querySelectorAll(".road")) {
    const edge = road.getBoundingClientRect().left + road.clientLeft;
    const end = edge + road.clientWidth;
    for (const col of road.children) {
      const r = col.getBoundingClientRect();
      const across = (x) => r.left < x - 0.5 && r.right > x + 0.5;
      if (across(edge) || across(end))
        out.push(road.id + " column");
    }
  }
  for (const list of document.querySelectorAll("ol.last")) {
    const box = list.getBoundingClientRect();
    for (const li of list.children) {
      const r = li.getBoundingClientRect();
      const shown = r.left < box.right && r.top < box.bottom;
      if (shown && (r.bottom > box.bottom + 0.5 || r.right > box.right + 0.5))
        out.push("result " + li.value);
    }
  }
  return out;
}
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
    roads["ask"] = {side: {road: None if v == "none" else v for road, v in marks.items()}
                    for side, marks in page["ask"].items()}
    return page["version"], page["round"], roads


# The payouts and the newest result, as the page shows them
PLAYERS_READ = """
return {payouts: [...document.querySelectorAll("#payouts li")].map(
          e => [e.dataset.wager, e.dataset.pays, e.innerText]),
        game: document.getElementById("game").innerText,
        newest: document.querySelector("ol.last li .words").innerText,
        cards: document.querySelector("ol.last li .hands").innerText,
        unwitnessed: (document.getElementById("unwitnessed") || {}).innerText};
"""


def check_what_players_read(driver, rig, table):
    """The game's name and each wager the registry offers with what the settlement's rules pay
    for it (game/wagers.py, asked here with a round that wins it), in English and Chinese; the
    newest result in words and its cards with suit symbols, against `sabot history`."""
    from sabot.game import wagers
    from sabot.game.wagers import Summary

    page = driver.execute_script(PLAYERS_READ)
    assert page["game"] == "EZ Baccarat EZ百家乐"
    offered = [w for w, _, _ in page["payouts"]]
    assert offered == ["player", "banker", "tie", "dragon7", "panda8",
                       "player_pair", "banker_pair"]  # the registry's
    pays = {w: p for w, p, _ in page["payouts"]}
    for wager, won in (("player", Summary(9, 3, 2, 2, False, False)),
                       ("dragon7", Summary(5, 7, 2, 3, False, False)),
                       ("panda8", Summary(8, 5, 3, 2, False, False))):
        assert pays[wager] == f"{wagers.resolve(wager, won)[1]} to 1", pays
    assert pays["tie"] == "8 to 1" and pays["banker"].startswith("1 to 1")
    assert all("赔" in text for _, _, text in page["payouts"])  # and in Chinese
    # a table the registry does not hold as witnessed: no receipt to scan, and it says so
    assert page["unwitnessed"].startswith("This table's results are not independently witnessed")
    h = subprocess.run([*SABOT, "history", "--db", rig.db, "--json"], capture_output=True,
                       text=True, timeout=60)
    last = [json.loads(x) for x in h.stdout.splitlines() if '"winner"' in x][-1]
    p, b = last["player_total"], last["banker_total"]
    want = {"player": f"Player {p} beats Banker {b}", "banker": f"Banker {b} beats Player {p}",
            "tie": f"Tie at {p}"}[last["winner"]]
    assert page["newest"].startswith(want), (page["newest"], last)
    for card in last["player"] + last["banker"]:  # each card with its suit's symbol
        assert as_shown([card]) in page["cards"], (page["cards"], last)


def check_full_screen(driver, w, h, dragons):
    """The scoreboard in a w x h viewport: the whole window, no scrolling, the Big Road over half
    the width, the registry's limits and the offered side wagers' counts; its screenshot into
    docs/ (README shows it)."""
    outer = [w, h]
    end = time.monotonic() + 10
    while True:  # the window, grown by its frame, until the viewport itself is w x h
        driver.set_window_size(*outer)
        time.sleep(0.2)  # a resize is applied after the call returns
        inner = driver.execute_script("return [innerWidth, innerHeight]")
        if inner == [w, h] or time.monotonic() > end:
            break
        outer = [outer[0] + w - inner[0], outer[1] + h - inner[1]]
    lay = driver.execute_script(LAYOUT)
    assert (lay["w"], lay["h"]) == (w, h), lay
    assert lay["page_w"] <= w and lay["page_h"] <= h, lay
    assert lay["big_w"] > 0.5 * w and lay["big_h"] > 0.2 * h, lay
    assert lay["cut"] == [], lay["cut"]  # whole columns and whole results, or none
    assert len(set(lay["derived"])) == 1, lay["derived"]  # the three derived roads one height
    assert "Min $25 · Max $5,000" in lay["text"] and f"Dragon 7 {dragons}" in lay["text"]
    assert "Panda 8 " in lay["text"] and "Lucky Six" not in lay["text"]
    assert "Banker ask" in lay["text"] and "cards dealt " in lay["text"]
    screenshot(driver, f"scoreboard-{w}x{h}.png")


@pytest.mark.long
def test_scoreboard_in_a_browser_draws_the_roads_sabot_roads_computes_and_updates_live(tmp_path):
    # every side wager an EZ table offers: the most lines its payouts and counts take
    rig = ServeRig(tmp_path, shoes=1, seed=42, ez=True, side_wagers=["dragon7", "panda8",
                                                                     "player_pair",
                                                                     "banker_pair"],
                   limits=(2500, 500000))
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
        # the five roads and the Banker and Player asks, read off the page, are sabot roads'
        assert drawn == want and set(want["ask"]) == {"banker", "player"}
        assert rig.get(f"/api/tables/{table}")["roads"] == want
        # As a casino shows it, on a 1920x1080 screen and a 1280x720 table display: the whole
        # window and no scrolling, the table's limits from the registry, the side wagers'
        # counts it offers, and no state of the pit's own.
        rounds = rig.get(f"/api/tables/{table}")["rounds"]
        for w, h in ((1920, 1080), (1280, 720)):
            check_full_screen(driver, w, h, sum("dragon7" in r["flags"] for r in rounds))
        check_what_players_read(driver, rig, table)
        driver.get(rig.url + "/")
        pit = driver.execute_script("return document.querySelector('table.pit').innerText")
        assert table in pit and "shoe ended" in pit and "Banker" in pit
        driver.set_window_size(1400, 400)
        screenshot(driver, "dashboard.png")
        # a lost link is the pit's business: the players' page only asks them to wait
        rig.boards[0].stop()
        driver.get(f"{rig.url}/table/{table}")
        end = time.monotonic() + 10
        while "please wait" not in driver.execute_script(LAYOUT)["text"]:
            assert time.monotonic() < end, driver.execute_script(LAYOUT)["text"]
            time.sleep(0.1)
        assert "link" not in driver.execute_script(LAYOUT)["text"]
        # The pages ran as served under their Content-Security-Policy: scripts and styles from
        # files, nothing refused (the live updates above are the script running).
        assert csp_violations(driver) == []
        with urllib.request.urlopen(f"{rig.url}/table/{table}", timeout=10) as r:
            assert "script-src 'self'" in r.headers["Content-Security-Policy"]
    finally:
        driver.quit()
        rig.stop()


@pytest.mark.long
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
        since = datetime.fromisoformat(link["since"])  # ISO 8601 with the server's offset
        assert link["state"] == "lost" and link["reason"] and since.tzinfo is not None, link
        with urllib.request.urlopen(f"{rig.url}/", timeout=10) as r:
            page = r.read().decode()
        assert f"since {since.astimezone().strftime('%H:%M:%S')}" in page and \
            link["reason"] in page
        lost = [line for line in rig.log_text().splitlines() if "link lost (" in line]
        assert lost and f"{rig.tables[0]} ({rig.boards[0].url}): link lost (" in lost[0], lost
    finally:
        code = rig.stop(signal.SIGTERM)
    # a service manager's stop: the summary, and the exit status of a clean audit
    assert code == 0, rig.log_text()
    assert "served: " in rig.log_text() and "frames verified" in rig.log_text()


@pytest.mark.long
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
        # the shoes' reads that came while a commit was made were stored by the next one
        stats = rig.get("/api/stats")
        assert stats["reads_committed"] > stats["commits"] > 0, stats
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


@pytest.mark.long
def test_a_shoe_plugged_in_at_the_wrong_table_is_named_once_and_stores_nothing_as_its(tmp_path):
    """Two shoes, each port given the other's id: each table says it is not the registered
    shoe (state `wrong shoe`, the API's and the dashboard's), serve says so once per table
    instead of a rejected frame every hello, and nothing is stored as either table's."""
    rig = ServeRig(tmp_path, shoes=2, seed=5, crossed=True)
    try:
        end = time.monotonic() + 20
        while {t["state"] for t in rig.get("/api/tables")} != {"wrong shoe"}:
            assert time.monotonic() < end, rig.get("/api/tables")
            time.sleep(0.2)
        time.sleep(4.5)  # two hellos more
        for t in rig.get("/api/tables"):
            assert "answers on" in t["state_detail"] and t["round"] == 0, t
            assert t["last_frame_at"] is None, t  # nothing authentic stored as its
        with urllib.request.urlopen(f"{rig.url}/", timeout=10) as r:
            assert "not the registered shoe" in r.read().decode()
        log = rig.log_text()
        assert log.count("not the registered shoe") == 2, log
        assert "rejected frames" not in log, log
    finally:
        rig.stop()


def test_a_second_serve_on_a_shoe_another_serve_validates_is_refused_naming_the_holder(
        tmp_path):
    """Two pits' serves on one shoe, each with a store of its own (no database sees both): the
    shoe tells the second its link is taken and by whom, the second refuses to start (one
    line, exit 2), and the first's link is never disturbed — it goes on storing the shoe."""
    rig = ServeRig(tmp_path, shoes=1, seed=9, cut_from_end=360)
    try:
        end = time.monotonic() + 20
        while rig.get("/api/tables")[0]["last_frame_at"] is None:
            assert time.monotonic() < end, rig.get("/api/tables")
            time.sleep(0.1)
        other = tmp_path / "other"
        other.mkdir()
        second = subprocess.run(
            [*SABOT, "serve", "--listen", f"127.0.0.1:{free_port_for_tests()}", "--db",
             str(other / "pit2.db"),
             "--registry", str(rig.registry), "--key", str(rig.key.path),
             "--shoe", f"{rig.boards[0].url}={rig.shoe_ids[0]}"],
            capture_output=True, text=True, timeout=60, cwd=other)
        said = second.stderr.strip().splitlines()
        assert second.returncode == 2 and not (other / "pit2.db").exists(), second.stderr
        assert said[-1].startswith(f"sabot serve: BAC-01 ({rig.shoe_ids[0]:#010x}) on "
                                   f"{rig.boards[0].url}: the shoe's link is taken by another "
                                   "host (127.0.0.1:"), said
        rig.deal()
        rig.wait_dealt()
        rig.wait_stored()
        assert rig.stored(0) == rig.expected(0)
        assert "link lost" not in rig.log_text(), rig.log_text()
    finally:
        rig.stop()

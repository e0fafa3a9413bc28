"""A floor that is not recording never looks healthy: `sabot serve` on a real PostgreSQL primary
with a synchronous hot standby (tests/kit/pg.py), a virtual shoe dealing, the dashboard in
headless Chromium. The database is frozen mid-shoe twice — its synchronous standby gone (every
commit waits for it), then the primary's processes stopped with SIGSTOP — and each time the
page says NOT RECORDING, with the cause the database gives, within the bound; serve's log has
one line for it; recording comes back with nothing lost or stored twice. Frozen once more,
serve answers SIGTERM within a bound and says what it had not stored."""

import http.client
import json
import os
import signal
import subprocess
import threading
import time
import urllib.request

import pytest

from sabot.virtual.dealer import Dealer

from kit import SABOT
from kit.browser import browser
from kit.pg import PgServer
from kit.procs import free_port_for_tests
from kit.serve_rig import ServeRig

pytestmark = pytest.mark.board

BOUND = 2.0  # serve --store-alarm


def processes_of(server):
    """The server's postmaster and every process it started (its backends, walsender, ...)."""
    with open(os.path.join(server.data, "postmaster.pid")) as f:
        master = int(f.readline())
    kids = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == master:
                        kids.append(int(pid))
            except (OSError, ValueError, IndexError):
                pass
    return [master, *kids]


def freeze(server, sig):
    for pid in processes_of(server):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def stop_standby(standby):
    standby._run("pg_ctl", "-D", standby.data, "-m", "immediate", "-w", "stop")


def start_standby(standby):
    standby._run("pg_ctl", "-D", standby.data, "-l", os.path.join(standby.dir, "log"), "-w",
                 "-t", "60", "-o", f"-k {standby.dir} -h 127.0.0.1 -p {standby.port}", "start")


def page_alarm(driver):
    """The NOT RECORDING line the dashboard shows now, or None."""
    return driver.execute_script(
        "const e = document.getElementById('not-recording'); return e ? e.innerText : null")


def until(what, done, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        got = what()
        if done(got):
            return got
        time.sleep(0.1)
    raise AssertionError(f"not within {seconds} s: {got!r}")


def health(rig):
    try:
        with urllib.request.urlopen(rig.url + "/api/health", timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


class Floor:
    """`sabot serve --floor` over the pit's database, as another host's: it reads the store."""

    def __init__(self, tmp_path, rig):
        self.port = free_port_for_tests()
        self.proc = subprocess.Popen([*SABOT, "serve", "--floor", "--listen",
                                      f"127.0.0.1:{self.port}", "--db", str(rig.db),
                                      "--registry", str(rig.registry), "--store-alarm",
                                      str(BOUND)],
                                     stderr=open(tmp_path / "floor.log", "w"), cwd=tmp_path)

    def table(self):
        """The floor's first table, as /api/floor says it now ({} before it answers)."""
        assert self.proc.poll() is None, "the floor's serve ended"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/floor",
                                        timeout=5) as r:
                return json.loads(r.read())["pits"][0]["tables"][0]
        except (OSError, http.client.HTTPException, IndexError, KeyError):
            return {}

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            assert self.proc.wait(20) == 0


def standby_gone(rig, driver, standby, floor):
    """The synchronous standby stopped: every commit waits for it; the page, the API, the
    health check, serve's log and the floor's serve say so within the bound; it comes back."""
    stop_standby(standby)
    gone = time.monotonic()
    said = until(lambda: page_alarm(driver), bool, BOUND + 6)
    assert time.monotonic() - gone < BOUND + 6
    assert "synchronous standby" in said and "no standby is connected" in said, said
    assert "the shoes keep every frame" in said
    table = rig.get("/api/tables")[0]
    assert table["state"] == "not recording" and table["state_since"], table
    status, body = health(rig)
    assert status == 503 and body["recording"] is False and \
        "synchronous standby" in body["not_recording"]["detail"], body
    assert body["attention"]["BAC-01"]["state"] == "not recording", body
    log = rig.log_text()
    assert log.count("ALARM not_recording") == 1 and "synchronous standby" in log, log
    # the floor sees it in the database: the pit's writer held waiting for the standby
    seen = until(floor.table, lambda t: t.get("state") == "not recording", BOUND + 6)
    assert "synchronous standby" in seen["state_detail"], seen
    floor.stop()
    start_standby(standby)
    until(lambda: page_alarm(driver), lambda s: s is None, 30)
    assert "recording again" in rig.log_text()


def primary_frozen(rig, driver, primary):
    """The primary stopped (SIGSTOP: its sockets open, nothing answered): the same, and the
    pages answer meanwhile."""
    freeze(primary, signal.SIGSTOP)
    try:
        said = until(lambda: page_alarm(driver), bool, BOUND + 8)
        assert "does not answer" in said, said
        assert rig.get("/api/tables")[0]["state"] == "not recording"
    finally:
        freeze(primary, signal.SIGCONT)
    until(lambda: page_alarm(driver), lambda s: s is None, 30)


def stopped_while_frozen(tmp_path, rig, driver, primary):
    """Frozen again, serve is stopped: it stops within a bound and says what it had not stored
    (the shoe keeps it); exit 2."""
    freeze(primary, signal.SIGSTOP)
    try:
        until(lambda: page_alarm(driver), bool, BOUND + 8)
        driver.get("about:blank")
        t = time.monotonic()
        code = rig.stop(signal.SIGTERM)
        took = time.monotonic() - t
    finally:
        freeze(primary, signal.SIGCONT)
    assert took < 15, took
    log = (tmp_path / "serve.log").read_text()
    assert "was not stored when serve stopped" in log or "did not confirm" in log, log
    assert code == 2, log


@pytest.mark.long
def test_a_frozen_database_is_an_alarm_on_the_page_within_the_bound_and_nothing_is_lost(
        tmp_path):
    primary = PgServer().start()
    standby = rig = driver = floor = None
    try:
        standby = primary.standby()  # every commit waits for it (synchronous_standby_names)
        rig = ServeRig(tmp_path, shoes=1, seed=71, db=primary.database(), cut_from_end=330,
                       extra=["--store-alarm", str(BOUND)])
        dealer = Dealer(rig.boards[0], rig.tokens[0])
        paced = threading.Event()

        def deal():  # a card every 0.2 s (the freezes come mid-shoe), then at full speed
            while dealer.step():
                if not paced.is_set():
                    time.sleep(0.2)
        floor = Floor(tmp_path, rig)
        dealing = threading.Thread(target=deal, daemon=True)
        dealing.start()
        driver = browser(tmp_path)
        driver.get(rig.url + "/")
        until(lambda: rig.get("/api/tables")[0]["round"], lambda n: n >= 3, 60)
        assert page_alarm(driver) is None and health(rig)[0] == 200
        until(floor.table, lambda t: t.get("state") == "dealing", 30)

        standby_gone(rig, driver, standby, floor)
        primary_frozen(rig, driver, primary)
        paced.set()
        dealing.join(120)
        rig.wait_stored()
        assert rig.stored(0) == rig.expected(0)  # every round once, in order: nothing lost
        # the two alarms are in the operator log, each with its times (serve_alarm)
        ops = subprocess.run([*SABOT, "history", "--db", str(rig.db), "--operations"],
                             capture_output=True, text=True, timeout=60)
        logged = [json.loads(line) for line in ops.stdout.splitlines()]
        kinds = [e.get("kind") for e in logged if e.get("operation") == "serve_alarm"]
        assert kinds == ["not_recording", "not_recording"], ops.stdout + ops.stderr
        stopped_while_frozen(tmp_path, rig, driver, primary)
    finally:
        if driver is not None:
            driver.quit()
        if floor is not None and floor.proc.poll() is None:
            floor.proc.kill()
        if rig is not None:
            rig.stop()
        if standby is not None:
            standby.stop()
        primary.stop()

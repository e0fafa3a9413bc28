"""A floor that is not recording never looks healthy: `sabot serve` on a real PostgreSQL primary
with a synchronous hot standby (tests/kit/pg.py), a virtual shoe dealing, the dashboard in
headless Chromium. The database is frozen mid-shoe twice — its synchronous standby gone (every
commit waits for it), then the primary's processes stopped with SIGSTOP — and each time the
page says NOT RECORDING, with the cause the database gives, within the bound; serve's log has
one line for it; recording comes back with nothing lost or stored twice. Frozen once more,
serve answers SIGTERM within a bound and says what it had not stored."""

import json
import os
import signal
import subprocess
import threading
import time
import urllib.request

import pytest

from kit import SABOT
from kit.browser import browser
from kit.pg import PgServer
from kit.procs import free_port_for_tests
from kit.serve_rig import ServeRig
from sabot.virtual.board import Dealer

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

        def deal():  # a card every 50 ms until told to go at full speed
            while dealer.step():
                if not paced.is_set():
                    time.sleep(0.05)
        dealing = threading.Thread(target=deal, daemon=True)
        dealing.start()
        driver = browser(tmp_path)
        driver.get(rig.url + "/")
        until(lambda: rig.get("/api/tables")[0]["round"], lambda n: n >= 3, 60)
        assert page_alarm(driver) is None and health(rig)[0] == 200

        # the floor's own serve, on another host as far as it knows: it reads the database
        floor_port = free_port_for_tests()
        floor = subprocess.Popen([*SABOT, "serve", "--floor", "--listen",
                                  f"127.0.0.1:{floor_port}", "--db", str(rig.db), "--registry",
                                  str(rig.registry), "--store-alarm", str(BOUND)],
                                 stderr=open(tmp_path / "floor.log", "w"), cwd=tmp_path)

        def floor_table():
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{floor_port}/api/floor",
                                            timeout=5) as r:
                    return json.loads(r.read())["pits"][0]["tables"][0]
            except (OSError, IndexError, KeyError):
                return {}
        until(floor_table, lambda t: t.get("state") == "dealing", 30)

        # 1. the synchronous standby gone: every commit waits for it, silently unless told
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
        log = rig.log_text()
        assert log.count("ALARM not_recording") == 1 and "synchronous standby" in log, log
        # the floor sees it in the database: the pit's writer held waiting for the standby
        seen = until(floor_table, lambda t: t.get("state") == "not recording", BOUND + 6)
        assert "synchronous standby" in seen["state_detail"], seen
        floor.send_signal(signal.SIGINT)
        assert floor.wait(20) == 0
        start_standby(standby)
        until(lambda: page_alarm(driver), lambda s: s is None, 30)
        assert "recording again" in rig.log_text()

        # 2. the primary stopped (SIGSTOP: its sockets open, nothing answered)
        freeze(primary, signal.SIGSTOP)
        try:
            said = until(lambda: page_alarm(driver), bool, BOUND + 8)
            assert "does not answer" in said, said
            assert rig.get("/api/tables")[0]["state"] == "not recording"  # the pages answer
        finally:
            freeze(primary, signal.SIGCONT)
        until(lambda: page_alarm(driver), lambda s: s is None, 30)

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

        # 3. frozen again, serve is stopped: it stops within a bound and says what it had not
        # stored (the shoe keeps it)
        freeze(primary, signal.SIGSTOP)
        try:
            until(lambda: page_alarm(driver), bool, BOUND + 8)
            driver.get("about:blank")
            t = time.monotonic()
            code = rig.stop(signal.SIGTERM)
            took = time.monotonic() - t
            rig = None
        finally:
            freeze(primary, signal.SIGCONT)
        assert took < 15, took
        log = (tmp_path / "serve.log").read_text()
        assert "was not stored when serve stopped" in log or "did not confirm" in log, log
        assert code == 2, log
    finally:
        if driver is not None:
            driver.quit()
        if floor is not None and floor.poll() is None:
            floor.kill()
        if rig is not None:
            rig.stop()
        if standby is not None:
            standby.stop()
        primary.stop()

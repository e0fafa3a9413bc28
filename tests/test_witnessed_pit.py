"""The witnessed pit end to end, from the command line: a witness someone else runs, then a
virtual shoe provisioned (its registry given to the witness; its first checkpoint binds its key
there), dealt by `sabot demo --witness URL=VKEY`: the shoe signs checkpoints of its own log, the
validator checks each against the stored frames and sends it to the witness, which cosigns; `sabot
receipt` then writes a round's receipt from the store and `sabot receipt verify` checks it
offline — and refuses it with a card changed. A witness nobody can reach is said in one line,
and no receipt is made."""

import base64
import json
import re
import sqlite3
import subprocess
import urllib.error
import urllib.request

import pytest

from kit import SABOT
from kit.procs import free_port_for_tests, wait_until_served

pytestmark = pytest.mark.board


def run(*args, **kw):
    return subprocess.run([*SABOT, *args], capture_output=True, text=True, timeout=180, **kw)


@pytest.fixture
def pit(tmp_path):
    """A provisioned virtual shoe for the demo's store (its flash beside --db), and a witness
    with the registry, listening."""
    key, reg, db = tmp_path / "host.key", tmp_path / "shoes.json", tmp_path / "pit.db"
    wkey = tmp_path / "regulator.key"
    vkey = run("witness", "--key", str(wkey), "--vkey").stdout.strip()
    port = free_port_for_tests()
    proc = subprocess.Popen([*SABOT, "witness", "--key", str(wkey), "--db",
                             str(tmp_path / "witness.db"), "--registry", str(reg), "--listen",
                             f"127.0.0.1:{port}"], stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    wait_until_served(url + "/logs")
    # as README: the witness first (its registry not written yet), then the shoe, whose first
    # checkpoint binds its key
    r = run("provision", "--key", str(key), "--flash", f"{db}.flash", "--registry", str(reg),
            "--table", "bac1", "--witness", f"{url}={vkey}")
    assert r.returncode == 0 and "holds the shoe's key" in r.stderr, r.stderr
    yield {"dir": tmp_path, "key": key, "reg": reg, "db": db, "vkey": vkey, "url": url}
    proc.send_signal(2)
    proc.wait(10)


@pytest.mark.long
def test_a_witnessed_demo_gives_a_receipt_the_player_verifies(pit):
    r = run("demo", "--db", str(pit["db"]), "--key", str(pit["key"]), "--registry",
            str(pit["reg"]), "--seed", "3", "--json", "--witness", f"{pit['url']}={pit['vkey']}")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    with sqlite3.connect(pit["db"]) as con:
        frames = con.execute("SELECT MAX(seq) FROM records").fetchone()[0]
    assert s["rejected"] == 0 and s["checkpoint"] == frames  # the whole log, shoe end included
    assert s["cosigned"]["size"] == frames and len(s["cosigned"]["witnesses"]) == 1
    held = json.loads(urllib.request.urlopen(pit["url"] + "/logs", timeout=5).read())
    assert [log["size"] for log in held["logs"]] == [frames]
    assert run("audit", "verify", "--db", str(pit["db"]), "--registry",
               str(pit["reg"])).returncode == 0
    r = run("audit", "verify", "--db", str(pit["db"]), "--registry", str(pit["reg"]),
            "--witness", pit["vkey"])
    assert r.returncode == 0 and "beyond the last checkpoint" not in r.stdout, r.stdout
    stored_cosignatures_are_the_witnesses(pit)

    out = pit["dir"] / "round5.tlog-proof"
    r = run("receipt", "--db", str(pit["db"]), "--registry", str(pit["reg"]), "--table", "bac1",
            "--shoe", "1", "--round", "5", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert len(out.read_bytes()) <= 1024  # fits one QR code
    import os

    mask = os.umask(0o022)
    os.umask(mask)
    for public in (out, pit["reg"]):  # a receipt and the registry are for anyone: not mode 600
        assert os.stat(public).st_mode & 0o777 == 0o666 & ~mask, public
    check = ("receipt", "verify", str(out), "--registry", str(pit["reg"]), "--witness",
             pit["vkey"])
    r = run(*check)
    assert r.returncode == 0, r.stderr
    assert "round 5 of its shoe 1" in r.stdout and "cannot drop or change" in r.stdout
    rounds = [json.loads(line) for line in run("history", "--db", str(pit["db"]), "--shoe", "1",
                                                "--round", "5", "--json").stdout.splitlines()]
    first = rounds[0]["player"][0]
    assert first in r.stdout

    served(pit, out.read_text())

    # the player's card changed in the receipt's frames: refused, and says which part
    import base64

    lines = out.read_text().split("\n")
    extra = bytearray(base64.b64decode(lines[1][6:]))
    extra[2 + 46 + 4] ^= 1  # the initial cards' first card
    lines[1] = "extra " + base64.b64encode(bytes(extra)).decode()
    out.write_text("\n".join(lines))
    r = run(*check)
    assert r.returncode != 0 and r.stderr.count("\n") == 1, r.stderr
    assert "initial cards" in r.stderr


def test_a_witnessed_table_dealt_with_no_witness_fails_the_audit_past_its_bound(pit):
    """The shoe is bound to the witness, so its table is a witnessed one; a pit that deals it
    without --witness (or with the witness unreachable) leaves every checkpoint uncosigned: the
    audit against the witness's key says how much lies beyond it and fails past the table's
    bound, where before it passed a whole shoe no witness had seen (and could not miss)."""
    entry = json.loads(pit["reg"].read_text())["shoes"][0]
    assert entry["witness_bound"] == 10  # set when provision bound it
    r = run("demo", "--db", str(pit["db"]), "--key", str(pit["key"]), "--registry",
            str(pit["reg"]), "--seed", "3")
    assert r.returncode == 0, r.stderr
    plain = run("audit", "verify", "--db", str(pit["db"]), "--registry", str(pit["reg"]))
    assert plain.returncode == 0, plain.stderr  # nothing the store alone can hold against it
    r = run("audit", "verify", "--db", str(pit["db"]), "--registry", str(pit["reg"]),
            "--witness", pit["vkey"], "--json")
    assert r.returncode == 1
    out = json.loads(r.stdout)
    (beyond,) = out["beyond"]
    assert beyond["cosigned_size"] == 0 and beyond["bound"] == 10
    assert beyond["rounds"] > 10 and beyond["frames"] > beyond["rounds"]
    assert "a witnessed table" in out["problem"] and f"{beyond['rounds']} rounds" in out["problem"]

    # the shoe's end deleted, so that it looks still dealt: its checkpoints every 10 rounds were
    # signed all the same, so the rounds before its newest but one are overdue
    from test_audit_verify import drop_triggers, rechain

    cut = pit["dir"] / "cut.db"
    cut.write_bytes(pit["db"].read_bytes())
    with sqlite3.connect(cut) as con:
        (end,), = con.execute("SELECT seq FROM records WHERE kind='shoe_end'")
        (first,), = con.execute("SELECT MIN(id) FROM frames WHERE seq >= ?", (end,))
    con = sqlite3.connect(cut)
    drop_triggers(con, cut)
    con.execute("DELETE FROM frames WHERE id >= ?", (first,))
    con.execute("DELETE FROM records WHERE seq >= ?", (end,))
    con.execute("DELETE FROM link_state WHERE last_seq >= ?", (end,))
    con.commit()
    con.close()
    rechain(cut)
    r = run("audit", "verify", "--db", str(cut), "--registry", str(pit["reg"]), "--witness",
            pit["vkey"])
    assert r.returncode == 1 and "a witnessed table" in r.stderr, (r.stdout, r.stderr)
    # the bound taken out of the registry (a host file): the witness's state still holds the shoe
    # bound to it, and the bound with it
    doc = json.loads(pit["reg"].read_text())
    doc["shoes"][0]["witness_bound"] = None
    loose = pit["dir"] / "loose.json"
    loose.write_text(json.dumps(doc))
    r = run("audit", "verify", "--db", str(pit["db"]), "--registry", str(loose), "--witness",
            pit["vkey"], "--witness-state", pit["url"])
    assert r.returncode == 1 and "a witnessed table" in r.stderr, (r.stdout, r.stderr)


@pytest.mark.long
def test_a_witnessed_table_served_with_no_witness_alarms_on_the_dashboard(pit):
    """serve started without --witness for a witnessed table stores its rounds, and once more
    of them than its bound lie beyond any cosigned checkpoint the table's alarm says so, on the
    dashboard and in the API, as it happens (not only at the next audit)."""
    import time

    d = pit["dir"]
    assert run("shuffle", "--seed", "4", "-o", str(d / "s.txt")).returncode == 0
    board_port, web = free_port_for_tests(), free_port_for_tests()
    board = subprocess.Popen([*SABOT, "board", "--listen", f"127.0.0.1:{board_port}", "--flash",
                              f"{pit['db']}.flash", "--shoe", str(d / "s.txt")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    serve = subprocess.Popen([*SABOT, "serve", "--db", str(pit["db"]), "--registry",
                              str(pit["reg"]), "--key", str(pit["key"]), "--listen",
                              f"127.0.0.1:{web}", "--shoe", f"socket://127.0.0.1:{board_port}"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        base = f"http://127.0.0.1:{web}"
        wait_until_served(base + "/api/tables")
        found = None
        for _ in range(300):
            table = json.loads(urllib.request.urlopen(base + "/api/tables/bac1", timeout=5).read())
            found = next((a for a in table["alarms"] if a["kind"] == "not_witnessed"), None)
            if found:
                break
            time.sleep(0.2)
        assert found is not None, table["alarms"]
        assert "more than its 10" in found["detail"] and "without --witness" in found["detail"]
        page = urllib.request.urlopen(base + "/", timeout=5).read().decode()
        assert "its rounds are not witnessed" in page
    finally:
        serve.send_signal(2)
        err = serve.communicate(timeout=20)[1]
        board.terminate()
        board.wait(10)
    assert "ALARM not_witnessed (bac1)" in err


def stored_cosignatures_are_the_witnesses(pit):
    """Every cosignature the store holds verifies with the witness's key (`audit verify
    --witness VKEY`). An insider who makes one up (another signature under the witness's name,
    the row chain recomputed) passes the check of names alone, and not that of the key."""
    from test_audit_verify import rechain

    verify = ("audit", "verify", "--registry", str(pit["reg"]))
    r = run(*verify, "--db", str(pit["db"]), "--witness", pit["vkey"])
    with sqlite3.connect(pit["db"]) as con:
        n = con.execute("SELECT COUNT(*) FROM cosignatures").fetchone()[0]
    assert r.returncode == 0 and n > 0 and f"{n} stored cosignatures verified" in r.stdout, r
    edited = pit["dir"] / "edited.db"
    edited.write_bytes(pit["db"].read_bytes())
    with sqlite3.connect(edited) as con:
        con.execute("DROP TRIGGER cosignatures_append_only_u")
        (rid, line), = con.execute("SELECT id, cosignature FROM cosignatures ORDER BY id DESC"
                                   " LIMIT 1")
        head, _, sig = line.rstrip("\n").rpartition(" ")
        raw = bytearray(base64.b64decode(sig))
        raw[-1] ^= 1  # the Ed25519 signature's last byte: its name and key ID kept
        con.execute("UPDATE cosignatures SET cosignature=? WHERE id=?",
                    (f"{head} {base64.b64encode(bytes(raw)).decode()}" + line[len(line.rstrip()):],
                     rid))
    rechain(edited)
    assert run(*verify, "--db", str(edited)).returncode == 0  # names alone
    r = run(*verify, "--db", str(edited), "--witness", pit["vkey"])
    assert r.returncode == 1 and f"cosignature id {rid}" in r.stderr, r
    assert "its key does not verify it" in r.stderr


def test_a_witness_nobody_reaches_is_said_in_one_line_and_no_receipt_is_made(pit):
    gone = f"http://127.0.0.1:{free_port_for_tests()}"
    r = run("demo", "--db", str(pit["db"]), "--key", str(pit["key"]), "--registry",
            str(pit["reg"]), "--seed", "4", "--witness", f"{gone}={pit['vkey']}")
    assert r.returncode == 0, r.stderr  # the audit went on: every round verified and stored
    said = [line for line in r.stderr.splitlines() if "could not be reached" in line]
    assert said and all(gone in line for line in said)
    assert "shoe's log: its element signed a checkpoint" in r.stdout
    assert "no witness cosigned one in this session" in r.stdout
    r = run("receipt", "--db", str(pit["db"]), "--registry", str(pit["reg"]), "--shoe", "1",
            "--round", "5")
    assert r.returncode != 0 and r.stderr.count("\n") == 1, r.stderr
    assert "no checkpoint of the shoe's log in" in r.stderr and "has 1 cosignature" in r.stderr


def served(pit, receipt):
    """The same store behind `sabot serve --floor`: the table's scoreboard shows the last round's
    QR code — the checker page's link to that round's receipt on this server — and the checker,
    opened at that link in Chromium, loads the receipt and verifies it with the player's keys
    (the registry and the witness's verifier key pasted), in the browser."""
    import io
    from pathlib import Path

    import segno
    from selenium.webdriver.support.ui import WebDriverWait

    import sabot.pit

    from kit.browser import browser

    # the regulator's copy of the checker, not this server's: here, the page saved as a file
    checker = (Path(sabot.pit.__file__).parent / "static" / "verify.html").as_uri()
    port = free_port_for_tests()
    base = f"http://127.0.0.1:{port}"
    # the address players' phones reach it by: here another name of the same host
    public = f"http://localhost:{port}"
    proc = subprocess.Popen([*SABOT, "serve", "--floor", "--db", str(pit["db"]), "--registry",
                             str(pit["reg"]), "--listen", f"127.0.0.1:{port}", "--checker",
                             checker, "--public-url", public + "/"], stderr=subprocess.PIPE,
                            text=True)
    driver = None
    try:
        board = wait_until_served(base + "/table/bac1").decode()
        assert "not independently witnessed" not in board  # a witnessed table: its QR code
        last = max(int(x) for x in re.findall(r'/qr/bac1/1/(\d+)"', board))
        history(base, board, last)
        link = f"{checker}#{public}/receipt/bac1/1/{last}"
        svg = urllib.request.urlopen(f"{base}/qr/bac1/1/{last}", timeout=5).read().decode()
        out = io.BytesIO()
        segno.make(link, error="m").save(out, kind="svg", xmldecl=False, scale=6, border=2)
        assert svg.encode() == out.getvalue()  # the code encodes that link
        got = urllib.request.urlopen(f"{base}/receipt/bac1/1/5", timeout=5).read().decode()
        assert got == receipt  # the same receipt the command line made
        with pytest.raises(urllib.error.HTTPError) as none:
            urllib.request.urlopen(f"{base}/receipt/bac1/1/999", timeout=5)
        assert none.value.code == 404 and b"not in" in none.value.read()
        for path in ("/receipt/bac1/1/" + "9" * 30, "/qr/bac1/1/" + "9" * 3000):
            with pytest.raises(urllib.error.HTTPError) as huge:  # a number no round has
                urllib.request.urlopen(base + path, timeout=5)
            assert huge.value.code == 404
        published(base, pit, got)
        driver = browser(pit["dir"])
        driver.get(base + "/table/bac1")  # the scoreboard shows the code as an image
        WebDriverWait(driver, 20).until(lambda d: d.execute_script(
            "const i = document.querySelector('#receipt-qr img');"
            "return i !== null && i.complete && i.naturalWidth > 100;"))
        driver.get(link.replace(f"/{last}", "/5"))
        WebDriverWait(driver, 20).until(lambda d: d.find_element(
            "id", "receipt").get_attribute("value").startswith("c2sp.org/tlog-proof@v1"))
        driver.execute_script(
            "document.getElementById('shoe-key').value = arguments[0];"
            "document.getElementById('witnesses').value = arguments[1];"
            "document.getElementById('check').click();", pit["reg"].read_text(), pit["vkey"])
        WebDriverWait(driver, 20).until(lambda d: d.find_element("id", "verdict").text.startswith(
            ("Verified", "Not verified")))
        said = driver.find_element("id", "verdict").text
        assert said.startswith("Verified: This is the result shoe") and "round 5" in said, said
        on_a_phone_with_the_witness_checker(driver, pit)
    finally:
        if driver is not None:
            driver.quit()
        proc.send_signal(2)
        proc.wait(10)


def on_a_phone_with_the_witness_checker(driver, pit):
    """The witness's own checker (serve --checker WITNESS/check): the scoreboard's QR code read
    off the screen and decoded as a phone would, then the page it links to, on a phone's
    screen, says the verdict with nothing typed or pasted, the keys the witness's (its verifier
    key, the shoe's key it holds from provisioning)."""
    from selenium.webdriver.support.ui import WebDriverWait

    port = free_port_for_tests()
    here = f"http://localhost:{port}"
    serve = subprocess.Popen([*SABOT, "serve", "--floor", "--db", str(pit["db"]), "--registry",
                              str(pit["reg"]), "--listen", f"127.0.0.1:{port}", "--checker",
                              f"{pit['url']}/check", "--public-url", here],
                             stderr=subprocess.DEVNULL)
    try:
        wait_until_served(f"http://127.0.0.1:{port}/table/bac1")
        driver.get(f"{here}/table/bac1")
        link = scanned(driver)
        last = int(link.rsplit("/", 1)[1])
        assert link == f"{pit['url']}/check#{here}/receipt/bac1/1/{last}", link
        driver.set_window_size(390, 844)
        driver.get(link)
        WebDriverWait(driver, 20).until(lambda d: d.find_element("id", "verdict").text
                                        .startswith(("Verified", "Not verified")))
        said = driver.find_element("id", "verdict").text
        assert said.startswith("Verified: This is the result shoe"), said
        assert f"round {last}" in said, said
        assert driver.find_element("id", "witnesses").get_attribute("value") == pit["vkey"]
        assert "carried in this page: nothing to paste" in driver.page_source
        # the same receipt with one card changed, checked against the witness's keys: refused
        text = driver.find_element("id", "receipt").get_attribute("value")
        lines = text.split("\n")
        at = next(i for i, line in enumerate(lines) if line.startswith("extra "))
        lines[at] = lines[at][:-6] + ("A" if lines[at][-6] != "A" else "B") + lines[at][-5:]
        driver.execute_script("document.getElementById('receipt').value = arguments[0];"
                              "document.getElementById('check').click();", "\n".join(lines))
        WebDriverWait(driver, 20).until(lambda d: d.find_element("id", "verdict").text
                                        .startswith("Not verified"))
        # a round the pit has no receipt of: said on the page (a new page: only the hash moved)
        driver.get("about:blank")
        driver.get(f"{pit['url']}/check#{here}/receipt/bac1/1/999")
        WebDriverWait(driver, 20).until(lambda d: "No receipt" in d.find_element(
            "id", "verdict").text)
        another_rounds_receipt_at_this_link(driver, pit, text, last)
        saved_for_offline_use(driver, pit, text)
    finally:
        serve.send_signal(2)
        serve.wait(10)


def another_rounds_receipt_at_this_link(driver, pit, receipt, last):
    """A casino's server that answers a table's code with another round's receipt (genuine,
    witnessed, but not the round the code named): refused on the page, which names both. And a
    code whose table name is not percent-encoding (an insider's, to silence the checker) leaves
    the page working: a receipt file still checks."""
    import http.server
    import threading

    from selenium.webdriver.support.ui import WebDriverWait

    asked = []

    class Pit(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # every path: the same receipt, of round `last`
            asked.append(self.path)
            self.send_response(200)
            self.send_header("Access-Control-Allow-Origin", "*")
            self.end_headers()
            self.wfile.write(receipt.encode())

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Pit)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        here = f"http://127.0.0.1:{server.server_port}"
        other = last - 1
        driver.get("about:blank")
        driver.get(f"{pit['url']}/check#{here}/receipt/bac1/1/{other}")
        WebDriverWait(driver, 20).until(lambda d: d.find_element("id", "verdict").text
                                        .startswith(("Verified", "Not verified")))
        said = driver.find_element("id", "verdict").text
        assert said.startswith("Not verified: this receipt is of shoe") and \
            f"(table bac1, shoe 1, round {other})" in said, said
        # another code scanned into the same tab: only the part after `#` changes, and the
        # verdict is the new link's, not the one before it
        driver.execute_script("location.hash = arguments[0];", f"#{here}/receipt/bac1/1/{last}")
        WebDriverWait(driver, 20).until(lambda d: d.find_element("id", "verdict").text
                                        .startswith("Verified"))
        # a table name with a `#` (percent-encoded in the code, as the pit writes it) is
        # fetched as named, not cut at its `#`
        driver.get("about:blank")
        driver.get(f"{pit['url']}/check#{here}/receipt/VIP%20%231/1/{last}")
        WebDriverWait(driver, 20).until(lambda d: d.find_element("id", "verdict").text
                                        .startswith(("Verified", "Not verified")))
        assert asked[-1] == f"/receipt/VIP%20%231/1/{last}", asked
        assert "(table VIP #1, shoe 1" in driver.find_element("id", "verdict").text
        # a table name that is not percent-encoding: the page is not silenced
        driver.get("about:blank")
        driver.get(f"{pit['url']}/check#{here}/receipt/bac1%A/1/{last}")
        path = pit["dir"] / "mine.tlog-proof"
        path.write_text(receipt)
        driver.find_element("id", "receipt-file").send_keys(str(path))
        WebDriverWait(driver, 20).until(lambda d: d.find_element("id", "verdict").text
                                        .startswith(("Verified", "Not verified")))
        assert driver.find_element("id", "verdict").text.startswith(
            "Verified: This is the result shoe"), driver.find_element("id", "verdict").text
        assert "(table bac1)" in driver.find_element("id", "verdict").text
    finally:
        server.shutdown()


def saved_for_offline_use(driver, pit, receipt):
    """The witness's checker saved as its three files (the page carries the witness's keys)
    and opened with no server at all: a receipt file chosen on it is verified; the same round
    signed by a key the witness never bound (an insider's own, put in the casino's registry) is
    refused, on the same keys."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, utils
    from selenium.webdriver.support.ui import WebDriverWait

    from sabot.protocol import P256_ORDER

    saved = pit["dir"] / "saved"
    saved.mkdir()
    for name, path in (("check.html", "/check"), ("verify.js", "/verify.js"),
                       ("pages.css", "/pages.css")):
        (saved / name).write_bytes(urllib.request.urlopen(pit["url"] + path, timeout=5).read())
    lines = receipt.split("\n")
    at = next(i for i, line in enumerate(lines) if line.startswith("extra "))
    extra = base64.b64decode(lines[at][6:])
    body = extra[:-64]  # both frames, less the result's signature: signed anew by the insider
    n = int.from_bytes(extra[:2], "big")
    r, s = utils.decode_dss_signature(ec.generate_private_key(ec.SECP256R1()).sign(
        body[2 + n:], ec.ECDSA(hashes.SHA256())))
    insider = lines.copy()
    insider[at] = "extra " + base64.b64encode(body + r.to_bytes(32, "big") + min(
        s, P256_ORDER - s).to_bytes(32, "big")).decode()
    files = {"genuine": receipt, "insider": "\n".join(insider)}
    for name, text in files.items():
        (saved / f"{name}.tlog-proof").write_text(text)
    driver.get("about:blank")
    driver.get((saved / "check.html").as_uri())
    for name, words in (("genuine", "Verified: This is the result shoe"),
                        ("insider", "Not verified: the result is not signed by shoe")):
        driver.execute_script("document.getElementById('verdict').textContent = '';")
        driver.find_element("id", "receipt-file").send_keys(str(saved / f"{name}.tlog-proof"))
        WebDriverWait(driver, 20).until(lambda d: d.find_element("id", "verdict").text
                                        .startswith(("Verified", "Not verified")))
        said = driver.find_element("id", "verdict").text
        assert said.startswith(words), (name, said)


def history(base, board, last):
    """A player's history: each round on the last-results list links to its own page, its
    words and its receipt's QR code; a round the table never dealt is none."""
    linked = sorted(int(x) for x in re.findall(r'href="/table/bac1/round/1/(\d+)"', board))
    assert linked == list(range(last - 11, last + 1)), linked  # the last results' twelve
    first = linked[0]
    earlier = urllib.request.urlopen(f"{base}/table/bac1/round/1/{first}",
                                     timeout=5).read().decode()
    assert f'src="/qr/bac1/1/{first}"' in earlier
    assert "beats" in earlier or "Tie" in earlier, earlier
    with pytest.raises(urllib.error.HTTPError) as gone:
        urllib.request.urlopen(f"{base}/table/bac1/round/1/999", timeout=5)
    assert gone.value.code == 404

def scanned(driver):
    """The text of the scoreboard's QR code, decoded from its pixels as drawn (zxing-cpp)."""
    import base64

    import numpy
    import zxingcpp
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 20).until(lambda d: d.execute_script(
        "const i = document.querySelector('#receipt-qr img');"
        "return i !== null && i.complete && i.naturalWidth > 100;"))
    w, h, gray = driver.execute_script("""
        const img = document.querySelector('#receipt-qr img');
        const c = document.createElement('canvas');
        c.width = img.naturalWidth + 40; c.height = img.naturalHeight + 40;
        const g = c.getContext('2d');
        g.fillStyle = '#fff'; g.fillRect(0, 0, c.width, c.height);
        g.drawImage(img, 20, 20);
        const px = g.getImageData(0, 0, c.width, c.height).data;
        let s = '';
        for (let i = 0; i < px.length; i += 4) s += String.fromCharCode(px[i + 1]);
        return [c.width, c.height, btoa(s)];""")
    image = numpy.frombuffer(base64.b64decode(gray), dtype=numpy.uint8).reshape(h, w)
    found = zxingcpp.read_barcodes(image)
    assert len(found) == 1, found
    return found[0].text

def published(base, pit, receipt):
    """The shoe's log as C2SP tlog-tiles from the same store: its checkpoint (the shoe's
    signature and the witness's), its level-0 hash tile and entry bundle, which are the stored
    frames and their leaf hashes, and whose root is the checkpoint's; the receipt's entry is
    that bundle's entry."""
    from sabot import note, tlog
    from sabot import receipt as receipts
    from sabot.registry import Registry

    entry = Registry.load(str(pit["reg"])).pick(None)
    log = f"{base}/log/{entry.shoe_id:08x}"
    signed = urllib.request.urlopen(log + "/checkpoint", timeout=5).read().decode()
    origin = tlog.origin(entry.shoe_id)
    shoe_key = note.ecdsa_verifier(origin, entry.public_key(1))
    _, good = note.open_note(signed, [shoe_key, note.Verifier.parse(pit["vkey"])])
    assert len(good) == 2
    cp = tlog.Checkpoint.parse(note.split(signed)[0])
    assert cp.size < tlog.TILE_WIDTH  # one shoe: its log fits a partial tile
    hashes = urllib.request.urlopen(f"{log}/{tlog.tile_path(0, 0, cp.size)}", timeout=5).read()
    bundle = urllib.request.urlopen(f"{log}/{tlog.tile_path(0, 0, cp.size, entries=True)}",
                                    timeout=5).read()
    entries, at = [], 0
    while at < len(bundle):
        n = int.from_bytes(bundle[at:at + 2], "big")
        entries.append(bundle[at + 2:at + 2 + n])
        at += 2 + n
    leaves = [hashes[i:i + 32] for i in range(0, len(hashes), 32)]
    assert len(entries) == len(leaves) == cp.size
    assert [tlog.leaf_hash(e) for e in entries] == leaves
    assert tlog.root(leaves) == cp.root
    index = int(receipt.split("\nindex ")[1].split("\n")[0])
    assert receipts._parse(receipt)[1] == entries[index]  # the receipt's result, as published
    with pytest.raises(urllib.error.HTTPError) as beyond:
        urllib.request.urlopen(f"{log}/{tlog.tile_path(0, 0)}", timeout=5)  # a full tile: not yet
    assert beyond.value.code == 404


@pytest.mark.long
def test_a_witnessed_blackjack_round_gets_a_receipt_a_voided_one_says_so(pit):
    """A blackjack shoe on the same witnessed pit: a played round's receipt is its signed
    blackjack_result in the shoe's log, and says each seat's hands and the dealer's; a round the
    supervisor voided has one too, which says it was voided and settles no wager."""
    from sabot.game.cards import CUT, format_shoe, shuffled_shoe

    db = pit["dir"] / "bj.db"
    short = shuffled_shoe(6, seed=5)[:150]  # a short shoe: its cut card at card 120
    short = [c for c in short if c != CUT]
    (pit["dir"] / "bj.txt").write_text(format_shoe(short[:120] + [CUT] + short[120:]))
    r = run("demo", "--game", "blackjack", "--db", str(db), "--key", str(pit["key"]),
            "--registry", str(pit["reg"]), "--shoe", str(pit["dir"] / "bj.txt"), "--seed", "5",
            "--mistakes", "0.4", "--json", "--witness", f"{pit['url']}={pit['vkey']}")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["cosigned"] and s["voided"] and s["wrong"] == 0
    with sqlite3.connect(db) as con:
        rows = [json.loads(x) for (x,) in con.execute(
            "SELECT record FROM records WHERE kind='blackjack_result' ORDER BY seq")]
    played = next(x for x in rows if not x["voided"])
    voided = next(x for x in rows if x["voided"])
    out = pit["dir"] / "bj.tlog-proof"
    common = ("--db", str(db), "--registry", str(pit["reg"]), "--table", "demo-blackjack",
              "--shoe", "1")
    r = run("receipt", *common, "--round", str(played["round"]), "-o", str(out))
    assert r.returncode == 0, r.stderr
    r = run("receipt", "verify", str(out), "--registry", str(pit["reg"]), "--witness",
            pit["vkey"])
    assert r.returncode == 0 and f"round {played['round']} of its shoe 1: seat " in r.stdout
    assert "; dealer " in r.stdout, r.stdout
    r = run("receipt", *common, "--round", str(voided["round"]), "-o", str(out) + ".2")
    assert r.returncode == 0, r.stderr
    r = run("receipt", "verify", str(out) + ".2", "--registry", str(pit["reg"]), "--witness",
            pit["vkey"])
    said = f"round {voided['round']} of its shoe 1: voided by a supervisor: no wager on it settles"
    assert r.returncode == 0 and said in r.stdout, r.stdout + r.stderr
    blackjack_history(pit, db, rows)


def blackjack_history(pit, db, rows):
    """The blackjack board's rounds before the newest link each to its own page, with its hands
    and its receipt's QR code, a voided round's saying it was voided."""
    port = free_port_for_tests()
    base = f"http://127.0.0.1:{port}"
    serve = subprocess.Popen([*SABOT, "serve", "--floor", "--db", str(db), "--registry",
                              str(pit["reg"]), "--listen", f"127.0.0.1:{port}",
                              "--public-url", base], stderr=subprocess.DEVNULL)
    try:
        board = wait_until_served(base + "/table/demo-blackjack").decode()
        linked = [int(x) for x in re.findall(
            r'href="/table/demo-blackjack/round/1/(\d+)"', board)]
        newest = rows[-1]["round"]
        assert linked == list(range(newest - 1, newest - 1 - len(linked), -1)) and linked, board
        for rec in rows:
            if rec["round"] not in linked:
                continue
            shown = urllib.request.urlopen(f"{base}/table/demo-blackjack/round/1/"
                                           f"{rec['round']}", timeout=5).read().decode()
            assert f'src="/qr/demo-blackjack/1/{rec["round"]}"' in shown
            assert ("voided by the supervisor" in shown) == rec["voided"], shown
            assert rec["voided"] or "Dealer" in shown
    finally:
        serve.send_signal(2)
        serve.wait(10)


def test_a_serve_without_a_public_url_makes_no_qr_code(pit, tmp_path):
    """The receipt's QR code is built from --public-url only: without it /qr is refused and the
    scoreboard shows none, where it took the address from the request's Host header — which any
    client sets — and let it be cached for an hour."""
    r = run("demo", "--db", str(pit["db"]), "--key", str(pit["key"]), "--registry",
            str(pit["reg"]), "--seed", "3", "--witness", f"{pit['url']}={pit['vkey']}")
    assert r.returncode == 0, r.stderr
    web = free_port_for_tests()
    serve = subprocess.Popen([*SABOT, "serve", "--floor", "--db", str(pit["db"]), "--registry",
                              str(pit["reg"]), "--listen", f"127.0.0.1:{web}"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{web}"
        wait_until_served(base + "/api/floor")
        board = urllib.request.urlopen(base + "/table/bac1", timeout=5).read().decode()
        assert "/qr/bac1/" not in board and "receipt-qr" not in board
        request = urllib.request.Request(base + "/qr/bac1/1/5", headers={"Host": "evil.example"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=5)
        assert refused.value.code == 404 and refused.value.headers["Vary"] == "Host"
        assert "--public-url" in refused.value.read().decode()
    finally:
        serve.terminate()
        serve.wait(20)

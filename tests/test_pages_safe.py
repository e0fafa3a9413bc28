"""The pit's pages against an insider's edited store and registry: markup in
every stored and registry field is shown as text and never runs, in a real browser; a value of
any shape renders (no server error); every response carries the Content-Security-Policy, and the
real pages run under it (the dashboard's live refresh included) with nothing refused.

The stores are real: shoes dealt by the host's rules and framed and signed as a shoe sends them
(capture_gen), taken by the Validator, then edited past the append-only triggers with sqlite, as
an insider with the database file would. The pages are served in this process (build_app under
uvicorn in a thread); only the browser test starts a process (Chromium)."""

import asyncio
import json
import shutil
import sqlite3
import threading
import time
import urllib.error
import urllib.request
from dataclasses import asdict
from urllib.parse import quote

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from sabot import keys
from sabot import protocol as pr
from sabot.audit.validator import Validator
from sabot.errors import SabotError
from sabot.game.cards import shuffled_shoe
from sabot.pit.markup import Html, document, el, join
from sabot.pit.pages import SECURITY_HEADERS, Pit, build_app, web_server
from sabot.registry import Registry, ShoeEntry
from sabot.virtual.capture_gen import ShoeSigner, shoe_frames

from kit.browser import browser, csp_violations
from kit.procs import free_port_for_tests

# What an insider writes: each runs `window.__pwned = 1` (or an alert) if a page lets it be markup
# or a link, wherever it lands: element content, a quoted or unquoted attribute, a URL.
MARKUP = (
    "<img src=x onerror=window.__pwned=1>",
    "\"><script>window.__pwned=1</script>",
    "'><svg onload=window.__pwned=1></svg>",
    "javascript:alert(document.domain)//events",  # a link's URL, a path ending like a stream's
    "</textarea></title><script>alert(1)</script>",
)


def markup_for(name):
    """A markup value for the field `name`, the five spread over the fields."""
    return f"{MARKUP[sum(map(ord, name)) % len(MARKUP)]}{name}"


# ---- real stores, then edited ------------------------------------------------------------------
def shoe(shoe_id, table, seed, **config):
    """(registry entry, the whole shoe's signed frames) of a shoe dealt by the host's rules."""
    key = ec.generate_private_key(ec.SECP256R1())
    entry = ShoeEntry(shoe_id, table=table, **config)
    entry.add_public_key(1, keys.public_pem(key.public_key()))
    frames, _ = shoe_frames(ShoeSigner(key, shoe_id), shuffled_shoe(8, seed), 1)
    return entry, frames


def dealt(db, shoes, frames=40):
    """The first `frames` frames of each shoe, validated into the store `db`."""
    for entry, raw in shoes:
        v = Validator(entry, str(db))
        v.receive(b"".join(pr.encode_frame(f) for f in raw[:frames]))
        v.store.close()


def bind(v, required=False):
    """`v` as an insider's sqlite writes it into a column: a list or object as its JSON text, an
    int past 64 bits as text, a string sqlite cannot encode as a BLOB of its bytes; None, in a
    column that refuses NULL, as empty text."""
    if required and (v is None or v != v):  # None, or a NaN (sqlite stores it as NULL)
        return ""
    if isinstance(v, (list, dict)):
        return dumps(v)
    if isinstance(v, int) and not -(2**63) <= v < 2**63:
        return str(v)
    if isinstance(v, str):
        try:
            v.encode()
        except UnicodeEncodeError:
            return v.encode("utf-8", "surrogatepass")
    return v


def dumps(v):
    return json.dumps(v, default=lambda b: b.decode("latin-1"))


def edit_every_field(db, value, entries):
    """An insider's edit of every column the pages could read, `value(name)` in each (tables 0, 1
    and 2 of `entries` take the edits that decide where a row goes, so the rest stays in view)."""
    def col(name, required=False):
        return bind(value(name), required)

    con = sqlite3.connect(db)
    for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type='trigger'").fetchall():
        con.execute(f"DROP TRIGGER {name}")
    n = [10**6]

    def chain_no():
        n[0] += 1
        return n[0]

    def add_record(sid, kind, record, **cols):
        fid = con.execute("SELECT max(id) FROM frames").fetchone()[0]
        row = {"chain_no": chain_no(), "frame_id": fid, "key_id": 1, "shoe_id": sid,
               "seq": n[0], "kind": kind, "shoe": 1, "round": 0,
               "record": dumps(record), "row_hash": b"\0"} | cols
        con.execute(f"INSERT OR IGNORE INTO records ({', '.join(row)}) VALUES "
                    f"({', '.join('?' * len(row))})", [bind(x) for x in row.values()])

    def add_alarm(**cols):
        row = {"chain_no": chain_no(), "frame_id": 1, "raised_at": 0, "key_id": 1,
               "shoe_id": cols.pop("shoe_id"), "shoe": 1, "round": value("alarms.round"),
               "kind": col("alarms.kind", required=True), "detail": value("alarms.detail"),
               "row_hash": b"\0"} | cols
        con.execute(f"INSERT INTO alarms ({', '.join(row)}) VALUES "
                    f"({', '.join('?' * len(row))})", [bind(x) for x in row.values()])

    def add_inventory(sid, inventory):
        con.execute("INSERT INTO link_state (chain_no, key_id, shoe_id, last_seq, last_digest,"
                    " last_boot, host_counter, inventory, row_hash) VALUES (?,?,?,?,?,?,?,?,?)",
                    (chain_no(), 0, sid, col("link_state.last_seq"), b"\0",
                     col("link_state.last_boot"), col("link_state.host_counter"),
                     inventory if isinstance(inventory, (str, bytes)) else dumps(inventory),
                     b"\0"))

    a, b, c = (e.shoe_id for e in entries[:3])
    for sid in (a, b, c):  # every value of the shoe's newest round
        rid, text = con.execute("SELECT id, record FROM records WHERE shoe_id=? AND kind='result'"
                                " ORDER BY id DESC LIMIT 1", (sid,)).fetchone()
        rec = {k: (v if k == "shoe" else value(f"records.record.{k}"))
               for k, v in json.loads(text).items()}
        con.execute("UPDATE records SET record=?, round=? WHERE id=?",
                    (dumps(rec), col("records.round"), rid))
    # table 0: its columns, a held irregularity and its resolution, alarms, accounting
    con.execute("UPDATE OR IGNORE records SET kind=?, seq=? WHERE id=(SELECT min(id) FROM"
                " records WHERE shoe_id=? AND kind='result')",
                (col("records.kind", required=True), col("records.seq"), a))
    add_record(a, "resolution", {"shoe": 1, "what": value("resolution.what"),
                                 "by": value("resolution.by"),
                                 "counter": value("resolution.counter")})
    add_record(a, "irregularity", {"shoe": 1, "kind": "card_not_drawn_in_time",
                                   "round": value("irregularity.round"),
                                   "detail": value("irregularity.detail")})
    add_alarm(shoe_id=a)
    add_alarm(shoe_id=a, shoe=None, round=0)  # a device alarm: shown in every shoe
    add_inventory(a, {"shoe": 1, "round": 1, "counts": {str(value("counts.card")): 1},
                      "partial": False})
    # table 1: its shoe number itself, every round after it, a tilt
    add_record(b, "shoe_start", {k: value(f"shoe_start.{k}") for k in ("shoe", "decks",
                                                                         "variant")})
    add_record(b, "result", {k: value(f"records.next.{k}") for k in (
        "shoe", "round", "player", "banker", "player_total", "banker_total", "winner", "flags",
        "dummy")}, shoe=value("records.shoe"))
    add_alarm(shoe_id=b, shoe=None, kind="tilt")
    add_inventory(b, {"shoe": value("inventory.shoe"), "counts": value("inventory.counts"),
                      "partial": value("inventory.partial")})
    # table 2: rows of no shoe id, accounting that is not an object
    add_record(value("records.shoe_id"), "result", {"shoe": 1, "winner": value("orphan")})
    add_alarm(shoe_id=value("alarms.shoe_id"))
    add_inventory(c, col("link_state.inventory", required=True))
    # what the pages do not show, edited all the same
    con.execute("UPDATE frames SET reason=?", (col("frames.reason"),))
    con.execute("UPDATE frames SET received_at=? WHERE id=(SELECT max(frame_id) FROM records)",
                (col("frames.received_at", required=True),))
    con.execute("INSERT INTO integrity_checks (chain_no, checked_at, shoe_id, seed, expected,"
                " answer, integrity, result, row_hash) VALUES (?,0,?,?,?,?,?,?,?)",
                (chain_no(), c, *(col(f"integrity_checks.{k}") for k in (
                    "seed", "expected", "answer", "integrity")),
                 col("integrity_checks.result", required=True), b"\0"))
    con.execute("INSERT INTO meta (chain_no, name, value, row_hash) VALUES (?,?,?,?)",
                (chain_no(), bind(str(value("meta.name"))), col("meta.value"), b"\0"))
    con.execute("INSERT INTO operations (chain_no, logged_at, shoe_id, seq, operation, entry,"
                " row_hash) VALUES (?,0,?,?,?,?,?)",  # the operator log, in the store
                (chain_no(), c, col("operations.seq"), col("operations.operation", required=True),
                 dumps({k: value(f"operations.{k}") for k in (
                     "at", "host", "user", "operation", "by", "shoe_id", "shoe", "what")}), b"\0"))
    con.commit()
    con.close()


def markup_registry(tmp_path, first_id):
    """A registry file per registry field, markup in that field: the entries the registry loads
    (the others it refuses in one line, before any page)."""
    key = ec.generate_private_key(ec.SECP256R1())
    good = ShoeEntry(first_id, table="BAC-REG")
    good.add_public_key(1, keys.public_pem(key.public_key()))
    loaded, refused = [], []
    fields = [*asdict(good), "public_keys.key", "public_keys.algorithm"]
    for i, name in enumerate(fields):
        raw = asdict(good) | {"shoe_id": first_id + i}
        if name.startswith("public_keys."):
            raw["public_keys"] = [raw["public_keys"][0] | {name[12:]: markup_for(name)}]
        elif name == "side_wagers":
            raw[name] = [markup_for(name)]
        else:
            raw[name] = markup_for(name)
        path = tmp_path / f"registry-{name}.json"
        path.write_text(json.dumps({"shoes": [raw]}))
        try:
            loaded += Registry.load(str(path)).shoes.values()
        except SabotError as e:
            assert "\n" not in str(e)
            refused.append(name)
    return loaded, refused


class PagesServer:
    """The pages of `sabot serve` (build_app over a Pit of `db`), served in this process."""

    def __init__(self, db, entries):
        self.pit = Pit(str(db), entries)
        app, hub = build_app(self.pit)
        self.port = free_port_for_tests()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = web_server(app, hub, "127.0.0.1", self.port)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self):
        self.thread.start()
        end = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < end and self.thread.is_alive(), "the pages did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(10)

    def get(self, path):
        """(status, headers, body) of a GET, whatever the status."""
        try:
            with urllib.request.urlopen(self.url + path, timeout=10) as r:
                return r.status, r.headers, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read()

    def first_event(self, path):
        """The headers of an event stream and its first message."""
        with urllib.request.urlopen(self.url + path, timeout=10) as r:
            for raw in r:
                if raw.startswith(b"data: "):
                    return r.headers, json.loads(raw[6:])
        raise AssertionError(f"{path}: no event")


def table_path(name):
    return "/table/" + quote(name, safe="")


def asgi_get(app, path):
    """(status, body) of a GET through the app itself, no server: every route's whole response,
    an exception included (Starlette re-raises it after its 500)."""
    raw = quote(path, safe="/%")
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
             "scheme": "http", "path": urllib.request.unquote(raw), "raw_path": raw.encode(),
             "query_string": b"", "root_path": "", "headers": [], "client": ("127.0.0.1", 1),
             "server": ("127.0.0.1", 80)}
    out = {"body": b""}

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        if message["type"] == "http.response.start":
            out["status"] = message["status"]
            out["headers"] = {k.decode(): v.decode() for k, v in message["headers"]}
        elif message["type"] == "http.response.body":
            out["body"] += message.get("body", b"")

    asyncio.run(app(scope, receive, send))
    return out["status"], out["headers"], out["body"]


@pytest.fixture(scope="module")
def base_store(tmp_path_factory):
    """Three tables, each 40 frames into a shoe (about 19 rounds), genuine."""
    tmp = tmp_path_factory.mktemp("pages")
    shoes = [shoe(0x5AB0_0001 + i, f"BAC-0{i + 1}", 500 + i,
                  side_wagers=["player_pair", "banker_pair"] if i == 0 else [])
             for i in range(3)]
    dealt(tmp / "base.db", shoes)
    return tmp / "base.db", [e for e, _ in shoes]


# ---- the builder -----------------------------------------------------------------------------
def test_the_html_builder_escapes_every_value_and_builds_nothing_the_policy_would_refuse():
    page = str(el("p", MARKUP[1], el("b", MARKUP[0]), title=MARKUP[2], data_v=MARKUP[1]))
    assert "<script" not in page and "<img" not in page and "<svg" not in page
    assert page.startswith('<p title="&#x27;&gt;&lt;svg') and page.count("<") == 4
    # a string put together by hand is text, even when it holds Html
    assert str(el("p", f"{el('b', 'x')}")) == "<p>&lt;b&gt;x&lt;/b&gt;</p>"
    assert str(join(el("br"), [el("i", 1), None, (x for x in "<>")])) == "<br><i>1</i>&lt;&gt;"
    with pytest.raises(TypeError):
        Html("<b>")
    for refused in (lambda: el("a", href="javascript:alert(1)"), lambda: el("a", href="//evil"),
                    lambda: el("a", href="/\\evil"), lambda: el("a", href="http://x/"),
                    lambda: el("div", onclick="x()"), lambda: el("div", style="color:red"),
                    lambda: el("style", "p{}"), lambda: el("script", "alert(1)"),
                    lambda: el("script", src="/x.js", type="module"), lambda: el("br", "x"),
                    lambda: el("img onerror=x")):
        with pytest.raises(ValueError):
            refused()
    assert str(el("a", "t", href="/table/a%2Fb")) == '<a href="/table/a%2Fb">t</a>'
    doc = str(document([el("title", "<t>")], el("body", el("script", src="/static/pages.js"))))
    assert doc == ('<!doctype html><html lang="en"><head><title>&lt;t&gt;</title></head><body>'
                   '<script src="/static/pages.js"></script></body></html>')


# ---- every shape, in this process --------------------------------------------------------------
def nested(depth):
    v = []
    for _ in range(depth):
        v = [v]
    return v


ODD = [None, [], {}, ["<b>", 1], {"<i>": [None]}, 1.5, -1, 10**30, True, "", "x" * 5000,
       float("nan"), float("inf"), "\ud800", nested(300), 2**63 - 1, b"<b>\xff"]


@pytest.mark.parametrize("odd", range(len(ODD)), ids=[repr(v)[:12] for v in ODD])
def test_every_route_renders_whatever_shape_an_edited_store_gives_any_field(base_store,
                                                                           tmp_path, odd):
    """Not only markup: a store edited by hand can hold anything in any column and JSON value
    (a list for a winner, a float for a shoe id, a NaN, a lone surrogate). Every route still
    answers 200 (the roads' tampered winner used to be a KeyError, a 500), with the policy."""
    db, entries = base_store
    shutil.copy(db, tmp_path / "a.db")
    v = ODD[odd]
    edit_every_field(tmp_path / "a.db", lambda name: v, entries)
    pit = Pit(str(tmp_path / "a.db"), entries)
    app, _ = build_app(pit)
    pit.refresh()
    paths = ["/", "/api/tables", "/api/stats", "/static/pages.js", "/static/pages.css",
             *(p for t in pit.tables() for p in (table_path(t.table),
                                                 "/api/tables/" + quote(t.table, safe="")))]
    for path in paths:
        status, headers, body = asgi_get(app, path)
        assert status == 200, (path, body[:300])
        assert headers["content-security-policy"] == SECURITY_HEADERS["content-security-policy"]
        if "/api/" in path:
            json.loads(body)  # strict JSON: a NaN is null
    # the genuine rounds before the edited ones are still drawn (table 1's shoe was restarted)
    rounds = {t.shoe_id: len(t.rounds) for t in pit.tables()}
    assert rounds[entries[0].shoe_id] >= 15 and rounds[entries[2].shoe_id] >= 15, rounds


def test_a_row_that_is_no_json_object_is_said_on_the_dashboard_not_a_server_error(base_store,
                                                                                  tmp_path):
    db, entries = base_store
    shutil.copy(db, tmp_path / "a.db")
    con = sqlite3.connect(tmp_path / "a.db")
    con.execute("DROP TRIGGER records_append_only_u")
    con.execute("UPDATE records SET record='<b>not json' WHERE id=(SELECT max(id) FROM records)")
    con.execute("DROP TRIGGER link_state_append_only_u")
    con.execute("UPDATE link_state SET inventory='[1, 2'")
    con.commit()
    con.close()
    pit = Pit(str(tmp_path / "a.db"), entries)
    app, _ = build_app(pit)
    pit.refresh()  # what the app's lifespan does first (asgi_get runs none)
    status, _, body = asgi_get(app, "/")
    assert status == 200 and (b"1 stored records or operator entries are no JSON a validator "
                              b"writes and are skipped: run sabot audit verify") in body
    assert b"&lt;b&gt;" not in body and all(t.edges is None for t in pit.tables())


def test_the_roads_of_a_table_with_an_unknown_winner_show_it_as_unknown_and_the_rest_as_dealt():
    from sabot.game.roads import roads

    r = roads(["banker", "<b>", ["player"], "player", None, "tie"])
    assert r["bead_plate"] == ["B", "?", "?", "P", "?", "T"]
    assert r["big_road"] == [[{"winner": "B", "ties": 0}], [{"winner": "P", "ties": 1}]]


# ---- in the browser ----------------------------------------------------------------------------
PAGE_STATE = """
return {pwned: window.__pwned, version: document.body ? document.body.dataset.version : null,
        updates: document.body ? +(document.body.dataset.updates || 0) : 0,
        scripts: [...document.scripts].map(s => s.src),
        planted: document.querySelectorAll("img, svg, iframe, object, embed, textarea").length,
        links: [...document.querySelectorAll("a")].map(a => a.getAttribute("href")),
        text: document.body ? document.body.innerText : ""};
"""


def wait_live(driver, timeout=10):
    """Until the page's first server-sent fragment has replaced the served one."""
    end = time.monotonic() + timeout
    while True:
        state = driver.execute_script(PAGE_STATE)
        if state["updates"] or time.monotonic() > end:
            return state
        time.sleep(0.05)


def no_alert(driver):
    from selenium.common.exceptions import NoAlertPresentException

    try:
        text = driver.switch_to.alert.text
    except NoAlertPresentException:
        return True
    raise AssertionError(f"an alert ran: {text!r}")


def genuine_pages_run_under_the_policy(driver, tmp_path, db, entries):
    """The real pages work with their policy on: the dashboard's live refresh shows a shoe's
    new rounds, the scoreboard draws with its stylesheet, nothing is refused; a handler planted
    afterwards is refused and reported, so the policy is enforced and its reports are read."""
    shutil.copy(db, tmp_path / "clean.db")
    live_entry, live_frames = shoe(0x5AB0_0100, "BAC-LIVE", 77)
    dealt(tmp_path / "clean.db", [(live_entry, live_frames)], frames=10)
    with PagesServer(tmp_path / "clean.db", [*entries, live_entry]) as pages:
        driver.get(pages.url + "/")
        before = wait_live(driver)
        assert before["scripts"] == [pages.url + "/static/pages.js"]
        v = Validator(live_entry, str(tmp_path / "clean.db"))  # the shoe goes on dealing
        v.receive(b"".join(pr.encode_frame(f) for f in live_frames[10:30]))
        v.store.close()
        round_now = sum(pr.parse(f).type == pr.T_RESULT for f in live_frames[:30])
        end = time.monotonic() + 10
        while True:
            shown_round = driver.execute_script(
                "return document.querySelector('tr[data-table=\"BAC-LIVE\"] td.shoe-round')"
                ".dataset.round")
            if shown_round == str(round_now) or time.monotonic() > end:
                break
            time.sleep(0.05)
        assert shown_round == str(round_now) and round_now > 4, (shown_round, round_now)
        assert int(driver.execute_script(PAGE_STATE)["version"]) > int(before["version"])
        driver.get(pages.url + table_path("BAC-01"))
        board = wait_live(driver)
        assert board["updates"] and "big road" in board["text"].lower()  # (shown in capitals)
        assert driver.execute_script(  # the stylesheet file applies
            "return getComputedStyle(document.querySelector('.bead')).borderRadius") == "50%"
        assert csp_violations(driver) == []
        driver.execute_script("document.body.insertAdjacentHTML('beforeend',"
                              " '<img src=x onerror=\"window.__planted=1\">')")
        end = time.monotonic() + 5
        while not (refused := csp_violations(driver)) and time.monotonic() < end:
            time.sleep(0.05)
        assert refused and driver.execute_script("return window.__planted") is None
        driver.get("about:blank")  # its event stream closed before the server stops


def check_page(driver, pages, link):
    """A table's scoreboard, its stream and its API entry: served, and nothing of them runs."""
    status, headers, _ = pages.get(link)
    assert status == 200 and headers["X-Frame-Options"] == "DENY", link
    driver.get(pages.url + link)
    state = wait_live(driver)
    assert state["updates"], link  # the stream's fragment came, and is as safe
    assert state["pwned"] is None and state["planted"] == 0 and no_alert(driver), link
    assert state["scripts"] == [pages.url + "/static/pages.js"], link
    stream_headers, message = pages.first_event(link + "/events")
    assert "<img" not in message["html"] and stream_headers["X-Content-Type-Options"]
    api = "/api/tables/" + link[len("/table/"):]
    status, headers, _ = pages.get(api)
    assert status == 200 and headers["Content-Type"] == "application/json", api
    driver.get(pages.url + api)  # JSON shown as text, never a document
    assert driver.execute_script("return window.__pwned") is None and no_alert(driver), api


def edited_pages_run_nothing(driver, tmp_path, db, entries):
    """Markup in every field of the store and every registry field: every page renders, none
    of it runs, nothing is even refused by the policy (it never became markup)."""
    shutil.copy(db, tmp_path / "edited.db")
    named = [ShoeEntry(e.shoe_id, table=MARKUP[i], side_wagers=e.side_wagers,
                       public_keys=e.public_keys) for i, e in enumerate(entries)]
    edit_every_field(tmp_path / "edited.db", markup_for, named)
    loaded, refused = markup_registry(tmp_path, 0x5AB0_0200)
    assert any(e.table.startswith(MARKUP[0][:5]) for e in loaded), refused
    with PagesServer(tmp_path / "edited.db", named + loaded) as pages:
        tables = [t.table for t in pages.pit.tables()]
        assert len(tables) >= len(named) + len(loaded)
        status, headers, body = pages.get("/")
        assert status == 200 and b"<img src=x" not in body and b"<script>" not in body
        for name, value in SECURITY_HEADERS.items():
            assert headers[name] == value, name
        driver.get(pages.url + "/")
        state = wait_live(driver)
        assert state["pwned"] is None and state["planted"] == 0 and no_alert(driver)
        assert sorted(link for link in state["links"] if link.startswith("/table/")) == \
            sorted(table_path(t) for t in tables)
        assert {"/floor", "/shift"} <= set(state["links"])
        assert MARKUP[0] in state["text"] and MARKUP[1] in state["text"]  # shown, as text
        for link in state["links"]:
            if link.startswith("/table/"):
                check_page(driver, pages, link)
        for link in ("/floor", "/shift"):
            status, _, body = pages.get(link)  # every table's markup, as text
            assert status == 200 and b"<script>" not in body and b"<img src=x" not in body, link
        for link, kind in (("/shift.csv", "text/csv"), ("/api/shift", "application/json"),
                           ("/api/floor", "application/json")):
            status, headers, body = pages.get(link)  # data, never a document
            assert status == 200 and headers["Content-Type"].startswith(kind), link
            assert headers["X-Content-Type-Options"] == "nosniff", link
        for path in ("/api/tables", table_path(MARKUP[1] + "nowhere")):
            driver.get(pages.url + path)
            assert driver.execute_script("return window.__pwned") is None and no_alert(driver)
        assert pages.get(table_path(MARKUP[1] + "nowhere"))[0] == 404
        assert csp_violations(driver) == []
        driver.get("about:blank")


@pytest.mark.long
@pytest.mark.board  # starts Chromium
def test_markup_in_every_stored_and_registry_field_never_runs_in_the_browser(base_store,
                                                                            tmp_path):
    """One Chromium session: the genuine store's pages under their policy, then the edited
    store's."""
    db, entries = base_store
    driver = browser(tmp_path)
    try:
        genuine_pages_run_under_the_policy(driver, tmp_path, db, entries)
        edited_pages_run_nothing(driver, tmp_path, db, entries)
    finally:
        driver.quit()


def test_stopping_the_server_with_a_page_open_ends_its_stream_without_a_traceback(base_store):
    """Ctrl-C to `sabot serve` while a page is open: its stream used to hold the shutdown for
    the whole graceful timeout, then be cancelled with a traceback on stderr."""
    import logging

    db, entries = base_store
    ended = threading.Event()
    errors = []
    told = logging.Handler(logging.ERROR)
    told.emit = errors.append
    with PagesServer(db, entries) as pages:
        logging.getLogger("uvicorn.error").addHandler(told)
        def follow():
            with urllib.request.urlopen(pages.url + "/events", timeout=30) as r:
                for _ in r:
                    pass
            ended.set()

        threading.Thread(target=follow, daemon=True).start()
        time.sleep(0.3)
        stopping = time.monotonic()
    logging.getLogger("uvicorn.error").removeHandler(told)
    assert errors == []
    assert ended.wait(5) and time.monotonic() - stopping < 0.8

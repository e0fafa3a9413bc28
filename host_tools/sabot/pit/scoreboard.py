"""A table's scoreboard, as players see it: the roads, the counts, the last results, the
table's state for players (nothing of the pit's own: a lost link, a held irregularity or a store
that is not recording are the pit's to handle; the players see the table paused), and the last
round's receipt as a QR code."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import quote

from sabot.game.roads import DERIVED, UNKNOWN, bead, streaks
from sabot.pit.markup import Html, el, join
from sabot.pit.payouts import blackjack_payout_lines, game_name, payout_lines, payout_lines21
from sabot.pit.tables import Pit, TableView, counts, flag_list, roads_of
from sabot.pit.words import clock, money, percent, result_words, shown, told

LAST_RESULTS = 12
# the board's labels in English and Chinese, side by side (the names Chinese scoreboards use)
ZH = {"Bead Plate": "珠盘路", "Big Road": "大路", "big_eye_boy": "大眼仔", "small_road": "小路",
      "cockroach_pig": "曱甴路", "Banker": "庄", "Player": "闲", "Tie": "和",
      "Banker ask": "庄问路", "Player ask": "闲问路", "Last results": "近期结果",
      "Payouts": "赔率"}
SUITS = {"S": ("♠", "black"), "H": ("♥", "red"), "D": ("♦", "red"), "C": ("♣", "black")}


def said(en: str, zh: str) -> Html:
    """Words in English, then Chinese: each shown when the table's languages have it."""
    return join(el("span", en, class_="en"), " ", el("span", zh, class_="zh", lang="zh"))


def both(en: str, key: str | None = None) -> Html:
    """A label in English, then Chinese."""
    return said(en, ZH[key or en])


def languages(c: Any) -> Html:
    """The table's languages for the page's style: a language it does not register is hidden
    (pages.css: #live with a .langs marker)."""
    langs = getattr(c, "languages", None) or ["en", "zh"]
    return el("i", class_=" ".join(["langs", *(f"no-{x}" for x in ("en", "zh")
                                                if x not in langs)]))


def cards_shown(cards: Any) -> Html:
    """Cards as players read them: 10♠ Q♦, the suits as symbols in their colours."""
    if not isinstance(cards, list):
        return join(shown(cards))
    out: list[Html | str] = []
    for c in cards:
        code = shown(c)
        rank, suit = code[:-1], code[-1:]
        if suit in SUITS and rank:
            symbol, colour = SUITS[suit]
            out.append(el("span", ("10" if rank == "T" else rank) + symbol,
                          class_=f"card {colour}"))
        else:
            out.append(code)
    return join(*[x for c in out for x in (c, " ")][:-1])

def derived_cells(entries: list[str]) -> list[tuple[int, int, str]]:
    """Derived-road entries laid out as players read them: a new column when the colour
    changes, down the column while it repeats."""
    out: list[tuple[int, int, str]] = []
    col, row = 0, 0
    for i, e in enumerate(entries):
        if i == 0 or e != entries[i - 1]:
            col, row = col + 1, 1
        else:
            row += 1
        out.append((col, row, e))
    return out


def bead_plate(t: TableView, marks: list[str]) -> Html:
    beads = []
    for i, (rec, v) in enumerate(zip(t.rounds, marks)):
        flags = flag_list(rec)
        pairs = [c for c, f in (("pp", "player_pair"), ("bp", "banker_pair")) if f in flags]
        beads.append(el("span", v, class_=" ".join(["bead", "U" if v == UNKNOWN else v, *pairs]),
                        data_i=i, data_v=v, title=f"round {shown(rec.get('round', UNKNOWN))}"))
    return el("div", beads, class_="grid", id="bead_plate")


def big_road(columns: list[list[dict[str, Any]]]) -> Html:
    return el("div", [
        el("div", [el("span", el("i", cell["ties"], class_="ties") if cell["ties"] else None,
                      class_=f"big {cell['winner']}", data_col=c, data_row=row,
                      data_v=cell["winner"], data_ties=cell["ties"])
                   for row, cell in enumerate(column, 1)], class_="col")
        for c, column in enumerate(columns, 1)], class_="road", id="big_road")


def derived_road(name: str, entries: list[str]) -> Html:
    columns: list[list[Html]] = []
    for i, (_, row, e) in enumerate(derived_cells(entries)):
        if row == 1:
            columns.append([])
        columns[-1].append(el("span", class_=e, data_i=i, data_v=e))
    return el("div", el("h2", both(name.replace("_", " ").title(), name)),
              el("div", [el("div", col, class_="col") for col in columns],
                 class_=f"road derived {name}", id=name))


def last_results(rounds: list[dict[str, Any]], offered: Sequence[str] = (),
                 link: Callable[[Any], str | None] = lambda rnd: None) -> Html:
    """The newest rounds, each in words ("Banker 7 beats Player 3 — Dragon 7": the flags players
    are told of, naturals and pairs and the side wagers the table offers, `offered`; not a Lucky
    Six on a table with no such wager), then its cards, the suits as symbols. `link(round)`: the
    round's own page (its receipt's QR code), where the table has receipts to scan."""
    flags = told(offered)
    items = []
    for rec in rounds[-LAST_RESULTS:][::-1]:
        rnd, winner = rec.get("round"), rec.get("winner")
        mark = bead(winner)
        words: Html = join(result_words(rec, flags))
        href = link(rnd)
        if href is not None:
            words = el("a", words, href=href)
        items.append(el(
            "li", el("b", words,
                     class_="words " + ("unknown-t" if mark == UNKNOWN else f"{mark}-t")),
            el("span", " · P ", cards_shown(rec.get("player")), " · B ",
               cards_shown(rec.get("banker")), class_="hands"),
            value=rnd if isinstance(rnd, int) and not isinstance(rnd, bool) else None))
    return el("ol", items, class_="last", reversed=True)


def payouts_box(c: Any) -> Html:
    """The wagers the table offers and what each pays, from the settlement's own rules (a
    blackjack table's: its side wagers' paytables)."""
    lines = (blackjack_payout_lines(c) if c.game == "blackjack" else payout_lines21(c)
             if c.game == "21-baccarat" else payout_lines(c))
    if not lines:
        return join()
    items = [el("li", el("span", el("b", name), " ", pays, class_="en"), " ",
                el("span", zh, class_="zh", lang="zh"), data_wager=w, data_pays=pays)
             for w, name, pays, zh in lines]
    return el("div", el("h2", both("Payouts")), el("ul", items, class_="payouts", id="payouts"),
              class_="paybox")


# What players are told of a table's state: nothing of the pit's own (a lost link, a tilt, a
# held irregularity are the pit's to handle; the table is paused for the players).
PLAYER_STATE = {"dealing": ("dealing", "发牌中"),
                "waiting": ("waiting for the next shoe", "等待新牌靴"),
                "ended": ("shoe ended", "牌靴结束")}  # any other state: please wait
PLEASE_WAIT = ("please wait", "请稍候")
RESULT_SHOWN_S = 8  # a round's result is the players' phase this long, then place your bets


def players_phase(pit: Pit, t: TableView, now: float | None = None) -> Html:
    """What players act on while the table deals: place your bets between rounds, no more bets
    once the round's first cards are out, then its result for a few seconds."""
    now = time.time() if now is None else now
    if pit.state(t) != "dealing":
        return join()
    link = pit.link(t.shoe_id) if t.shoe_id in pit.own else None
    # the first cards as stored, or as the shoe just sent them (stored with their result)
    if t.round_open is not None or (link or {}).get("round_open") is not None:
        return el("div", said("No more bets", "停止下注"),
                  class_="phase closed", id="phase", data_phase="no_more_bets")
    last = t.round_stored[-1] if t.round_stored else None
    if (t.rounds and isinstance(last, (int, float)) and not isinstance(last, bool)
            and now - last < RESULT_SHOWN_S):
        return el("div", result_words(t.rounds[-1], told(t.config.side_wagers)),
                  class_="phase result", id="phase", data_phase="result")
    return el("div", said("Place your bets", "请下注"),
              class_="phase open", id="phase", data_phase="place_bets")
SIDE_NAMES = {"dragon7": "Dragon 7", "panda8": "Panda 8", "lucky_six": "Lucky Six"}


def ask_panel(asked: dict[str, dict[str, str | None]]) -> Html:
    """Banker ask and Player ask: each derived road's entry were the next round won by that
    side, drawn as the road draws it (an empty place where it gives none)."""
    rows = []
    for side, label in (("banker", both("Banker ask")), ("player", both("Player ask"))):
        marks = [el("span", el("span", class_=e) if e else None, class_=f"askmark {name}",
                    data_road=name, data_v=e or "none", title=name.replace("_", " "))
                 for name, e in asked[side].items()]
        rows.append(el("div", el("b", label, class_="B-t" if side == "banker" else "P-t"),
                       marks, class_="ask", id=f"ask_{side}"))
    return el("div", rows, class_="asks")


def blackjack_hands(h: dict[str, Any]) -> Html:
    """A blackjack round's hands: the dealer's, then each seat's from the dealer's left."""
    if h.get("voided"):
        return el("p", "voided by the supervisor: no wager settled", class_="voided")
    rows = [el("tr", el("th", "Dealer"), el("td", cards_shown(h.get("dealer"))),
               el("td", shown(h.get("dealer_total")),
                  f" · {len(h.get('dealer') or [])} cards"), class_="dealer")]
    rows += [el("tr", el("th", f"Seat {shown(x.get('seat'))}"),
                el("td", cards_shown(x.get("cards"))),
                el("td", shown(x.get("total")), " · doubled" if x.get("doubled") else None,
                   " · split" if x.get("split") else None), data_seat=shown(x.get("seat")))
             for x in h.get("hands") or []]
    return el("table", rows, class_="hands")


def blackjack_board(pit: Pit, t: TableView) -> Html:
    """A blackjack table's scoreboard: the newest round's hands, the dealer's and each seat's
    from the dealer's left, then the rounds before it."""
    c = t.config
    last = t.hands[-1] if t.hands else None
    head = [el("span", f"shoe {shown(t.shoe)}" if t.shoe is not None else "no shoe yet"),
            el("span", f"round {shown(last['round']) if last else 0}"),
            el("span", said(*PLAYER_STATE.get(pit.state(t), PLEASE_WAIT)), class_="state"),
            el("span", clock(time.time()), class_="clock", id="clock"),
            el("span", f"dealer {'draws to soft 17' if c.dealer == 'h17' else 'stands on 17'}"
               f"{'' if c.hole_card else ' · no hole card'}")]
    if c.min_bet_cents is not None and c.max_bet_cents is not None:
        head.append(el("span", f"Min {money(c.min_bet_cents)} · Max {money(c.max_bet_cents)}",
                       class_="limits", id="limits"))

    newest = el("div", el("h2", f"Round {shown(last['round'])}" if last else "No round yet"),
                blackjack_hands(last) if last else None, class_="lastbox", id="hands")
    # (the list's own numbers are the rounds')
    def before_item(h: dict[str, Any]) -> Html:
        words: Html = join("voided") if h.get("voided") else join(
            el("b", "dealer ", cards_shown(h.get("dealer")),
               f" ({shown(h.get('dealer_total'))})"),
            *(f" · seat {shown(x.get('seat'))} {shown(x.get('total'))}"
              for x in h.get("hands") or []))
        href = round_link(pit, t, h.get("round"))
        return el("li", el("a", words, href=href) if href is not None else words,
                  value=h.get("round") if isinstance(h.get("round"), int) else None)

    before = [before_item(h) for h in t.hands[-LAST_RESULTS - 1:-1][::-1]]
    return join(
        languages(c),
        el("div", head, id="where", class_="where", data_shoe=shown(t.shoe),
           data_round=shown(last["round"]) if last else 0),
        newest,
        el("div", el("div", el("h2", "Rounds before"),
                     el("ol", before, class_="last", reversed=True), class_="lastbox"),
           payouts_box(c), class_="bottom"),
        receipt_qr(pit, t))


def scoreboard(pit: Pit, t: TableView) -> Html:
    if t.config.game == "blackjack":
        return blackjack_board(pit, t)
    r, n = roads_of(t), counts(t.rounds)
    c = t.config
    decided = n["banker"] + n["player"] + n["tie"]
    streak = streaks(r["big_road"])
    now = streak["current"]
    in_shoe = c.decks * 52
    dealt = None if t.remaining is None else in_shoe - t.remaining
    name_en, name_zh = game_name(c)
    head = [el("span", said(name_en, name_zh), class_="game", id="game"),
            el("span", f"shoe {shown(t.shoe)}" if t.shoe is not None else "no shoe yet"),
            el("span", f"round {len(t.rounds)}"),
            el("span", said(*PLAYER_STATE.get(pit.state(t), PLEASE_WAIT)), class_="state"),
            el("span", clock(time.time()), class_="clock", id="clock")]
    if c.min_bet_cents is not None and c.max_bet_cents is not None:
        head.append(el("span", f"Min {money(c.min_bet_cents)} · Max {money(c.max_bet_cents)}",
                       class_="limits", id="limits"))
    progress = el("label", el("progress", value=dealt or 0, max=in_shoe),
                  "cards dealt -" if dealt is None else f"cards dealt {dealt} of {in_shoe}",
                  class_="progress", id="progress")
    stats = [el("span", both("Banker"), f" {n['banker']} · {percent(n['banker'], decided)}",
                class_="B-t"),
             el("span", both("Player"), f" {n['player']} · {percent(n['player'], decided)}",
                class_="P-t"),
             el("span", both("Tie"), f" {n['tie']} · {percent(n['tie'], decided)}",
                class_="T-t"),
             el("span", f"Banker pair {n['banker_pair']}"),
             el("span", f"Player pair {n['player_pair']}")]
    if c.game != "21-baccarat":  # a hand of 21 Baccarat is no natural
        stats.append(el("span", f"Naturals {n['natural']}"))
    stats += [el("span", f"{SIDE_NAMES[w]} {n[w]}", data_side=w)
              for w in SIDE_NAMES if w in c.side_wagers]
    streak_line = [el("span", "streak " + ("-" if now is None else
                                          f"{'Banker' if now['winner'] == 'B' else 'Player'} "
                                          f"{now['length']}"), id="streak"),
                   el("span", f"longest Banker {streak['longest_banker']}"),
                   el("span", f"longest Player {streak['longest_player']}")]
    return join(
        languages(c),
        el("div", head, progress, id="where", class_="where", data_shoe=shown(t.shoe),
           data_round=len(t.rounds)),
        players_phase(pit, t),
        el("div", el("div", el("h2", both("Bead Plate")), bead_plate(t, r["bead_plate"]),
                     class_="beads"),
           el("div", el("h2", both("Big Road")), big_road(r["big_road"]), class_="bigroad"),
           class_="roads top"),
        el("div", [derived_road(name, r[name]) for name in DERIVED], ask_panel(r["ask"]),
           class_="roads derived-row"),
        el("div", el("p", stats, class_="counts", id="counts"),
           el("p", streak_line, class_="counts streaks"), class_="stats"),
        el("div", el("div", el("h2", both("Last results")),
                     last_results(t.rounds, c.side_wagers, lambda rnd: round_link(pit, t, rnd)),
                     class_="lastbox"),
           payouts_box(c), class_="bottom"),
        receipt_qr(pit, t))


def round_link(pit: Pit, t: TableView, rnd: Any) -> str | None:
    """A round's own page on this server (its words, cards and receipt QR code), where the
    table has receipts to scan: a witnessed table, a server with --public-url."""
    if (t.config.witness_bound is None or pit.public_url is None or not isinstance(t.shoe, int)
            or not isinstance(rnd, int) or isinstance(rnd, bool)
            or not (0 < t.shoe < 1 << 16 and 0 < rnd < 1 << 16)):
        return None
    return f"/table/{quote(t.table, safe='', errors='replace')}/round/{t.shoe}/{rnd}"


def round_page(pit: Pit, t: TableView, shoe: int, rnd: int) -> Html | None:
    """One earlier round of the current shoe, as a player tapping it on the last-results list
    sees it: its words and cards and its receipt's QR code; None when it is not shown here."""
    blackjack = t.config.game == "blackjack"
    rec = next((r for r in (t.hands if blackjack else t.rounds) if r.get("round") == rnd),
               None) if shoe == t.shoe else None
    if rec is None or round_link(pit, t, rnd) is None:
        return None
    qr = receipt_path(t.table, shoe, rnd).replace("/receipt/", "/qr/", 1)
    back = "/table/" + quote(t.table, safe="", errors="replace")
    shown_round = (join(el("p", el("b", f"Round {rnd}"), class_="round-words", id="round-words"),
                        blackjack_hands(rec)) if blackjack else join(
        el("p", el("b", result_words(rec, told(t.config.side_wagers))), class_="round-words",
           id="round-words"),
        el("p", "P ", cards_shown(rec.get("player")), " · B ", cards_shown(rec.get("banker")),
           class_="hands")))
    return join(
        languages(t.config),
        shown_round,
        el("figure", el("img", src=qr, alt=f"QR code: the receipt of round {rnd}"),
           el("figcaption", said(f"Round {rnd}: scan to check its receipt",
                                 f"第{rnd}局：扫码核验")), class_="round-qr", id="round-qr"),
        el("p", el("a", said("Back to the table", "返回本桌"), href=back)))


def receipt_path(table: str, shoe: int, round_no: int) -> str:
    return f"/receipt/{quote(table, safe='', errors='replace')}/{shoe}/{round_no}"


def receipt_qr(pit: Pit, t: TableView) -> Html:
    """The last round's receipt as a QR code: a link to this server's checker page, which loads
    the receipt and checks it in the player's browser against keys the player trusts. None
    without serve --public-url (no address a phone could be sent to that no client chose). A
    table the registry does not hold as witnessed has no receipts to check (a receipt needs a
    witness's cosignature): it says so plainly instead."""
    if t.config.witness_bound is None:
        return el("p", said("This table's results are not independently witnessed",
                            "本桌结果未经独立见证"), class_="unwitnessed", id="unwitnessed")
    if pit.public_url is None:
        return join()
    played = [h for h in t.hands if not h.get("voided")] if t.config.game == "blackjack" \
        else t.rounds
    last = played[-1] if played else None
    rnd = last.get("round") if isinstance(last, dict) else None
    # (an edited store may give anything: no number, no code)
    shoe = t.shoe
    if not (isinstance(shoe, int) and isinstance(rnd, int) and not isinstance(rnd, bool)
            and 0 < shoe < 1 << 16 and 0 < rnd < 1 << 16):
        return join()
    src = receipt_path(t.table, shoe, rnd).replace("/receipt/", "/qr/", 1)
    return el("figure", el("img", src=src, alt=f"QR code: the receipt of round {rnd}"),
              el("figcaption", f"Round {rnd}: scan to check its receipt"),
              class_="receipt-qr", id="receipt-qr")


def scoreboard_html(pit: Pit, t: TableView) -> str:
    return str(scoreboard(pit, t))


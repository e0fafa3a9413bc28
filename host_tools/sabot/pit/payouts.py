"""What a baccarat table's scoreboard tells players of its game: the game's name and each wager
it offers with what it pays, in English and Chinese. The odds are not written here: each line
asks the settlement's own rules (game/wagers.py, the regulation's 627a.12 / 631c.5) what a round
that wins the wager pays, so the board and `sabot settle` cannot disagree."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from sabot.game import baccarat21 as b21
from sabot.game import blackjack_settle as bj
from sabot.game import wagers
from sabot.game.settle import Table
from sabot.game.wagers import Summary
from sabot.pit.words import wager_name
from sabot.registry import ShoeEntry

# A round that wins each wager, as resolve() reads it: (player total, banker total, player cards,
# banker cards, player pair, banker pair)
_PLAYER_WINS = Summary(9, 3, 2, 2, False, False)
_BANKER_WINS = Summary(3, 9, 2, 2, False, False)
_BANKER_SIX = Summary(3, 6, 2, 2, False, False)  # commission-free: a Banker win with six
_BANKER_SIX_THREE = Summary(3, 6, 2, 3, False, False)
_DRAGON7 = Summary(5, 7, 2, 3, False, False)  # EZ: Banker's three-card 7 over the Player
_PANDA8 = Summary(8, 5, 3, 2, False, False)  # EZ: Player's three-card 8 over the Banker
_TIE = Summary(5, 5, 2, 2, False, False)
_PAIRS = Summary(5, 3, 2, 2, True, True)
_ONE_PAIR = Summary(5, 3, 2, 2, True, False)

GAME_NAMES = {  # (English, Chinese)
    "baccarat": ("Baccarat", "百家乐"), "midibaccarat": ("Midi Baccarat", "中型百家乐"),
    "minibaccarat": ("Mini Baccarat", "迷你百家乐"), "21-baccarat": ("21 Baccarat", "21点百家乐")}
WAGER_ZH = {"player": "闲", "banker": "庄", "tie": "和", "dragon7": "龙7", "panda8": "熊猫8",
            "lucky_six": "幸运6", "player_pair": "闲对", "banker_pair": "庄对",
            "house_money": "庄闲对", "dragon_bonus_player": "闲龙宝",
            "dragon_bonus_banker": "庄龙宝", "hit_and_run": "庄家多牌", "straight_jack": "顺子21",
            "blackjack_house_money": "首两张", "player_bonus": "闲奖金", "banker_bonus": "庄奖金"}


def _odds(x: int | Fraction) -> tuple[str, str]:
    """`x` to 1 in words: (English, Chinese)."""
    f = Fraction(x)
    if f.denominator == 1:
        return f"{f.numerator} to 1", f"1赔{f.numerator}"
    return f"{f.numerator} to {f.denominator}", f"{f.denominator}赔{f.numerator}"


def _pays(wager: str, s: Summary) -> tuple[str, str]:
    result, odds, vig = wagers.resolve(wager, s)
    assert result == wagers.WIN, (wager, s)  # each summary above wins its wager
    en, zh = _odds(odds)
    if vig:
        pct = f"{float(Fraction(vig) * 100):g}%"
        return f"{en} less {pct} commission", f"{zh}，抽{pct}佣金"
    return en, zh


def _dragon_bonus(rule: str, player: bool) -> tuple[str, str]:
    """A Dragon Bonus wager's paytable (627a.12(e)), each line asked of the rules: a natural win
    and a non-natural win by 9 down to 4 points (three cards each side)."""
    def pays(own: int, other: int, own_cards: int, other_cards: int) -> tuple[str, str]:
        return _pays(rule, Summary(own, other, own_cards, other_cards, False, False) if player
                     else Summary(other, own, other_cards, own_cards, False, False))

    natural = pays(9, 7, 2, 3)
    by = [(m, pays(9, 9 - m, 3, 3)) for m in range(9, 3, -1)]
    return (f"natural win {natural[0]}; win by " + ", ".join(f"{m}: {o[0]}" for m, o in by),
            f"例牌赢{natural[1]}；" + "，".join(f"赢{m}点{o[1]}" for m, o in by))


def game_name(c: ShoeEntry) -> tuple[str, str]:
    en, zh = GAME_NAMES.get(c.game, (c.game, c.game))
    if c.ez:
        return f"EZ {en}", f"EZ{zh}"
    if c.commission_free:
        return f"Commission-free {en}", f"免佣{zh}"
    return en, zh


def payout_lines(c: ShoeEntry) -> list[tuple[str, str, str, str]]:
    """(wager, its name, what it pays) for each wager the table offers, in English and Chinese:
    [(wager, name_en, pays_en, name_zh + pays_zh), ...]."""
    table = Table(c.table_config())
    out: list[tuple[str, str, str, str]] = []

    def line(wager: str, en: str, zh: str) -> None:
        out.append((wager, wager_name(wager), en, f"{WAGER_ZH.get(wager, '')} {zh}"))

    line("player", *_pays("player", _PLAYER_WINS))
    rule = table.rule_name("banker")
    en, zh = _pays(rule, _BANKER_WINS)
    if rule == "ez_banker":  # a Banker win with a Dragon 7 pushes
        if wagers.resolve(rule, _DRAGON7)[0] == wagers.PUSH:
            en, zh = f"{en}; a win with a three-card 7 pushes", f"{zh}；三张牌7点赢则和局退还"
    elif rule == "nocomm_banker":
        six_en, six_zh = _pays(rule, _BANKER_SIX)
        en, zh = f"{en}; a win with 6 pays {six_en}", f"{zh}；6点赢{six_zh}"
    line("banker", en, zh)
    tie_en, tie_zh = _odds(table.tie_odds)
    line("tie", tie_en, tie_zh)
    for w in c.side_wagers:
        if w == "dragon7":
            line(w, *_pays(w, _DRAGON7))
        elif w == "panda8":
            line(w, *_pays(w, _PANDA8))
        elif w == "lucky_six":
            two, three = _pays(w, _BANKER_SIX), _pays(w, _BANKER_SIX_THREE)
            line(w, f"{two[0]} with two cards, {three[0]} with three",
                 f"两张牌{two[1]}，三张牌{three[1]}")
        elif w in ("player_pair", "banker_pair"):
            line(w, *_pays(w, _PAIRS))
        elif w == "house_money":
            both, one = _pays(w, _PAIRS), _pays(w, _ONE_PAIR)
            line(w, f"{both[0]} both pairs, {one[0]} either pair",
                 f"两对{both[1]}，一对{one[1]}")
        elif w.startswith("dragon_bonus_"):
            line(w, *_dragon_bonus(table.rule_name(w), w.endswith("player")))
    return out


def blackjack_payout_lines(c: ShoeEntry) -> list[tuple[str, str, str, str]]:
    """As payout_lines, for a blackjack table's side wagers: each paytable as the settlement
    holds it (game/blackjack_settle.py, § 633a.13 (l), (m), (n)), a line per wager."""
    out: list[tuple[str, str, str, str]] = []
    for w in c.side_wagers:
        if w == "hit_and_run":  # "for 1" (the stake included), by the dealer's cards
            t = bj.HIT_AND_RUN_FOR_ONE
            counts = sorted(k for k in t if isinstance(k, int))
            en = (f"dealer blackjack {t['blackjack']} for 1, "
                  + ", ".join(f"{n} cards {t[n]} for 1" for n in counts)
                  + ", 8 or more: the meter")
            zh = (f"庄家21点含本金{t['blackjack']}倍，"
                  + "，".join(f"{n}张含本金{t[n]}倍" for n in counts) + "，8张或以上：累积奖金")
            out.append((w, "Hit and Run", en, f"{WAGER_ZH[w]} {zh}"))
        elif w == "straight_jack":  # "to 1", by the straight's length
            lengths = bj.STRAIGHT_JACK_TO_ONE
            en = ", ".join(f"{n}-card straight {lengths[n]} to 1" for n in sorted(lengths)) + \
                " and a share of the meter"
            zh = "，".join(f"{n}张顺子1赔{lengths[n]}" for n in sorted(lengths)) + "，另分累积奖金"
            out.append((w, "Straight Jack", en, f"{WAGER_ZH[w]} {zh}"))
        elif w == "house_money":  # the player's first two cards: each hand's odds asked
            en_parts, zh_parts = [], []
            for name, zh_name, cards in (("A K suited", "同花AK", ["AS", "KS"]),
                                         ("two-card straight flush", "同花顺", ["9S", "TS"]),
                                         ("pair", "对子", ["9S", "9H"]),
                                         ("two-card straight", "顺子", ["9S", "TH"])):
                got = bj.house_money_hand(cards, c.decks)
                assert got is not None, cards  # each of these is a House Money hand
                en_parts.append(f"{name} {got[1]} to 1")
                zh_parts.append(f"{zh_name}1赔{got[1]}")
            out.append((w, "House Money", ", ".join(en_parts),
                        f"{WAGER_ZH['blackjack_house_money']} " + "，".join(zh_parts)))
    return out


def payout_lines21(c: ShoeEntry) -> list[tuple[str, str, str, str]]:
    """As payout_lines, for a 21 Baccarat table: each line asked of its settlement
    (game/baccarat21_settle.py) for a round that wins the wager, $100 wagered."""
    from sabot.game import baccarat21_settle as settle21

    rules, offered = settle21.table_of(c.table_config())
    out: list[tuple[str, str, str, str]] = []

    def pays(wager: str, **round_: Any) -> tuple[str, str]:
        result, win, vig = settle21.result_of(wager, 10_000, rules, round_)
        assert result == "win", (wager, round_)
        en, zh = _odds(Fraction(win, 10_000))
        pct = f"{float(Fraction(vig, 100)):g}%"
        return (f"{en} less {pct} commission", f"{zh}，抽{pct}佣金") if vig else (en, zh)

    def line(wager: str, en: str, zh: str) -> None:
        out.append((wager, wager_name(wager), en, f"{WAGER_ZH.get(wager, '')} {zh}"))

    pushes = settle21.result_of("player", 10_000, rules, {"winner": "tie"})[0] == "push"
    tie_en, tie_zh = ("a tie pushes", "和局退还") if pushes else ("a tie loses", "和局输")
    for hand in settle21.MAIN:
        en, zh = pays(hand, winner=hand)
        line(hand, f"{en}; {tie_en}", f"{zh}；{tie_zh}")
    if "tie" in offered:
        line("tie", *pays("tie", winner="tie"))
    for w in offered:
        if w.endswith("_bonus"):
            got = [(hand, pays(w, winner="player", **{w: hand})) for hand in b21.BONUS_HANDS
                   if hand in rules.bonus_paytable]
            line(w, ", ".join(f"{h.replace('_', ' ')} {en}" for h, (en, _) in got),
                 "，".join(f"{'同花对' if h == 'suited_pair' else '对子'}{zh}"
                          for h, (_, zh) in got))
    return out

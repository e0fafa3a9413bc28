"""What a baccarat table's scoreboard tells players of its game: the game's name and each wager
it offers with what it pays, in English and Chinese. The odds are not written here: each line
asks the settlement's own rules (game/wagers.py, the regulation's 627a.12 / 631c.5) what a round
that wins the wager pays, so the board and `sabot settle` cannot disagree."""

from __future__ import annotations

from fractions import Fraction

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
    "minibaccarat": ("Mini Baccarat", "迷你百家乐")}
WAGER_ZH = {"player": "闲", "banker": "庄", "tie": "和", "dragon7": "龙7", "panda8": "熊猫8",
            "lucky_six": "幸运6", "player_pair": "闲对", "banker_pair": "庄对",
            "house_money": "庄闲对", "dragon_bonus_player": "闲龙宝",
            "dragon_bonus_banker": "庄龙宝"}


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
            line(w, f"paytable {table.paytable}", f"赔率表{table.paytable}")
    return out

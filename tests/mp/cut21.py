# Runs on the unix-port MicroPython: a 21 Baccarat shoe whose cut card ends the shoe
# (shoe/b21.py RULE_CUT_LAST) through shoe/dealing.py: the burn and a round, then the cut card
# between rounds, held there (an unreadable card, resolved by voiding it) or not.
# Prints a line for each: "held H phase P round R" after the cut card (and its resolution).
from shoe.b21 import RULE_CUT_LAST, Rules21
from shoe.cards import CUT, NO_CARD
from shoe.dealing import RES_VOID_CARD, DealingState

RANKS, SUITS = "A23456789TJQK", "SHDC"


def code(card):
    return RANKS.index(card[0]) * 4 + SUITS.index(card[1])


for held in (0, 1):
    s = DealingState(8)
    s.b21 = Rules21(16 | RULE_CUT_LAST, 17)
    s.new_shoe()
    for c in ("AD", "4C", "TS", "TH", "9S", "8H"):  # the burn, then a round
        s.card_out(code(c))
    if held:
        s.card_out(NO_CARD)
    s.card_out(CUT)
    if held:
        s.resolve(RES_VOID_CARD)
    print("held %d phase %d round %d" % (held, s.phase, s.round_no))

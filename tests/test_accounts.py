"""The shoe's content accounting on its own: hand-built records, no frames, no store."""

import json

from sabot import protocol as pr
from sabot.audit.accounts import ShoeAccounts, expected_announcements, new_shoe_accounts
from sabot.game import rules
from sabot.registry import ShoeEntry

PLAYER, BANKER = ["9S", "KH"], ["2D", "3C"]  # a natural nine against five: no third card
BURN = ["2S", "4H", "5D"]  # a two exposed: two more burned


def accounts(config=None):
    """(ShoeAccounts starting from no record, the alarms it raises as (kind, where))."""
    raised = []
    acc = ShoeAccounts(config or ShoeEntry(7), {"inventory": {}},
                       lambda kind, detail, **where: raised.append((kind, where)))
    return acc, raised


def shoe_start(shoe=1, decks=8):
    return {"event": "shoe_start", "shoe": shoe, "decks": decks,
            "variant": pr.decode_variant(pr.variant_byte())}


def initial(rnd, shoe=1):
    return {"event": "initial_cards", "shoe": shoe, "round": rnd,
            "player": PLAYER[:2], "banker": BANKER[:2]}


def result(rnd, shoe=1):
    want = rules.round_outcome(PLAYER, BANKER)
    return {"shoe": shoe, "round": rnd, "player": PLAYER, "banker": BANKER,
            "player_total": want["player_total"], "banker_total": want["banker_total"],
            "winner": want["winner"], "flags": want["flags"],
            "announcements": expected_announcements(want, {})}


def shoe_end(inventory, rounds=1, shoe=1, unknown=0):
    return {"event": "shoe_end", "shoe": shoe, "rounds": rounds, "position": 0,
            "inventory": inventory, "unknown": unknown}


def deal_one_round(acc):
    acc.account("shoe_start", shoe_start())
    acc.account("burn", {"event": "burn", "shoe": 1, "cards": BURN})
    acc.account("initial_cards", initial(1))
    acc.account("result", result(1))


def test_a_whole_shoe_by_the_procedure_raises_nothing_and_counts_every_card():
    acc, raised = accounts()
    deal_one_round(acc)
    out = dict.fromkeys(BURN + PLAYER + BANKER, 1)
    acc.account("shoe_end", shoe_end(out))
    assert raised == []
    inv = acc.state["inventory"]
    assert inv["counts"] == out and inv["round"] == 1 and inv["ended"] and not inv["partial"]


def test_a_shoe_end_whose_inventory_is_not_the_cards_counted_is_inventory_mismatch():
    acc, raised = accounts()
    deal_one_round(acc)
    said = dict.fromkeys(BURN + PLAYER + BANKER, 1)
    del said["KH"]
    acc.account("shoe_end", shoe_end(said))
    assert raised == [("inventory_mismatch", {"shoe": 1})]


def test_rounds_before_the_burn_are_one_missing_burn_per_shoe():
    acc, raised = accounts()
    acc.account("shoe_start", shoe_start())
    for rnd in (1, 2):
        acc.account("initial_cards", initial(rnd))
        acc.account("result", result(rnd))
    assert raised == [("missing_burn", {"shoe": 1, "round": 1})]


def test_a_shoe_met_mid_way_is_partial_and_raises_no_missing_burn_nor_initial_cards():
    acc, raised = accounts()
    acc.mark_partial()
    acc.account("result", result(5))
    assert raised == [] and acc.state["inventory"]["partial"]
    assert acc.state["inventory"]["shoe"] == 1  # the first record names the shoe


def test_a_copy_beyond_the_decks_is_inventory_exceeded_and_a_foreign_config_is_config_mismatch():
    acc, raised = accounts(ShoeEntry(7, decks=1))
    acc.account("shoe_start", shoe_start(decks=8))
    acc.account("burn", {"event": "burn", "shoe": 1, "cards": ["2S", "9S", "9S"]})
    assert [k for k, _ in raised] == ["config_mismatch", "inventory_exceeded"]


def test_the_accounts_keep_the_json_shape_the_link_state_stores():
    acc, _ = accounts()
    deal_one_round(acc)
    inv = acc.state["inventory"]
    assert set(inv) == set(new_shoe_accounts(None))
    assert json.loads(json.dumps(inv, sort_keys=True)) == inv

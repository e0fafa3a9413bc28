"""A round's receipt (sabot/receipt.py, `sabot receipt verify`): a C2SP tlog-proof whose entry
is the round's signed result in its shoe's log, the checkpoint signed by the shoe's key and
cosigned by a real witness (sabot/witness/service.py's add-checkpoint). A genuine receipt
verifies and says what it proves in plain words; each of a flipped card, altered initial cards, a
wrong shoe key, a proof to another tree, a checkpoint not signed by the shoe and a missing
cosignature is refused, saying which part does not hold. (The shoe's element signs its
checkpoints on a board: here a P-256 key stands in for it, as in capture_gen.)"""

import base64
import json
import struct
import subprocess

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from sabot import keys, note, receipt, tlog
from sabot import protocol as pr
from sabot.errors import SabotError
from sabot.game.cards import shuffled_shoe
from sabot.registry import Registry, ShoeEntry
from sabot.virtual import capture_gen
from sabot.witness.service import Witness

from kit import SABOT

SHOE = 0x5AB0_0001


def signed_checkpoint(key, leaves, size):
    origin = tlog.origin(SHOE)
    text = tlog.Checkpoint(origin, size, tlog.root(leaves[:size])).text()
    v = note.ecdsa_verifier(origin, key.public_key())
    return text + "\n" + note.signature_line(origin, v.id, key.sign(
        text.encode(), ec.ECDSA(hashes.SHA256())))


@pytest.fixture(scope="module")
def shoe(tmp_path_factory):
    """A dealt shoe's frames (its log's leaves), its registry entry, and a witness that cosigned
    its checkpoint."""
    key = ec.generate_private_key(ec.SECP256R1())
    entry = ShoeEntry(SHOE)
    entry.add_public_key(1, keys.public_pem(key.public_key()))
    frames, rounds = capture_gen.shoe_frames(capture_gen.ShoeSigner(key, SHOE),
                                             shuffled_shoe(8, 7), 1)
    leaves = [tlog.leaf_hash(f) for f in frames]
    cp = signed_checkpoint(key, leaves, len(frames))
    d = tmp_path_factory.mktemp("witness")
    w = Witness(str(d / "w.db"), ed25519.Ed25519PrivateKey.generate(), {SHOE: entry},
                "regulator.example/w1")
    answer = w.add_checkpoint(tlog.add_checkpoint_body(0, [], cp))
    assert answer.status == 200
    w.close()
    return {"key": key, "entry": entry, "frames": frames, "leaves": leaves,
            "checkpoint": cp + answer.body, "witness": note.Verifier.parse(w.vkey),
            "rounds": rounds, "dir": d}


def round_receipt(shoe, n=10, frames=None, checkpoint=None, leaves=None):
    """Round n's receipt: its initial cards and result are frames 2 + 2(n-1) and the one
    after (shoe start and burn come first)."""
    frames = frames or shoe["frames"]
    at = 2 + 2 * (n - 1) + 1
    leaves = leaves or shoe["leaves"]
    return receipt.make(frames[at - 1], frames[at], at,
                        tlog.inclusion_proof(leaves, at, len(leaves)),
                        checkpoint or shoe["checkpoint"])


def test_a_genuine_receipt_verifies_and_says_what_it_proves(shoe):
    text = round_receipt(shoe)
    got = receipt.verify(text, {SHOE: shoe["entry"]}, [shoe["witness"]])
    assert got["round"]["round"] == 10 and got["witnesses"] == ["regulator.example/w1"]
    assert got["index"] == 21 and got["size"] == len(shoe["frames"])
    words = got["explanation"]
    assert "round 10 of its shoe 1" in words and "cannot drop or change" in words
    assert "fair" in words and "does not show" in words  # what it proves, and not more
    assert len(text.encode()) <= 1024 + 512  # one QR code holds up to 2,953 bytes
    pasted = "\r\n" + text.replace("\n", "\r\n") + "\n\n"  # as mailed: CRLF, blank lines
    assert receipt.verify(pasted, {SHOE: shoe["entry"]}, [shoe["witness"]])["index"] == 21
    twice = receipt.verify(text, {SHOE: shoe["entry"]}, [shoe["witness"], shoe["witness"]])
    assert twice["witnesses"] == ["regulator.example/w1"]  # one witness given twice is one


def _refused(shoe, text, words, witnesses=None, quorum=None, entry=None):
    with pytest.raises(receipt.ReceiptInvalid, match=words):
        receipt.verify(text, {SHOE: entry or shoe["entry"]},
                       witnesses if witnesses is not None else [shoe["witness"]], quorum)


def _with_frames(text, initial, result):
    lines = text.split("\n")
    lines[1] = "extra " + base64.b64encode(struct.pack(">H", len(initial)) + initial
                                           + result).decode()
    return "\n".join(lines)


def test_each_forgery_is_refused_saying_which_part(shoe):
    text = round_receipt(shoe)
    initial, result = shoe["frames"][20], shoe["frames"][21]
    flipped = bytearray(result)
    flipped[pr.HEADER.size + 6] ^= 1  # a card of the result
    _refused(shoe, _with_frames(text, initial, bytes(flipped)), "not signed by shoe")
    other = bytearray(initial)
    other[pr.HEADER.size + 4] ^= 1  # a first card
    _refused(shoe, _with_frames(text, bytes(other), result), "initial cards")
    stranger = ec.generate_private_key(ec.SECP256R1())  # the registry names another key
    entry = ShoeEntry(SHOE)
    entry.add_public_key(1, keys.public_pem(stranger.public_key()))
    _refused(shoe, text, "not signed by shoe", entry=entry)
    other_tree = [tlog.leaf_hash(b"another history %d" % i) for i in range(len(shoe["leaves"]))]
    forged_cp = signed_checkpoint(shoe["key"], other_tree, len(other_tree)) + \
        shoe["checkpoint"].split("\n\n")[1].split("\n", 1)[1]  # the witness's line moved over
    _refused(shoe, round_receipt(shoe, checkpoint=forged_cp), "signatures do not hold")
    _refused(shoe, round_receipt(shoe, checkpoint=signed_checkpoint(
        shoe["key"], other_tree, len(other_tree))), "0 of the witnesses")
    own = shoe["checkpoint"].split("\n")
    no_shoe_sig = "\n".join(line for line in own if not line.startswith(
        f"\u2014 {tlog.origin(SHOE)} "))
    _refused(shoe, round_receipt(shoe, checkpoint=no_shoe_sig), "not signed by the shoe")
    wrong_index = text.replace("\nindex 21\n", "\nindex 23\n")
    _refused(shoe, wrong_index, "not in the log")
    second = note.Verifier.parse(note.Ed25519Signer(
        "lab.example/w2", ed25519.Ed25519PrivateKey.generate(), note.COSIGNATURE).verifier.vkey())
    _refused(shoe, text, "1 of the witnesses", witnesses=[shoe["witness"], second])
    assert receipt.verify(text, {SHOE: shoe["entry"]}, [shoe["witness"], second], 1)


@pytest.mark.board
def test_sabot_receipt_verify_exits_0_only_for_a_genuine_receipt(shoe):
    d = shoe["dir"]
    reg = Registry(str(d / "shoes.json"))
    reg.put(shoe["entry"])
    good = d / "round10.tlog-proof"
    good.write_text(round_receipt(shoe))
    base = [*SABOT, "receipt", "verify", "--registry", str(d / "shoes.json"), "--witness",
            shoe["witness"].vkey()]
    r = subprocess.run([*base, str(good)], capture_output=True, text=True)
    assert r.returncode == 0 and "Player" in r.stdout and "cannot drop or change" in r.stdout, \
        r.stderr
    bad = d / "bad.tlog-proof"
    bad.write_text(round_receipt(shoe).replace("\nindex 21\n", "\nindex 23\n"))
    r = subprocess.run([*base, str(bad)], capture_output=True, text=True)
    assert r.returncode != 0 and "not in the log" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.board
def test_the_browser_checker_accepts_a_genuine_receipt_and_refuses_each_forgery(shoe, tmp_path):
    """pit/static/verify.html in Debian's headless Chromium, opened as a saved file (no server
    at all): WebCrypto alone accepts the genuine receipt and refuses a flipped card, a wrong shoe
    key, a proof to another tree and a missing cosignature, saying which."""
    from pathlib import Path

    from selenium.webdriver.support.ui import WebDriverWait

    import sabot.pit

    from kit.browser import browser, cards_shown

    page = Path(sabot.pit.__file__).parent / "static" / "verify.html"
    genuine = round_receipt(shoe)
    initial, result = shoe["frames"][20], shoe["frames"][21]
    flipped = bytearray(result)
    flipped[pr.HEADER.size + 6] ^= 1
    stranger = ec.generate_private_key(ec.SECP256R1())
    other_tree = [tlog.leaf_hash(b"another history %d" % i) for i in range(len(shoe["leaves"]))]
    witness_line = shoe["checkpoint"].split("\n\n")[1].split("\n", 1)[1]
    cases = [
        # checked against the registry: its table named too
        (genuine, None, "Verified: This is the result shoe 0x5ab00001 (table shoe-1521483777) "
         "signed for round 10"),
        ("\n" + genuine + "\n\n", None, "Verified: This is"),  # as pasted, blank lines around it
        (genuine, "not a key", "Not verified: the shoe's key box holds no public key"),
        (_with_frames(genuine, initial, bytes(flipped)), None, "Not verified: the result is not "
         "signed by shoe"),
        (genuine, keys.public_pem(stranger.public_key()), "Not verified: the result is not "
         "signed by shoe"),
        (round_receipt(shoe, checkpoint=signed_checkpoint(shoe["key"], other_tree,
                                                          len(other_tree)) + witness_line),
         None, "Not verified: the checkpoint's signatures do not hold"),
        (round_receipt(shoe, checkpoint=signed_checkpoint(shoe["key"], other_tree,
                                                          len(other_tree))),
         None, "Not verified: 0 of the witnesses"),
        (genuine.replace("\nindex 21\n", "\nindex 23\n"), None, "Not verified: the result is "
         "not in the log"),
        # the one witness's line twice, two witnesses trusted: one cosigned, not two
        (genuine + witness_line, None, "Not verified: 1 of the witnesses",
         shoe["witness"].vkey() + "\n" + Witness(str(tmp_path / "w2.db"),
                                                 ed25519.Ed25519PrivateKey.generate(), {},
                                                 "regulator.example/w2").vkey),
    ]
    dummy, dummy_entry, dummy_witness = dummy_receipt(tmp_path)
    cases.append((dummy, dummy_entry.public_keys[0]["key"], "Verified: This is the result shoe "
                  "0x5ab00001 signed for " + cards_shown(DUMMY_SAID), dummy_witness.vkey()))
    bj, bj_entry, bj_witness = blackjack_receipt(tmp_path)
    cases.append((bj, bj_entry.public_keys[0]["key"], "Verified: This is the result shoe "
                  "0x5ab00001 signed for " + cards_shown(BLACKJACK_SAID), bj_witness.vkey()))
    void, void_entry, void_witness = blackjack_receipt(tmp_path, voided=True)
    cases.append((void, void_entry.public_keys[0]["key"], "Verified: This is the result shoe "
                  "0x5ab00001 signed for " + cards_shown(VOIDED_SAID), void_witness.vkey()))
    b21, b21_entry, b21_witness = receipt21(tmp_path)
    cases.append((b21, b21_entry.public_keys[0]["key"], "Verified: This is the result shoe "
                  "0x5ab00001 signed for " + cards_shown(SAID21), b21_witness.vkey()))
    # signed by the shoe's own key, but the Banker's win is not what its rules give the cards
    b21, b21_entry, b21_witness = receipt21(tmp_path, winner=2)
    cases.append((b21, b21_entry.public_keys[0]["key"], "Not verified: the shoe's round is not "
                  "one the rules deal", b21_witness.vkey()))
    registry = json.dumps({"shoes": [shoe["entry"].__dict__]})
    driver = browser(tmp_path)
    try:
        driver.get(page.as_uri())
        for text, key, words, *trusted in cases:
            driver.execute_script(
                "document.getElementById('receipt').value = arguments[0];"
                "document.getElementById('shoe-key').value = arguments[1];"
                "document.getElementById('witnesses').value = arguments[2];"
                "document.getElementById('verdict').textContent = '';"
                "document.getElementById('check').click();",
                text, key or registry, trusted[0] if trusted else shoe["witness"].vkey())
            WebDriverWait(driver, 20).until(lambda d: d.find_element(
                "id", "verdict").text not in ("", "checking…"))
            said = driver.find_element("id", "verdict").text
            assert said.startswith(words), (words, said[:400])
    finally:
        driver.quit()


@pytest.mark.board
def test_a_tlog_policy_names_the_witnesses_and_their_quorum(shoe, tmp_path):
    """receipt verify --policy: witness, group (K, all, any) and quorum lines; the receipt holds
    when the witnesses that cosigned meet the quorum, and a malformed policy is one line."""
    w1 = shoe["witness"].vkey()
    w2 = Witness(str(tmp_path / "w2.db"), ed25519.Ed25519PrivateKey.generate(), {},
                 "regulator.example/w2").vkey
    text = round_receipt(shoe)
    entries = {SHOE: shoe["entry"]}

    def check(policy):
        return receipt.verify(text, entries, [], policy=receipt.Policy.parse(policy))

    both = f"log ignored\nwitness a {w1}\nwitness b {w2} https://w2.example\n"
    assert check(both + "group g any a b\nquorum g  # either will do\n")["witnesses"] == [
        shoe["witness"].name]
    assert check(both + "group g 1 a b\nquorum g\n")["index"] == 21
    with pytest.raises(receipt.ReceiptInvalid, match="do not meet the policy's quorum"):
        check(both + "group g all a b\nquorum g\n")
    with pytest.raises(receipt.ReceiptInvalid, match="do not meet the policy's quorum"):
        check(both + "quorum b\n")
    assert "No witness was asked for" in check(f"witness b {w2}\nquorum none\n")["explanation"]
    for bad, words in ((both, "no quorum line"), (both + "group g 3 a b\nquorum g\n",
                                                   "threshold"),
                       (both + "group g any a c\nquorum g\n", "defined nowhere"),
                       (both + "witness a " + w2 + "\nquorum a\n", "named twice"),
                       ("frobnicate\n", "not a policy line")):
        with pytest.raises(SabotError, match=words):
            receipt.Policy.parse(bad)
    d = shoe["dir"]
    Registry(str(d / "shoes.json")).put(shoe["entry"])
    (d / "r.tlog-proof").write_text(text)
    (d / "policy").write_text(both + "group g any a b\nquorum g\n")
    r = subprocess.run([*SABOT, "receipt", "verify", str(d / "r.tlog-proof"), "--registry",
                        str(d / "shoes.json"), "--policy", str(d / "policy")],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "cosigned" in r.stdout, r.stderr



def dummy_receipt(tmp_path):
    """(receipt, its shoe's entry, the witness's verifier) of round 4: a dummy hand (a
    supervisor's keep-dummy: no wagers on it), Player 9H 2S, Banker KD 3C and a third card the
    shoe could not read (0xFF)."""
    key = ec.generate_private_key(ec.SECP256R1())
    entry = ShoeEntry(SHOE)
    entry.add_public_key(1, keys.public_pem(key.public_key()))
    signer = capture_gen.ShoeSigner(key, SHOE)
    cards = [pr.CARD_NAMES.index(c) for c in ("9H", "2S", "KD", "3C")]
    initial = signer.chained(pr.T_INITIAL_CARDS, struct.pack(">HH", 1, 4)
                             + bytes((cards[0], cards[2], cards[1], cards[3])))
    result = signer.chained(pr.T_RESULT, struct.pack(">HHBB", 1, 4, 2 << 4 | 3, 1)
                            + bytes(cards + [0xFF]) + struct.pack(">HB", 2, 0))
    leaves = [tlog.leaf_hash(f) for f in (initial, result)]
    checkpoint, witness = cosigned(tmp_path / "dummy-w.db", key, entry, leaves)
    text = receipt.make(initial, result, 1, tlog.inclusion_proof(leaves, 1, 2), checkpoint)
    return text, entry, witness


def cosigned(db, key, entry, leaves):
    """The shoe's checkpoint of `leaves`, signed by `key` and cosigned by a witness kept in
    `db`; (the checkpoint note, the witness's verifier)."""
    cp = signed_checkpoint(key, leaves, len(leaves))
    w = Witness(str(db), ed25519.Ed25519PrivateKey.generate(), {SHOE: entry},
                "regulator.example/w1")
    answer = w.add_checkpoint(tlog.add_checkpoint_body(0, [], cp))
    witness = note.Verifier.parse(w.vkey)
    w.close()
    return cp + answer.body, witness


DUMMY_SAID = ("round 4 of its shoe 1, a dummy hand (a supervisor kept it with no wagers on it: it "
              "settles no bet): Player 9H 2S (1), Banker KD 3C ? (?): Banker wins.")


def test_a_dummy_hand_and_an_unread_card_are_said_as_they_are(tmp_path):
    """A result the shoe signed for a dummy hand is called one, and a card the shoe could not
    read is "?" with its hand's total unknown — never a total made up from it. (The browser
    checker says the same: test_the_browser_checker_accepts_...)"""
    text, entry, witness = dummy_receipt(tmp_path)
    words = receipt.verify(text, {SHOE: entry}, [witness])["explanation"]
    assert DUMMY_SAID in words and "None" not in words, words


def blackjack_receipt(tmp_path, voided=False):
    """(receipt, its shoe's entry, the witness's verifier) of a blackjack round the shoe signed
    alone (no initial cards): seats 2 and 5, seat 2 splitting its eights and doubling the first
    hand, the dealer drawing to 21; or, `voided`, the same cards of a round a supervisor
    voided."""
    from sabot.game.blackjack import follow_round

    key = ec.generate_private_key(ec.SECP256R1())
    entry = ShoeEntry(SHOE, game="blackjack", decks=6)
    entry.add_public_key(1, keys.public_pem(key.public_key()))
    signer = capture_gen.ShoeSigner(key, SHOE)
    events = [("card", c) for c in ("8S", "8H", "9C", "8D", "TS", "7C")] + [
        ("press", "split"), ("card", "3H"), ("press", "double"), ("card", "9D"),
        ("card", "2C"), ("card", "KC"), ("press", "next"), ("press", "next"), ("card", "5S")]
    got = follow_round([2, 5], events, "s17")
    assert got["complete"]
    placed = [15 if p == "dealer" else p
              for (k, _), p in zip(events, got["placed"], strict=True) if k == "card"]
    placed += [0] * (len(placed) % 2)
    press = {name: b for b, name in pr.BLACKJACK_PRESSES.items()}
    raw = bytes(pr.CARD_NAMES.index(w) if k == "card" else press[w] for k, w in events)
    result = signer.chained(pr.T_BLACKJACK_RESULT, struct.pack(">HHBBB", 1, 3, 0x12,
                                                                6 if voided else 2, len(raw))
                            + raw + bytes(placed[i] << 4 | placed[i + 1]
                                          for i in range(0, len(placed), 2)))
    checkpoint, witness = cosigned(tmp_path / f"bj-w{int(voided)}.db", key, entry,
                                   [tlog.leaf_hash(result)])
    return receipt.make(b"", result, 0, [], checkpoint), entry, witness


BLACKJACK_SAID = ("round 3 of its shoe 1: seat 2 8S 3H 9D (20, split), seat 2 8D 2C KC (20, "
                  "split), seat 5 8H TS (18); dealer 9C 7C 5S (21, 3 cards).")


VOIDED_SAID = ("round 3 of its shoe 1: voided by a supervisor: no wager on it settles, and its "
               "cards (8S 8H 9C 8D TS 7C 3H 9D 2C KC 5S) were set aside.")


def test_a_voided_blackjack_rounds_receipt_verifies_and_says_it_was_voided(tmp_path):
    """A round a supervisor voided is signed by the shoe like any other: its receipt verifies,
    and says it was voided and settles no wager, naming the cards set aside; it is never taken
    for a played round."""
    text, entry, witness = blackjack_receipt(tmp_path, voided=True)
    checked = receipt.verify(text, {SHOE: entry}, [witness])
    assert checked["round"]["voided"] and VOIDED_SAID in checked["explanation"], checked


def test_a_blackjack_rounds_receipt_names_each_hand_and_refuses_a_card_moved(tmp_path):
    """A blackjack round's receipt is its one signed frame: verified, it says each seat's hands
    and the dealer's; a card put in another hand (signed anew by another key) is refused."""
    text, entry, witness = blackjack_receipt(tmp_path)
    words = receipt.verify(text, {SHOE: entry}, [witness])["explanation"]
    assert BLACKJACK_SAID in words, words
    extra = base64.b64decode(text.split("\n")[1][6:])
    flipped = bytearray(extra)
    flipped[-64 - 1] ^= 0x10  # the last byte of nibbles: the dealer's 5S into another hand
    forged = text.replace(text.split("\n")[1], "extra " + base64.b64encode(flipped).decode())
    with pytest.raises(receipt.ReceiptInvalid, match="not signed by shoe"):
        receipt.verify(forged, {SHOE: entry}, [witness])


def receipt21(tmp_path, winner=1):
    """(receipt, its shoe's entry, the witness's verifier) of a 21 Baccarat round at a table of
    the default settings: Player TS 5S 7H (22), Banker TH 6C 8D (24), both over 21, the lower
    winning (§ 681a.6(c)(1)(ii)); `winner` the outcome byte's, 1 the Player's as the rules
    say."""
    from sabot import frames21
    from sabot.game import baccarat21 as b21

    key = ec.generate_private_key(ec.SECP256R1())
    entry = ShoeEntry(SHOE, game="21-baccarat")
    entry.add_public_key(1, keys.public_pem(key.public_key()))
    signer = capture_gen.ShoeSigner(key, SHOE)
    player, banker = ["TS", "5S", "7H"], ["TH", "6C", "8D"]
    rules = frames21.rule_bytes(b21.Rules())
    code = pr.CARD_NAMES.index
    initial = signer.chained(pr.T_INITIAL_CARDS, struct.pack(">HH", 1, 7) + bytes(
        code(c) for c in (player[0], banker[0], player[1], banker[1])))
    result = signer.chained(pr.T_RESULT21, struct.pack(">HHBB", 1, 7, 3 << 4 | 3, 0) + rules
                            + bytes(code(c) for c in player + banker) + bytes((winner,)))
    leaves = [tlog.leaf_hash(f) for f in (initial, result)]
    checkpoint, witness = cosigned(tmp_path / f"b21-w{winner}.db", key, entry, leaves)
    return (receipt.make(initial, result, 1, tlog.inclusion_proof(leaves, 1, 2), checkpoint),
            entry, witness)


SAID21 = ("round 7 of its shoe 1: Player TS 5S 7H (22), Banker TH 6C 8D (24): Player wins.")


def test_a_21_baccarat_rounds_receipt_verifies_and_is_held_to_its_tables_rules(tmp_path):
    """A 21 Baccarat round's receipt is its initial cards and signed result, as baccarat's: it
    verifies and names each hand's total (both over 21: the lower wins); a result that says
    another winner than its table's rules give from its cards is refused, even signed by the
    shoe's own key."""
    text, entry, witness = receipt21(tmp_path)
    checked = receipt.verify(text, {SHOE: entry}, [witness])
    assert SAID21 in checked["explanation"] and checked["round"]["game"] == "21-baccarat"
    text, entry, witness = receipt21(tmp_path, winner=2)
    with pytest.raises(receipt.ReceiptInvalid, match="not one the rules deal"):
        receipt.verify(text, {SHOE: entry}, [witness])


def test_a_21_baccarat_receipt_is_held_to_its_tables_settings_and_game(tmp_path):
    """A round signed under settings the registry's table does not have (the Player's Hand
    standing on 12), or a baccarat round from a shoe registered at a 21 Baccarat table, is
    refused even though the shoe's key signed it and its cards follow its own rule bytes."""
    text, entry, witness = receipt21(tmp_path)
    other = ShoeEntry(SHOE, game="21-baccarat", rules21={"player_draws_below": 12})
    other.public_keys = entry.public_keys
    with pytest.raises(receipt.ReceiptInvalid, match="other settings than table"):
        receipt.verify(text, {SHOE: other}, [witness])
    text, entry, witness = dummy_receipt(tmp_path)
    other = ShoeEntry(SHOE, game="21-baccarat")
    other.public_keys = entry.public_keys
    with pytest.raises(receipt.ReceiptInvalid, match="not of table"):
        receipt.verify(text, {SHOE: other}, [witness])

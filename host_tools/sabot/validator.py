"""The validator: verifies every frame (MAC, sequence, chain, boot counter), recomputes every round from
its cards with the host's independent rules, tracks the shoe inventory, and stores everything in the
audit log. Works the same on a live link and on a capture (`sabot replay`)."""

import struct

from . import frames as fr
from . import rules
from .audit import AuditStore
from .cards import BURN_VALUES, card_code

IRREGULARITIES = ("", "card_not_due", "unreadable_card", "two_cards", "inventory_exceeded", "foreign_card",
                  "card_missing", "cards_exhausted")
RESOLUTIONS = ("", "void_card", "keep_dummy", "void_round")
COMMAND_REJECTIONS = ("", "bad_mac", "replayed", "not_for_this_shoe", "not_now", "unknown_command")
PHASES = ("burn_first", "burn", "dealing", "held", "ended")
WINNERS = {1: "player", 2: "banker", 3: "tie"}
ANNOUNCEMENTS = ((1, "tie hand"), (2, "Dragon 7"), (4, "Panda 8"), (8, "Lucky Six"))
GAMES = ("minibaccarat", "midibaccarat", "baccarat", "baccarat")
CONTRACT_ROUND_KEYS = ("shoe", "round", "player", "banker", "player_total", "banker_total", "winner", "flags",
                       "dummy")


def decode_variant(v):
    return {"game": GAMES[v & 3], "ez": bool(v & 4), "commission_free": bool(v & 8), "squeeze": bool(v & 16)}


def contract_round(rec):
    """A round record with exactly the keys CONTRACTS.md promises (the audit log keeps more)."""
    return {k: rec[k] for k in CONTRACT_ROUND_KEYS if k in rec}


def expected_announcements(rec, variant):
    """627a.11(a) / 631a.12(a): "tie hand"; "Dragon 7" / "Panda 8" on EZ tables; 631c.5(e): "Lucky Six"."""
    out = ["tie hand"] if rec["winner"] == "tie" else []
    if variant.get("ez"):
        out += [n for f, n in (("dragon7", "Dragon 7"), ("panda8", "Panda 8")) if f in rec["flags"]]
    if variant.get("commission_free") and "lucky_six" in rec["flags"]:
        out.append("Lucky Six")
    return out
FLAG_BITS = (("banker_natural", 8), ("banker_pair", 256), ("dragon7", 16), ("lucky_six", 64),
             ("panda8", 32), ("player_natural", 4), ("player_pair", 128))


class Reject(Exception):
    def __init__(self, reason):
        self.reason = reason


CARD_NAMES = [card_code(b) for b in range(52)] + ["CUT"] + [None] * 203  # by card byte


INTEGRITY = ("unchecked", "ok", "tilt")


def decode_status(payload):
    phase, shoe, rnd, position, due, host_counter, acked, first, last, integ = struct.unpack(">BHHHBIIIIB",
                                                                                             payload)
    return {"phase": PHASES[phase] if phase < len(PHASES) else phase, "shoe": shoe, "round": rnd,
            "integrity": INTEGRITY[integ] if integ < 3 else integ,
            "position": position, "due": ("none", "player", "banker")[due] if due < 3 else due,
            "host_counter": host_counter, "acked": acked, "unacked_from": first, "unacked_to": last}


class Validator:
    def __init__(self, key, store, on_record=None):
        self.key = key
        self.store = store if isinstance(store, AuditStore) else AuditStore(store)
        self.deframer = fr.Deframer()
        self.on_record = on_record
        st = self.store.link(key.key_id, key.shoe_id)
        self.state = st or {"last_seq": 0, "last_mac": b"", "last_boot": 0, "host_counter": 0,
                            "inventory": {}}
        self.anchored = st is not None
        self.resend_until = 0  # after an authentic status, resends up to this seq are expected
        self.status = None
        self.counts = {"frames": 0, "verified": 0, "rejected": 0, "rounds": 0, "irregularities": 0,
                       "resent": 0}
        self.rejections = []
        self.alarms = []

    # ---- intake --------------------------------------------------------------------------------
    def receive(self, data):
        """Bytes from the link; [(frame or None, verdict, reason)] for each frame completed.

        The frames of one read are stored in one durable transaction (a group commit); the link
        acknowledges them only after this returns, so an acknowledged frame is always on disk."""
        encoded = self.deframer.feed(data)
        if not encoded:
            return []
        self.store.begin()
        try:
            out = [self._one(e) for e in encoded]
            self.store.save_link(self.key.key_id, self.key.shoe_id, self.state)
        except BaseException:
            self.store.rollback()
            raise
        self.store.commit()
        return out

    def _one(self, encoded):
        self.counts["frames"] += 1
        raw = fr.cobs_decode(encoded)
        frame = fr.parse(raw) if raw is not None else "bad_framing"
        try:
            if isinstance(frame, str):
                raise Reject(frame)
            verdict, reason, decoded = self._verify(frame)
            fid = self.store.add_frame(raw, frame, verdict, reason)
            if decoded is not None:
                self._store_record(frame, fid, decoded)
        except Reject as r:
            verdict, reason = "rejected", r.reason
            self.store.add_frame(raw if raw is not None else encoded, frame, verdict, reason)
            self.counts["rejected"] += 1
            seq = frame.seq if not isinstance(frame, str) else None
            self.rejections.append({"seq": seq, "reason": reason})
        if verdict == "accepted":
            self.counts["verified"] += 1
        elif verdict == "resent":
            self.counts["resent"] += 1
        return (frame if not isinstance(frame, str) else None), verdict, reason

    def _verify(self, f):
        k = self.key
        if f.key_id != k.key_id or f.shoe_id != k.shoe_id:
            raise Reject("unknown_shoe_or_key")
        if not fr.verify(k.key, f):
            raise Reject("bad_mac")
        st = self.state
        if f.type == fr.T_STATUS:
            if f.boot < st["last_boot"]:
                raise Reject("boot_backwards")
            self.status = decode_status(f.payload)
            self.resend_until = max(self.resend_until, self.status["unacked_to"])
            st["host_counter"] = max(st["host_counter"], self.status["host_counter"])
            return "accepted", None, None
        if f.type == fr.T_INTEGRITY:
            return "accepted", None, None  # an answer to a verify-firmware challenge; checked there
        if f.type not in fr.CHAINED:
            raise Reject("unknown_type")
        if self.anchored and f.seq <= st["last_seq"]:
            # Already stored: a resend we asked for (after our hello) is expected, anything else is a replay.
            same = self.store.stored_raw(f.key_id, f.shoe_id, f.seq) == f.raw
            if same and f.seq <= self.resend_until:
                return "resent", None, None
            raise Reject("replayed")
        if f.boot < st["last_boot"]:
            raise Reject("boot_backwards")
        if self.anchored and f.seq != st["last_seq"] + 1:
            raise Reject("sequence_gap")
        if self.anchored and st["last_mac"] and f.chain != st["last_mac"][:8]:
            raise Reject("chain_broken")
        if not self.anchored and f.seq != 1:
            self.alarms.append(f"chain anchored at seq {f.seq}: earlier frames were not seen here")
        decoded = self._check_content(f)  # raises Reject; nothing of the frame is applied before it passes
        self.anchored = True
        self.resend_until = 0  # resends come oldest first, before anything new: the window is closed
        st["last_seq"], st["last_mac"], st["last_boot"] = f.seq, f.mac, f.boot
        return "accepted", None, decoded

    # ---- content: recompute with the host's own rules -----------------------------------------
    def _check_content(self, f):
        decoded = decode_payload(f)
        if decoded is None:
            raise Reject("malformed_payload")
        kind, rec = decoded
        inv = self.state["inventory"]
        if kind == "shoe_start":
            self.state["inventory"] = {"decks": rec["decks"], "shoe": rec["shoe"], "round": 0, "counts": {},
                                       "initial": None, "variant": rec["variant"]}
            return decoded
        if not inv:
            inv.update({"decks": 8, "shoe": rec.get("shoe"), "round": 0, "counts": {}, "initial": None})
        if kind == "burn":
            cards = rec["cards"]
            if None in cards or len(cards) != 1 + BURN_VALUES[cards[0][0]]:
                raise Reject("burn_mismatch")
            self._count(cards)
        elif kind == "initial_cards":
            inv["initial"] = [rec["player"][0], rec["banker"][0], rec["player"][1], rec["banker"][1]]
        elif kind == "result":
            self._check_round(rec, inv)
        elif kind == "resolution" and rec["resolution"] == "void_round":
            self._count(rec["voided_cards"])
        elif kind == "shoe_end":
            if rec["inventory"] != {c: n for c, n in inv["counts"].items() if n}:
                raise Reject("inventory_mismatch")
        return decoded

    def _check_round(self, rec, inv):
        player, banker = rec["player"], rec["banker"]
        if None in player or None in banker or "CUT" in player + banker:
            raise Reject("recompute_mismatch")
        if rules.redeal(player, banker) != (player, banker):
            raise Reject("recompute_mismatch")  # the rules draw differently from what the shoe did
        want = rules.round_outcome(player, banker)
        for k in ("player_total", "banker_total", "winner", "flags"):
            if rec[k] != want[k]:
                raise Reject("recompute_mismatch")
        if rec["announcements"] != expected_announcements(want, inv.get("variant", {})):
            raise Reject("announcement_mismatch")
        if rec["shoe"] == inv.get("shoe") and rec["round"] != inv["round"] + 1:
            raise Reject("round_out_of_order")
        order = rules.dealing_order(player, banker)
        if inv.get("initial") and inv["initial"] != order[:4]:
            raise Reject("initial_cards_mismatch")
        self._count(order)
        inv["round"] = rec["round"]
        inv["initial"] = None

    def _count(self, cards):
        inv = self.state["inventory"]
        counts, decks = inv["counts"], inv["decks"]
        for c in cards:
            if counts.get(c, 0) >= decks:
                self.alarms.append(f"inventory: a copy of {c} beyond {decks} decks")
                raise Reject("inventory_exceeded")
        for c in cards:
            counts[c] = counts.get(c, 0) + 1

    def _store_record(self, f, fid, decoded):
        kind, rec = decoded
        self.store.add_record(f, fid, kind, rec)
        if kind == "result":
            self.counts["rounds"] += 1
        elif kind == "irregularity":
            self.counts["irregularities"] += 1
        if self.on_record:
            self.on_record(kind, rec)

    def summary(self):
        s = dict(self.counts)
        s["rejections"] = self.rejections
        s["alarms"] = self.alarms
        return s


def decode_payload(f):
    """(kind, record) for a chained frame's payload, or None when it does not fit its type."""
    p = f.payload
    try:
        kind = fr.TYPES[f.type]
        if kind == "shoe_start":
            shoe, decks, variant = struct.unpack(">HBB", p)
            return kind, {"event": kind, "shoe": shoe, "decks": decks, "variant": decode_variant(variant)}
        if kind == "command_rejected":
            reason, ftype, counter = struct.unpack(">BBI", p)
            return kind, {"event": kind, "reason": COMMAND_REJECTIONS[reason], "command": ftype,
                          "counter": counter}
        shoe, rnd = struct.unpack(">HH", p[:4])
        body = p[4:]
        if kind == "burn":
            return kind, {"event": kind, "shoe": shoe, "cards": [CARD_NAMES[b] for b in body]}
        if kind == "initial_cards":
            if len(body) != 4:
                return None
            c = [CARD_NAMES[b] for b in body]
            return kind, {"event": kind, "shoe": shoe, "round": rnd, "player": [c[0], c[2]],
                          "banker": [c[1], c[3]]}
        if kind == "result":
            np, nb, dummy = body[0] >> 4, body[0] & 15, body[1]
            if not (2 <= np <= 3 and 2 <= nb <= 3) or len(body) != 5 + np + nb:
                return None
            cards = [CARD_NAMES[b] for b in body[2 : 2 + np + nb]]
            o, ann = struct.unpack(">HB", body[2 + np + nb :])
            known = None not in cards
            rec = {"shoe": shoe, "round": rnd, "player": cards[:np], "banker": cards[np:],
                   "player_total": rules.point_count(cards[:np]) if known else None,
                   "banker_total": rules.point_count(cards[np:]) if known else None,
                   "winner": WINNERS.get(o & 3), "flags": [n for n, bit in FLAG_BITS if o & bit]}
            if dummy:
                rec["dummy"] = True
            rec["announcements"] = [name for bit, name in ANNOUNCEMENTS if ann & bit]
            return kind, rec
        if kind == "irregularity":
            k, card, position = struct.unpack(">BBH", body)
            return kind, {"event": kind, "shoe": shoe, "round": rnd, "kind": IRREGULARITIES[k],
                          "card": CARD_NAMES[card], "position": position}
        if kind == "resolution":
            code, k, card, source, counts = body[:5]
            voided = [CARD_NAMES[b] for b in body[5 : 5 + (counts >> 4) + (counts & 15)]]
            return kind, {"event": kind, "shoe": shoe, "round": rnd, "resolution": RESOLUTIONS[code],
                          "kind": IRREGULARITIES[k], "card": CARD_NAMES[card],
                          "source": ("supervisor", "host")[source], "voided_cards": voided}
        if kind == "shoe_end":
            (position,) = struct.unpack(">H", body[:2])
            inv = body[2:]
            if len(inv) != 52:
                return None
            return kind, {"event": kind, "shoe": shoe, "rounds": rnd, "position": position,
                          "inventory": {card_code(i): n for i, n in enumerate(inv) if n}}
    except (struct.error, IndexError, ValueError, KeyError, TypeError):
        return None
    return None

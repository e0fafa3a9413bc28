"""Why a validator rejected a frame, derived again by `sabot audit verify` (audit/verify.py) from
the frame's bytes and the shoe's state the frames stored before it leave (as the validator,
audit/validator.py, decides it)."""

from __future__ import annotations

from sabot import protocol as pr
from sabot.audit.derived import Broken, DerivedShoe, sid, status_of, type_name

NOT_A_FRAME = frozenset(("bad_framing", "too_long", "too_short", "bad_version"))


def check_unparsed(rid: int, raw: bytes, reason: str | None) -> None:
    """A rejected frame the validator could not parse: its bytes say why (as the validator
    stored them: still COBS-encoded when that failed, decoded otherwise)."""
    if reason == "truncated":
        return  # a capture ending inside a frame (Validator.finish): no frame to judge
    try:
        if reason == "bad_framing":
            pr.decode_frame(raw)
        else:
            pr.parse(raw)
        why = "a frame"
    except pr.FrameError as e:
        why = e.reason
    if why != reason:
        raise Broken(f"frame id {rid} is stored as rejected ({reason}), but its bytes say {why}")


def check_rejected(rid: int, f: pr.Frame, reason: str, shoe: DerivedShoe, authentic: bool,
                   known: bool) -> None:
    """A rejected frame's reason, derived again where its bytes and the state decide it;
    `known`: the registry holds the key version it names."""
    st = shoe.st
    anchored = shoe.anchored or shoe.linked
    chained = f.type in pr.CHAINED
    if reason == "unknown_shoe_or_key":
        return  # also a registered shoe's frame on another shoe's port: its verdict is local
    if reason == "unknown_type":
        ok = known and ((not f.signed and f.type != pr.T_INITIAL_CARDS) or (
            authentic and not chained and f.type not in (pr.T_STATUS, pr.T_INTEGRITY,
                                                         pr.T_CHECKPOINT)))
    elif reason == "bad_signature":
        ok = known and f.signed and not authentic
    elif reason == "unsealed":
        ok = known and not f.signed and f.type == pr.T_INITIAL_CARDS
    elif reason == "malformed_payload":
        ok = authentic and f.type == pr.T_STATUS and not status_of(f)
    elif reason == "replayed":
        ok = authentic and anchored and (f.seq < st["last_seq"] if f.type == pr.T_STATUS
                                         else chained and f.seq <= st["last_seq"])
    elif reason == "boot_backwards":
        ok = authentic and f.boot < st["last_boot"]
    elif reason == "sequence_gap":
        ok = authentic and chained and anchored and f.seq > st["last_seq"] + 1
    elif reason == "chain_broken":
        ok = (authentic and chained and anchored and f.seq == st["last_seq"] + 1
              and bool(st["last_digest"]) and f.chain != st["last_digest"])
    elif reason in NOT_A_FRAME:
        ok = False  # it parses
    else:
        raise Broken(f"frame id {rid} is stored as rejected for {reason!r}, no reason a "
                     "validator gives")
    if not ok:
        what = "the registry holds no key for it" if not known else \
            "its signature holds" if reason == "bad_signature" and authentic else \
            "its signature fails" if f.signed and not authentic else \
            "the frames stored before it say otherwise"
        raise Broken(f"frame id {rid} (shoe {sid(f.shoe_id)} seq {f.seq} {type_name(f)}) is "
                     f"stored as rejected for {reason}, but {what}: its verdict was rewritten")

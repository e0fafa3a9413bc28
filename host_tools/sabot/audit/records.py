"""What the validator and `sabot audit verify`'s own walk say alike about stored records: a
round as docs/INTERFACES.md promises it, the details of the alarms the audit derives again
(counter_low, checkpoint_mismatch, tilt), and the shoe's log rebuilt from its stored frames."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sabot import protocol as pr
from sabot import tlog

if TYPE_CHECKING:
    from sabot.audit.store import AuditStore

CONTRACT_ROUND_KEYS = ("shoe_id", "shoe", "round", "game", "player", "banker", "player_total",
                       "banker_total", "winner", "flags", "dummy")


def contract_round(rec: dict[str, Any]) -> dict[str, Any]:
    """A round record with exactly the keys docs/INTERFACES.md promises (the log keeps more)."""
    return {k: rec[k] for k in CONTRACT_ROUND_KEYS if k in rec}


LINK_KEY = 0  # link state is kept per shoe, whatever result key version signs its frames
TILT_DETAIL = "the shoe's code does not match its MANIFEST: it deals nothing"
# The element's command counter stops at COUNTER_MAX, and then the shoe takes no counted command
# again (resolve, new shoe, update, rekey). A shoe counts tens a day; its rate limit lets a
# flood of signed commands count 4 a second: half the range is past only after 3 days of one,
# 3 days before the end.
COUNTER_MAX = 2_097_151  # the ATECC608's (host_tools/sabot/virtual/element_chip.py)
COUNTER_LOW = 1 << 20
_SIGNED_PER_S = 4  # firmware/shoe/port.py


def counter_low(host_counter: int) -> str:
    """counter_low's detail: what is left, and how soon a flood at the rate limit ends it."""
    left = COUNTER_MAX - host_counter
    return (f"the element's command counter is at {host_counter:,} of {COUNTER_MAX:,}: "
            f"{left:,} counted commands left ({left / _SIGNED_PER_S / 3600:.0f} hours at the "
            "shoe's rate limit), then it refuses every resolve, new shoe, update and rekey; "
            "no shoe counts this many but under a flood of signed commands: find who holds "
            "the command key")


CHAINED_NAMES = tuple(pr.TYPES[t] for t in sorted(pr.CHAINED))


def stored_log(store: AuditStore, shoe_id: int) -> tuple[tlog.Prefix, list[bytes]]:
    """The shoe's log as `store` holds it (firmware/shoe/tree.py): its leaves from seq 1 on while
    none is missing (tlog.Prefix), and those leaves' bytes."""
    log, leaves = tlog.Prefix(), list[bytes]()
    for seq, raw in store.chained_frames(shoe_id, CHAINED_NAMES):
        log.add(seq - 1, raw)
        if len(leaves) < len(log.hashes):
            leaves.append(raw)
    return log, leaves


def checkpoint_mismatch(size: int) -> str:
    """The checkpoint_mismatch alarm's detail (audit/verify.py derives it again)."""
    return (f"the shoe signed a checkpoint of its log at {size} frames whose root is not that "
            "of the frames stored")

"""`sabot verify-firmware`: challenge a shoe with a fresh seed (an unsigned verify command); it
answers HMAC-SHA256(seed, its code tree) in an integrity frame signed by its secure element; the
host checks the signature with the shoe's public key from the registry (no secret) and compares
the HMAC with the same digest of the certified build."""

from __future__ import annotations

import hmac
import time
from typing import Any

from sabot import protocol as pr
from sabot.errors import SabotError
from sabot.link.transport import DEFAULT_BAUD, ShoePort
from sabot.registry import ShoeEntry
from sabot.release.build import seeded_digest

OPEN_WAIT = 5.0  # a shoe that has just rebooted may not be listening yet


VERIFY_AGAIN = 1.2  # seconds: the shoe answers at most one challenge a second (its rate limit)


class NoIntegrityAnswer(SabotError):
    """The shoe did not answer the challenge in time (silent, or another shoe: a shoe ignores a
    challenge naming another shoe id)."""


def verify_firmware(url: str, seed_hex: str, config: ShoeEntry, build_dir: str,
                    timeout: float = 10,
                    baud: int = DEFAULT_BAUD) -> dict[str, Any]:
    try:
        seed = bytes.fromhex(seed_hex)
    except ValueError:
        raise SabotError(f"--seed must be hex, got {seed_hex!r}") from None
    if not 1 <= len(seed) <= 64:
        raise SabotError("--seed must be 1 to 64 bytes (2 to 128 hex digits)")
    expected = seeded_digest(seed, build_dir)
    port = ShoePort(url, baud, open_timeout=OPEN_WAIT)
    try:
        end, asked = time.monotonic() + timeout, 0.0
        while time.monotonic() < end:
            if time.monotonic() - asked > VERIFY_AGAIN:
                # the shoe answers one challenge a second: one inside that second is dropped
                port.send_command(None, config.shoe_id, pr.C_VERIFY, seed)
                asked = time.monotonic()
            for _, f in port.frames(0.1):
                if (isinstance(f, pr.Frame) and f.type == pr.T_INTEGRITY
                        and f.shoe_id == config.shoe_id):
                    key = config.public_key(f.key_id)
                    if key is None:
                        raise SabotError(f"the integrity answer is signed with key version "
                                         f"{f.key_id}, which the registry does not hold for shoe "
                                         f"{pr.shoe_id_text(config.shoe_id)} (versions "
                                         f"{config.key_versions_text})")
                    if not pr.verify(key, f):
                        raise SabotError("the integrity answer is not signed by this shoe's key")
                    state, got = f.payload[0], f.payload[1:]
                    ok = state == 1 and hmac.compare_digest(got, expected)
                    return {"result": "pass" if ok else "fail",
                            "integrity": pr.INTEGRITY[state] if state < 3 else state,
                            "seed": seed.hex(), "expected": expected.hex(), "answer": got.hex(),
                            "shoe_id": f.shoe_id, "boot": f.boot}
    finally:
        port.close()
    raise NoIntegrityAnswer(f"no integrity answer from {url} within {timeout} s")

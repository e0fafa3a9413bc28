"""`sabot verify-firmware`: challenge a shoe with a fresh seed; it answers HMAC-SHA256(seed, its code
tree), signed with its key; the host compares with the same digest of the certified build."""

import hmac
import time

import serial

from . import frames as fr
from .build import seeded_digest
from .errors import SabotError

STATES = ("unchecked", "ok", "tilt")


def verify_firmware(url, seed_hex, key, build_dir, timeout=10):
    try:
        seed = bytes.fromhex(seed_hex)
    except ValueError:
        raise SabotError(f"--seed must be hex, got {seed_hex!r}") from None
    if not 1 <= len(seed) <= 64:
        raise SabotError("--seed must be 1 to 64 bytes (2 to 128 hex digits)")
    expected = seeded_digest(seed, build_dir)
    opened_by = time.monotonic() + 5  # a shoe that has just rebooted may not be listening yet
    while True:
        try:
            ser = serial.serial_for_url(url, timeout=0.1)
            break
        except (serial.SerialException, ValueError) as e:
            if time.monotonic() > opened_by:
                raise SabotError(f"cannot open {url}: {e}") from None
            time.sleep(0.2)
    try:
        ser.write(fr.command(key.key, key.key_id, key.shoe_id, 0, fr.C_INTEGRITY, seed))
        deframer = fr.Deframer()
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for enc in deframer.feed(ser.read(256)):
                raw = fr.cobs_decode(enc)
                f = fr.parse(raw) if raw else None
                if isinstance(f, fr.Frame) and f.type == fr.T_INTEGRITY:
                    if not fr.verify(key.key, f):
                        raise SabotError("the integrity answer is not signed by this shoe's key")
                    state, got = f.payload[0], f.payload[1:]
                    ok = state == 1 and hmac.compare_digest(got, expected)
                    return {"result": "pass" if ok else "fail", "integrity": STATES[state] if state < 3 else state,
                            "seed": seed.hex(), "expected": expected.hex(), "answer": got.hex(),
                            "shoe_id": f.shoe_id, "boot": f.boot}
    finally:
        ser.close()
    raise SabotError(f"no integrity answer from {url} within {timeout} s")

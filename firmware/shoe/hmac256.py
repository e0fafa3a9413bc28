"""HMAC-SHA256 (RFC 2104) on MicroPython's hashlib, which has no hmac module. Used for one thing
only: the seeded code-tree answer to a regulator's challenge (integrity.seeded), keyed by the
challenge's public seed. No secret key exists in the firmware: the secure element signs."""

import hashlib


class HmacKey:
    def __init__(self, key):
        if len(key) > 64:
            key = hashlib.sha256(key).digest()
        key = key + bytes(64 - len(key))
        self._ipad = bytes(b ^ 0x36 for b in key)
        self._opad = bytes(b ^ 0x5C for b in key)

    def stream(self):
        """An object with update(data) and digest(), for messages too long to hold at once."""
        return _Stream(self)


class _Stream:
    def __init__(self, key):
        self._opad = key._opad
        self._inner = hashlib.sha256(key._ipad)

    def update(self, data):
        self._inner.update(data)

    def digest(self):
        outer = hashlib.sha256(self._opad)
        outer.update(self._inner.digest())
        return outer.digest()


def equal(a, b):
    """Constant-time comparison: the time does not depend on where the bytes differ."""
    if len(a) != len(b):
        return False
    d = 0
    for i in range(len(a)):
        d |= a[i] ^ b[i]
    return d == 0

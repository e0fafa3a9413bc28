"""Consistent Overhead Byte Stuffing: frames on the link are COBS-encoded and end with 0x00, so a
receiver resynchronises at the next zero byte after any line noise.

The `_into` forms work in caller-owned buffers and allocate nothing."""


def encode_into(src, n, dst, at=0):
    """Encode src[at:at + n] into dst, delimiter included; the encoded length. dst must hold
    n + n // 254 + 2 bytes."""
    code_at = 0
    o = 1
    code = 1
    for i in range(at, at + n):
        b = src[i]
        if b == 0:
            dst[code_at] = code
            code_at = o
            o += 1
            code = 1
        else:
            dst[o] = b
            o += 1
            code += 1
            if code == 255 and i + 1 < at + n:  # a full block; a new one only if data follows
                dst[code_at] = code
                code_at = o
                o += 1
                code = 1
    dst[code_at] = code
    dst[o] = 0
    return o + 1


def decode_into(src, n, dst):
    """Decode one frame src[:n] (without its delimiter) into dst; its length, or -1 if malformed or
    longer than dst."""
    i = 0
    o = 0
    room = len(dst)
    while i < n:
        code = src[i]
        if code == 0 or i + code > n or o + code - 1 > room:
            return -1
        for j in range(i + 1, i + code):
            dst[o] = src[j]
            o += 1
        i += code
        if code < 255 and i < n:
            if o >= room:
                return -1
            dst[o] = 0
            o += 1
    return o


def encode(data):
    out = bytearray(len(data) + len(data) // 254 + 2)
    return bytes(out[: encode_into(data, len(data), out)])


def decode(data):
    """Decode one frame (without its trailing zero); None if malformed."""
    out = bytearray(len(data))
    n = decode_into(data, len(data), out)
    return None if n < 0 else bytes(out[:n])

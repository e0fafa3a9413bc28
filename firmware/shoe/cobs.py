"""Consistent Overhead Byte Stuffing: frames on the link are COBS-encoded and end with 0x00, so a
receiver resynchronises at the next zero byte after any line noise."""


def encode(data):
    out = bytearray(len(data) + len(data) // 254 + 2)
    code_at = 0
    o = 1
    code = 1
    for b in data:
        if b == 0:
            out[code_at] = code
            code_at = o
            o += 1
            code = 1
        else:
            out[o] = b
            o += 1
            code += 1
            if code == 255:
                out[code_at] = code
                code_at = o
                o += 1
                code = 1
    out[code_at] = code
    out[o] = 0
    return bytes(out[: o + 1])


def decode(data):
    """Decode one frame (without its trailing zero); None if malformed."""
    out = bytearray()
    i = 0
    n = len(data)
    while i < n:
        code = data[i]
        if code == 0 or i + code > n:
            return None
        out.extend(data[i + 1 : i + code])
        i += code
        if code < 255 and i < n:
            out.append(0)
    return bytes(out)

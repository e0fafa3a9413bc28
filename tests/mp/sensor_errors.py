# Runs on the unix-port MicroPython and on CPython alike (tests/test_sensor_crc.py runs both and
# compares): every 1- and 2-bit error of each card's frame (52 cards, the cut card, unreadable) at
# the confidences given, each fed to a fresh decoder and followed by a genuine frame. A corrupted
# frame must give nothing (the genuine one after it must come out: the decoder resynchronised).
# Also every genuine frame at every confidence decodes, and a digest of their CRCs shows both
# interpreters compute the same table.
# usage: sensor_errors.py [--step K] CONF [CONF...] (hex; --step K: the errors of every Kth card's
#   frame only, the cut card's and the unreadable one's always)
#   ->  "frames F patterns P accepted A lost L errors E digest D"
import sys

from shoe.sensor import READ_CARD, READ_CUT, READ_NONE, READ_UNREADABLE, SensorDecoder, encode

RANKS = b"A23456789TJQK"
SUITS = b"SHDC"
KINDS = [(82, bytes((RANKS[n >> 2], SUITS[n & 3])), READ_CARD, n) for n in range(52)]
KINDS += [(67, b"--", READ_CUT, 52), (85, b"--", READ_UNREADABLE, 255)]
CUT_CARD = KINDS[52][3]
SENTINEL = encode(82, b"7D", 0x5A)

digest = 0
d = SensorDecoder()
for kind, rank_suit, want, card in KINDS:
    for conf in range(256):
        frame = encode(kind, rank_suit, conf)
        got = READ_NONE
        for b in frame:
            got = d.feed(b)
        if got != want or d.confidence != conf or (want != READ_UNREADABLE and d.card != card):
            raise SystemExit("genuine frame refused: %r" % frame)
        digest = (digest * 31 + frame[7] * 256 + frame[8]) % 1000003

args = sys.argv[1:]
step = 1
if args[:1] == ["--step"]:
    step = int(args[1])
    args = args[2:]
SAMPLE = KINDS[:52:step] + KINDS[52:]
frames = patterns = accepted = lost = errors = 0
for conf_hex in args:
    conf = int(conf_hex, 16)
    for kind, rank_suit, _want, _card in SAMPLE:
        frame = encode(kind, rank_suit, conf)
        frames += 1
        nbits = len(frame) * 8
        for i in range(nbits):
            for j in range(i, nbits):  # j == i: the 1-bit error
                bad = bytearray(frame)
                bad[i >> 3] ^= 1 << (i & 7)
                if j != i:
                    bad[j >> 3] ^= 1 << (j & 7)
                patterns += 1
                d = SensorDecoder()
                for b in bad:
                    if d.feed(b) != READ_NONE:
                        accepted += 1
                got = READ_NONE
                for b in SENTINEL:
                    got = d.feed(b)
                if got != READ_CARD or d.card != 6 * 4 + 2 or d.confidence != 0x5A:
                    lost += 1
                errors += d.errors
print("frames %d patterns %d accepted %d lost %d errors %d digest %d"
      % (frames, patterns, accepted, lost, errors, digest))

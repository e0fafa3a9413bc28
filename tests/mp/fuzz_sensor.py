# Runs on the unix-port MicroPython: seeded random bytes into the recognition-module decoder.
# Each case: random garbage, then one genuine frame; the decoder must not crash, must
# resynchronise (the genuine card comes out) and must never produce a card that was not sent. Also
# a random single-bit flip and a random two-bit flip of a genuine frame must be refused (the CRC-8
# catches every one: tests/test_sensor_crc.py runs them all).
# usage: micropython fuzz_sensor.py CASES SEED
#   ->  "cases N resynced R phantom P flips_accepted F two_flips_accepted T"
import random
import sys

from shoe.sensor import READ_CARD, READ_NONE, SensorDecoder, encode

cases = int(sys.argv[1])
random.seed(int(sys.argv[2]))
ranks = b"A23456789TJQK"
suits = b"SHDC"
resynced = phantom = flips_accepted = two_flips_accepted = 0
d = SensorDecoder()
for _case in range(cases):
    for _ in range(random.getrandbits(6)):
        r = d.feed(random.getrandbits(8))
        if r != READ_NONE:
            phantom += 1
    card = ranks[random.getrandbits(8) % 13], suits[random.getrandbits(2)]
    got = None
    for b in encode(ord("R"), bytes(card)):
        if d.feed(b) == READ_CARD:
            got = d.card
    if got == ranks.index(bytes((card[0],))) * 4 + suits.index(bytes((card[1],))):
        resynced += 1
    frame = bytearray(encode(ord("R"), bytes(card)))
    i = random.getrandbits(8) % len(frame)
    frame[i] ^= 1 << random.getrandbits(3)
    d2 = SensorDecoder()
    for b in frame:
        if d2.feed(b) != READ_NONE:
            flips_accepted += 1
    frame = bytearray(encode(ord("R"), bytes(card), random.getrandbits(8)))
    i = random.getrandbits(8) % (len(frame) * 8)
    j = (i + 1 + random.getrandbits(8) % (len(frame) * 8 - 1)) % (len(frame) * 8)  # j != i
    frame[i >> 3] ^= 1 << (i & 7)
    frame[j >> 3] ^= 1 << (j & 7)
    d2 = SensorDecoder()
    for b in frame:
        if d2.feed(b) != READ_NONE:
            two_flips_accepted += 1
print("cases %d resynced %d phantom %d flips_accepted %d two_flips_accepted %d"
      % (cases, resynced, phantom, flips_accepted, two_flips_accepted))

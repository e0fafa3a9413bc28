# Runs on the unix-port MicroPython: signs N digests through the secure-element emulator over the
# virtual board's socket I2C bus, with the heap locked around the whole card path: load_digest,
# sign_start and the sign_ready polling (any allocation raises MemoryError and is counted).
# usage: micropython element_sign.py unix:PATH|tcp:HOST:PORT N  ->  "pub <X||Y hex>", "signed N
# alloc_failures F busy_polls P ms_per_sign T probe_caught C", then "sig <digest hex> <r||s hex>"
# per signature. probe_caught 1: an allocation under the same lock is caught (the lock is real).
import sys
import time

import micropython
from i2c_socket import SocketI2C

from shoe.element import Element

bus = SocketI2C(sys.argv[1])
n = int(sys.argv[2])
el = Element(bus)
pub = bytearray(64)
el.public_key(0, pub)
print("pub %s" % "".join("%02x" % b for b in pub))
digest = bytearray(32)
sig = bytearray(64)
failures = 0
polls = 0
lines = []
t0 = time.ticks_ms()
for i in range(n):
    for j in range(32):
        digest[j] = (i * 7 + j * 13) & 0xFF
    micropython.heap_lock()
    try:
        el.load_digest(digest)
        el.sign_start(0)
        while not el.sign_ready(sig):
            polls += 1
    except MemoryError:
        failures += 1
    micropython.heap_unlock()
    lines.append("sig %s %s" % ("".join("%02x" % b for b in digest),
                                "".join("%02x" % b for b in sig)))
ms = time.ticks_diff(time.ticks_ms(), t0)
caught = 0
micropython.heap_lock()
try:
    probe = bytearray(8)
except MemoryError:
    caught = 1
micropython.heap_unlock()
print("signed %d alloc_failures %d busy_polls %d ms_per_sign %.2f probe_caught %d"
      % (n, failures, polls, ms / n, caught))
for line in lines:
    print(line)

# Runs on the unix-port MicroPython: seeded random bytes into the shoe's host-command intake (its
# command port). No crash, and no command takes effect without the command key's signature.
# usage: micropython fuzz_commands.py FLASHDIR ELEMENT_SPEC CASES SEED  ->  "cases N accepted A"
import random
import sys

import board
from nulls import Null

from shoe.app import ShoeApp
from shoe.store import Flash

app = ShoeApp(Flash(sys.argv[1]), Null(), Null(), board.element(sys.argv[2]))
app.start()
cases = int(sys.argv[3])
random.seed(int(sys.argv[4]))
before = (app.port.counter, app.outbox.acked, app.shoe.phase)
for n in range(cases):
    data = bytes(random.getrandbits(8) for _ in range(random.getrandbits(7)))
    if n % 3 == 0:
        data += b"\x00"
    app.host_bytes(data)
after = (app.port.counter, app.outbox.acked, app.shoe.phase)
print("cases %d accepted %d" % (cases, 0 if after == before else 1))

# Runs on the unix-port MicroPython: seeded random bytes into the shoe's host-command intake (its
# command port). No crash, and no command takes effect without the key.
# usage: micropython fuzz_commands.py FLASHDIR CASES SEED  ->  "cases N accepted A"
import random
import sys

from nulls import Null

from shoe.app import ShoeApp
from shoe.store import Flash

app = ShoeApp(Flash(sys.argv[1]), Null(), Null())
app.start()
cases = int(sys.argv[2])
random.seed(int(sys.argv[3]))
before = (app.port.counter, app.outbox.acked, app.shoe.phase)
for n in range(cases):
    data = bytes(random.getrandbits(8) for _ in range(random.getrandbits(7)))
    if n % 3 == 0:
        data += b"\x00"
    app.host_bytes(data)
after = (app.port.counter, app.outbox.acked, app.shoe.phase)
print("cases %d accepted %d" % (cases, 0 if after == before else 1))

# Boots the shoe app from a flash directory and prints where it stands.
# usage: micropython boot.py FLASHDIR ELEMENT_SPEC  ->  "position P seq S unacked N shoe H round R"
# (seq: the newest frame built; unacked: those finished and held for the host, after the boot
# finished what the power cut left unfinished)
import sys

import board
from nulls import Null

from shoe.app import ShoeApp
from shoe.store import Flash

app = ShoeApp(Flash(sys.argv[1]), Null(), Null(), board.element(sys.argv[2]))
app.start()
while app.busy():
    app.service(0)
s = app.shoe
unacked = sum(1 for _ in app.unacked())
print("position %d seq %d unacked %d shoe %d round %d" % (s.position, app.outbox.seq, unacked,
                                                          s.shoe_no, s.round_no))

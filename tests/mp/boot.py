# Boots the shoe app from a flash directory and prints where it stands.
# usage: micropython boot.py FLASHDIR  ->  "position P seq S unacked N shoe H round R"
import sys

from nulls import Null

from shoe.app import ShoeApp
from shoe.store import Flash

app = ShoeApp(Flash(sys.argv[1]), Null(), Null())
app.start()
s = app.shoe
unacked = sum(1 for _ in app.unacked())
print("position %d seq %d unacked %d shoe %d round %d" % (s.position, app.outbox.seq, unacked,
                                                          s.shoe_no, s.round_no))

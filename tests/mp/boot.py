# Boots the shoe app from a flash directory and prints where it stands.
# usage: micropython boot.py FLASHDIR  ->  "position P seq S outbox N shoe H round R"
import sys

from shoe.app import ShoeApp
from shoe.store import Flash


class Null:
    def write(self, data):
        pass

    def show(self, *state):
        pass

    def announce(self, *result):
        pass


app = ShoeApp(Flash(sys.argv[1]), Null(), Null())
app.start()
s = app.shoe
print("position %d seq %d outbox %d shoe %d round %d" % (s.position, app.seq, len(app.outbox), s.shoe_no,
                                                          s.round_no))

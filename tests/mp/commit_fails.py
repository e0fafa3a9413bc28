# Runs on the unix-port MicroPython: the flash refuses a finished frame's log record (OSError, as a
# full or failing flash does) once, at frame FAILSEQ; service() raises it, and the next passes try
# again. Everything the shoe sent goes to OUTFILE (the link's bytes, COBS frames).
# usage: micropython commit_fails.py SHOEFILE FLASHDIR ELEMENT_SPEC OUTFILE FAILSEQ
import sys

import board
from nulls import Null

from shoe.app import ShoeApp
from shoe.sensor import encode
from shoe.store import R_FINAL, Flash


class FileLink:
    def __init__(self, path):
        self.f = open(path, "wb")

    def write(self, buf, n=-1):
        self.f.write(buf, n) if n >= 0 else self.f.write(buf)


app = ShoeApp(Flash(sys.argv[2]), FileLink(sys.argv[4]), Null(), board.element(sys.argv[3]))
fail_at = int(sys.argv[5])
real = app.log.commit
failed = []


def commit(rtype, n):
    if rtype == R_FINAL and not failed and app.outbox.done + 1 == fail_at:
        failed.append(n)
        raise OSError(28)  # ENOSPC: nothing written
    real(rtype, n)


app.log.commit = commit
app.start()
raised = 0
cards = [t for line in open(sys.argv[1]) for t in line.split()]
for t in cards[:30]:
    for b in (encode(ord("C")) if t == "CUT" else encode(ord("R"), bytes((ord(t[0]), ord(t[1]))))):
        app.sensor_byte(b)
    app.exit_edge()
    while app.busy():
        try:
            app.service(0)
        except OSError:
            raised += 1
app.link.f.close()
print("raised %d failed_len %d done %d seq %d" % (raised, failed[0] if failed else 0,
                                                  app.outbox.done, app.outbox.seq))

# Runs on the unix-port MicroPython over the emulated machine (boards/emulated/), with an
# instrumented copy of firmware/shoe/drivers/hw.py imported as `hw` (tests/kit/lines.py): every
# function of hw.py on the Pico's, the ESP32's and a development board's data. Prints the lines
# that ran ("LINES ..."), then "ok".
# usage: micropython hw_lines.py ELEMENT_SPEC HOST:PORT BOARDS_DIR   (stdin: b"hi", for StdioLink,
# closed when the script says `close stdin`)
import socket
import sys
import time

import emulated_machine

sys.modules["machine"] = emulated_machine
sys.modules["os"] = emulated_machine.emulated_os()

import _lines  # noqa: E402
import hw  # noqa: E402  (the instrumented copy)

from shoe import cobs  # noqa: E402

element_spec, listen, boards, chip = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]


class Board:
    def __init__(self, path, **changes):
        ns = {}
        exec(open(path).read(), ns)
        for k, v in ns.items():
            setattr(self, k, v)
        for k, v in changes.items():
            setattr(self, k, v)


pico = Board(boards + "/rpi_pico/board.py")
esp32_board = Board(boards + "/esp32/board.py")
dev = Board(boards + "/rpi_pico/board.py", LINK="stdio", BUZZER=None)


def check(cond, what):
    if not cond:
        sys.stdout.write("FAILED %s\n" % what)
        sys.exit(1)


# a development board: the host link on stdin/stdout, no buzzer
emulated_machine.wire(dev, element_spec, listen, chunk=3)
io = hw.build(dev)
buf = bytearray(8)
check(io.link.readinto(buf) == 2 and buf[:2] == b"hi", "stdio link reads what is waiting")
check(io.link.readinto(buf) == 0, "stdio link: nothing more waiting")
sys.stdout.write("close stdin\n")  # the test closes it: the host went away
io.link.poll.poll(5000)
check(io.link.readinto(buf) == 0, "stdio link: the input has ended")
io.link.write(b"stdio-frame\n", 6)
io.link.write(b"whole\n")
check(io.lamps.buzzer is None, "no buzzer")

# the Pico: its own USB CDC interface (the emulated one on a socket, 3 bytes a write)
emulated_machine.wire(pico, element_spec, listen, chunk=3)
io = hw.build(pico)
host = socket.socket()
host.connect(socket.getaddrinfo(*listen.split(":"))[0][-1])
check(io.link.readinto(buf) == 0, "cdc: nothing from the host yet")  # accepts the host
tx = bytearray(203)
body = bytes(range(1, 120))
m = cobs.encode_into(body, len(body), tx)
io.link.write(tx, m)
check(io.link.busy(), "cdc: the rest of the frame waits")
while io.link.busy():
    io.tick(0)  # the board loop's passes flush it
got = b""
while len(got) < m:
    got += host.recv(256)
check(cobs.decode(got[:-1]) == body, "cdc: the frame arrives whole")
host.send(b"\x01\x02")
time.sleep_ms(20)
check(io.link.readinto(buf) == 2, "cdc: host bytes read")
check(io.lamps.buzzer is not None, "the buzzer's PWM")
host.close()
time.sleep_ms(20)
check(io.link.readinto(buf) == 0, "cdc: the host hung up")

# the ESP32: UART0 as the host link, detached from the REPL
emulated_machine.wire(esp32_board, element_spec, listen, chunk=3)
io = hw.build(esp32_board)
check(emulated_machine.dupterm_calls[-1] == (None, 0), "esp32: REPL detached from UART0")
check(io.link.readinto(buf) == 0, "esp32: nothing waiting")
host = socket.socket()
host.connect(socket.getaddrinfo(*listen.split(":"))[0][-1])
host.send(b"\x05")
time.sleep_ms(20)
io.link.uart.any()  # accepts the host
time.sleep_ms(20)
check(io.link.readinto(buf) == 1, "esp32: a host byte read")
host.close()


# a UART that takes nothing for a while, then a few bytes a write: the queue fills, wraps, drops
class Stalled:
    def __init__(self):
        self.taken = bytearray()
        self.stalled = True

    def write(self, b):
        if self.stalled:
            return None
        n = min(len(b), 5)
        self.taken += bytes(b[:n])
        return n

    def any(self):
        return 0


uart = Stalled()
link = hw.UartLink(uart)
sent = []
for i in range(40):
    body = bytes((i + j) % 255 + 1 for j in range(150))
    m = cobs.encode_into(body, len(body), tx)
    link.write(tx, m)
    sent.append(body)
    if i == 15:
        uart.stalled = False
    for _ in range(20):
        link.flush()
while link.busy():
    link.flush()
frames = [cobs.decode(f) for f in bytes(uart.taken).split(b"\x00")[:-1]]
check(link.dropped > 0 and len(frames) + link.dropped == len(sent), "whole frames dropped")
check(all(f in sent for f in frames), "no frame cut")

# the secure element on I2C, woken by SDA held low, patiently driven
element = hw.element(pico)
element.wake()
check(element._awake, "the element answered its wake")

# the board loop's pause while the element works: back within the emulated 1 ms tick
t0 = time.ticks_ms()
hw.idle()
check(time.ticks_diff(time.ticks_ms(), t0) < 50, "idle returns at the next tick")

# the shoe log's raw partition: the Pico's at the end of its flash storage, the ESP32's from its
# image's partition table (none there: refused in one line); a board naming none keeps a file
import esp32  # noqa: E402  (boards/emulated's)
import rp2  # noqa: E402

rp2.CHIP = esp32.CHIP = chip
sys.modules["os"] = emulated_machine.emulated_os()  # statvfs("/") as the board's image mounts it
emulated_machine.ROOT_FS_BYTES = pico.STORAGE_BYTES  # a stock image: littlefs over all of it
try:
    hw.log_device(pico)
    check(False, "a stock image's filesystem over the log partition")
except OSError as e:
    check("flash the board's image" in str(e), "the stock image refused in one line")
emulated_machine.ROOT_FS_BYTES = pico.LOG_START  # the board's image
dev_, first, blocks = hw.log_device(pico)
check(first == 0 and blocks == pico.LOG_BYTES // 4096 and dev_.ioctl(5, 0) == 4096,
      "the Pico's log partition")
with open(boards + "/esp32/partitions-sabot-4MiB.csv") as f:
    esp32.TABLE = f.read()
dev_, first, blocks = hw.log_device(esp32_board)
check(first == 0 and blocks == 0x40000 // 4096, "the ESP32's log partition")
esp32.TABLE = ""
try:
    hw.log_device(esp32_board)
    check(False, "an ESP32 image without the log partition")
except OSError as e:
    check("sabotlog" in str(e), "the missing partition named")
check(hw.log_device(Board(boards + "/virtual/board.py")) is None, "no partition: a file")

try:
    hw.reset()
    check(False, "reset returns")
except SystemExit:
    pass
_lines.report()
print("ok")

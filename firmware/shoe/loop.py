"""The board's main loop, one pass at a time: `step(app, io, now)`. The same loop runs the shoe on
Pico, an ESP32 (firmware/main.py, `io` built from pins by shoe/drivers/hw.py) and the virtual board
(boards/virtual/main.py, `io` fed by the simulated dealer).

`io` offers: bets() (blackjack's bet spots, a bit per seat with a wager; 0 on a board without
them), sensor_buf and sensor_read() (recognition-module bytes waiting, copied into
sensor_buf), exit_edges() (cards that left the shoe since the last call), pressed(now) (a bit per
button pressed, below), link_buf and link_read() (host bytes waiting, copied into link_buf),
tick(now) (lamps that blink; the host link's bytes its driver has not taken yet). Every pass
also lets the app finish and send frames with the secure element (`app.service(now)`: one step,
never waiting for a signature), and `app.busy()` tells a board that sleeps between passes to
come back soon. An idle pass allocates nothing."""

try:
    from micropython import const
except ImportError:  # CPython (tests): const is only a compiler hint
    def const(x):  # type: ignore[misc]
        return x

# One bit per button, in pressed()
CONFIRM = const(1)
EMPTY = const(2)
REVEAL = const(4)
VOID_CARD = const(8)  # the supervisor's key: resolutions 1..4
KEEP_DUMMY = const(16)
VOID_ROUND = const(32)
END_SHOE = const(64)
NEXT = const(128)  # blackjack: the dealer's presses (shoe/blackjack.py PRESS_*)
DOUBLE = const(256)
SPLIT = const(512)

# boards name their buttons (board.BUTTONS); these are the bits the names stand for
BUTTON_BITS = (("confirm", CONFIRM), ("empty", EMPTY), ("reveal", REVEAL),
               ("void_card", VOID_CARD), ("keep_dummy", KEEP_DUMMY), ("void_round", VOID_ROUND),
               ("end_shoe", END_SHOE), ("next", NEXT), ("double", DOUBLE), ("split", SPLIT))


def step(app, io, now):
    n = io.sensor_read()
    buf = io.sensor_buf
    for i in range(n):
        app.sensor_byte(buf[i])
    n = io.exit_edges()
    if n:
        app.bets = io.bets()  # the bet spots as these cards leave: read only then
    for _ in range(n):
        app.exit_edge()
    pressed = io.pressed(now)
    if pressed:
        press(app, pressed)
    app.service(now)
    n = io.link_read()
    if n:
        app.host_bytes(io.link_buf, n)
    io.tick(now)


def press(app, pressed):
    if pressed & CONFIRM:
        app.confirm_button()
    if pressed & EMPTY:
        app.empty_sensor()
    if pressed & REVEAL:
        app.reveal_button()
    if pressed & VOID_CARD:
        app.supervisor(1)
    if pressed & KEEP_DUMMY:
        app.supervisor(2)
    if pressed & VOID_ROUND:
        app.supervisor(3)
    if pressed & END_SHOE:
        app.supervisor(4)
    if pressed & NEXT:
        app.blackjack_press(1)
    if pressed & DOUBLE:
        app.blackjack_press(2)
    if pressed & SPLIT:
        app.blackjack_press(3)

"""The shoe's controls and lamps, each driving the pins it is given (objects with value() and, for
the exit sensor, irq()): nothing here imports `machine`, so the same classes run against dummy pins
in tests. shoe/drivers/hw.py builds them from a board's data."""

try:
    from time import ticks_add, ticks_diff
except ImportError:  # CPython (tests): plain millisecond numbers
    def ticks_add(a, b):  # type: ignore[misc,no-redef]
        return a + b

    def ticks_diff(a, b):  # type: ignore[misc,no-redef]
        return a - b

try:
    from micropython import const
except ImportError:  # CPython (tests): const is only a compiler hint
    def const(x):  # type: ignore[misc,no-redef]
        return x

_BLINK_MS = const(250)
_EDGE_WRAP = const(0x3FFFFFFF)  # keeps the edge count a small int on every port


class ExitSensor:
    """Photo-interrupter at the shoe's mouth: one falling edge per card that leaves. The interrupt
    only counts; the main loop takes the count. Each side writes its own number, so no edge is lost
    between the two and no interrupt needs disabling."""

    def __init__(self, pin, trigger):
        self.pin = pin
        self.edges = 0  # written by the interrupt only
        self.taken = 0  # written by the main loop only
        pin.irq(trigger=trigger, handler=self._isr)

    def _isr(self, _pin):
        self.edges = (self.edges + 1) & _EDGE_WRAP  # a small-int add: no allocation

    def take(self):
        edges = self.edges
        n = (edges - self.taken) & _EDGE_WRAP
        self.taken = edges
        return n


class Button:
    """A push button to ground with the pull-up on: one press reported per press held for
    debounce_ms."""

    def __init__(self, pin, debounce_ms=30):
        self.pin = pin
        self.debounce_ms = debounce_ms
        self.down = False
        self.down_since = 0
        self.reported = False

    def pressed(self, now_ms):
        if self.pin.value():  # released
            self.down = False
            self.reported = False
            return False
        if not self.down:
            self.down = True
            self.down_since = now_ms
        if not self.reported and ticks_diff(now_ms, self.down_since) >= self.debounce_ms:
            self.reported = True
            return True
        return False


class LampIndicators:
    """Player-draws, Banker-draws, result and alarm lamps, and a buzzer on alarms. At a result the
    result lamp lights, then blinks once for each announcement the dealer must call (tie hand,
    Dragon 7, Panda 8, Lucky Six); it goes out when the next card leaves the shoe. At a blackjack
    table (`blackjack`, set by the app) the first lamp says a player's hand takes the next card,
    the second the dealer's (the rule says draw), and the result lamp that the round's cards are
    out and the dealer's confirm of its hands is due."""

    blackjack = False

    def __init__(self, player, banker, result, alarm, buzzer=None):
        self.player = player
        self.banker = banker
        self.result = result
        self.alarm = alarm
        self.buzzer = buzzer
        self.result_at = -1  # the shoe position the lit result belongs to
        self.announced = False
        self.toggles = 0  # result lamp toggles still to make
        self.lit = 0
        self.toggle_at = 0
        self.toggle_due = False

    def show(self, phase, due, position, shoe_no, round_no, alarm, reveal):
        if self.blackjack:  # due: a hand's index, 0xFE the dealer's, 0xFD confirm, 0xFF none
            self.player.value(1 if due < 0xFD else 0)
            self.banker.value(1 if due == 0xFE else 0)
        else:
            self.player.value(1 if due == 1 else 0)
            self.banker.value(1 if due == 2 else 0)
        self.alarm.value(1 if alarm else 0)
        if self.buzzer is not None:
            self.buzzer.duty_u16(32768 if alarm else 0)
        if self.announced:
            self.announced = False
            self.result_at = position
        elif self.lit and position != self.result_at:
            self._result(0)
            self.toggles = 0

    def placed(self, rnd):
        """Blackjack: the dealer's hand is complete; the result lamp asks for the confirm (the
        hands are the display's, on a board that has one)."""
        self._result(1)
        self.toggles = 0
        self.announced = True

    def announce(self, player_total, banker_total, winner, announcements):
        n = 0
        while announcements:
            n += announcements & 1
            announcements >>= 1
        self._result(1)
        self.toggles = 2 * n  # off, then on again, per announcement
        self.toggle_due = False
        self.announced = True

    def tick(self, now):
        if not self.toggles:
            return
        if not self.toggle_due:
            self.toggle_due = True
            self.toggle_at = ticks_add(now, _BLINK_MS)
        elif ticks_diff(now, self.toggle_at) >= 0:
            self.toggles -= 1
            self._result(0 if self.lit else 1)
            self.toggle_at = ticks_add(now, _BLINK_MS)

    def _result(self, on):
        self.lit = on
        self.result.value(on)


class PanelIO:
    """What the board loop (shoe/loop.py) reads and drives, built from the board's drivers."""

    def __init__(self, uart, exit_sensor, buttons, lamps, link, sensor_buf=32, link_buf=64,
                 bet_spots=()):
        self.bet_spots = bet_spots  # blackjack: the seats' bet-spot sensors (Pins), seat 1 first
        self.uart = uart
        self.exit_sensor = exit_sensor
        self.buttons = buttons  # ((Button, bit), ...)
        self.lamps = lamps
        self.link = link
        self.sensor_buf = bytearray(sensor_buf)
        self.link_buf = bytearray(link_buf)

    def bets(self):
        bits = 0
        for i in range(len(self.bet_spots)):
            if not self.bet_spots[i].value():  # a wager on the spot pulls its line low
                bits |= 1 << i
        return bits

    def sensor_read(self):
        if not self.uart.any():
            return 0
        return self.uart.readinto(self.sensor_buf) or 0

    def exit_edges(self):
        return self.exit_sensor.take()

    def pressed(self, now):
        bits = 0
        for button, bit in self.buttons:
            if button.pressed(now):
                bits |= bit
        return bits

    def link_read(self):
        return self.link.readinto(self.link_buf)

    def tick(self, now):
        self.lamps.tick(now)
        self.link.flush()  # what the link's driver did not take of a frame yet

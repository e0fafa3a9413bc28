"""Drivers for the reference hardware (boards/README.md). Built from a board's data by `build(board)`.

Interrupt handlers only count edges; the main loop does the rest, outside interrupt context."""

import select
import sys

import machine
import micropython


class ExitSensor:
    """Photo-interrupter at the shoe's mouth: one falling edge per card that leaves."""

    def __init__(self, pin):
        self.pin = pin
        self.edges = 0
        pin.irq(trigger=machine.Pin.IRQ_FALLING, handler=self._isr)

    def _isr(self, _pin):
        self.edges += 1  # a small-int increment: no allocation in the interrupt

    def take(self):
        state = machine.disable_irq()
        n = self.edges
        self.edges = 0
        machine.enable_irq(state)
        return n


class Button:
    """A push button to ground with the pull-up on; reports one press per debounced press."""

    def __init__(self, pin, debounce_ms=30):
        self.pin = pin
        self.debounce_ms = debounce_ms
        self.down_since = None
        self.reported = False

    def pressed(self, now_ms):
        import time

        if self.pin.value():  # released
            self.down_since = None
            self.reported = False
            return False
        if self.down_since is None:
            self.down_since = now_ms
        if not self.reported and time.ticks_diff(now_ms, self.down_since) >= self.debounce_ms:
            self.reported = True
            return True
        return False


class LampIndicators:
    """Player-draws, Banker-draws, result and alarm lamps, and a buzzer on alarms."""

    def __init__(self, player, banker, result, alarm, buzzer=None):
        self.player, self.banker, self.result, self.alarm, self.buzzer = player, banker, result, alarm, buzzer

    def show(self, phase, due, position, shoe_no, round_no, alarm, reveal):
        self.player.value(1 if due == 1 else 0)
        self.banker.value(1 if due == 2 else 0)
        self.alarm.value(1 if alarm else 0)
        if self.buzzer is not None:
            self.buzzer.duty_u16(32768 if alarm else 0)

    def announce(self, player_total, banker_total, winner, announcements):
        # The result lamp lights for the round's result; announcements (tie hand, Dragon 7, Panda 8,
        # Lucky Six) blink it once each so the dealer calls them.
        self.result.value(1)


class StdioLink:
    """The host link on the USB serial port (or UART0 on boards without native USB)."""

    def __init__(self):
        self.out = sys.stdout.buffer
        self.inp = sys.stdin.buffer
        self.poll = select.poll()
        self.poll.register(self.inp, select.POLLIN)

    def write(self, data):
        self.out.write(data)

    def read_available(self, limit=64):
        got = bytearray()
        while len(got) < limit and self.poll.poll(0):
            got += self.inp.read(1)
        return got


def build(board):
    """Drivers for a board described as data (boards/<name>/board.py)."""
    Pin = machine.Pin
    uart = machine.UART(board.SENSOR_UART, baudrate=board.SENSOR_BAUD, tx=Pin(board.SENSOR_TX),
                        rx=Pin(board.SENSOR_RX))
    exit_sensor = ExitSensor(Pin(board.EXIT_SENSOR, Pin.IN, Pin.PULL_UP))
    buttons = {name: Button(Pin(p, Pin.IN, Pin.PULL_UP)) for name, p in board.BUTTONS.items()}
    lamp = {n: Pin(p, Pin.OUT) for n, p in board.LAMPS.items()}
    buzzer = machine.PWM(Pin(board.BUZZER), freq=2000, duty_u16=0) if board.BUZZER is not None else None
    lamps = LampIndicators(lamp["player"], lamp["banker"], lamp["result"], lamp["alarm"], buzzer)
    return uart, exit_sensor, buttons, lamps, StdioLink()


def keyboard_interrupt(enabled):
    """While dealing no byte on the link (0x03 included) may interrupt the firmware."""
    micropython.kbd_intr(3 if enabled else -1)

"""The board loop and its drivers with dummy pins: Button debounce, ExitSensor counting, the lamps
(an announcement really blinks the result lamp, which goes out at the next card), one step() for
every board, and on real MicroPython an idle loop that allocates nothing."""

import itertools
import re
import sys

import pytest

from kit import FIRMWARE, ROOT

sys.path.insert(0, str(FIRMWARE))
sys.path.insert(0, str(ROOT / "tests" / "mp"))

from panel import UART, Link, Pin

from shoe import loop
from shoe.drivers.controls import Button, ExitSensor, LampIndicators, PanelIO


def test_button_reports_one_press_per_press_held_for_the_debounce_time():
    pin = Pin()
    b = Button(pin, debounce_ms=30)
    pin.level = 0
    assert [b.pressed(t) for t in (100, 110, 129)] == [False, False, False]
    assert b.pressed(130) is True
    assert [b.pressed(t) for t in range(131, 400, 10)] == [False] * 27  # held: still one press
    pin.level = 1
    assert b.pressed(400) is False
    pin.level = 0  # a bounce shorter than the debounce time is no press
    assert b.pressed(410) is False
    pin.level = 1
    assert b.pressed(415) is False
    pin.level = 0
    assert b.pressed(420) is False and b.pressed(450) is True


def test_exit_sensor_counts_every_edge_between_takes():
    pin = Pin()
    s = ExitSensor(pin, Pin.IRQ_FALLING)
    assert s.take() == 0
    for _ in range(3):
        pin.fall()
    assert s.take() == 3 and s.take() == 0
    s.edges = s.taken = 0x3FFFFFFF  # the count wraps without losing an edge
    pin.fall()
    pin.fall()
    assert s.take() == 2


def lamps():
    pins = [Pin(0) for _ in range(4)]
    return LampIndicators(*pins), pins


def test_an_announcement_blinks_the_result_lamp_then_the_next_card_puts_it_out():
    lamp, (_, _, result, _) = lamps()
    lamp.announce(7, 7, 3, 1 | 2)  # tie hand and Dragon 7: two blinks
    lamp.show(2, 1, 20, 1, 5, 0, 0)
    seen = []
    for t in range(0, 3000, 50):
        lamp.tick(t)
        seen.append(result.level)
    changes = sum(1 for a, b in itertools.pairwise(seen) if a != b)
    assert seen[0] == 1 and changes == 4 and seen[-1] == 1  # off-on twice, then steady on
    lamp.show(2, 2, 20, 1, 5, 0, 0)  # same position: still lit
    assert result.level == 1
    lamp.show(2, 2, 21, 1, 6, 0, 0)  # the next card is out
    assert result.level == 0


def test_a_result_without_announcements_lights_steadily():
    lamp, (_, _, result, _) = lamps()
    lamp.announce(9, 8, 1, 0)
    lamp.show(2, 1, 9, 1, 1, 0, 0)
    writes = result.writes
    for t in range(0, 2000, 50):
        lamp.tick(t)
    assert result.level == 1 and result.writes == writes


def test_lamps_show_who_draws_and_the_alarm():
    lamp, (player, banker, _, alarm) = lamps()
    lamp.show(2, 1, 5, 1, 1, 0, 0)
    assert (player.level, banker.level, alarm.level) == (1, 0, 0)
    lamp.show(3, 0, 6, 1, 1, 2, 0)
    assert (player.level, banker.level, alarm.level) == (0, 0, 1)


class Recorder:
    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        return lambda *a: self.calls.append((name, *a))


def test_step_feeds_sensor_bytes_before_edges_then_buttons_then_host_bytes():
    uart, link, exit_pin = UART(), Link(), Pin()
    confirm, empty = Button(Pin(0), 0), Button(Pin(1), 0)
    io = PanelIO(uart, ExitSensor(exit_pin, Pin.IRQ_FALLING), ((confirm, loop.CONFIRM),
                 (empty, loop.EMPTY)), lamps()[0], link)
    app = Recorder()
    uart.waiting += b"$R"
    exit_pin.fall()
    link.waiting += b"\x01\x02"
    loop.step(app, io, 0)
    assert [c[0] for c in app.calls] == ["sensor_byte", "sensor_byte", "exit_edge",
                                         "confirm_button", "service", "host_bytes"]
    assert app.calls[-1][2] == 2


@pytest.mark.board
def test_idle_loop_allocates_nothing_on_micropython(mpy, shoe_flash, element):
    flash, _, _ = shoe_flash
    r = mpy(ROOT / "tests" / "mp" / "idle_loop.py", flash, element)
    assert r.returncode == 0, r.stderr.decode()
    passes, failures, position, confirmed = map(int, re.findall(rb"\d+", r.stdout))
    assert passes == 10000 and failures == 0
    assert position == 1 and confirmed == 1  # the same loop really takes a card and a button


def test_a_blackjack_tables_lamps_say_whose_hand_draws_and_when_the_confirm_is_due():
    lamp, (player, banker, result, _) = lamps()
    lamp.blackjack = True
    for due, lit in ((0, (1, 0)), (2, (1, 0)), (0xFE, (0, 1)), (0xFD, (0, 0)), (0xFF, (0, 0))):
        lamp.show(2, due, 9, 1, 1, 0, 0)
        assert (player.level, banker.level) == lit, due
    lamp.placed(None)  # the dealer's hand is complete: the confirm is due
    lamp.show(2, 0xFD, 9, 1, 1, 0, 0)
    assert result.level == 1
    lamp.show(2, 0, 10, 1, 2, 0, 0)  # the next round's first card
    assert result.level == 0

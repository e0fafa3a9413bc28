"""micropython-lib's usb.device, emulated (boards/emulated/emulated_machine.py): the device the
Pico's CDC interface registers with; `builtin_driver` is recorded (the shoe turns the USB REPL
off)."""


class _Device:
    def __init__(self):
        self.interfaces = ()
        self.builtin_driver = None

    def init(self, *interfaces, builtin_driver=False):
        self.interfaces = interfaces
        self.builtin_driver = builtin_driver


_device = _Device()


def get():
    return _device

# Type stubs for micropython-lib's usb-device packages (frozen by the rp2 manifest),
# only as far as the shoe uses them: the board stubs do not include them.

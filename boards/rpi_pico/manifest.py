# This board's MicroPython image: the rp2 port's `rp2` module (its modules/rp2.py: the PIO
# helpers), this board's own `_boot.py` in place of the port's (littlefs over the first part of
# the flash storage, the rest the shoe log's raw partition: docs/FLASH.md) and the host link's
# USB CDC library (micropython-lib). Nothing of the shoe's firmware is frozen: MicroPython runs a
# frozen main.py in place of /main.py, and a frozen module wherever the filesystem lacks one, so
# frozen firmware would run beside the tree MANIFEST and the boot check cover and no update could
# replace it. The firmware is the deployed, signed tree (`sabot deploy`).
freeze("$(PORT_DIR)/modules", "rp2.py")
module("_boot.py")
require("usb-device-cdc")  # the host link's own USB CDC interface (micropython-lib)

# This board's frozen firmware: the shared shoe package, the board's data and the boot entry.
# The rp2 port's own manifest first (its `_boot.py`, which mounts the littlefs flash at /):
# a FROZEN_MANIFEST replaces the port's, so without this line the image never mounts /data.
include("$(PORT_DIR)/boards/manifest.py")
include("../../firmware/manifest.py")
module("board.py")
module("main.py", base_path="../../firmware")
module("maint.py", base_path="../../firmware")  # the blank shoe's REPL helpers (provisioning)
require("usb-device-cdc")  # the host link's own USB CDC interface (micropython-lib)

# This board's MicroPython image: the port's own manifest (its `_boot.py`, which mounts the
# littlefs flash at /; a FROZEN_MANIFEST replaces the port's, so without this line the image
# never mounts /data). Nothing of sabot is frozen: MicroPython runs a frozen main.py in place of
# /main.py, and a frozen module wherever the filesystem lacks one, so frozen code would run beside
# the tree MANIFEST and the boot check cover and no update could replace it. The firmware is the
# deployed, signed tree (`sabot deploy`).
include("$(PORT_DIR)/boards/manifest.py")

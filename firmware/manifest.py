# The shoe firmware as a MicroPython package, shared by every board's manifest. Each
# boards/<name>/manifest.py first include()s its port's own manifest
# ($(PORT_DIR)/boards/manifest.py on rp2 and esp32, $(PORT_DIR)/variants/manifest.py on unix): a
# FROZEN_MANIFEST replaces the port's, and the port's manifest freezes `_boot.py`, which mounts
# the flash filesystem (without it a frozen shoe finds no MANIFEST and tilts). Then this file,
# then the board's board.py and entry point. Freezing keeps the code and the decision table in
# flash; in micropython/ports/<port>:
#   make BOARD=<port board> FROZEN_MANIFEST=<path to boards/<name>/manifest.py>
# (both ports' Makefiles pass FROZEN_MANIFEST on to their cmake / idf.py build)
metadata(description="sabot smart baccarat shoe firmware", version="0.1.0")
package("shoe")

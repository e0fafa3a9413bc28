# The virtual board's MicroPython image (a unix-port build): the port's own manifest, as its
# variants have (a FROZEN_MANIFEST replaces it). Nothing of sabot is frozen, as on every board:
# the code that runs is the tree MANIFEST and the boot check cover, which an update replaces.
include("$(PORT_DIR)/variants/manifest.py")

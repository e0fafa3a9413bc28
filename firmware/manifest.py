# The shoe firmware as a MicroPython package, shared by every board's manifest (each
# boards/<name>/manifest.py include()s this file, then adds its own board.py and entry point).
# Freezing it into a MicroPython build keeps the code and the decision table in flash; in
# micropython/ports/<port>:
#   make BOARD=<port board> FROZEN_MANIFEST=<path to boards/<name>/manifest.py>
metadata(description="sabot smart baccarat shoe firmware", version="0.1.0")
package("shoe")

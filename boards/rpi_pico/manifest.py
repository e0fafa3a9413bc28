# Freeze the shoe firmware and this board's data into a MicroPython build, so the code and the decision
# table stay in flash:  make BOARD=<port board> FROZEN_MANIFEST=<this file>  in micropython/ports/<port>.
package("shoe", base_path="$(MPY_DIR)/../sabot/firmware")
module("board.py")
module("main.py", base_path="$(MPY_DIR)/../sabot/firmware")

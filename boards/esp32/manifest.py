# This board's frozen firmware: the shared shoe package, the board's data and the boot entry.
include("../../firmware/manifest.py")
module("board.py")
module("main.py", base_path="../../firmware")
module("maint.py", base_path="../../firmware")  # REPL helpers for maintenance

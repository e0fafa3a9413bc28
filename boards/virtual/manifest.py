# The virtual board's frozen firmware (a unix-port build): the shared shoe package, the board's
# data and its own entry point (its dealer channel and socket link).
include("../../firmware/manifest.py")
module("board.py")
module("main.py")
module("i2c_socket.py")  # the bus to the secure element (the emulator's socket)
module("maint.py", base_path="../../firmware")  # REPL helpers for maintenance

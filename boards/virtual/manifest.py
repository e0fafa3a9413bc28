# The virtual board's frozen firmware (a unix-port build): the shared shoe package, the board's
# data and its own entry point (its dealer channel and socket link).
# The unix port's own manifest first, as its variants do (a FROZEN_MANIFEST replaces it).
include("$(PORT_DIR)/variants/manifest.py")
include("../../firmware/manifest.py")
module("board.py")
module("main.py")
module("i2c_socket.py")  # the bus to the secure element (the emulator's socket)
module("one_host.py")  # the socket link's one-host rule
module("dealer_channel.py")  # the simulated dealer's bytes on stdin
module("maint.py", base_path="../../firmware")  # the blank shoe's REPL helpers (provisioning)

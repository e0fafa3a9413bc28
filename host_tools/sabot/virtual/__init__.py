"""The virtual shoe: the board on the unix-port MicroPython, its simulated dealer and
secure-element emulator, provisioning, the demo, the soak, captures."""

"""Hardware drivers: the only firmware modules that touch `machine`. Each takes its bus and pins."""

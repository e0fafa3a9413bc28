"""Hardware drivers: each takes its bus and pins; hw.py alone imports `machine`."""

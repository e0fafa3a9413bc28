"""The package's build beyond host_tools/pyproject.toml, for `make dist` only: the exact-edge
kernel (sabot/game/outcomes.c) compiled into the wheel, or on install from the sdist. It is
optional: without a C compiler the package installs and counts in Python (slower, the same
integers). The checkout's own build is the Makefile's, which names it _outcomes.so."""

import zlib
from pathlib import Path

from setuptools import Extension, setup

SOURCE = "sabot/game/outcomes.c"
CRC = zlib.crc32((Path(__file__).parent / SOURCE).read_bytes())

setup(ext_modules=[Extension(
    "sabot.game._outcomes", [SOURCE], define_macros=[("SOURCE_CRC", f"{CRC}u")],
    extra_compile_args=["-O3", "-funroll-loops"], optional=True)])

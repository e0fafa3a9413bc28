"""The exact edges' compiled kernel: outcomes.c, built by the Makefile into _outcomes.so beside
this file and loaded with ctypes, handed its tables (the classes of first four cards and the
drawing rule) at load. Loaded only when built from the outcomes.c beside it (its CRC-32 is
compiled in); without it the counting is Python's (wide_counting.py)."""

from __future__ import annotations

import _thread
import os
from array import array
from collections.abc import Sequence
from functools import lru_cache
from itertools import chain

from sabot.game import outcome_tables, rules
from sabot.game.edge_tables import MAIN_INDEX, return_tables

TYPE_CHECKING = False  # typing's, without importing typing for `sabot analyze` (mypy: True)
if TYPE_CHECKING:
    from typing import Any


class _Kernel:
    """_outcomes.so, loaded and handed its tables."""

    def __init__(self, lib: Any, ctypes: Any) -> None:
        self.ctypes = ctypes
        i32, i64, u64 = ctypes.c_int32, ctypes.c_int64, ctypes.c_uint64
        p32, p64, pu64 = (ctypes.POINTER(t) for t in (i32, i64, u64))
        lib.sabot_outcomes_init.argtypes = [ctypes.c_int, p32, ctypes.c_int, p32, p32]
        lib.sabot_outcomes_init.restype = ctypes.c_int
        lib.sabot_outcomes.argtypes = [p64, p64, ctypes.c_int, p64, p64, pu64]
        lib.sabot_outcomes.restype = i64
        lib.sabot_returns.argtypes = [p64, ctypes.c_int, p64, p64, pu64]
        lib.sabot_returns.restype = None
        table = [rules.player_draws(p) for p in range(8)] + [
            rules.banker_draws(b, None) for b in range(8)] + [
            rules.banker_draws(b, v) for b in range(8) for v in range(10)]

        def c_array(ints: Sequence[int]) -> Any:
            a = array("i", ints)
            return (i32 * len(a)).from_buffer_copy(a)

        if lib.sabot_outcomes_init(
                len(outcome_tables.CLASS_PARTS) // 8, c_array(outcome_tables.CLASS_PARTS),
                len(outcome_tables.SPLITS) // 4, c_array(outcome_tables.SPLITS),
                c_array(table)) != 0:
            raise OSError("the kernel refused its tables")
        self.count = lib.sabot_outcomes
        self.dot = lib.sabot_returns
        self.b21 = lib.sabot_b21_wins  # its argtypes set at its first use (b21_wins)

    @lru_cache(maxsize=64)  # noqa: B019  (one kernel per process: it lives as long)
    def returns(self, tie_odds: int, names: tuple[str, ...]) -> Any:
        """The return rows of these main wagers as one int64 array, or None when one does not
        fit in 64 bits (a Tie paying beyond 2**58 to 1: Python sums it)."""
        _, main, _ = return_tables(tie_odds)
        try:
            flat = array("q", chain.from_iterable(main[MAIN_INDEX[name]] for name in names))
        except OverflowError:
            return None
        return (self.ctypes.c_int64 * len(flat)).from_buffer_copy(flat)


def b21_wins(counts: Sequence[int], hands: Any) -> dict[str, float] | None:
    """21 Baccarat's chance of each winner for value counts (ten, ace first) and a
    baccarat21_analyze.Hands, summed by the kernel; None without one."""
    k = kernel()
    if k is None:
        return None
    ctypes = k.ctypes
    fn = k.b21
    if fn.argtypes is None:
        i32, p8, p32, pd = (ctypes.c_int32, ctypes.POINTER(ctypes.c_int8),
                            ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_double))
        fn.argtypes = [p32, i32, p8, pd, p32, p32, p32, p32, p8, pd, p32, p32, p8, pd]
        fn.restype = ctypes.c_int
    wins = (ctypes.c_double * 3)()
    if fn((ctypes.c_int32 * 10)(*counts), *hands.arrays(ctypes), wins) != 0:
        raise ValueError("the kernel refused a 21 Baccarat composition")
    return {"player": wins[0], "banker": wins[1], "tie": wins[2]}


_KERNEL_LOCK = _thread.allocate_lock()  # threading's Lock, without importing threading
_KERNEL: list[_Kernel | None] = []  # [the kernel, or None without one], once looked for


def kernel() -> _Kernel | None:
    """The compiled kernel when it is built from the outcomes.c beside this file, else None."""
    if not _KERNEL:
        with _KERNEL_LOCK:  # one load and one init, whichever thread asks first
            if not _KERNEL:
                _KERNEL.append(_load_kernel())
    return _KERNEL[0]


def _load_kernel(here: str | None = None) -> _Kernel | None:
    """The kernel from the directory `here` (default: this module's), if it was built from the
    outcomes.c there: _outcomes.so as the Makefile builds it, or as an installed package's build
    names it (_outcomes.cpython-311-x86_64-linux-gnu.so)."""
    import ctypes
    import zlib
    from importlib.machinery import EXTENSION_SUFFIXES

    here = here or os.path.dirname(os.path.abspath(__file__))
    try:
        with open(os.path.join(here, "outcomes.c"), "rb") as f:
            crc = zlib.crc32(f.read())
        built = [os.path.join(here, "_outcomes" + suffix) for suffix in [".so",
                                                                         *EXTENSION_SUFFIXES]]
        lib = ctypes.CDLL(next((p for p in built if os.path.exists(p)), built[0]))
        lib.sabot_outcomes_source_crc.restype = ctypes.c_uint32
        if lib.sabot_outcomes_source_crc() != crc:
            return None  # built from another outcomes.c: `make` builds it again
        return _Kernel(lib, ctypes)
    except (OSError, AttributeError):  # not built (or not for this machine): Python counts
        return None


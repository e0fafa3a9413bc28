"""Exclusive locks that name their holder: a lock file holding the pid of the process that has it
(an audit store's writer, a virtual board's flash directory)."""

from __future__ import annotations

import fcntl
import os


def try_lock(fd: int) -> str | None:
    """None once this process holds `fd`'s exclusive lock, its pid written in it; else who holds
    it (the pid the holder wrote)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return os.read(fd, 32).decode(errors="replace").strip() or "another process"
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    return None

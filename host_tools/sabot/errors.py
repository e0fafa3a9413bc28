"""The one error type the CLI turns into a one-line message and a non-zero exit."""

from __future__ import annotations


class SabotError(Exception):
    """Bad input or a failed check, worded for the person at the terminal."""

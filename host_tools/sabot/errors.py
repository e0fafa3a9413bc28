"""The errors the CLI turns into a one-line message, and the exit status each one means
(docs/INTERFACES.md "Exit status"): the class says which, so no caller matches a message's text."""

from __future__ import annotations

OK = 0  # the record verified (or the command did what it was asked)
NOT_VERIFIED = 1  # the record did not verify: a rejected frame, an integrity or content alarm
BAD_INPUT = 2  # bad input, usage or I/O (a link lost included), with a one-line reason
INTERRUPTED = 130  # Ctrl-C (128 + SIGINT), as shells report it
# Game-protection notices: what is dealt, not whether the shoe or the record holds. Printed,
# stored, counted and shown; they change no exit status or verdict unless --fail-on-notice.
NOTICES = frozenset(("player_advantage", "repeated_sequence"))


class SabotError(Exception):
    """Bad input or a failed check, worded for the person at the terminal."""

    exit_status = BAD_INPUT


class NotVerified(SabotError):
    """What was checked does not hold: frames rejected, alarms raised, a store that does not
    verify, a shoe whose firmware or dealing does not match the build or the rules."""

    exit_status = NOT_VERIFIED


def parse_json(data: str | bytes, what: str) -> object:
    """`data` (bytes: UTF-8) as JSON, else a SabotError in one line naming `what`: not UTF-8, not
    JSON, a number past Python's digits limit, or nested past the parser's depth (a
    RecursionError): for JSON a user hands the host, which must never end in a traceback."""
    import json

    try:
        return json.loads(data.decode("utf-8") if isinstance(data, bytes) else data)
    except UnicodeDecodeError:
        raise SabotError(f"{what}: not UTF-8 text") from None
    except json.JSONDecodeError as e:
        raise SabotError(f"{what}: not JSON ({e.msg} at line {e.lineno} column {e.colno})"
                         ) from None
    except ValueError:  # int("9" * 5000): Python's integer string conversion limit
        raise SabotError(f"{what}: a number too long (over 4300 digits)") from None
    except RecursionError:
        raise SabotError(f"{what}: JSON nested too deep") from None

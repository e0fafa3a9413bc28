"""What a service manager needs of a long-running sabot (`serve`, the witness): log lines a journal
or a SIEM reads, with their severity, and readiness and a watchdog over systemd's notify socket
(sd_notify(3)). Nothing here is needed at a terminal: without NOTIFY_SOCKET nothing is sent, and
the default log format is the plain one people read."""

from __future__ import annotations

import io
import os
import re
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TextIO

# syslog's severities (the journal's priorities), the ones sabot uses
LEVELS = {"critical": 2, "error": 3, "warning": 4, "notice": 5, "info": 6}
FORMATS = ("text", "logfmt", "json")
_PREFIX = re.compile(r"^sabot [\w-]+: (?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4} )?")


class _State:
    program = "sabot"
    format = "text"
    raw: TextIO | None = None  # the real standard error, once it is wrapped


_state = _State()


def now_text(when: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(when))


def rfc3339(when: float | None = None) -> str:
    """The time as RFC 3339 has it (the offset with its colon), for the structured formats."""
    from datetime import datetime

    return datetime.fromtimestamp(time.time() if when is None else when).astimezone(
    ).isoformat(timespec="seconds")


def _journal_priority(stream: Any) -> bool:
    """Whether `stream` is the journal's own stream (systemd sets JOURNAL_STREAM to its device
    and inode): then a line may lead with <N>, its priority."""
    given = os.environ.get("JOURNAL_STREAM", "")
    try:
        st = os.fstat(stream.fileno())
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return False
    return given == f"{st.st_dev}:{st.st_ino}"


def _quoted(value: str) -> str:
    """A logfmt value: bare when it can be, else in double quotes with \\ and " escaped."""
    if value and not re.search(r'[\s"=\\]', value):
        return value
    value = value.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + value.replace("\n", "\\n").replace("\r", "\\r") + '"'


def record(text: str, level: str, when: float | None = None, program: str | None = None
           ) -> str:
    """One log line in the chosen format (without its newline)."""
    program = program or _state.program
    stamp = now_text(when) if _state.format == "text" else rfc3339(when)
    if _state.format == "json":
        import json

        return json.dumps({"time": stamp, "level": level, "program": program, "msg": text},
                          ensure_ascii=False)
    if _state.format == "logfmt":
        return f"time={stamp} level={level} program={_quoted(program)} msg={_quoted(text)}"
    return f"{'sabot' if program == 'sabot' else 'sabot ' + program}: {stamp} {text}"


def log(text: str, level: str = "info", program: str | None = None) -> None:
    """One line of a service's log, with its time and severity, on standard error (a service's
    journal)."""
    stream = _state.raw or sys.stderr
    line = record(text, level, program=program)
    if _journal_priority(stream):
        line = f"<{LEVELS[level]}>{line}"
    stream.write(line + "\n")
    stream.flush()


def level_of(line: str) -> str:
    """The severity of a line written without one (a summary, a web server's own warning)."""
    for word, level in (("ALARM ", "warning"), ("ERROR:", "error"), ("CRITICAL:", "critical"),
                        ("WARNING:", "warning"), ("internal error", "error")):
        if line.startswith(word) or (word == "internal error" and word in line):
            return level
    return "info"


class _Lines(io.TextIOBase):
    """Standard error, once the log is structured: every line any part of the process writes
    there (a summary, a library's warning) becomes one record, so a SIEM never meets a line it
    cannot parse."""

    def __init__(self, raw: TextIO) -> None:
        self.raw, self.pending = raw, ""

    def write(self, s: str) -> int:
        self.pending += s
        while "\n" in self.pending:
            line, self.pending = self.pending.split("\n", 1)
            line = _PREFIX.sub("", line.rstrip("\r"))
            if line.strip():
                log(line, level_of(line))
        return len(s)

    def flush(self) -> None:
        self.raw.flush()

    def fileno(self) -> int:
        return self.raw.fileno()

    def isatty(self) -> bool:
        return False


def structured() -> bool:
    return _state.format != "text"


def say(command: str, text: str, level: str = "info") -> None:
    """A line `sabot COMMAND: TEXT` for people, or, in a structured log, one record of `level`
    whatever `text` holds (a path with a line break in it makes no second record)."""
    if structured():
        log(text, level)
    else:
        print(f"sabot {command}: {text}", file=sys.stderr, flush=True)


def failed(command: str, text: str) -> None:
    """The line a command ends on when it fails: an error record in a structured log (a service
    that could not start is found at `journalctl -p err`)."""
    say(command, text, "error")


def _crash(kind: type[BaseException], error: BaseException, tb: Any, where: str = "") -> None:
    """An exception nothing caught: one critical record with its whole traceback."""
    import traceback

    text = "".join(traceback.format_exception(kind, error, tb)).rstrip()
    log(f"{where}{text}", "critical")


def configure(program: str, fmt: str = "text") -> None:
    """Name the program in its lines and pick their format: `text` (for people), `logfmt`
    (key=value) or `json` (one object a line); the latter two structure every line written to
    standard error, and log an exception nothing caught (the process's, a thread's) as one
    critical record."""
    if fmt not in FORMATS:
        from sabot.errors import SabotError

        raise SabotError(f"--log-format takes {', '.join(FORMATS)}, not {fmt!r}")
    _state.program, _state.format = program, fmt
    if fmt != "text" and _state.raw is None:
        import threading

        _state.raw = sys.stderr
        sys.stderr = _Lines(sys.stderr)
        sys.excepthook = _crash
        threading.excepthook = lambda a: _crash(
            a.exc_type, a.exc_value or a.exc_type(), a.exc_traceback,
            f"thread {a.thread.name if a.thread else '?'}: ")


def notify(*fields: str) -> bool:
    """Tell the service manager `fields` (READY=1, STATUS=..., WATCHDOG=1, STOPPING=1) over
    NOTIFY_SOCKET; False when there is none (not started by systemd, or Type= is not notify)."""
    import socket

    path = os.environ.get("NOTIFY_SOCKET", "")
    if not path:
        return False
    address = "\0" + path[1:] if path.startswith("@") else path  # an abstract socket
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
            s.connect(address)
            s.sendall("\n".join(fields).encode())
    except OSError as e:
        log(f"the service manager's socket {path} refused {fields[0]}: {e.strerror or e}",
            "warning")
        return False
    return True


def watchdog_interval() -> float | None:
    """Seconds between the watchdog's pings (half systemd's WatchdogSec=), or None when no
    watchdog watches this process."""
    usec, pid = os.environ.get("WATCHDOG_USEC", ""), os.environ.get("WATCHDOG_PID", "")
    if not usec.isdigit() or int(usec) == 0 or (pid.isdigit() and int(pid) != os.getpid()):
        return None
    return int(usec) / 2e6


def uvicorn_server(app: Any, host: str, port: int, status: str,
                   alive: Callable[[], bool] | None = None,
                   before_shutdown: Callable[[], Any] | None = None, **config: Any) -> Any:
    """A uvicorn server that tells the service manager it is ready once its socket listens
    (READY=1 with `status`), pings the watchdog from its own event loop while `alive()` (so a
    hung loop or a dead worker thread is restarted), and says STOPPING=1 when it stops."""
    import asyncio

    import uvicorn

    class Server(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            if self.should_exit:
                return
            notify("READY=1", f"STATUS={status}")
            every = watchdog_interval()
            if every:
                self._watchdog = asyncio.ensure_future(self._ping(every))

        async def _ping(self, every: float) -> None:
            while not self.should_exit:
                if alive is None or alive():
                    notify("WATCHDOG=1")
                else:
                    log("not pinging the watchdog: a worker thread has stopped", "critical")
                await asyncio.sleep(every)

        async def shutdown(self, sockets: Any = None) -> None:
            notify("STOPPING=1")
            if before_shutdown is not None:
                await before_shutdown()
            await super().shutdown(sockets)

    return Server(uvicorn.Config(app, host=host, port=port, log_level="warning",
                                 proxy_headers=False, **config))

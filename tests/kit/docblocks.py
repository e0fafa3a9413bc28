"""The documents' runnable shell blocks, read with Sybil and run with bash as a reader would run
them (tests/test_docs_blocks.py).

A block is runnable when the line before its fence is one of these HTML comments (invisible on
GitHub and on the site):

    <!-- runnable -->                        run it; it must exit 0
    <!-- runnable: in the background -->     a second terminal: started and left running (a board,
                                             a witness, serve); the next block starts once every
                                             HOST:PORT it names with --listen accepts connections
    <!-- runnable: again until it passes --> run it again, every half second, until it exits 0
                                             (60 s at most): a command that needs the background
                                             ones to have got somewhere (a round cosigned)

A document's runnable blocks are one session, in the document's order, as a reader following it:
one fresh working directory (with .venv, the checkout's venv, in it, so `.venv/bin/sabot` runs as
written; the checkout itself is $SABOT_REPO), each block under `bash` with `set -euo pipefail`,
and bash's line numbers those of the document. Every process a block leaves running (`&`, or a
background block) is stopped when the session ends. The TCP ports a document's blocks name
(127.0.0.1:PORT) are held for its whole session (a lock file each), so two documents that use the
same port take turns, on any worker."""

import fcntl
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from sybil import Region, Sybil

from kit.base import ROOT

MARKER = re.compile(r"^<!--\s*runnable\b(?P<mode>[^>]*?)\s*-->[ \t]*$", re.M)
MODES = {"": "run", ": in the background": "background", ": again until it passes": "until"}
FENCE = re.compile(r"^```[^\n`]*$", re.M)
PORT = re.compile(r"\b(?:127\.0\.0\.1|localhost|0\.0\.0\.0):(\d{2,5})\b")
LISTEN = re.compile(r"--listen[ =](\S+):(\d+)")
# the commands that listen on a port of their own, whose runnable blocks must name it (--listen)
# so that the session waits for it and holds it: without it each takes a default port
LISTENERS = re.compile(r"\bsabot (serve|witness|board)\b")

BLOCK_SECONDS = 120  # a block that runs longer is stopped and fails
READY_SECONDS = 60  # for a background block's ports
UNTIL_SECONDS = 60  # for a block run again until it passes


@dataclass
class Block:
    path: Path
    line: int  # the opening fence's line
    mode: str
    text: str

    @property
    def where(self):
        return f"{relative(self.path)}:{self.line}"

    def script(self):
        """The block for bash, its lines at the document's own line numbers."""
        return "\n" * (self.line - 1) + "set -euo pipefail\n" + self.text

    def numbered(self):
        return "".join(f"{self.line + 1 + i:5}  {t}\n" for i, t in enumerate(
            self.text.splitlines()))


def relative(path):
    try:
        return str(Path(path).relative_to(ROOT))
    except ValueError:
        return str(path)


def logical_lines(text):
    return text.replace("\\\n", " ").splitlines()


def parse_runnable(document):
    """Sybil's parser: a Region for each marked block, its evaluator running it in the
    document's session."""
    text = document.text
    for m in MARKER.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        where = f"{relative(document.path)}:{line}"
        mode = MODES.get(m["mode"])
        if mode is None:
            raise ValueError(f"{where}: not a runnable marker this test knows: {m[0]!r} (known: "
                             + ", ".join(f"<!-- runnable{k} -->" for k in MODES) + ")")
        start = m.end() + 1
        opening = FENCE.match(text, start)
        if opening is None:
            raise ValueError(f"{where}: a runnable marker must be on the line just before a "
                             "code block's opening fence (```sh)")
        closing = FENCE.search(text, opening.end() + 1)
        if closing is None:
            raise ValueError(f"{where}: the runnable block is never closed")
        body = text[opening.end() + 1:closing.start()]
        block = Block(Path(document.path), line + 1, mode, body)
        for command in logical_lines(body):
            if (LISTENERS.search(command) and "--listen" not in command
                    and "--vkey" not in command):
                raise ValueError(f"{block.where}: `{LISTENERS.search(command)[0]}` here takes "
                                 "its default port: name it with --listen HOST:PORT, so the "
                                 "test can wait for it and keep other documents off it")
        yield Region(opening.start(), closing.end(), block, evaluate)


def evaluate(example):
    """Sybil's evaluator: the block, run in its document's session; a failure's text, or None."""
    return example.namespace["session"].run(example.parsed)


SYBIL = Sybil(parsers=[parse_runnable], path=str(ROOT))


def blocks_of(path):
    """The document's Sybil Document and its runnable blocks' examples, in order."""
    document = SYBIL.parse(Path(path))
    return document, list(document.examples())


def documents():
    """The documents holding a runnable marker (README.md and docs/*.md), those naming the most
    ports first: the documents that share ports run one after another, so they start first."""
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        if MARKER.search(text):
            found.append((-len(set(PORT.findall(text))), relative(path)))
    return [name for _, name in sorted(found)]


def accepts(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def tail(path, lines=60):
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    kept = text.splitlines()[-lines:]
    return "\n".join(kept) + ("\n" if kept else "")


class Session:
    """A reader following one document: its directory, the processes its blocks started, the
    ports it holds."""

    def __init__(self, path, scratch, blocks):
        self.path = Path(path)
        self.work = Path(scratch) / "work"
        self.logs = Path(scratch) / "logs"
        self.work.mkdir(parents=True)
        self.logs.mkdir(parents=True)
        (self.work / ".venv").symlink_to(Path(sys.prefix))
        self.env = dict(os.environ, SABOT_REPO=str(ROOT),
                        PATH=f"{Path(sys.prefix) / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
        self.ports = sorted({int(p) for b in blocks for p in PORT.findall(b.text)})
        self.locks = []
        self.started = []  # (block, Popen, log): each its own process group
        self.background = []

    def __enter__(self):
        self._hold_ports()
        return self

    def __exit__(self, *exc):
        failure = self._stop()
        for lock in self.locks:
            lock.close()
        if failure and exc[0] is None:
            raise AssertionError(failure)
        return False

    def _hold_ports(self):
        """Each port the blocks name, held against other documents' sessions (any worker, any
        run on this machine); a port something else listens on fails at once."""
        folder = Path(tempfile.gettempdir()) / "sabot-doc-ports"
        folder.mkdir(exist_ok=True)
        for port in self.ports:
            lock = open(folder / f"{port}.lock", "a")  # held until the session ends
            end = time.monotonic() + 600
            while True:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > end:
                        raise AssertionError(f"{relative(self.path)}: port {port} was held by "
                                             "another document's blocks for 10 minutes") from None
                    time.sleep(0.2)
            self.locks.append(lock)
            if accepts(port):
                raise AssertionError(
                    f"{relative(self.path)}: its blocks use port {port}, and something else "
                    "listens on it now (not these tests): stop it and run the test again")

    def _start(self, block, attempt=""):
        log = self.logs / f"{block.line}{attempt}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                ["bash", "-c", block.script(), relative(block.path)], cwd=self.work,
                env=self.env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True)
        self.started.append((block, proc, log))
        return proc, log

    def failure(self, block, what, log):
        text = [f"{block.where}: {what}", block.numbered().rstrip("\n"),
                f"--- its output ({relative(self.path)}, run in {self.work}) ---",
                tail(log).rstrip("\n")]
        for other, proc, other_log in self.background:
            state = "still running" if proc.poll() is None else f"exited {proc.returncode}"
            text += [f"--- the background block at {other.where} ({state}) said ---",
                     tail(other_log, 20).rstrip("\n")]
        return "\n".join(text)

    def run(self, block):
        if block.mode == "background":
            return self._background(block)
        deadline = time.monotonic() + UNTIL_SECONDS
        attempt = 0
        while True:
            proc, log = self._start(block, f"-{attempt}" if attempt else "")
            try:
                rc = proc.wait(BLOCK_SECONDS)
            except subprocess.TimeoutExpired:
                self._stop_group(proc)
                return self.failure(block, f"still running after {BLOCK_SECONDS} s: stopped",
                                    log)
            if rc == 0:
                return None
            if block.mode != "until" or time.monotonic() > deadline:
                again = (f" (run {attempt + 1} times over {UNTIL_SECONDS} s)"
                         if block.mode == "until" else "")
                return self.failure(block, f"exited {rc}{again}", log)
            attempt += 1
            time.sleep(0.5)

    def _background(self, block):
        proc, log = self._start(block)
        self.background.append((block, proc, log))
        ports = [int(p) for _, p in (LISTEN.findall(" ".join(logical_lines(block.text))))]
        end = time.monotonic() + READY_SECONDS
        while not all(accepts(p) for p in ports):
            if proc.poll() is not None:
                return self.failure(block, f"exited {proc.returncode} before "
                                    f"{', '.join(map(str, ports))} accepted connections", log)
            if time.monotonic() > end:
                return self.failure(block, f"{', '.join(map(str, ports))} not accepting "
                                    f"connections after {READY_SECONDS} s", log)
            time.sleep(0.1)
        return None

    @staticmethod
    def _stop_group(*procs, seconds=1.5):
        """The blocks' process groups: SIGTERM (as Ctrl-C would end a command), then SIGKILL
        after `seconds` for whatever is left (serve takes seconds to say goodbye to shoes that
        are gone; boards and witnesses are gone at once, their temporary files removed)."""
        left = list(procs)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for proc in left:
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    pass
            end = time.monotonic() + seconds
            while left and time.monotonic() < end:
                for proc in list(left):
                    proc.poll()
                    try:
                        os.killpg(proc.pid, 0)
                    except ProcessLookupError:
                        left.remove(proc)
                time.sleep(0.05)
        for proc in procs:
            proc.wait()

    def _stop(self):
        """Every process the session started stopped; a background block that had ended
        on its own with a failure, said."""
        failure = None
        for block, proc, log in self.background:
            if proc.poll() not in (None, 0):
                failure = failure or self.failure(
                    block, f"(in the background) exited {proc.returncode} on its own", log)
        self._stop_group(*(proc for _, proc, _ in self.started))
        return failure

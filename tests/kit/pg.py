"""A real PostgreSQL server for the tests: Debian's initdb and pg_ctl (`make test` installs
postgresql when missing) in a temporary directory, on loopback only, run as `nobody` where the
tests run as root (initdb refuses root). No mock stands for it."""

import glob
import os
import shutil
import subprocess
import tempfile

import pytest

from kit.procs import free_port_for_tests


def pg_bin():
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
                   key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    if found:
        return os.path.dirname(found[-1])
    which = shutil.which("pg_ctl")
    if which:
        return os.path.dirname(os.path.realpath(which))
    pytest.fail("PostgreSQL is missing: run `make test` (it installs Debian's postgresql)")


class PgServer:
    """initdb, then pg_ctl start on 127.0.0.1:PORT, in `dir` (a fresh temporary one by default);
    database() makes a fresh database, its URL."""

    def __init__(self, dir=None, port=None, fsync=False, user="sabot"):
        self.bin = pg_bin()
        self.fsync = fsync  # on for make bench's figures: a floor's server runs with it
        self.dir = dir or tempfile.mkdtemp(prefix="sabot-pg-")
        self.port = port or free_port_for_tests()
        self.user = user  # the superuser initdb makes
        self.data = os.path.join(self.dir, "data")
        self.log = os.path.join(self.dir, "log")
        self._as = None
        if os.geteuid() == 0:  # initdb refuses root: the server runs as nobody
            import pwd

            nobody = pwd.getpwnam("nobody")
            os.chown(self.dir, nobody.pw_uid, nobody.pw_gid)
            uid, gid = nobody.pw_uid, nobody.pw_gid
            self.uid, self.gid = uid, gid

            def drop():
                os.setgroups([])
                os.setgid(gid)
                os.setuid(uid)
            self._as = drop
        else:
            self.uid, self.gid = os.geteuid(), os.getegid()

    def start(self):
        self.initdb()
        self.launch()
        return self

    def initdb(self, *auth):
        """The cluster made; `auth`, initdb's options for it (default: --auth=trust)."""
        self._run("initdb", "-D", self.data, "-U", self.user, *(auth or ["--auth=trust"]),
                  "-E", "UTF8", "--no-instructions", *([] if self.fsync else ["--no-sync"]))

    def options(self):
        """The server's own options (pg_ctl -o): its socket's directory, loopback, its port.
        fsync off: these tests are of sabot's store, never of PostgreSQL's own crash safety (a
        database copied per test is then a file copy, not a WAL flush and two checkpoints)."""
        return (f"-k {self.dir} -h 127.0.0.1 -p {self.port}"
                + ("" if self.fsync else " -c fsync=off -c full_page_writes=off"))

    def launch(self):
        self._run("pg_ctl", "-D", self.data, "-l", self.log, "-w", "-t", "60", "-o",
                  self.options(), "start")

    def standby(self):
        """A hot standby of this server (pg_basebackup -R: streaming from it), started, and this
        server made to wait for it at each commit (synchronous_standby_names): a commit is
        acknowledged only once both hold it. (A quick pair for a test of waiting; the floor's
        own set-up, as docs/FLOOR.md has IT build it, is kit/runbook.py's.)"""
        other = PgServer(fsync=self.fsync)
        other._run("pg_basebackup", "-D", other.data, "-h", "127.0.0.1", "-p", str(self.port),
                   "-U", self.user, "-R", "-X", "stream", "-c", "fast")
        os.chmod(other.data, 0o700)
        other._run("pg_ctl", "-D", other.data, "-l", os.path.join(other.dir, "log"), "-w", "-t",
                   "60", "-o", f"-k {other.dir} -h 127.0.0.1 -p {other.port}", "start")
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as con:
            con.execute(b"ALTER SYSTEM SET synchronous_standby_names = '*'")
            con.execute(b"SELECT pg_reload_conf()")
            for _ in range(300):  # until the standby streams, synchronously
                row = con.execute(b"SELECT sync_state FROM pg_stat_replication").fetchone()
                if row and row[0] == "sync":
                    break
                import time

                time.sleep(0.1)
            else:
                raise AssertionError("the standby never became synchronous")
        return other

    def kill(self):
        """The server's death, as a machine that loses power takes it: its postmaster and every
        process of it (backends, WAL sender) killed (SIGKILL) at once. A postmaster killed alone
        leaves its backends running until they notice, long enough to commit a read begun
        after the kill."""
        import signal

        with open(os.path.join(self.data, "postmaster.pid")) as f:
            self.killed = int(f.readline())
        try:
            with open(f"/proc/{self.killed}/task/{self.killed}/children") as f:
                children = [int(pid) for pid in f.read().split()]
        except OSError:
            children = []
        os.kill(self.killed, signal.SIGKILL)  # first: it would restart a backend killed before it
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def wait_gone(self, timeout=30):
        """Until the killed postmaster is no process at all: until then (a zombie, until the
        system reaps it) its pid in postmaster.pid counts as a live server, and pg_ctl, postgres
        and pg_rewind refuse the data directory; a machine that lost power has none."""
        import time

        end = time.monotonic() + timeout
        while os.path.exists(f"/proc/{self.killed}"):
            assert time.monotonic() < end, f"postmaster {self.killed} not reaped"
            time.sleep(0.05)

    def _run(self, tool, *args):
        r = subprocess.run([os.path.join(self.bin, tool), *args], capture_output=True, text=True,
                           preexec_fn=self._as, timeout=120, cwd=self.dir)
        assert r.returncode == 0, f"{tool}: {r.stdout}{r.stderr}"

    def url(self, db="postgres", password=None):
        who = self.user + (f":{password}" if password else "")
        return f"postgresql://{who}@127.0.0.1:{self.port}/{db}"

    def database(self):
        """A fresh, empty database (a name no other test of the run has): its URL."""
        import secrets

        import psycopg

        name = f"audit_{secrets.token_hex(6)}"
        with psycopg.connect(self.url(), autocommit=True) as con:
            con.execute(f"CREATE DATABASE {name}".encode())
        return self.url(name)

    def stop(self):
        subprocess.run([os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-m", "fast", "-w",
                        "stop"], capture_output=True, preexec_fn=self._as, timeout=120,
                       cwd=self.dir)  # a killed one is stopped already
        shutil.rmtree(self.dir, ignore_errors=True)


def shared_server():
    """The run's one server, started by the first test that needs it (workers take turns at a
    lock in the run's directory; tests/conftest.py stops it when the run ends); a server of its
    own outside such a run."""
    import fcntl

    from kit.run import RUN_DIR

    run = os.environ.get(RUN_DIR)
    if not run:
        return PgServer().start()
    with open(os.path.join(run, "lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        port_file = os.path.join(run, "port")
        if os.path.exists(port_file):
            with open(port_file) as f:
                return PgServer(os.path.join(run, "server"), int(f.read()))
        where = os.path.join(run, "server")
        os.mkdir(where)
        server = PgServer(where).start()
        with open(port_file, "w") as f:
            f.write(str(server.port))
        return server


def stop_shared(run):
    """At the end of the run: the shared server stopped, if one was started."""
    if os.path.exists(os.path.join(run, "port")):
        PgServer(os.path.join(run, "server"), 0).stop()
    shutil.rmtree(run, ignore_errors=True)


class CuttingProxy:
    """A TCP relay between a client and a server (real sockets both ways) that, once armed, cuts
    every connection at the client's next COMMIT: before the server gets it ("before"), or once
    the server has had it and before its answer comes back ("after"): a network lost under a
    commit, either side of the moment it is decided. `then` is the cuts after that one, each
    (bytes the client sends, "before" or "after"), armed in turn."""

    def __init__(self, port):
        import socket
        import threading

        self.target = port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.armed = None  # None, "before" or "after"
        self.at = b"COMMIT\x00"  # what the armed cut waits for
        self.then = []
        self.cuts = 0
        self.refusing = False  # set: the server is away (every connection cut, new ones too)
        self.open = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, name):
        return f"postgresql://sabot@127.0.0.1:{self.port}/{name}"

    def _accept(self):
        import socket
        import threading

        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.refusing:
                self._cut(client)
                continue
            server = socket.create_connection(("127.0.0.1", self.target))
            self.open += [client, server]
            muted = threading.Event()  # set: nothing more of the server's reaches the client
            threading.Thread(target=self._up, args=(client, server, muted), daemon=True).start()
            threading.Thread(target=self._down, args=(server, client, muted),
                             daemon=True).start()

    def _cut(self, *socks):
        import socket

        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def _up(self, client, server, muted):
        import time

        while True:
            try:
                data = client.recv(65536)
            except OSError:
                return
            if not data:
                return self._cut(client, server)
            with self.lock:
                cut = self.armed if self.at in data else None
                if cut:
                    self.armed = None
                    self.cuts += 1
                    if self.then:
                        self.at, self.armed = self.then.pop(0)
            if cut == "before":
                return self._cut(client, server)
            if cut == "after":
                muted.set()
            try:
                server.sendall(data)
            except OSError:
                return
            if cut == "after":
                time.sleep(0.3)  # the server commits; its answer never comes back
                return self._cut(client, server)

    def _down(self, server, client, muted):
        while True:
            try:
                data = server.recv(65536)
                if not data or muted.is_set():
                    return self._cut(client, server)
                client.sendall(data)
            except OSError:
                return

    def away(self, gone=True):
        """The server away (every connection cut, new ones refused) or back."""
        self.refusing = gone
        if gone:
            self._cut(*self.open)
            self.open = []

    def close(self):
        self.listener.close()

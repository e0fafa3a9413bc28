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

    def __init__(self, dir=None, port=None):
        self.bin = pg_bin()
        self.dir = dir or tempfile.mkdtemp(prefix="sabot-pg-")
        self.port = port or free_port_for_tests()
        self.user = "sabot"
        self.data = os.path.join(self.dir, "data")
        self._as = None
        if os.geteuid() == 0:  # initdb refuses root: the server runs as nobody
            import pwd

            nobody = pwd.getpwnam("nobody")
            os.chown(self.dir, nobody.pw_uid, nobody.pw_gid)
            uid, gid = nobody.pw_uid, nobody.pw_gid

            def drop():
                os.setgroups([])
                os.setgid(gid)
                os.setuid(uid)
            self._as = drop

    def start(self):
        self._run("initdb", "-D", self.data, "-U", self.user, "--auth=trust", "-E", "UTF8",
                  "--no-instructions")
        # fsync off: these tests are of sabot's store, never of PostgreSQL's own crash safety (a
        # database copied per test is then a file copy, not a WAL flush and two checkpoints)
        self._run("pg_ctl", "-D", self.data, "-l", os.path.join(self.dir, "log"), "-w", "-t",
                  "60", "-o", f"-k {self.dir} -h 127.0.0.1 -p {self.port} -c fsync=off "
                  "-c full_page_writes=off", "start")
        return self

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
        self._run("pg_ctl", "-D", self.data, "-m", "fast", "-w", "stop")
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

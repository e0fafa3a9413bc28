"""A real PostgreSQL server for the tests: Debian's initdb and pg_ctl (`make test` installs
postgresql when missing) in a temporary directory, on loopback only, run as `nobody` where the
tests run as root (initdb refuses root). No mock stands for it."""

import glob
import itertools
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
    """initdb, then pg_ctl start on 127.0.0.1:PORT; database() makes a fresh database, its URL."""

    def __init__(self):
        self.bin = pg_bin()
        self.dir = tempfile.mkdtemp(prefix="sabot-pg-")
        self.port = free_port_for_tests()
        self.user = "sabot"
        self._names = itertools.count(1)
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
        data = os.path.join(self.dir, "data")
        self._run("initdb", "-D", data, "-U", self.user, "--auth=trust", "-E", "UTF8",
                  "--no-instructions")
        self._run("pg_ctl", "-D", data, "-l", os.path.join(self.dir, "log"), "-w", "-t", "60",
                  "-o", f"-k {self.dir} -h 127.0.0.1 -p {self.port}", "start")
        self.data = data

    def _run(self, tool, *args):
        r = subprocess.run([os.path.join(self.bin, tool), *args], capture_output=True, text=True,
                           preexec_fn=self._as, timeout=120, cwd=self.dir)
        assert r.returncode == 0, f"{tool}: {r.stdout}{r.stderr}"

    def url(self, db="postgres", password=None):
        who = self.user + (f":{password}" if password else "")
        return f"postgresql://{who}@127.0.0.1:{self.port}/{db}"

    def database(self):
        """A fresh, empty database: its URL."""
        import psycopg

        name = f"audit{next(self._names)}"
        with psycopg.connect(self.url(), autocommit=True) as con:
            con.execute(f"CREATE DATABASE {name}".encode())
        return self.url(name)

    def stop(self):
        self._run("pg_ctl", "-D", self.data, "-m", "fast", "-w", "stop")
        shutil.rmtree(self.dir, ignore_errors=True)

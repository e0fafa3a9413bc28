"""docs/FLOOR.md, the floor's runbook, run as written: its blocks read out of the document (each
after a `<!-- runbook: NAME -->` line) and run with bash on stand-ins for its machines, two of
them real PostgreSQL servers on loopback (tests/test_floor_runbook.py, make bench's floor).

A machine (Host) is a directory: a home, where its blocks run, and a bin first on PATH. The
settings block is the one thing not as written: each machine gets it with the values pointing at
the test's servers (DB1, DB2 their loopback ports; DATA and CONF its own server's). What a test
machine cannot do as written is done by three stand-ins in that bin, and nothing else:
- apt-get: the packages are on the test machine already (`make test` installs postgresql), and
  the cluster Debian's postgresql package makes and starts is made and started by the test.
- systemctl: `postgresql@VERSION-main` is the host's test server, started and stopped with
  pg_ctl as Debian's unit does with pg_ctlcluster (mask too: a masked unit does not start).
- sudo: `sudo -u postgres CMD` runs CMD as the user the test's server runs as (nobody where the
  tests run as root, since initdb refuses root; the tests' own user otherwise), with the host's
  postgres home and the server's socket: the real postgres account's home is the machine's own,
  which a test must not write.
`sabot` on PATH is this checkout's (what the runbook's install block links to /usr/local/bin)."""

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

from kit.base import ROOT
from kit.pg import PgServer, pg_bin

DOC = ROOT / "docs" / "FLOOR.md"
BLOCK = re.compile(r"^<!-- runbook: ([\w-]+) -->\n```[^\n]*\n(.*?)^```", re.S | re.M)
# every setting the settings block may name; FLOOR and SERVERS, made of the others, as written
SETTINGS = {"DB1", "DB2", "DB_NET", "FLOOR_NET", "PG_VERSION", "DATA", "CONF", "FLOOR",
            "SERVERS"}
# what the blocks ask for (read -rsp '...' NAME), as the test answers
PASSWORDS = {"SABOT_PW": "it-Floor-pw-1", "REPLICATOR_PW": "repl-Floor-pw-2",
             "PIT1_PW": "pit1-Floor-pw-3", "PIT2_PW": "pit2-Floor-pw-4"}


def blocks():
    """name -> the block's text, as docs/FLOOR.md has it."""
    found = {}
    for name, body in BLOCK.findall(DOC.read_text(encoding="utf-8")):
        assert name not in found, f"two runbook blocks named {name}"
        found[name] = body
    return found


def asked(block):
    """The passwords a block asks for, in order (its `read -rsp '...' NAME` lines)."""
    return re.findall(r"\bread -rsp '[^']*' (\w+)", block)


class DebianCluster(PgServer):
    """A test server laid out as Debian lays out a cluster: its configuration files apart from
    the data directory (the server started with its config_file, which names the data directory,
    pg_hba.conf and pg_ident.conf), so a copy of the data directory does not carry them. TCP
    connections need a password (scram-sha-256), and none is admitted but by the lines the
    runbook adds to pg_hba.conf; the local socket is trusted, as Debian's peer authentication
    trusts the postgres user on the machine."""

    def __init__(self, dir, fsync=False):
        os.makedirs(dir)
        super().__init__(dir=dir, fsync=fsync, user="postgres")
        self.etc = os.path.join(dir, "etc")
        self.conf = os.path.join(self.etc, "postgresql.conf")

    def initdb(self):
        super().initdb("--auth-local=trust", "--auth-host=scram-sha-256")
        os.makedirs(self.etc)
        for name in ("postgresql.conf", "pg_hba.conf", "pg_ident.conf"):
            shutil.move(os.path.join(self.data, name), os.path.join(self.etc, name))
        with open(self.conf, "a") as f:
            f.write(f"data_directory = '{self.data}'\nhba_file = '{self.etc}/pg_hba.conf'\n"
                    f"ident_file = '{self.etc}/pg_ident.conf'\n")
        hba = os.path.join(self.etc, "pg_hba.conf")
        with open(hba) as f:
            kept = [line for line in f if not line.startswith("host")]
        with open(hba, "w") as f:
            f.writelines(kept)
        for path in (self.etc, *(os.path.join(self.etc, n) for n in os.listdir(self.etc))):
            os.chown(path, self.uid, self.gid)

    def options(self):
        # full_page_writes stays on (PostgreSQL's default): pg_rewind needs it
        return (f"-c config_file={self.conf} -k {self.dir} -h 127.0.0.1 -p {self.port}"
                + ("" if self.fsync else " -c fsync=off"))

    def address(self):
        return f"127.0.0.1:{self.port}"

    def admin(self, db="postgres"):
        """The test's own way in, as Debian's postgres user: the local socket, its superuser."""
        return f"host={self.dir} port={self.port} user=postgres dbname={db}"


def _script(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o755)


class Host:
    """One machine of the runbook: `home` (its user's: root's on a database server), where its
    blocks run; `bin`, first on its PATH, with the stand-ins; a database server's `server`."""

    def __init__(self, root, name, server=None):
        self.name = name
        self.dir = os.path.join(root, name)
        self.home = os.path.join(self.dir, "home")
        self.bin = os.path.join(self.dir, "bin")
        for d in (self.home, self.bin):
            os.makedirs(d, exist_ok=True)
        self.server = server
        _script(os.path.join(self.bin, "sabot"),
                f"#!/bin/sh\nPYTHONPATH={shlex.quote(str(ROOT / 'host_tools'))} exec "
                f"{shlex.quote(sys.executable)} -m sabot \"$@\"\n")
        _script(os.path.join(self.bin, "apt-get"),
                "#!/bin/sh\n# stand-in (tests/kit/runbook.py): the packages are here already\n"
                "echo \"apt-get stand-in: $*: installed on this machine already\" >&2\n")
        if server is not None:
            self.postgres_home = os.path.join(self.dir, "postgres")
            os.makedirs(self.postgres_home)
            os.chown(self.postgres_home, server.uid, server.gid)
            self._server_stand_ins()

    def _server_stand_ins(self):
        s, q = self.server, shlex.quote
        drop = (f"setpriv --reuid={s.uid} --regid={s.gid} --clear-groups --"
                if os.geteuid() == 0 else "")
        _script(os.path.join(self.bin, "sudo"), f"""#!/bin/sh
# stand-in (tests/kit/runbook.py): sudo -u postgres CMD, as the test's server's own user
if [ "$1" != -u ] || [ "$2" != postgres ] || [ $# -lt 3 ]; then
    echo "sudo stand-in: only sudo -u postgres CMD" >&2; exit 2
fi
shift 2
export HOME={q(self.postgres_home)} PGHOST={q(s.dir)} PGPORT={s.port} PGUSER=postgres
export PATH={q(self.bin)}:/usr/bin:/bin
exec {drop} "$@"
""")
        pg_ctl = q(os.path.join(s.bin, "pg_ctl"))
        unit = f"postgresql@{pg_version()}-main"
        masked = q(os.path.join(self.dir, "masked"))
        _script(os.path.join(self.bin, "systemctl"), f"""#!/bin/sh
# stand-in (tests/kit/runbook.py): {unit} is this host's test server, run with pg_ctl
set -e
action=$1; shift
now=; if [ "$1" = --now ]; then now=1; shift; fi
if [ "$1" != {unit} ] || [ $# -ne 1 ]; then echo "systemctl stand-in: only {unit}" >&2; exit 2; fi
pgctl() {{ {drop} {pg_ctl} -D {q(s.data)} "$@"; }}
stop() {{ if pgctl status >/dev/null 2>&1; then pgctl -m fast -w -t 60 stop >/dev/null; fi; }}
start() {{
    if [ -e {masked} ]; then echo "Failed to start {unit}: Unit {unit} is masked." >&2; exit 1; fi
    pgctl status >/dev/null 2>&1 || pgctl -l {q(s.log)} -w -t 60 -o {q(s.options())} start \\
        >/dev/null || {{ tail -20 {q(s.log)} >&2; exit 1; }}
}}
case $action in
    start) start ;;
    stop) stop ;;
    restart) stop; start ;;
    mask) touch {masked}; if [ -n "$now" ]; then stop; fi ;;
    unmask) rm -f {masked} ;;
    *) echo "systemctl stand-in: no $action" >&2; exit 2 ;;
esac
""")

    def env(self):
        return {"PATH": f"{self.bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "HOME": self.home, "LANG": "C.UTF-8", "USER": os.environ.get("USER", "root")}


def pg_version():
    return os.path.basename(os.path.dirname(pg_bin()))


class Floor:
    """db1 and db2 (each a DebianCluster, made and started as Debian's postgresql package does),
    IT's workstation and pit 1's host; run() runs a block of the runbook on one of them."""

    def __init__(self, fsync=False):
        self.root = tempfile.mkdtemp(prefix="sabot-floor-")
        os.chmod(self.root, 0o711)  # the servers' own user passes through
        self.hosts = {}
        self.said = []  # (host, block and its time, what it printed): for a failing test
        try:
            for name in ("db1", "db2"):
                d = os.path.join(self.root, name)
                os.makedirs(d)
                os.chmod(d, 0o711)
                server = DebianCluster(os.path.join(d, "pg"), fsync)
                server.initdb()
                server.launch()
                self.hosts[name] = Host(self.root, name, server)
            for name in ("it", "pit1"):
                self.hosts[name] = Host(self.root, name)
        except BaseException:
            self.stop()
            raise
        self.blocks = blocks()

    def server(self, name):
        return self.hosts[name].server

    def settings(self, host, swapped=False):
        """The settings block as `host` gets it: each setting's value the test's (DB1 and DB2
        exchanged when `swapped`, as the runbook says for the second failover), comments,
        FLOOR and SERVERS as written."""
        db1, db2 = (self.server(n).address() for n in ("db1", "db2"))
        if swapped:
            db1, db2 = db2, db1
        own = self.hosts[host].server
        values = {"DB1": db1, "DB2": db2, "DB_NET": "127.0.0.1/32", "FLOOR_NET": "127.0.0.1/32",
                  "PG_VERSION": pg_version(),
                  "DATA": own.data if own else "/nonexistent/data",
                  "CONF": own.conf if own else "/nonexistent/postgresql.conf"}
        lines, named = [], set()
        for line in self.blocks["settings"].splitlines():
            m = re.match(r"(\w+)=(\S+)(.*)", line)
            assert m, f"a settings line that sets nothing: {line!r}"
            named.add(m.group(1))
            if m.group(1) in values:
                line = f"{m.group(1)}={shlex.quote(values[m.group(1)])}{m.group(3)}"
            lines.append(line)
        assert named == SETTINGS, f"the settings block names {sorted(named ^ SETTINGS)} otherwise"
        return "\n".join(lines) + "\n"

    def run(self, host, name, swapped=False, check=True):
        """Block `name` run with bash on `host` (stopping at its first failing line), the
        passwords it asks for on its standard input. Its CompletedProcess."""
        text = self.blocks[name]
        answers = "".join(PASSWORDS[n] + "\n" for n in asked(text))
        h = self.hosts[host]
        t = time.monotonic()
        r = subprocess.run(["bash", "-c", "set -euo pipefail\n" + self.settings(host, swapped)
                            + text], input=answers, env=h.env(), cwd=h.home,
                           capture_output=True, text=True, timeout=180)
        self.said.append((host, f"{name} ({time.monotonic() - t:.2f} s)", r.stdout + r.stderr))
        if check:
            assert r.returncode == 0, (f"block {name} on {host}: exit {r.returncode}\n{r.stdout}"
                                       f"{r.stderr}{self.server_logs()}")
        return r

    def shell(self, host, script):
        """A script of the test's own (no block of the runbook) on `host`, with its settings:
        its CompletedProcess."""
        h = self.hosts[host]
        return subprocess.run(["bash", "-c", self.settings(host) + script], env=h.env(),
                              cwd=h.home, capture_output=True, text=True, timeout=180)

    def server_logs(self, lines=15):
        """The end of each server's log, for a failing test's message."""
        out = ""
        for name in ("db1", "db2"):
            try:
                with open(self.server(name).log) as f:
                    out += f"\n--- {name}'s log:\n" + "".join(f.readlines()[-lines:])
            except OSError:
                pass
        return out

    def set_up(self):
        """Sections 1 to 3 as the runbook gives them: db1 the primary, db2 its synchronous
        standby, IT's password in place."""
        for h in ("db1", "db2"):
            self.run(h, "install-db")
            said = self.run(h, "servers").stdout.split()
            assert said == ["t"], f"pg_hba.conf's lines on {h}: {said}"
        self.run("db1", "primary")
        self.run("db2", "standby")
        self.run("it", "it-password")
        self.run("it", "sync")

    def set_up_pits(self):
        self.run("db1", "pit-roles")
        self.run("it", "pit-shoes")
        self.run("pit1", "pit-password")

    def pit_url(self):
        """The --db URL the serve block gives pit 1's serve (role pit1), the settings expanded
        as on pit 1's host."""
        urls = re.findall(r'--db "(postgresql://pit1@[^"]+)"', self.blocks["serve"])
        assert len(urls) == 1, urls
        r = subprocess.run(["bash", "-c", self.settings("pit1") + f'printf %s "{urls[0]}"'],
                           capture_output=True, text=True, check=True)
        return r.stdout

    def pgpass(self, host):
        return os.path.join(self.hosts[host].home, ".pgpass")

    def url(self, db, role="sabot"):
        """A URL of both servers, as the runbook's: the primary, whichever it is now."""
        a, b = (self.server(n).address() for n in ("db1", "db2"))
        return f"postgresql://{role}@{a},{b}/{db}?target_session_attrs=read-write"

    def database(self):
        """A fresh database on the primary (db1), owned by sabot: its URL (both servers)."""
        import secrets

        import psycopg

        name = f"bench_{secrets.token_hex(6)}"
        with psycopg.connect(self.server("db1").admin(), autocommit=True) as con:
            con.execute(f"CREATE DATABASE {name} OWNER sabot".encode())
        return self.url(name)

    def log(self):
        return "\n".join(f"--- {name} on {host}:\n{text}" for host, name, text in self.said)

    def stop(self):
        for h in self.hosts.values():
            if h.server is not None:
                h.server.stop()
        shutil.rmtree(self.root, ignore_errors=True)

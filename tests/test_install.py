"""docs/INSTALL.md, run as written: the package built by `make dist`, installed by pipx into a
fresh environment of its own, then `sabot serve` and the witness started as their systemd units
start them, under their settings files, and a pit's shoe recorded through the installed copy, no
repository on its path (the page's "How this page is tested" says what is a stand-in)."""

import json
import os
import re
import stat
import subprocess
import sys
import time
import urllib.request

import pytest

from kit import ROOT, SABOT, SIGN_MS, free_port_for_tests

pytestmark = [pytest.mark.board, pytest.mark.long]

DOC = ROOT / "docs" / "INSTALL.md"
BLOCK = re.compile(r"^<!-- install: ([\w-]+) -->\n```[^\n]*\n(.*?)^```", re.S | re.M)
ORDER = ["settings", "build", "install", "users", "files", "serve-settings", "serve-unit",
         "witness", "backup", "restore", "upgrade"]
SHOE_ID = "0x5ab00001"
LOGFMT = re.compile(r"^time=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d "
                    r"level=(critical|error|warning|notice|info) program=(serve|witness) "
                    r'msg=("([^"\\]|\\.)*"|\S+)$')

# what a test machine cannot do as written (the page names each)
STAND_INS = {
    "apt-get": "#!/bin/sh\nexit 0\n",
    "useradd": '#!/bin/sh\necho "useradd $*" >> "$TEST_RECORD"\n',
    "chown": '#!/bin/sh\necho "chown $*" >> "$TEST_RECORD"\n',
    # install -o/-g: the owner recorded, the rest done by the real install
    "install": '#!/bin/bash\nargs=()\nwhile [ $# -gt 0 ]; do case "$1" in\n'
               '  -o|-g) echo "install $1 $2" >> "$TEST_RECORD"; shift 2;;\n'
               '  *) args+=("$1"); shift;;\nesac; done\nexec /usr/bin/install "${args[@]}"\n',
    "systemctl": f'#!/bin/sh\nexec {sys.executable} {ROOT}/tests/kit/systemctl.py "$@"\n',
}


def blocks():
    found = BLOCK.findall(DOC.read_text(encoding="utf-8"))
    assert [n for n, _ in found] == ORDER, "the page's install blocks, in this order"
    return dict(found)


def settings_names(block):
    names = set(re.findall(r"^(?:export )?(\w+)=", block, re.M))
    names |= set(re.findall(r"\b(PIPX_\w+)=", block))
    return names


def get(url, timeout=3):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def wait_for(what, predicate, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = predicate()
        if got:
            return got
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def test_install_as_documented(tmp_path):
    doc = blocks()
    t = tmp_path
    for d in ("bin", "units", "systemd", "varlib", "etc", "copied", "home", "dist", "bench"):
        (t / d).mkdir()
    for name, text in STAND_INS.items():
        (t / "bin" / name).write_text(text)
        (t / "bin" / name).chmod(0o755)
    os.symlink(ROOT / ".venv" / "bin" / "pipx", t / "bin" / "pipx")
    shoe_port, listen_port, witness_port = (free_port_for_tests() for _ in range(3))
    varlib = t / "varlib"
    ours = {"WHEEL": None, "WITNESS_STATE": varlib / "sabot-witness", "PIT": "pit-1",
            "DB": "pit.db", "SHOES": f"socket://127.0.0.1:{shoe_port}={SHOE_ID}",
            "LISTEN": f"127.0.0.1:{listen_port}", "WITNESS_LISTEN": f"127.0.0.1:{witness_port}",
            "ETC": t / "etc", "STATE": varlib / "sabot",
            "UNITS": t / "units", "BACKUPS": t / "backups", "PIPX_HOME": t / "pipx",
            "PIPX_BIN_DIR": t / "localbin"}
    assert settings_names(doc["settings"]) == set(ours), "the page's settings, each given here"
    # the repository's own tools are not on this machine's PATH: only what pipx installs
    # the machine's own environment (its package index, certificates and caches), but a PATH of
    # the test machine's: the checkout's tools are not on it, only what pipx installs
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env.update(PATH=f"{t / 'bin'}:{t / 'localbin'}:/usr/sbin:/usr/bin:/sbin:/bin",
               TEST_RECORD=str(t / "record"), TEST_UNITS=str(t / "units"),
               TEST_SYSTEMD=str(t / "systemd"), TEST_VARLIB=str(varlib),
               SABOT_SIGN_MS=str(SIGN_MS), DIST=str(t / "dist"), DIST_STAGE=str(t / "stage"))

    def run(name, cwd=t / "home"):
        script = f"set -euo pipefail\n{settings}\n{doc[name]}"
        r = subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0, f"INSTALL.md block {name} failed:\n{r.stdout}\n{r.stderr}"
        return r.stdout + r.stderr

    # 1. the package, built as the page says (into the test's DIST, not the checkout's dist/)
    settings = ""
    out = run("build", cwd=ROOT)
    wheels = list((t / "dist").glob("sabot-*-cp311-cp311-linux_x86_64.whl"))
    assert len(wheels) == 1 and list((t / "dist").glob("sabot-*.tar.gz")), out
    ours["WHEEL"] = wheels[0]
    settings = "\n".join(f"{k}={str(v)!r}" for k, v in ours.items()
                         if not k.startswith("PIPX")) + \
        f"\nexport PIPX_HOME={ours['PIPX_HOME']} PIPX_BIN_DIR={ours['PIPX_BIN_DIR']}\n"

    # 2. installed: the command pipx put on PATH is the wheel's, in an environment of its own
    out = run("install")
    assert re.search(r"^sabot \d+\.\d+\.\d+ \(firmware source sha256", out, re.M), out
    # the firmware it carries, as the checkout's: what an engineer compares with a release
    ours_version = subprocess.run([*SABOT, "--version"], capture_output=True, text=True,
                                  check=True).stdout.strip()
    assert ours_version in out, (ours_version, out)
    installed = (t / "localbin" / "sabot").resolve()
    assert str(installed).startswith(str(t / "pipx")), installed
    assert not str(installed).startswith(str(ROOT))
    python = installed.with_name("python")
    r = subprocess.run([python, "-c", "from sabot import paths; from sabot.game import edges; "
                        "print(paths.INSTALLED, paths.ROOT, edges.kernel() is not None)"],
                       capture_output=True, text=True, cwd=t, env=env, check=True)
    is_installed, tree, kernel = r.stdout.split()
    assert is_installed == "True" and tree.startswith(str(t / "pipx")), r.stdout
    assert kernel == "True", "the wheel carries the exact-edge kernel, compiled"
    _pinned_and_no_firmware_tools(t, env, installed, python)

    # a bench technician's machine: the package with its firmware tools, which builds a Pico's
    # firmware from the wheel's own tree and provisions and runs the pit's (virtual) shoe
    bench_env = dict(env, PIPX_HOME=str(t / "bench" / "pipx"),
                     PIPX_BIN_DIR=str(t / "bench" / "bin"))
    constraints = f"--constraint {t / 'dist' / 'sabot-constraints.txt'}"
    subprocess.run(["pipx", "install", f"--pip-args={constraints}", f"{ours['WHEEL']}[firmware]"],
                   env=bench_env, cwd=t,
                   check=True, capture_output=True, timeout=300)
    bench = str(t / "bench" / "bin" / "sabot")
    again = subprocess.run([bench, "--version"], capture_output=True, text=True, env=env)
    assert again.stdout.strip() == ours_version, "each install of the wheel says the same"
    made = subprocess.run([bench, "firmware", "--board", "rpi_pico"], cwd=t / "bench", env=env,
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 0 and "MANIFEST sha256" in made.stdout + made.stderr, made
    assert (t / "bench" / "build").is_dir(), "built where it ran, not in the package"
    copied = t / "copied"
    for argv in (["provision", "--key", "pit1.pem", "--flash", "shoe1", "--table", "bac1",
                  "--shoe-id", SHOE_ID, "--registry", "floor-shoes.json"],
                 ["shuffle", "--seed", "1", "-o", "s1.txt"]):
        subprocess.run([bench, *argv], cwd=copied, env=env, check=True, capture_output=True,
                       timeout=120)
    subprocess.run([bench, "accounts", "add", "--accounts", "pit1-accounts.json", "--name",
                    "sam", "--role", "supervisor", "--password-stdin"], input="a-Long-pass-1\n",
                   cwd=copied, env=env, check=True, capture_output=True, text=True)
    board = subprocess.Popen([bench, "board", "--listen", f"127.0.0.1:{shoe_port}", "--flash",
                              "shoe1", "--shoe", "s1.txt"], cwd=copied, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _services(run, env, t, ours, listen_port)
    finally:
        for unit in ("sabot-serve", "sabot-witness"):
            subprocess.run(["systemctl", "stop", unit], env=env, capture_output=True)
        board.terminate()
        board.wait(10)


def _services(run, env, t, ours, listen_port):
    state, record = ours["STATE"], t / "record"
    run("users")
    assert "useradd --system" in record.read_text() and state.is_dir()
    run("files", cwd=t / "copied")
    assert not (state / ".pgpass").exists(), "a SQLite pit has no database password"
    for name in ("pit1.pem", "floor-shoes.json", "pit1-accounts.json"):
        assert stat.S_IMODE((state / name).stat().st_mode) == 0o600, name
    assert "install -o sabot" in record.read_text()
    run("serve-settings")
    assert (ours["ETC"] / "serve.toml").exists()

    # 4. the unit: checked by the real systemd-analyze, started as systemd starts it
    out = run("serve-unit")
    unit = (ours["UNITS"] / "sabot-serve.service").read_text()
    exec_start = re.search(r"^ExecStart=(.*)$", unit, re.M)[1]
    # (this test machine's Python may be under a home directory, as no pit host's is: said)
    from sabot.cli.floor import hidden_from_service

    hidden = hidden_from_service(exec_start.split()[0])
    assert sorted(out.strip().splitlines()) == sorted([
        *(f"sabot unit: warning: {hidden[0]} is under a home directory, which the unit hides "
          "from its service (ProtectHome=true, user sabot): install sabot outside any home "
          "(docs/INSTALL.md) before using this unit" for _ in hidden[:1]), "active"]), out
    assert exec_start.startswith(str(t / "pipx")) and "--config " in exec_start, exec_start
    for hardening in ("ProtectSystem=strict", "NoNewPrivileges=true", "User=sabot",
                      "Type=notify", "WatchdogSec=30"):
        assert hardening in unit
    base = f"http://127.0.0.1:{listen_port}"

    def rounds():
        code, tables = get(f"{base}/api/tables")
        return code == 200 and sum(x.get("round") or 0 for x in tables)

    wait_for("the shoe's first rounds stored by the service", rounds, 60)
    code, health = get(f"{base}/api/health")
    assert code == 200 and health["recording"] is True, health
    notes = (t / "systemd" / "sabot-serve.notify").read_text().splitlines()
    assert notes[0].startswith("READY=1|STATUS=http://"), notes
    assert "WATCHDOG=1" in notes, "the watchdog is pinged"
    assert any(str(state / "pit.db") == str(p) for p in state.iterdir())

    # 5. the witness, as a service of its own
    run("witness", cwd=t / "copied")
    for name in ("sabot-serve", "sabot-witness"):  # each hardened: rated OK or better
        rated = subprocess.run(["systemd-analyze", "security", "--offline=true",
                                str(ours["UNITS"] / f"{name}.service")], capture_output=True,
                               text=True, timeout=60).stdout
        level = re.search(r"Overall exposure level for \S+: ([\d.]+) (\w+)", rated)
        assert level and float(level[1]) <= 2.0 and level[2] == "OK", (name, rated[-300:])
    assert (ours["ETC"] / "regulator.vkey").read_text().startswith("sabot.witness/")
    wnotes = (t / "systemd" / "sabot-witness.notify").read_text()
    assert wnotes.startswith(f"READY=1|STATUS=http://{ours['WITNESS_LISTEN']}/add-checkpoint"), \
        wnotes

    # 7. a SQLite pit's backup, taken while serve runs, and checked
    seen = [0]

    def settled():  # the shoe dealt out: no new round for two seconds
        now = rounds()
        done = now == seen[0] and now > 0
        seen[0] = now
        time.sleep(2)
        return now if done else 0

    before = wait_for("the whole shoe stored", settled, 120)
    _backup_and_restore(run, ours, before, base, rounds)

    # 8. upgraded in place: the restart is clean, the new serve ready, and what was stored kept
    run("upgrade")
    assert (t / "systemd" / "sabot-serve.notify").read_text().startswith("READY=1|")
    wait_for("the restarted serve's pages to say it records",
             lambda: get(f"{base}/api/health")[0] == 200, 30)
    assert rounds() == before
    subprocess.run(["systemctl", "stop", "sabot-serve"], env=env, check=True, timeout=60)
    assert (t / "systemd" / "sabot-serve.exit").read_text() == "0", "a clean stop"
    journal = (t / "systemd" / "sabot-serve.journal").read_text().splitlines()
    bad = [line for line in journal if not LOGFMT.match(line)]
    assert journal and not bad, f"lines that are not logfmt records: {bad[:3]}"
    assert sum("msg=\"served:" in line for line in journal) == 3, "each stop's summary logged"


def _backup_and_restore(run, ours, before, base, rounds):
    """7. A SQLite pit's backup taken while serve runs, checked, with the files beside the
    store; then restored in the store's place as the page says."""
    out = run("backup")
    assert re.search(rf"^ok: \d+ frames, {before} rounds", out, re.M), out
    assert len(list(ours["BACKUPS"].glob("pit-*.db"))) == 1
    (files,) = ours["BACKUPS"].glob("pit-files-*.tar.gz")  # the key, registry, accounts, settings
    assert stat.S_IMODE(files.stat().st_mode) == 0o600
    import tarfile

    with tarfile.open(files) as tar:
        kept = {os.path.basename(n) for n in tar.getnames()}
    assert kept == {"pit1.pem", "floor-shoes.json", "pit1-accounts.json", "serve.toml"}, kept

    # the copy restored in the store's place: serve stopped first (its summary in the journal,
    # counted below), the copy checked,
    # and serve started on it again, recording, with every round the copy holds
    run("restore")
    wait_for("the restored serve's pages to say it records",
             lambda: get(f"{base}/api/health")[0] == 200, 30)
    assert rounds() == before


def _pinned_and_no_firmware_tools(t, env, installed, python):
    """The pit host's install: every package at the version the constraints name, and no
    firmware tools, which a command needing them says how to get."""
    # every package installed at the version the constraints (the tests' venv) name
    pinned = dict(line.split("==") for line in
                  (t / "dist" / "sabot-constraints.txt").read_text().split())
    got = json.loads(subprocess.run(
        [python, "-c", "import json; from importlib import metadata; print(json.dumps({"
         "d.metadata['Name'].lower().replace('_', '-'): d.version for d in "
         "metadata.distributions()}))"], capture_output=True, text=True, check=True).stdout)
    wrong = {n: (v, pinned[n]) for n, v in got.items() if n in pinned and pinned[n] != v}
    assert not wrong and {"anyio", "h11", "cffi", "psycopg-binary"} <= set(got), (wrong, got)
    # a pit host's install has no firmware tools: a command that needs them says how to get
    # them, in one line, and leaves nothing behind (no release or command key made for nothing)
    empty = t / "home" / "no-tools"
    empty.mkdir()
    for argv in (["firmware", "--board", "virtual"], ["demo"]):
        r = subprocess.run([installed, *argv], cwd=empty, env=env, capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 2 and "[firmware]" in r.stderr, r.stderr
        assert r.stderr.count("\n") == 1 and list(empty.iterdir()) == [], r.stderr

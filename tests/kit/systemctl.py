#!/usr/bin/env python3
"""A stand-in for systemctl on a test machine (tests/test_install.py): it runs a unit's own
ExecStart as written, as systemd would for Type=notify, and nothing more.

- `start`/`enable --now`/`restart` UNIT: a supervisor process binds a notify socket, starts the
  ExecStart command in the unit's WorkingDirectory (its /var/lib/ under $TEST_VARLIB, the test's
  stand-in for /var/lib) with NOTIFY_SOCKET, WATCHDOG_USEC (from WatchdogSec=), WATCHDOG_PID and
  HOME set, standard error to the unit's journal file, and records every notification; the
  command returns 0 once the service said READY=1, 1 with the journal's tail when it exits first
  or TimeoutStartSec= passes.
- `stop` UNIT: SIGTERM, then waits TimeoutStopSec= for it to end (1 when it did not).
- `is-active`, `cat`, `daemon-reload`: as systemctl's.
The unit files are read from $TEST_UNITS; each unit's state (pid, notifications, journal, exit
status) is kept in $TEST_SYSTEMD/UNIT.*."""

import os
import shlex
import signal
import socket
import subprocess
import sys
import time

UNITS, STATE, VARLIB = (os.environ["TEST_UNITS"], os.environ["TEST_SYSTEMD"],
                        os.environ["TEST_VARLIB"])


def unit_file(name):
    return os.path.join(UNITS, name if name.endswith(".service") else name + ".service")


def settings(name):
    """Service-section keys: the last value of each (DeviceAllow and the like are not used)."""
    out, section = {}, None
    with open(unit_file(name)) as f:
        for line in f:
            line = line.strip()
            if line.startswith("["):
                section = line
            elif "=" in line and not line.startswith("#") and section == "[Service]":
                key, value = line.split("=", 1)
                out[key] = value
    return out


def state(name, what):
    return os.path.join(STATE, f"{name.removesuffix('.service')}.{what}")


def mapped(path):
    return VARLIB + path[len("/var/lib"):] if path.startswith("/var/lib/") else path


def pid_of(name):
    try:
        pid = int(open(state(name, "pid")).read())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


def supervise(name):
    """The supervisor: runs the service and records its notifications until it ends."""
    s = settings(name)
    sock_path = state(name, "notify.sock")
    if os.path.exists(sock_path):
        os.unlink(sock_path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(sock_path)
    sock.settimeout(0.2)
    cwd = mapped(s.get("WorkingDirectory", "/"))
    watchdog = s.get("WatchdogSec")

    def environment():
        os.environ.update(NOTIFY_SOCKET=sock_path, HOME=cwd, WATCHDOG_PID=str(os.getpid()))
        if watchdog:
            os.environ["WATCHDOG_USEC"] = str(int(float(watchdog) * 1e6))

    with open(state(name, "journal"), "ab") as journal:
        argv = [w.replace("%%", "%") for w in shlex.split(s["ExecStart"])]  # systemd's %%
        child = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL,
                                 stdout=journal, stderr=journal, preexec_fn=environment)
    with open(state(name, "pid"), "w") as f:
        f.write(str(child.pid))
    with open(state(name, "notify"), "a") as notes:
        while child.poll() is None:
            try:
                notes.write(sock.recv(4096).decode().replace("\n", "|") + "\n")
                notes.flush()
            except TimeoutError:
                pass
    with open(state(name, "exit"), "w") as f:
        f.write(str(child.returncode))


def notes(name):
    try:
        return open(state(name, "notify")).read().splitlines()
    except OSError:
        return []


def start(name):
    if pid_of(name):
        return 0
    for what in ("notify", "exit", "pid"):
        if os.path.exists(state(name, what)):
            os.unlink(state(name, what))
    s = settings(name)
    subprocess.Popen([sys.executable, __file__, "_supervise", name], start_new_session=True,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)
    end = time.monotonic() + float(s.get("TimeoutStartSec", "90"))
    while time.monotonic() < end:
        if any("READY=1" in n.split("|") for n in notes(name)):
            return 0
        if os.path.exists(state(name, "exit")):
            break
        time.sleep(0.1)
    print(f"Job for {name} failed. Its journal:", file=sys.stderr)
    try:
        sys.stderr.write("".join(open(state(name, "journal")).readlines()[-10:]))
    except OSError:
        pass
    stop(name)
    return 1


def stop(name):
    pid = pid_of(name)
    if pid is None:
        return 0
    os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + float(settings(name).get("TimeoutStopSec", "90"))
    while time.monotonic() < end:
        if os.path.exists(state(name, "exit")):
            return 0
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)
    print(f"{name}: did not stop within TimeoutStopSec, killed", file=sys.stderr)
    return 1


def main(argv):
    words = [w for w in argv if not w.startswith("-")]
    verb, names = words[0], words[1:]
    if verb == "_supervise":
        supervise(names[0])
        return 0
    if verb == "daemon-reload":
        return 0
    if verb == "cat":
        sys.stdout.write(open(unit_file(names[0])).read())
        return 0
    if verb == "is-active":
        up = pid_of(names[0]) is not None and not os.path.exists(state(names[0], "exit"))
        print("active" if up else "inactive")
        return 0 if up else 3
    if verb in ("start", "stop", "restart") or (verb == "enable" and "--now" in argv):
        code = 0
        for name in names:
            if verb in ("stop", "restart"):
                code |= stop(name)
            if verb != "stop":
                code |= start(name)
        return code
    if verb == "enable":
        return 0
    print(f"systemctl stand-in: {verb} is not one the test machine does", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

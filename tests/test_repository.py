"""What the repository itself promises: no private key is ever picked up by `git add`."""

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.board  # runs git
@pytest.mark.parametrize("name", ["sabot-release.pem", "sabot.key", "host.pem",
                                  "keys/command.key", "host_tools/release.pem"])
def test_private_keys_are_ignored_wherever_a_command_writes_them(name):
    r = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "--no-index", name],
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == name, (name, r.stdout, r.stderr)


@pytest.mark.board  # runs git
def test_a_shoe_file_is_not_ignored():
    r = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "--no-index", "shoe.txt"],
                       capture_output=True, text=True)
    assert r.returncode == 1, r.stdout


def test_the_package_installs_the_versions_the_tests_run():
    """The wheel's dependencies are requirements.txt's pins, each exactly: a pit host installed
    from it runs what `make test` ran, whenever it is installed."""
    import re
    import tomllib

    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        m = re.match(r"([A-Za-z0-9_.-]+)==(\S+)", line)
        if m:
            pins[m[1].lower()] = m[2]
    project = tomllib.loads((ROOT / "host_tools" / "pyproject.toml").read_text())["project"]
    wanted = project["dependencies"] + project["optional-dependencies"]["firmware"]
    for dependency in wanted:
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)(\[\w+\])?==(\S+)", dependency)
        assert m, f"{dependency}: not pinned to one version"
        names = [m[1].lower()] + ([f"{m[1].lower()}-{m[2][1:-1]}"] if m[2] else [])
        for name in names:  # psycopg[binary] pins psycopg and psycopg-binary
            assert pins.get(name) == m[3], f"{name}: {m[3]} here, {pins.get(name)} tested"

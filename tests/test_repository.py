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

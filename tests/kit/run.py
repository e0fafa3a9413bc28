"""What the tests of one run share across their workers: a directory the controller makes
(tests/conftest.py), where the first worker that needs a thing makes it, under a lock, and the
others use it: the PostgreSQL server (kit/pg.py), the firmware build (built_tree)."""

import fcntl
import json
import os
import shutil
import tempfile
from pathlib import Path

RUN_DIR = "SABOT_TEST_RUN_DIR"


def shared(name, make):
    """The run's `name` directory, made once by make(path) (a directory of its own outside such
    a run)."""
    run = os.environ.get(RUN_DIR)
    if not run:
        path = Path(tempfile.mkdtemp(prefix=f"sabot-{name}-"))
        make(path)
        return path
    path = Path(run) / name
    with open(f"{path}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(f"{path}.done"):
            shutil.rmtree(path, ignore_errors=True)
            path.mkdir()
            make(path)
            Path(f"{path}.done").touch()
    return path


def built_tree():
    """The run's one build of the virtual board's firmware (mpy-cross takes seconds a build):
    (its directory, holding `tree` and `release.pem`, and the build's summary)."""
    from sabot.release.build import build

    def make(d):
        info = build("virtual", d / "tree", release=d / "release.pem")
        (d / "info.json").write_text(json.dumps(info))

    d = shared("build-virtual", make)
    return d, json.loads((d / "info.json").read_text())


def install_build(root, release):
    """The run's build copied to `root` (a board's filesystem, or a code tree), its release key
    to `release`: as `build("virtual", root, release=release)` leaves them."""
    d, info = built_tree()
    shutil.copytree(d / "tree", root, dirs_exist_ok=True)
    shutil.copy2(d / "release.pem", release)
    return dict(info, dir=str(root))

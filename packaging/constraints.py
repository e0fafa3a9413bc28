"""Every package the wheel installs, pinned to the version the tests ran (this venv's): the
wheel pins only sabot's own dependencies, and what they pull in would otherwise be whatever the
package index holds on the day. `make dist` writes it beside the wheel; docs/INSTALL.md installs
with it (pip's --constraint), so pit hosts installed months apart run the same packages.

    python packaging/constraints.py PYPROJECT [EXTRA ...] > sabot-constraints.txt"""

import sys
import tomllib
from importlib import metadata

from packaging.requirements import Requirement


def closure(requirements):
    """{name: installed version} of these requirements and everything they pull in, each
    marker evaluated where its requirement is met (an extra's by the extras asked of it)."""
    seen, todo = {}, [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        name = req.name.lower().replace("_", "-")
        if name in seen:
            continue
        dist = metadata.distribution(req.name)
        seen[name] = dist.version
        for sub in dist.requires or []:
            child = Requirement(sub)
            if child.marker is None or any(child.marker.evaluate({"extra": x})
                                           for x in ("", *req.extras)):
                todo.append(child)
    return seen


def main(pyproject, *extras):
    project = tomllib.load(open(pyproject, "rb"))["project"]
    wanted = list(project["dependencies"])
    for extra in extras:
        wanted += project["optional-dependencies"][extra]
    for name, version in sorted(closure(wanted).items()):
        print(f"{name}=={version}")


if __name__ == "__main__":
    main(*sys.argv[1:])

"""The host package's layers: every module's imports, those inside functions included, only go
down errors/paths/locks/service → game → core (protocol, keys, registry) → audit → link → pit |
virtual → release → cli. A module that imports from a layer above it, or from its sibling (pit and
virtual), fails here, naming both."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "host_tools" / "sabot"

# Lower numbers lie lower. Within a layer only the flat core's modules (0 and 2) import each other.
LAYERS = {
    "sabot.errors": 0, "sabot.paths": 0, "sabot.locks": 0, "sabot.service": 0,
    "sabot.game": 1,
    "sabot.protocol": 2, "sabot.keys": 2, "sabot.registry": 2, "sabot.attestation": 2,
    "sabot.tlog": 2, "sabot.note": 2, "sabot.receipt": 2, "sabot.frames21": 2,
    "sabot.table_checks": 2,
    "sabot.audit": 3,
    "sabot.link": 4,
    "sabot.pit": 5, "sabot.virtual": 5, "sabot.witness": 5,
    "sabot.release": 6,
    "sabot.cli": 7, "sabot.__main__": 8,
}
FLAT = {0, 2}


def module_name(path, root=PACKAGE.parent):
    parts = Path(path).relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(name):
    """(layer, group) of a sabot module: the longest prefix of LAYERS it falls under."""
    for prefix in sorted(LAYERS, key=len, reverse=True):
        if name == prefix or name.startswith(prefix + "."):
            return LAYERS[prefix], prefix
    return None


def is_module(name):
    path = PACKAGE.parent / name.replace(".", "/")
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def sabot_imports(source, here, is_package=False):
    """Every sabot module `source` imports, as (line, module), relative imports resolved."""
    package = here if is_package else here.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            # `from sabot.game import cards` imports the module sabot.game.cards
            names = [f"{base}.{a.name}" if is_module(f"{base}.{a.name}") else base
                     for a in node.names]
        else:
            continue
        yield from ((node.lineno, n) for n in names if n.startswith("sabot."))


def upward_imports(source, here, is_package=False):
    mine = layer_of(here)
    assert mine is not None, f"{here} is in no layer: add its folder to LAYERS"
    found = []
    for line, name in sabot_imports(source, here, is_package):
        theirs = layer_of(name)
        assert theirs is not None, f"{here} line {line} imports {name}, which is in no layer"
        if theirs[0] < mine[0] or theirs[1] == mine[1] or (theirs[0] == mine[0] in FLAT):
            continue
        found.append(f"line {line}: {name} ({theirs[1]}, layer {theirs[0]})")
    return found


MODULES = sorted(p for p in PACKAGE.rglob("*.py") if p != PACKAGE / "__init__.py")


def test_the_package_has_its_layers():
    groups = {layer_of(module_name(p))[1] for p in MODULES if layer_of(module_name(p))}
    assert set(LAYERS) <= groups, f"layers with no module: {set(LAYERS) - groups}"


@pytest.mark.parametrize("path", MODULES, ids=module_name)
def test_imports_only_go_down(path):
    here = module_name(path)
    upward = upward_imports(path.read_text(), here, path.name == "__init__.py")
    assert upward == [], f"{here} ({layer_of(here)[1]}) imports upward: {upward}"


def test_an_upward_or_sideways_import_is_caught():
    """The check itself: the audit store imported by a game module (even inside a function), a
    page importing the demo, the CLI imported by the validator."""
    lazy = "def f():\n    from sabot.audit.store import AuditStore\n"
    assert upward_imports(lazy, "sabot.game.cards") == [
        "line 2: sabot.audit.store (sabot.audit, layer 3)"]
    assert upward_imports("from sabot.virtual import demo\n", "sabot.pit.pages") == [
        "line 1: sabot.virtual.demo (sabot.virtual, layer 5)"]
    assert upward_imports("import sabot.cli\n", "sabot.audit.validator") != []
    assert upward_imports("from sabot import protocol as pr\nfrom sabot.game import rules\n",
                          "sabot.registry") == []
    assert upward_imports("from . import store\n", "sabot.audit.verify") == []

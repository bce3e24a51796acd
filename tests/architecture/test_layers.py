"""The layering in docs/architecture.md holds: imports only flow downward."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "fastprep"

#: module prefix -> layer; the most specific prefix wins
LAYERS = {
    "fastprep.errors": 0,
    "fastprep.plan": 1,
    "fastprep.native": 1,
    "fastprep.api": 2,
    "fastprep.optimize": 2,
    "fastprep.planning": 3,
    "fastprep.data": 3,
    "fastprep.validate": 3,
    "fastprep.emit": 3,
    "fastprep.backends": 3,
    "fastprep.storage": 3,
    "fastprep.runtime": 4,
    "fastprep.pipeline": 4,
    "fastprep.integrations": 4,
    "fastprep.bench": 4,
    "fastprep.cli": 4,
    "fastprep.sklearn": 4,
    "fastprep.__main__": 4,
}
ROOT = "fastprep"  # the package __init__: the public API, re-exports every layer
HEAVY = ("pandas", "numba", "dask", "distributed", "sklearn", "scipy", "pyarrow")


def layer_of(module: str) -> int:
    if module == ROOT:
        return 4
    matches = [p for p in LAYERS if module == p or module.startswith(p + ".")]
    if not matches:
        raise AssertionError(f"{module} has no layer in docs/architecture.md")
    return LAYERS[max(matches, key=len)]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
    return found


MODULES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: module_name(p))
def test_imports_flow_downward(path: Path) -> None:
    me = module_name(path)
    mine = layer_of(me)
    for imported in imports_of(path):
        if not imported.startswith("fastprep"):
            continue
        if me.startswith("fastprep.backends") and imported.startswith("fastprep.emit"):
            continue  # backends produce emit blocks: a sibling layer-3 data type
        assert layer_of(imported) <= mine, f"{me} (layer {mine}) imports {imported}"
        if mine < 4:
            assert layer_of(imported) < 4, f"{me} imports orchestration module {imported}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: module_name(p))
def test_plan_and_dsl_import_no_dataframe_or_jit_library(path: Path) -> None:
    me = module_name(path)
    if not me.startswith(("fastprep.errors", "fastprep.plan", "fastprep.api", "fastprep.optimize")):
        return
    for imported in imports_of(path):
        root = imported.split(".")[0]
        assert root not in HEAVY, f"{me} (layer {layer_of(me)}) imports {imported}"


def test_every_module_is_assigned_a_layer() -> None:
    for path in MODULES:
        assert 0 <= layer_of(module_name(path)) <= 4

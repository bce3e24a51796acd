"""The layering of docs/architecture.md holds for the real package: imports flow downward only,
no import cycle between modules or packages, no private name taken across packages, every
module in a layer. The checker (``layering.py``) counts every import: inside functions, under
``if TYPE_CHECKING:`` and relative ones; ``test_layer_checker.py`` proves it fails."""

from __future__ import annotations

import ast

import pytest
from layering import LAYERS, PACKAGE, check, module_names, package_of

#: libraries the plan, the user API and the optimizer never import (anywhere in the module)
HEAVY = ("pandas", "numba", "dask", "distributed", "sklearn", "scipy", "pyarrow", "polars", "torch")
LIGHT_PACKAGES = ("errors", "plan", "api", "optimize")


@pytest.fixture(scope="module")
def report():
    return check(PACKAGE, LAYERS)


def test_no_layering_violation(report) -> None:
    found = sorted(str(v) for v in report.violations)
    assert found == [], "layering violations (docs/architecture.md):\n" + "\n".join(found)


def test_every_module_has_a_layer() -> None:
    missing = sorted(m for m in module_names(PACKAGE) if package_of(m) not in LAYERS)
    assert missing == []


def test_the_graph_is_read(report) -> None:
    """A checker that reads no import would pass everything: the real graph is dense."""
    assert len(report.modules) > 100
    assert len({(e.source, e.target) for e in report.edges}) > 400
    edges = {(e.source, e.target) for e in report.edges}
    assert {("fastprep", "fastprep.pipeline"), ("fastprep", "fastprep.errors")} <= edges


def test_plan_api_and_optimizer_import_no_dataframe_or_jit_library(report) -> None:
    found = []
    for module, path in report.modules.items():
        if package_of(module) not in LIGHT_PACKAGES:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            found += [f"{module} imports {n}" for n in names if n.split(".")[0] in HEAVY]
    assert found == []

"""The layer checker fails where it must: an upward import (absolute, relative, inside a
function, under ``TYPE_CHECKING``), a cycle of modules or of packages, a private name taken
across packages, a module with no layer. Each case is a small package tree written into
``tmp_path``, plus one injected upward import into a copy of the real package."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest
from layering import LAYERS, PACKAGE, check, strongly_connected

SMALL_LAYERS = {"pkg": 3, "low": 0, "mid": 1, "high": 2, "side": 1}


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """Write ``{"low/a.py": source}`` under ``root/pkg`` (every folder gets an ``__init__``)."""
    package = root / "pkg"
    for name, source in {"__init__.py": "", **files}.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        for folder in [path.parent, *path.parent.parents]:
            if folder == root:
                break
            (folder / "__init__.py").touch()
        path.write_text(textwrap.dedent(source))
    return package


def keys(tmp_path: Path, files: dict[str, str]) -> set[str]:
    return check(write_tree(tmp_path, files), SMALL_LAYERS).keys()


def test_a_clean_tree_passes(tmp_path) -> None:
    found = keys(tmp_path, {
        "low/a.py": "X = 1\n",
        "mid/b.py": "from pkg.low.a import X\nfrom ..low import a\n",
        "high/c.py": "import pkg.mid.b as b\n\ndef f():\n    from pkg.low import a\n    return a.X\n",
    })  # fmt: skip
    assert found == set()


@pytest.mark.parametrize(
    "source",
    [
        "import pkg.high.c\n",
        "from pkg.high.c import Y\n",
        "from pkg.high import c\n",
        "from ..high.c import Y\n",
        "from ..high import c\n",
        "def f():\n    from ..high.c import Y\n    return Y\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.high.c import Y\n",
    ],
    ids=["import", "from-module", "from-package", "relative", "relative-package", "in-function",
         "type-checking"],
)  # fmt: skip
def test_upward_import_is_reported(tmp_path, source) -> None:
    found = keys(tmp_path, {"low/a.py": source, "high/c.py": "Y = 1\n"})
    assert "upward import: pkg.low.a -> pkg.high.c" in found


def test_module_cycle_is_reported(tmp_path) -> None:
    found = keys(tmp_path, {
        "mid/a.py": "def f():\n    from pkg.mid.b import g\n    return g\n",
        "mid/b.py": "from pkg.mid.c import h\ndef g():\n    return 1\n",
        "mid/c.py": "from pkg.mid.a import f\nh = 1\n",
    })  # fmt: skip
    assert {
        "module cycle: pkg.mid.a",
        "module cycle: pkg.mid.b",
        "module cycle: pkg.mid.c",
    } <= found


def test_relative_import_cycle_is_reported(tmp_path) -> None:
    found = keys(tmp_path, {
        "mid/a.py": "from . import b\n",
        "mid/b.py": "from .a import X\n",
    })  # fmt: skip
    assert {"module cycle: pkg.mid.a", "module cycle: pkg.mid.b"} <= found


def test_cycle_through_a_package_init_is_reported(tmp_path) -> None:
    found = keys(tmp_path, {
        "mid/__init__.py": "from .a import X\n",
        "mid/a.py": "from pkg.mid import helper\nX = 1\n",
        "mid/helper.py": "from pkg.mid import X\n",
    })  # fmt: skip
    assert {"module cycle: pkg.mid", "module cycle: pkg.mid.helper"} <= found


def test_package_cycle_without_a_module_cycle_is_reported(tmp_path) -> None:
    found = keys(tmp_path, {
        "mid/a.py": "from pkg.side.b import Y\n",
        "side/b.py": "Y = 1\n",
        "side/c.py": "from pkg.mid.d import Z\n",
        "mid/d.py": "Z = 1\n",
    })  # fmt: skip
    assert not any(key.startswith("module cycle") for key in found)
    assert {"package cycle: mid", "package cycle: side"} <= found


@pytest.mark.parametrize(
    "source",
    [
        "from pkg.low.a import _helper\n",
        "from ..low.a import _helper\n",
        "from pkg.low import a\nY = a._helper()\n",
        "import pkg.low.a as m\nY = m._helper()\n",
        "import pkg.low.a\nY = pkg.low.a._helper()\n",
        "def f():\n    from ..low import a\n    return a._helper\n",
    ],
    ids=["from", "relative", "module-attribute", "alias-attribute", "dotted-attribute",
         "in-function"],
)  # fmt: skip
def test_private_name_of_another_package_is_reported(tmp_path, source) -> None:
    found = keys(tmp_path, {"low/a.py": "def _helper():\n    return 1\n", "mid/b.py": source})
    assert "private name: pkg.mid.b uses pkg.low.a._helper" in found


def test_private_name_inside_its_own_package_and_dunders_pass(tmp_path) -> None:
    found = keys(tmp_path, {
        "low/a.py": "def _helper():\n    return 1\n",
        "low/b.py": "from pkg.low.a import _helper\nfrom . import a\nY = a._helper\n",
        "mid/c.py": "from pkg.low import a\nY = a.__name__\nZ = object()._private\n",
    })  # fmt: skip
    assert found == set()


def test_private_name_of_a_sub_package_is_reported(tmp_path) -> None:
    found = keys(tmp_path, {
        "mid/a.py": "def _helper():\n    return 1\n",
        "mid/sub/b.py": "from pkg.mid import a\nY = a._helper()\n",
    })  # fmt: skip
    assert found == {"private name: pkg.mid.sub.b uses pkg.mid.a._helper"}


def test_module_without_a_layer_is_reported(tmp_path) -> None:
    found = keys(tmp_path, {"extra/a.py": "X = 1\n"})
    assert {"no layer: pkg.extra", "no layer: pkg.extra.a"} <= found


def test_injected_upward_import_into_a_copy_of_fastprep_is_reported(tmp_path) -> None:
    """One ``from ..runtime.execute import Output`` in plan/nodes.py: the upward import, and
    the cycle it closes (the engine imports the plan)."""
    copy = tmp_path / "fastprep"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    before = check(copy, LAYERS).keys()
    nodes = copy / "plan" / "nodes.py"
    nodes.write_text(nodes.read_text() + "\nfrom ..runtime.execute import Output  # noqa\n")
    after = check(copy, LAYERS).keys()
    assert after - before >= {
        "upward import: fastprep.plan.nodes -> fastprep.runtime.execute",
        "module cycle: fastprep.plan.nodes",
        "package cycle: plan",
    }


def test_strongly_connected_components() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert sorted(strongly_connected(graph)) == [["a", "b", "c"], ["d"], ["e"]]

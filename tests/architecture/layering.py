"""The import checker behind ``test_layers.py``: reads a package tree with ``ast`` (nothing is
imported) and reports what breaks the layering in docs/architecture.md.

Every import counts: at module level, inside functions, under ``if TYPE_CHECKING:``, absolute
and relative (``from ..runtime import x``). A violation is a :class:`Violation` whose ``key`` is
a stable one-line string (what a failure lists) and whose ``detail`` says where.

The rules:

- **upward import**: a module imports a module of a higher layer;
- **module cycle**: a module sits in an import cycle (a strongly connected component of the
  module graph, or imports itself);
- **package cycle**: a package sits in a cycle of the package graph (package A imports B and B,
  maybe through others, imports A), even when no module-level cycle exists;
- **private name**: a module imports ``_name`` from a module of another package, or uses
  ``module._name`` on a module of another package (here a package is a folder: a sub-package
  such as ``runtime/cluster/`` keeps its private names from ``runtime/`` and back);
- **no layer**: a module whose package is not in the layer table.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "fastprep"

#: package (first name under ``fastprep``; ``fastprep`` is the root ``__init__``) -> layer.
#: docs/architecture.md's package table says the same (``test_architecture_doc.py``).
LAYERS = {
    "errors": 0,
    "plan": 1,
    "native": 1,
    "api": 2,
    "optimize": 2,
    "planning": 3,
    "data": 3,
    "validate": 3,
    "emit": 3,
    "backends": 3,
    "storage": 3,
    "runtime": 4,
    "pipeline": 5,
    "integrations": 5,
    "cli": 5,
    "bench": 5,
    "sklearn": 5,
    "__main__": 5,
    "fastprep": 5,  # the public API: re-exports every layer
}


@dataclass(frozen=True)
class Violation:
    key: str  # stable: one line naming the violation
    detail: str = field(default="", compare=False)  # where it happens, for the failure message

    def __str__(self) -> str:
        return f"{self.key}  ({self.detail})" if self.detail else self.key


@dataclass(frozen=True)
class Import:
    """One edge of the module graph: ``source`` imports ``target`` at ``line``;
    ``names`` are the names taken from it (``from target import a, b``)."""

    source: str
    target: str
    line: int
    names: tuple[str, ...] = ()


def module_names(root: Path) -> dict[str, Path]:
    """``fastprep.plan.nodes`` -> its file, for every ``.py`` under the package ``root``."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _package_of_file(module: str, path: Path) -> str:
    """The package a relative import in ``module`` starts from."""
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _folder(module: str, path: Path) -> str:
    """The package folder a module belongs to (a sub-package is a package of its own)."""
    return _package_of_file(module, path)


def _resolve_from(module: str, path: Path, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = _package_of_file(module, path).split(".")
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def imports_in(
    module: str, path: Path, known: Iterable[str], tree: ast.Module | None = None
) -> list[Import]:
    """Every import in one file that reaches a module of the tree (``known``), resolved:
    ``from a import b`` is an edge to ``a.b`` where ``b`` is a module, else to ``a``."""
    known = set(known)
    top = module.split(".")[0]
    edges = []
    for node in ast.walk(tree or ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == top:
                    edges.append(Import(module, _nearest(alias.name, known), node.lineno))
        elif isinstance(node, ast.ImportFrom):
            base = _resolve_from(module, path, node)
            if base.split(".")[0] != top:
                continue
            plain = []
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in known:
                    edges.append(Import(module, sub, node.lineno))
                else:
                    plain.append(alias.name)
            if plain:
                edges.append(Import(module, _nearest(base, known), node.lineno, tuple(plain)))
    return edges


def _nearest(name: str, known: set[str]) -> str:
    """``name`` if it is a module of the tree, else its nearest enclosing package that is (an
    import of a missing module still counts as an edge to the package it names)."""
    while name not in known and "." in name:
        name = name.rpartition(".")[0]
    return name


def package_of(module: str) -> str:
    """The layer-table entry of a module: ``fastprep.runtime.cluster.job`` -> ``runtime``;
    the root ``__init__`` is ``fastprep``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def strongly_connected(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of a directed graph (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    components.append(sorted(component))
    return components


def _private_uses(
    module: str, path: Path, edges: list[Import], tree: ast.Module
) -> list[tuple[str, str, int]]:
    """``(target module, name, line)`` for every private name this file takes from or reads
    on a module of the tree: ``from m import _x`` and ``m._x`` where ``m`` is bound to a module
    by an import (``import a.b as m``, ``from a import b``, or the dotted ``a.b._x``)."""
    uses = [
        (edge.target, name, edge.line)
        for edge in edges
        for name in edge.names
        if name.startswith("_") and not name.startswith("__")
    ]
    bound: dict[str, str] = {}  # local name -> module it names
    known = {edge.target for edge in edges}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname and alias.name in known:
                    bound[alias.asname] = alias.name
                elif not alias.asname:
                    bound.setdefault(alias.name.split(".")[0], alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            base = _resolve_from(module, path, node)
            for alias in node.names:
                if f"{base}.{alias.name}" in known:
                    bound[alias.asname or alias.name] = f"{base}.{alias.name}"
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
            continue
        if node.attr.startswith("__"):
            continue
        dotted = _dotted(node.value)
        if dotted is None:
            continue
        head, _, rest = dotted.partition(".")
        if head not in bound:
            continue
        target = ".".join(filter(None, [bound[head], rest]))
        if target in known:
            uses.append((target, node.attr, node.lineno))
    return uses


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return None if inner is None else f"{inner}.{node.attr}"
    return None


@dataclass
class Report:
    """The module graph of one package tree and every violation found in it."""

    modules: dict[str, Path]
    edges: list[Import]
    violations: set[Violation]

    def keys(self) -> set[str]:
        return {v.key for v in self.violations}


def check(root: Path, layers: Mapping[str, int]) -> Report:
    """Read every module under the package folder ``root`` and check it against ``layers``
    (package name -> layer; the root package's ``__init__`` is the entry ``root.name``)."""
    modules = module_names(root)
    trees = {name: ast.parse(path.read_text(), str(path)) for name, path in modules.items()}
    edges = [
        edge
        for name, path in modules.items()
        for edge in imports_in(name, path, modules, trees[name])
        if edge.target in modules
    ]
    found: set[Violation] = set()

    for name in modules:
        if package_of(name) not in layers:
            found.add(Violation(f"no layer: {name}", f"package {package_of(name)!r}"))

    for edge in edges:
        mine, theirs = package_of(edge.source), package_of(edge.target)
        if mine in layers and theirs in layers and layers[mine] < layers[theirs]:
            found.add(
                Violation(
                    f"upward import: {edge.source} -> {edge.target}",
                    f"layer {layers[mine]} imports layer {layers[theirs]}, "
                    f"{modules[edge.source].name}:{edge.line}",
                )
            )

    graph: dict[str, set[str]] = {name: set() for name in modules}
    for edge in edges:
        graph[edge.source].add(edge.target)
    for component in strongly_connected(graph):
        if len(component) == 1 and component[0] not in graph[component[0]]:
            continue
        for member in component:
            found.add(Violation(f"module cycle: {member}", " <-> ".join(component)))

    packages: dict[str, set[str]] = {}
    for edge in edges:
        mine, theirs = package_of(edge.source), package_of(edge.target)
        packages.setdefault(mine, set())
        if mine != theirs:
            packages[mine].add(theirs)
    for component in strongly_connected(packages):
        if len(component) > 1:
            for member in component:
                through = sorted(
                    f"{e.source} -> {e.target}"
                    for e in edges
                    if package_of(e.source) == member
                    and package_of(e.target) in component
                    and package_of(e.target) != member
                )
                found.add(
                    Violation(
                        f"package cycle: {member}",
                        f"{' <-> '.join(component)}; {member} imports {', '.join(through)}",
                    )
                )

    by_source: dict[str, list[Import]] = {}
    for edge in edges:
        by_source.setdefault(edge.source, []).append(edge)
    for name, path in modules.items():
        for target, private, line in _private_uses(
            name, path, by_source.get(name, []), trees[name]
        ):
            if _folder(target, modules[target]) != _folder(name, path):
                found.add(
                    Violation(
                        f"private name: {name} uses {target}.{private}",
                        f"{path.name}:{line}",
                    )
                )
    return Report(modules, edges, found)


if __name__ == "__main__":  # python tests/architecture/layering.py: today's violations
    for violation in sorted(check(PACKAGE, LAYERS).violations, key=lambda v: v.key):
        print(violation)

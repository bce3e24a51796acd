"""The docs describe the layout that exists: docs/architecture.md's package table is the layer
test's ``LAYERS``, and every repository path the README and docs/ name exists (a test named
in docs/guarantees.md exists in the file named with it)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from layering import LAYERS
from support import REPO

ARCHITECTURE = REPO / "docs" / "architecture.md"
#: docs whose paths are checked; docs/decisions.md is a history and names what was
DOCS = [
    REPO / "README.md",
    *(p for p in sorted((REPO / "docs").glob("*.md")) if p.name != "decisions.md"),
]
PATH = re.compile(r"(?<![\w/.])((?:fastprep|tests|benchmarks|pipelines|data_samples)/[\w./-]*)")
ROW = re.compile(r"^\|\s*(\d+)\s*\|\s*`(fastprep/[\w./]*)`\s*\|")
#: folders a run creates (not in the repository)
CREATED = {"benchmarks/results/", "benchmarks/results", "benchmarks/results/data"}
#: test files by basename (basenames are unique across tests/)
TEST_FILES = {path.name: path for path in (REPO / "tests").rglob("test_*.py")}


def package_of_path(path: str) -> str:
    name = path.removeprefix("fastprep/").rstrip("/").removesuffix(".py")
    return "fastprep" if name == "__init__" else name


def test_the_package_table_is_the_layer_table() -> None:
    rows = [ROW.match(line) for line in ARCHITECTURE.read_text().splitlines()]
    table = {package_of_path(m[2]): int(m[1]) for m in rows if m}
    assert table == LAYERS


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_path_a_doc_names_exists(doc: Path) -> None:
    missing = []
    for number, line in enumerate(doc.read_text().splitlines(), 1):
        for match in PATH.finditer(line):
            path = match[1].rstrip(".").split("::")[0]
            if path not in CREATED and not (REPO / path).exists():
                missing.append(f"{doc.name}:{number}: {path}")
    assert missing == []


def test_every_test_named_in_the_guarantees_exists() -> None:
    """``tests/x/test_a.py::test_b``, ``test_a.py::test_b`` and a bare ``test_b`` (a test of
    the file named before it on the same line, or of any file)."""
    text = (REPO / "docs" / "guarantees.md").read_text()
    everything = "\n".join(path.read_text() for path in TEST_FILES.values())
    missing = []
    for number, line in enumerate(text.splitlines(), 1):
        current = None
        for token in re.findall(r"`([^`]+)`", line):
            file, _, name = token.partition("::")
            if file.endswith(".py") and Path(file).name.startswith("test_"):
                current = TEST_FILES.get(Path(file).name)
                if current is None:
                    missing.append(f"line {number}: {file}")
                    continue
                if name and not _defines(current.read_text(), name):
                    missing.append(f"line {number}: {token}")
            elif re.fullmatch(r"test_[\w*]+", token):
                source = current.read_text() if current else everything
                if not _defines(source, token) and not _defines(everything, token):
                    missing.append(f"line {number}: {token}")
    assert missing == []


def _defines(source: str, name: str) -> bool:
    """``source`` defines the test ``name`` (``[params]`` dropped; ``*`` matches any tail)."""
    pattern = re.escape(name.split("[")[0]).replace(r"\*", r"\w*")
    return re.search(rf"^\s*(?:async\s+)?def {pattern}\(", source, re.M) is not None

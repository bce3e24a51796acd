"""Tests mirror the package: ``tests/<package>/`` for ``fastprep/<package>/`` (sub-packages
too), plus the cross-cutting ``e2e/``, ``docs/`` and ``architecture/``; basenames are unique
(there is no ``__init__.py``: pytest imports each test module by its basename)."""

from __future__ import annotations

from collections import Counter

from support import REPO

TESTS = REPO / "tests"
CROSS_CUTTING = {"e2e", "docs", "architecture"}
DATA_FOLDERS = {"fixtures"}  # inputs of the tests beside them


def test_every_test_folder_mirrors_a_package() -> None:
    stray = []
    for folder in sorted(p for p in TESTS.rglob("*") if p.is_dir()):
        relative = folder.relative_to(TESTS)
        if "__pycache__" in relative.parts or relative.parts[0] in CROSS_CUTTING:
            continue
        if relative.name in DATA_FOLDERS:
            continue
        if not (REPO / "fastprep" / relative / "__init__.py").exists():
            stray.append(str(relative))
    assert stray == [], "no fastprep package of that name: " + ", ".join(stray)


def test_test_files_live_in_folders_and_have_unique_basenames() -> None:
    files = [p for p in TESTS.rglob("test_*.py") if "__pycache__" not in p.parts]
    assert [p.name for p in files if p.parent == TESTS] == []
    repeated = [name for name, n in Counter(p.name for p in files).items() if n > 1]
    assert repeated == []
    assert list(TESTS.rglob("__init__.py")) == []

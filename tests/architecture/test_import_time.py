"""The import-time guard: ``import fastprep`` loads no heavy optional dependency; each is
imported where it is first needed (scikit-learn is the tests' oracle only)."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("sklearn", "numba", "dask", "distributed", "torch", "matplotlib", "scipy.stats", "polars")


def test_import_fastprep_loads_no_heavy_dependency() -> None:
    code = "import json, sys; import fastprep; print(json.dumps(sorted(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    loaded = set(json.loads(result.stdout))
    assert [m for m in HEAVY if m in loaded] == []


def test_pipeline_definition_loads_no_heavy_dependency(repo_root) -> None:
    """Running the bundled pipeline file (what ``fastprep run`` does first) stays light too."""
    code = (
        "import json, sys, runpy; "
        f"runpy.run_path({str(repo_root / 'pipelines' / 'flights.py')!r}); "
        "print(json.dumps(sorted(sys.modules)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    loaded = set(json.loads(result.stdout))
    assert [m for m in HEAVY if m in loaded] == []


def test_streamed_execution_needs_no_dask() -> None:
    """A run over its memory budget streams in this process: that path imports no Dask,
    so it works without the ``[distributed]`` extra."""
    code = (
        "import json, sys; import fastprep.runtime.streamed; print(json.dumps(sorted(sys.modules)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    loaded = set(json.loads(result.stdout))
    assert [m for m in ("dask", "distributed") if m in loaded] == []

"""The import-time guard: ``import fastprep`` loads no heavy optional dependency; each is
imported where it is first needed (scikit-learn is the tests' oracle only). pandas and
scipy are among them: a job from a file to arrays on disk needs neither."""

from __future__ import annotations

import json
import os
import subprocess
import sys

HEAVY = (
    "sklearn",
    "numba",
    "dask",
    "distributed",
    "torch",
    "matplotlib",
    "scipy",
    "polars",
    "pandas",
)


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


def test_command_line_job_on_a_file_loads_no_pandas_nor_scipy(repo_root, tmp_path) -> None:
    """``fastprep run`` from a Parquet file to X (CSR), y and the quarantine on disk, then
    ``fastprep transform`` of it with the saved state: no pandas (pyarrow would import it
    for its conversions) and no scipy.sparse; the sample has quarantined rows, so their
    Parquet file is written too."""
    out, state = tmp_path / "out", tmp_path / "out" / "pipeline.fastprep"
    sample = repo_root / "data_samples" / "flights.parquet"
    code = (
        "import json, sys; from fastprep.cli import main; "
        f"code = main(['run', {str(repo_root / 'pipelines' / 'flights.py')!r}, "
        f"'--output', {str(out)!r}]); "
        f"code += main(['transform', {str(state)!r}, '--input', {str(sample)!r}, "
        f"'--output', {str(tmp_path / 'again')!r}]); "
        "print(json.dumps([code, sorted(sys.modules)]))"
    )
    env = {**os.environ, "FASTPREP_CACHE_DIR": str(tmp_path / "cache")}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300,
        env=env,
    )  # fmt: skip
    code, modules = json.loads(result.stdout.splitlines()[-1])
    assert code == 0
    assert list(out.glob("*.quarantine.parquet"))
    assert list((tmp_path / "again").glob("*.X.data.npy"))
    loaded = set(modules)
    assert [m for m in ("pandas", "scipy", "scipy.sparse") if m in loaded] == []
    # nor numpy.ma (~7 ms), which pa.array of a numpy array, np.unique and np.median import,
    # nor pyarrow.compute (~23 ms: data/arrow_compute.py calls the kernels it wraps)
    assert [m for m in ("numpy.ma", "pyarrow.compute") if m in loaded] == []


def test_import_pauses_the_collector_and_restores_it() -> None:
    """``import fastprep`` runs no collection over what it loads (~85 without the pause;
    one may run before it starts), whose objects end in the oldest generation, still
    collectable; the collector is left as found: enabled stays enabled, disabled stays
    disabled."""
    code = (
        "import gc, json; runs = []; gc.callbacks.append(lambda phase, info: "
        "runs.append(info['generation']) if phase == 'start' else None); "
        "enabled = gc.isenabled(); import fastprep; "
        "print(json.dumps([runs, gc.isenabled(), gc.get_count()[0] < 700]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    runs, enabled, young_small = json.loads(result.stdout)
    assert len(runs) <= 1 and enabled and young_small
    off = "import gc; gc.disable(); import fastprep; print(gc.isenabled())"
    result = subprocess.run(
        [sys.executable, "-c", off], capture_output=True, text=True, check=True, timeout=120
    )
    assert result.stdout.strip() == "False"

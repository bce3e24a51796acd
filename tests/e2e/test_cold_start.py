"""A fresh install (empty kernel caches) runs the bundled example without compiling or
even importing Numba, and writes the same X and y as the Numba paths, bit for bit."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

import fastprep as fp
from fastprep.cli import load_pipeline_file

RUN = """
import sys
from fastprep.cli import main
code = main(["run", sys.argv[1], "--output", sys.argv[2]])
print("numba imported:", "numba" in sys.modules)
sys.exit(code)
"""


def _dense_or_csr(X):
    return sp.csr_matrix(X) if sp.issparse(X) else np.asarray(X)


def test_cold_cache_run_compiles_nothing_and_equals_numba(tmp_path, repo_root, monkeypatch) -> None:
    from fastprep.data import text_encode

    if not hasattr(text_encode, "kernels_ready"):  # (its no-compile path lands separately)
        pytest.skip("text encoding has no path without a compiled kernel yet")
    pipeline_file = repo_root / "pipelines" / "flights.py"
    env = {
        **os.environ,
        "FASTPREP_CACHE_DIR": str(tmp_path / "fastprep-cache"),
        "NUMBA_CACHE_DIR": str(tmp_path / "numba-cache"),
    }
    env.pop("FASTPREP_KERNEL_PATH", None)
    result = subprocess.run(
        [sys.executable, "-c", RUN, str(pipeline_file), str(tmp_path / "out")],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "numba imported: False" in result.stdout
    assert not list((tmp_path / "numba-cache").rglob("*.nbi"))  # nothing compiled
    cold = fp.open_output(tmp_path / "out")

    monkeypatch.setenv("FASTPREP_KERNEL_PATH", "numba")  # every helper on its kernel
    warm = load_pipeline_file(pipeline_file).fit_transform(
        str(repo_root / "data_samples" / "flights.parquet"), backend="numba"
    )
    a, b = _dense_or_csr(cold.X), _dense_or_csr(warm.X)
    assert a.shape == b.shape
    assert np.array_equal(a.indptr, b.indptr) and np.array_equal(a.indices, b.indices)
    assert a.data.dtype == b.data.dtype and a.data.tobytes() == b.data.tobytes()
    assert np.asarray(cold.y).tobytes() == np.asarray(warm.y).tobytes()
    assert np.array_equal(np.asarray(cold.row_ids), np.asarray(warm.row_ids))

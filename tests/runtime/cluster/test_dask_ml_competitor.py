"""The benchmark's hand-written dask.dataframe + dask-ml pipeline gives fastprep's X and y on
the flights sample (so the benchmark compares equal work), on the real cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from fastprep.bench.harness import compare
from fastprep.cli import load_pipeline_file

pytest.importorskip("dask_ml")
REPO = Path(__file__).resolve().parents[3]


def test_dask_ml_flights_equals_fastprep(client, flights_row_groups, tmp_path) -> None:
    import numpy as np
    import scipy.sparse as sp

    from fastprep.bench import dask_ml_flights

    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    _, expected = pipeline.fit_and_transform(flights_row_groups)
    assert expected.report.rows_quarantined > 0  # the rows dask-ml drops by hand
    X, y = dask_ml_flights.run(str(flights_row_groups))
    result = compare(X, y, expected.X, expected.y)
    assert result["ok"], result
    written = dask_ml_flights.run(str(flights_row_groups), str(tmp_path))
    files = sorted(tmp_path.glob("part-*.npz"))
    assert written == expected.X.shape[0] and len(files) > 1
    shards = sp.vstack([sp.load_npz(f) for f in files], format="csr")
    assert compare(shards, np.concatenate([np.load(f.with_suffix(".y.npy")) for f in files]),
                   expected.X, expected.y)["ok"]  # fmt: skip

"""A job runs on the client it is given, also when that client is not Dask's default one
(``Client(..., set_as_default=False)``, as a library embedding fastprep makes it): its
tasks' results are awaited on that client's event loop, not on a default client's."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("distributed")

from support import REPO

SCRIPT = """
import numpy as np
from distributed import Client, LocalCluster

from fastprep.cli import load_pipeline_file

if __name__ == "__main__":
    pipeline = load_pipeline_file("pipelines/flights.py")
    single = pipeline.fit_transform("data_samples/flights.parquet")
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=None) as cluster:
        with Client(cluster, set_as_default=False) as client:
            fitted = pipeline.fit("data_samples/flights.parquet", client=client,
                                  rows_per_partition=10_000)
            out = fitted.transform("data_samples/flights.parquet", client=client,
                                   rows_per_partition=10_000)
    assert (out.X != single.X).nnz == 0 and np.array_equal(out.y, single.y)
    print("same")
"""


def test_job_on_a_client_that_is_not_the_default(tmp_path) -> None:
    # a fresh interpreter: the test session's own cluster client is the default here
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("same")

"""``warm_workers`` loads the job's kernels in every worker process, not only in those a
one-partition job happened to run on, and in a worker that joins later."""

from __future__ import annotations

from pathlib import Path

from fastprep.cli import load_pipeline_file
from fastprep.native import kernel_files
from fastprep.planning import planner
from fastprep.runtime.cluster import warm_workers

REPO = Path(__file__).resolve().parents[3]


def test_every_worker_gets_the_kernels(cluster, client) -> None:
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    try:
        warm_workers(client, pipeline.optimized, pipeline.schema, pipeline.sample,
                     backend="numba")  # fmt: skip
        # (functions of fastprep: a worker cannot import this test module)
        loaded = client.run(kernel_files.any_loaded)
        assert len(loaded) == 2 and all(loaded.values())
        assert all(client.run(planner.numba_imported).values())
        joined = cluster.start_worker()  # a fresh process: warmed as it joins
        try:
            cluster.wait_for_workers(3)
            loaded = client.run(kernel_files.any_loaded)
            assert len(loaded) == 3 and all(loaded.values())
        finally:
            cluster.kill(joined)
    finally:
        client.unregister_worker_plugin("fastprep-warm-kernels")

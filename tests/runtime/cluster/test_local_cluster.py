"""The one LocalCluster fastprep starts (memory-budget routing and ``fastprep run
--scheduler local`` both): one single-threaded worker process per core, Dask's own
diagnostics quieted in its processes (not in this one), closed on exit."""

from __future__ import annotations

import pytest

pytest.importorskip("distributed")

import dask

from fastprep.runtime.cluster.local import QUIET, connect, local_workers


def _settings(dask_worker=None, dask_scheduler=None) -> dict:
    """The quieted settings as the process sees them, and what its server runs."""
    server = dask_worker if dask_worker is not None else dask_scheduler
    return {
        "config": {key: dask.config.get(key) for key in QUIET},
        "profiling": "profile" in server.periodic_callbacks,
        "monitor_ms": server.periodic_callbacks["monitor"].callback_time,
        "tick_ms": server.periodic_callbacks["tick"].callback_time,
    }


def test_local_cluster_is_one_single_threaded_worker_per_core():
    before = {key: dask.config.get(key) for key in QUIET}
    with connect("local") as (client, where):
        threads = client.nthreads()
        assert len(threads) == local_workers()
        assert set(threads.values()) == {1}
        assert f"LocalCluster of {local_workers()} worker(s)" in where
        # every worker process and the scheduler run with the quiet settings ...
        for seen in [*client.run(_settings).values(), client.run_on_scheduler(_settings)]:
            assert seen["monitor_ms"] == 10_000 and seen["tick_ms"] == 1_000
            assert not seen["profiling"]
        assert all(s["config"] == QUIET for s in client.run(_settings).values())
        # ... while this process keeps its own
        assert {key: dask.config.get(key) for key in QUIET} == before
        cluster = client.cluster
    assert cluster.status.name == "closed"

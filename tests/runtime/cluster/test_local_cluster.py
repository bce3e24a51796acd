"""The one LocalCluster fastprep starts (memory-budget routing and ``fastprep run
--scheduler local`` both): one single-threaded worker process per core, closed on exit."""

from __future__ import annotations

import pytest

pytest.importorskip("distributed")

from fastprep.runtime.cluster.local import connect, local_workers


def test_local_cluster_is_one_single_threaded_worker_per_core():
    with connect("local") as (client, where):
        threads = client.nthreads()
        assert len(threads) == local_workers()
        assert set(threads.values()) == {1}
        assert f"LocalCluster of {local_workers()} worker(s)" in where
        cluster = client.cluster
    assert cluster.status.name == "closed"

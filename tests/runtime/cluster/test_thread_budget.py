"""A Dask worker's tasks keep to the worker's threads: one core per task (fastprep's
fan-out, Numba's threads in the task's thread, Arrow's pool for the worker's tasks
together), the same output as one process, and nothing changed outside the workers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow
import pytest
from support import assert_same_matrix

from fastprep.cli import load_pipeline_file
from fastprep.native import threads
from fastprep.runtime.cluster.budget import budget_now, in_budget

distributed = pytest.importorskip("distributed")

REPO = Path(__file__).resolve().parents[3]
ROWS = 5_000


def _probe(client, worker: str) -> dict[str, int]:
    """The budget a task sees on ``worker`` (a task, not ``client.run``: Numba's count is
    the task thread's own)."""
    return client.submit(in_budget, budget_now, pure=False, workers=[worker]).result()


def _same_as_one_process(client, source: Path) -> None:
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    fitted = pipeline.fit(source, client=client, rows_per_partition=ROWS, backend="numba")
    out = fitted.transform(source, client=client, rows_per_partition=ROWS, backend="numba")
    here = fitted.transform(source, backend="numba")
    assert_same_matrix(out.X, here.X)
    assert np.array_equal(out.row_ids, here.row_ids)


def test_a_one_thread_worker_runs_its_tasks_on_one_core(client, flights_row_groups) -> None:
    arrow, cores = pyarrow.cpu_count(), threads.cores()
    _same_as_one_process(client, flights_row_groups)  # the job imports Numba on the workers
    for worker in client.nthreads():
        budget = _probe(client, worker)
        assert budget["fastprep"] == budget["pool"] == budget["arrow"] == 1, budget
        assert budget["numba"] == 1, budget
    # the client's process (one process's run) is left as it was
    assert threads.workers() == cores and pyarrow.cpu_count() == arrow


def test_a_two_thread_worker_runs_each_task_on_one_core(flights_row_groups) -> None:
    """Two tasks at once: each fans out to one thread; the process's pools are sized for
    the two (fastprep's, Arrow's), Numba launched with one thread per task."""
    with (
        distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=True,
                                 dashboard_address=":0") as cluster,
        distributed.Client(cluster, set_as_default=False) as client,
    ):  # fmt: skip
        _same_as_one_process(client, flights_row_groups)
        [worker] = client.nthreads()
        budget = _probe(client, worker)
        assert (budget["fastprep"], budget["pool"], budget["arrow"]) == (1, 2, 2), budget
        assert budget["numba"] == budget["numba_launched"] == 1, budget


def test_a_worker_in_the_clients_process_leaves_its_pools_alone() -> None:
    """``processes=False``: the worker's threads are the client's process's; a limit there
    would outlive the job (and this test process's other tests)."""
    arrow, cores = pyarrow.cpu_count(), threads.cores()
    with (
        distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                 dashboard_address=":0") as cluster,
        distributed.Client(cluster, set_as_default=False) as client,
    ):  # fmt: skip
        [worker] = client.nthreads()
        budget = _probe(client, worker)
    assert budget["fastprep"] == budget["pool"] == cores, budget
    assert threads.workers() == cores and pyarrow.cpu_count() == arrow

"""Connecting to a Dask cluster: the one place fastprep starts a ``LocalCluster``.

Used by the memory-budget routing (:mod:`fastprep.runtime.route`, a run over its budget sent
to Dask partitions) and by ``fastprep run --scheduler local``; both get the same cluster:

- one worker process per core, one thread each: a partition task is Python and pandas work
  between compiled kernels, which holds the GIL, so threads in one process would wait on
  each other; and the memory pre-flight predicts the job's peak as one process per core
  (plus the scheduler and a nanny per worker), which is what this starts; each task
  keeps to its one core (:mod:`fastprep.runtime.cluster.budget`);
- each worker's memory limit stays Dask's default share of the machine: the budget sizes
  the partitions (the data), and a worker alone needs a few hundred MB of imports;
- the dashboard on a free port (``:0``): two runs, or a notebook's own cluster on the usual
  8787, never collide.

Dask is imported only when a cluster is asked for.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fastprep.errors import PipelineDefinitionError
from fastprep.native import threads

#: the ``scheduler=`` value that starts a LocalCluster for the run
LOCAL = "local"


def local_workers() -> int:
    """The worker processes of a LocalCluster started here: one per core this process may
    run on (:func:`fastprep.native.threads.cores`, its CPU affinity)."""
    return threads.cores()


@contextmanager
def connect(scheduler: str) -> Iterator[tuple[Any, str]]:
    """``(client, where)``: a ``distributed.Client`` of the cluster at ``scheduler`` (an
    address), or of a LocalCluster started for ``"local"`` and closed on exit; ``where``
    says which, for the run's report."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise PipelineDefinitionError(
            f"scheduler {scheduler!r} needs dask.distributed: pip install 'fastprep[distributed]'"
        ) from None
    if scheduler != LOCAL:
        with Client(scheduler) as client:
            yield client, f"the cluster at {scheduler}"
        return
    workers = local_workers()
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                           dashboard_address=":0")  # fmt: skip
    try:
        with Client(cluster) as client:
            yield client, f"a LocalCluster of {workers} worker(s) (started for this run)"
    finally:
        cluster.close()

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
  8787, never collide;
- Dask's own diagnostics quieted (:data:`QUIET`): they run on every process's event loop
  while the tasks compute, and on a machine whose cores all run tasks they take those
  cores' time. :func:`start_local` is the one constructor (the benchmark starts its
  clusters with it too); a user's own cluster keeps the user's settings.

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

#: Dask settings of the clusters fastprep starts. Measured on the flights job (3.4M rows,
#: 2 single-thread workers on 2 cores), the event loops' CPU per job fell from about
#: 0.15 s (client + scheduler) and 0.22 s (the two workers) to 0.08 and 0.06 s:
#:
#: - the workers' statistical profiler sampled the task thread's stack every 10 ms (the
#:   dashboard's profile page), taking the GIL from the task each time;
#: - the system monitor (host CPU, memory, network and disk counters for the dashboard's
#:   graphs) ran every 0.5 s in the scheduler, in each nanny and in each worker; every
#:   10 s still feeds the graphs, and the workers' memory limits are watched apart from it
#:   (``distributed.worker.memory.monitor-interval``);
#: - the event-loop health tick ran every 20 ms; every second still warns of a loop
#:   blocked for its limit (3 s).
QUIET: dict[str, Any] = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.system-monitor.interval": "10s",
    "distributed.admin.tick.interval": "1s",
}


def local_workers() -> int:
    """The worker processes of a LocalCluster started here: one per core this process may
    run on (:func:`fastprep.native.threads.cores`, its CPU affinity)."""
    return threads.cores()


def start_local(n_workers: int | None = None, **options: Any) -> Any:
    """A ``distributed.LocalCluster`` of ``n_workers`` single-thread worker processes
    (default :func:`local_workers`), started with :data:`QUIET` (its scheduler, nannies
    and workers read it when made; the settings of this process stay as they were, and a
    worker added later by ``cluster.scale`` starts with them). ``options``: more ``LocalCluster`` arguments (``memory_limit``, ``env``, ...)."""
    import dask
    from distributed import LocalCluster

    options = {"threads_per_worker": 1, "processes": True, "dashboard_address": ":0"} | options
    with dask.config.set(QUIET):
        return LocalCluster(
            n_workers=local_workers() if n_workers is None else n_workers, **options
        )


@contextmanager
def connect(scheduler: str) -> Iterator[tuple[Any, str]]:
    """``(client, where)``: a ``distributed.Client`` of the cluster at ``scheduler`` (an
    address), or of a LocalCluster started for ``"local"`` and closed on exit; ``where``
    says which, for the run's report."""
    try:
        from distributed import Client
    except ImportError:
        raise PipelineDefinitionError(
            f"scheduler {scheduler!r} needs dask.distributed: pip install 'fastprep[distributed]'"
        ) from None
    if scheduler != LOCAL:
        with Client(scheduler) as client:
            yield client, f"the cluster at {scheduler}"
        return
    workers = local_workers()
    cluster = start_local(workers)
    try:
        with Client(cluster) as client:
            yield client, f"a LocalCluster of {workers} worker(s) (started for this run)"
    finally:
        cluster.close()

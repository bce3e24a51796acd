"""A Dask worker's tasks keep to the worker's threads: each task computes on one core.

A worker started with ``nthreads=n`` runs ``n`` tasks at once and is meant to use ``n``
cores (Dask sets ``OMP_NUM_THREADS=1`` in its workers for the same reason). fastprep's
own pool, Numba's ``prange`` kernels and Arrow's CPU pool are each sized to the machine
by default, so a 1-thread worker ran parts of every task on every core (a 1-worker job
was not a one-core job), and two such workers on two cores ran four and more compute
threads against each other (their tasks computed 25-35% more per row than 1 worker's;
with the budget the fit's per-row compute is about equal, see docs/distributed.md). :func:`in_budget` wraps every partition task
the job submits: before the task it applies :func:`fastprep.native.threads.limit` with
the worker's thread count (process-wide, once) and Numba's count in the task's own thread
(:func:`fastprep.native.threads.fit_thread`; Numba's is per thread). ``FASTPREP_THREADS``
set in the workers' environment overrides the one thread per task.

Outside a worker (the client, one process running a job) nothing changes, nor in a worker
that runs inside the client's process (``LocalCluster(processes=False)``): its pools are
the client's too, and a process-wide limit would outlive the job there.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

from fastprep.native import threads
from fastprep.runtime.kept_values import running_worker

R = TypeVar("R")


def worker_nthreads(worker: Any) -> int:
    """The tasks ``worker`` runs at once (``Worker.state.nthreads``; older Dask kept it
    on the worker itself)."""
    state = getattr(worker, "state", None)
    n = getattr(state, "nthreads", None) or getattr(worker, "nthreads", None) or 1
    return max(1, int(n))


def owns_process(worker: Any) -> bool:
    """Whether ``worker`` has its process to itself (a nanny's or ``dask worker``'s), not
    a thread of the client's (``LocalCluster(processes=False)``: the scheduler and the
    other workers there too; Dask tells the two apart the same way): the process-wide
    pools are then the client's as well, and left as they are. A Dask without the
    registries counts as a worker's own process."""
    import distributed

    workers = getattr(distributed.Worker, "_instances", None)
    schedulers = getattr(distributed.Scheduler, "_instances", None)
    if workers is None or schedulers is None:
        return True
    return len(schedulers) == 0 and len(workers) == 1


def fit_to_worker(worker: Any = None) -> bool:
    """Size this process's compute threads for ``worker`` (default: the Dask worker
    running the calling task) and Numba's for the calling thread; False (nothing done)
    outside a worker, or in a worker inside the client's process (:func:`owns_process`)."""
    worker = worker if worker is not None else running_worker()
    if worker is None or not owns_process(worker):
        return False
    threads.limit(worker_nthreads(worker))
    threads.fit_thread()
    return True


def in_budget(func: Callable[..., R], *args: Any, **kwargs: Any) -> R:
    """``func(*args, **kwargs)`` on a Dask worker, its threads fitted to the worker first
    (what ``client.submit(in_budget, func, ...)`` runs)."""
    fit_to_worker()
    return func(*args, **kwargs)


def budget_now() -> dict[str, int]:
    """What this process's compute threads are now (``client.run(budget_now)`` shows a
    cluster's; tests, the benchmark): fastprep's fan-out per task and pool, Arrow's CPU
    count, Numba's threads in the calling thread and the threads it launched (0: Numba not
    imported)."""
    import pyarrow

    numba = None
    if "numba" in sys.modules:
        import numba  # (the statement: another thread may be importing it)
    return {
        "fastprep": threads.workers(),
        "pool": threads.pool_size(),
        "arrow": pyarrow.cpu_count(),
        "numba": int(numba.get_num_threads()) if numba is not None else 0,
        "numba_launched": int(numba.config.NUMBA_NUM_THREADS) if numba is not None else 0,
    }

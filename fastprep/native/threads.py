"""One process-wide thread pool for fastprep's parallel work: text encoding, the hashing
kernels, the Numba backend's hoisted ufuncs, compressing and decompressing output files.

The work is numpy ufuncs, Numba ``nogil`` kernels and Arrow codecs, which release the GIL;
one pool sized to the usable cores keeps them from oversubscribing the machine (several
pools of ``cpu_count`` threads each did when their work overlapped).

- Made on first use: ``import fastprep`` starts no thread.
- A task running on the pool that fans out again runs its pieces inline
  (:func:`map_all`): waiting on the pool from inside it could take every worker.
- A forked child (``multiprocessing`` with fork, a Dask worker started by fork) has none
  of the parent's threads: it forgets the parent's pool and makes its own on first use.
  :func:`shutdown` ends the threads (tests, a worker closing); the next use makes a new
  pool. Interpreter exit joins them (``concurrent.futures`` does that for every pool).

Not here: the streamed run's read-ahead thread, an output writer's file-sync threads and
the kept partitions' spill writer. Each does I/O that must start at once, not queue behind
compute tasks on this pool (a read-ahead that waits for the compute it should overlap
overlaps nothing); they wait on the disk, not on a core, so no budget counts them.

**The budget: the one place that decides how many threads fastprep's work uses.**
:func:`workers` is the threads one task may fan out to: fastprep's pool, and what the
other compute pools of the process get when :func:`limit` is applied. In one process that
is every core the process may run on (its CPU affinity). A process that runs ``tasks``
tasks at once on as many cores (a Dask worker of ``nthreads`` threads: Dask's own rule,
``OMP_NUM_THREADS=1`` in its workers, is one core per worker thread) calls
:func:`limit`: each task then fans out to one thread, and the process-wide pools are sized
for the tasks together: fastprep's pool and Arrow's CPU pool (``pyarrow.set_cpu_count``)
to ``tasks``, Numba's ``prange`` threads to one per task (``NUMBA_NUM_THREADS`` before
Numba is imported; ``numba.set_num_threads``, which is per thread, in each task's thread by
:func:`fit_thread`), numexpr's (the ``numexpr`` backend; process-wide) to one. Without
it a 1-thread Dask worker ran parts of each task on two cores (fastprep's pool, Numba,
Arrow each sized to the machine), and two such workers on two cores ran 4+ compute
threads, slower per row than one.

``FASTPREP_THREADS=n`` (environment) fixes the fan-out of one task to ``n``: in a Dask
worker's tasks every pool above (sized ``n`` per task); in one process fastprep's pool and
fan-out (Numba, Arrow and numexpr keep their own settings there).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from fastprep.errors import PipelineDefinitionError

T = TypeVar("T")
R = TypeVar("R")

#: the environment variable that fixes the threads one task fans out to
ENV = "FASTPREP_THREADS"

_PREFIX = "fastprep-worker"
_LOCK = threading.Lock()
_POOL: ThreadPoolExecutor | None = None
#: the tasks this process runs at once, set by :func:`limit` (a Dask worker's threads);
#: None: one process's work, every core
_TASKS: int | None = None
#: what :func:`limit` changed, to give back: Arrow's CPU count before, and whether it set
#: ``NUMBA_NUM_THREADS`` itself
_ARROW_BEFORE: int | None = None
_NUMBA_ENV_SET = False
_NUMEXPR_BEFORE: int | None = None
_NUMEXPR_ENV_SET = False


def cores() -> int:
    """The cores this process may run on (its CPU affinity)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def override() -> int | None:
    """``FASTPREP_THREADS`` as a number of threads, None when unset or empty."""
    value = os.environ.get(ENV, "").strip()
    if not value:
        return None
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise PipelineDefinitionError(f"{ENV}={value!r}: expected a whole number of threads >= 1")
    return n


def workers() -> int:
    """The threads one task may fan out to: ``FASTPREP_THREADS`` if set; one in a process
    that runs several tasks on a core each (:func:`limit`); else :func:`cores`."""
    fixed = override()
    if fixed is not None:
        return fixed
    return 1 if _TASKS is not None else cores()


def pool_size() -> int:
    """Threads of the pool: one task's fan-out times the tasks that run at once."""
    return workers() * (_TASKS or 1)


def limit(tasks: int | None) -> None:
    """This process runs ``tasks`` tasks at once, each on one core (a Dask worker of
    ``tasks`` threads): fastprep's pool, Arrow's CPU pool and Numba's default threads are
    sized for that (see the module's text); ``None`` gives back one process's budget.
    Process-wide and idempotent: cheap to call at the start of every task. Numba's count
    is per thread: :func:`fit_thread` sets it in the thread that runs the task."""
    global _TASKS
    tasks = None if tasks is None else max(1, int(tasks))
    with _LOCK:
        if tasks == _TASKS:
            return
        _TASKS = tasks
        _resize_pool()
    _size_arrow()
    _size_numba()
    _size_numexpr()


def _resize_pool() -> None:
    """(Under ``_LOCK``.) A pool of another size is let go: its queued work still runs,
    the next use makes one of the new size."""
    global _POOL
    if _POOL is not None and _POOL._max_workers != pool_size():
        _POOL.shutdown(wait=False)
        _POOL = None


def _size_arrow() -> None:
    global _ARROW_BEFORE
    import pyarrow

    if _TASKS is None:
        if _ARROW_BEFORE is not None:
            pyarrow.set_cpu_count(_ARROW_BEFORE)
            _ARROW_BEFORE = None
        return
    if _ARROW_BEFORE is None:
        _ARROW_BEFORE = pyarrow.cpu_count()
    pyarrow.set_cpu_count(pool_size())


def _size_numba() -> None:
    """Numba's default thread count comes from ``NUMBA_NUM_THREADS`` when it is imported:
    set it while it is not (a value the user set is kept); once imported, only
    :func:`fit_thread` can change a thread's count."""
    global _NUMBA_ENV_SET
    if "numba" in sys.modules:
        return
    _NUMBA_ENV_SET = _env_for_import("NUMBA_NUM_THREADS", _NUMBA_ENV_SET)


def _size_numexpr() -> None:
    """numexpr (the ``numexpr`` backend) has one process-wide thread count, which each
    ``evaluate`` fans out to: one task's share; ``NUMEXPR_NUM_THREADS`` while it is not
    imported (it reads it then; a value the user set is kept)."""
    global _NUMEXPR_BEFORE, _NUMEXPR_ENV_SET
    if "numexpr" in sys.modules:
        import numexpr

        if _TASKS is None:
            if _NUMEXPR_BEFORE is not None:
                numexpr.set_num_threads(_NUMEXPR_BEFORE)
                _NUMEXPR_BEFORE = None
            return
        before = numexpr.set_num_threads(workers())
        if _NUMEXPR_BEFORE is None:
            _NUMEXPR_BEFORE = before
        return
    _NUMEXPR_ENV_SET = _env_for_import("NUMEXPR_NUM_THREADS", _NUMEXPR_ENV_SET)


def _env_for_import(name: str, set_here: bool) -> bool:
    """A library not imported yet reads its thread count from the environment variable
    ``name`` when it is: set it to one task's share under a budget, remove it when the
    budget is given back; a value the user set is kept. Returns whether ``name`` is now
    this module's (``set_here``: it was before)."""
    if _TASKS is None:
        if set_here:
            os.environ.pop(name, None)
        return False
    if set_here or name not in os.environ:
        os.environ[name] = str(workers())
        return True
    return False


def fit_thread() -> None:
    """Numba's thread count for the calling thread (``numba.set_num_threads`` is
    per thread) to :func:`workers`, at most what Numba launched; nothing when Numba is
    not imported (it then starts with ``NUMBA_NUM_THREADS``, see :func:`limit`)."""
    if "numba" not in sys.modules:
        return
    # the statement, not the module in sys.modules: another task's thread may be importing
    # it now, and the import waits for that to finish where sys.modules has it half made
    import numba

    want = min(workers(), int(numba.config.NUMBA_NUM_THREADS))
    if numba.get_num_threads() != want:
        numba.set_num_threads(want)


def pool() -> ThreadPoolExecutor:
    """The process's pool (made on first use; made again when its size is no longer
    :func:`pool_size`: ``FASTPREP_THREADS`` changed since, or ``workers`` was patched)."""
    global _POOL
    with _LOCK:
        _resize_pool()
        if _POOL is None:
            _POOL = ThreadPoolExecutor(pool_size(), thread_name_prefix=_PREFIX)
        return _POOL


def on_pool_thread() -> bool:
    """Whether the calling thread is one of the pool's."""
    return threading.current_thread().name.startswith(_PREFIX)


def map_all(func: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """``[func(x) for x in items]``, on the pool (in order); inline when there is one
    item, the caller is a pool thread itself, or the task's budget is one thread."""
    items = list(items)
    if len(items) <= 1 or on_pool_thread() or workers() <= 1:
        return [func(x) for x in items]
    return list(pool().map(func, items))


def imap(func: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
    """Results of ``func`` over ``items`` in order as they are ready (the pool works
    ahead), so a caller can write each while later ones compute; inline on a pool thread."""
    if on_pool_thread():
        return map(func, items)
    return pool().map(func, items)


def submit(func: Callable[..., R], *args: Any) -> Any:
    """``pool().submit``: a future of ``func(*args)``."""
    return pool().submit(func, *args)


def shutdown() -> None:
    """End the pool's threads (after their queued work); the next use makes a new pool."""
    global _POOL
    with _LOCK:
        old, _POOL = _POOL, None
    if old is not None:
        old.shutdown(wait=True)


def _forget_after_fork() -> None:
    """In a forked child: the parent's pool object has no threads here; drop it."""
    global _POOL, _LOCK
    _LOCK = threading.Lock()
    _POOL = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)

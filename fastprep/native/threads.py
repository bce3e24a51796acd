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

Not here: the streamed run's read-ahead thread and an output writer's file-sync threads.
Each does I/O that must start at once, not queue behind compute tasks on
this pool (a read-ahead that waits for the compute it should overlap overlaps nothing).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

_PREFIX = "fastprep-worker"
_LOCK = threading.Lock()
_POOL: ThreadPoolExecutor | None = None


def workers() -> int:
    """Threads of the pool: the cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def pool() -> ThreadPoolExecutor:
    """The process's pool (made on first use)."""
    global _POOL
    with _LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(workers(), thread_name_prefix=_PREFIX)
        return _POOL


def on_pool_thread() -> bool:
    """Whether the calling thread is one of the pool's."""
    return threading.current_thread().name.startswith(_PREFIX)


def map_all(func: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """``[func(x) for x in items]``, on the pool (in order); inline when there is one
    item or the caller is a pool thread itself."""
    items = list(items)
    if len(items) <= 1 or on_pool_thread():
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

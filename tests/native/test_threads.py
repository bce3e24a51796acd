"""The process-wide thread pool: made on first use, no deadlock when a task fans out,
a forked child makes its own, shut down and made again."""

from __future__ import annotations

import os
import threading

import pytest

from fastprep.native import threads


def test_map_all_keeps_order_and_runs_on_the_pool() -> None:
    names = threads.map_all(lambda i: (i, threading.current_thread().name), range(8))
    assert [i for i, _ in names] == list(range(8))
    assert all(name.startswith("fastprep-worker") for _, name in names)
    assert threads.pool()._max_workers == threads.workers()


def test_a_task_that_fans_out_runs_its_pieces_inline() -> None:
    """Every worker waiting on the pool from inside it would deadlock."""

    def outer(i: int) -> list[int]:
        return threads.map_all(lambda j: i * 10 + j, range(threads.workers() * 2))

    out = threads.map_all(outer, range(threads.workers() * 2))
    assert out[1][:3] == [10, 11, 12]


def test_shutdown_then_a_new_pool() -> None:
    first = threads.pool()
    threads.shutdown()
    assert threads.pool() is not first
    assert threads.map_all(lambda x: x + 1, [1, 2]) == [2, 3]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork only")
def test_a_forked_child_makes_its_own_pool() -> None:
    parent = threads.pool()
    threads.map_all(lambda x: x, range(4))  # the parent's threads exist
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the parent's pool must be forgotten, a new one must work
        try:
            ok = threads._POOL is None and threads.map_all(lambda x: x * 2, [1, 2]) == [2, 4]
            os.write(write, b"1" if ok and threads.pool() is not parent else b"0")
        finally:
            os._exit(0)
    os.close(write)
    assert os.read(read, 1) == b"1"
    os.waitpid(pid, 0)
    os.close(read)


def test_outside_a_budget_one_task_uses_every_core() -> None:
    assert threads.workers() == threads.cores() == threads.pool_size()


def test_a_process_of_tasks_on_a_core_each_and_back() -> None:
    """What a Dask worker of two threads applies; given back after (xdist shares this
    process between files)."""
    import numexpr
    import pyarrow

    arrow, numexpr_threads = pyarrow.cpu_count(), numexpr.get_num_threads()
    numba_env = os.environ.get("NUMBA_NUM_THREADS")
    try:
        threads.limit(2)
        threads.limit(2)  # idempotent
        assert threads.workers() == 1 and threads.pool_size() == 2
        assert pyarrow.cpu_count() == 2 and numexpr.get_num_threads() == 1
        assert threads.pool()._max_workers == 2
        # one thread per task: a fan-out runs inline, in the task's own thread
        here = threading.current_thread().name
        assert threads.map_all(lambda _: threading.current_thread().name, range(4)) == [here] * 4
        threads.limit(1)
        assert threads.pool()._max_workers == 1 and pyarrow.cpu_count() == 1
    finally:
        threads.limit(None)
        threads.fit_thread()
    assert threads.workers() == threads.cores() == threads.pool()._max_workers
    assert pyarrow.cpu_count() == arrow and numexpr.get_num_threads() == numexpr_threads
    assert os.environ.get("NUMBA_NUM_THREADS") == numba_env


def test_fastprep_threads_fixes_the_fan_out(monkeypatch: pytest.MonkeyPatch) -> None:
    from fastprep.errors import PipelineDefinitionError

    monkeypatch.setenv(threads.ENV, "3")
    assert threads.workers() == 3 and threads.pool_size() == 3
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv(threads.ENV, bad)
        with pytest.raises(PipelineDefinitionError, match=threads.ENV):
            threads.workers()
    monkeypatch.setenv(threads.ENV, "")
    assert threads.workers() == threads.cores()


def test_the_pool_follows_its_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pool made while ``FASTPREP_THREADS`` (or a patched ``workers``) said 3 is not
    the pool once it says otherwise: later calls get a pool of the size in force."""
    monkeypatch.setenv(threads.ENV, "3")
    assert threads.pool()._max_workers == 3
    monkeypatch.delenv(threads.ENV)
    assert threads.pool()._max_workers == threads.pool_size() == threads.workers()
    assert threads.map_all(lambda i: i * 2, range(5)) == [0, 2, 4, 6, 8]

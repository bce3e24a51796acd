"""A partition of a larger job chooses its helper kernels' paths as the whole job would:
the one-time cost of a kernel (a load from Numba's disk cache, a compile) is weighed
against the job's saving, not one partition's."""

from __future__ import annotations

import threading

import pytest

from fastprep.data.partitions import plan_partitions
from fastprep.planning import planner
from fastprep.runtime import partition_tasks


@pytest.fixture
def numba_loaded_process(monkeypatch):
    monkeypatch.delenv("FASTPREP_KERNEL_PATH", raising=False)
    monkeypatch.setattr(planner, "numba_imported", lambda: True)
    monkeypatch.setattr(planner, "_learned", lambda _name: None)  # the generic rates


def test_a_cached_kernel_is_loaded_for_a_large_jobs_partition(numba_loaded_process) -> None:
    # 500,000 values: numpy 5 ms against Numba 1 ms + a 12 ms load from the disk cache
    assert planner.kernel_path("scan", 500_000, cached=True) == "numpy"
    with planner.part_of_job(3_367_760, 500_000):
        assert planner.job_scale() == pytest.approx(3_367_760 / 500_000)
        assert planner.kernel_path("scan", 500_000, cached=True) == "numba"
    assert planner.job_scale() == 1.0
    assert planner.kernel_path("scan", 500_000, cached=True) == "numpy"


def test_the_job_scale_never_lowers_a_choice(numba_loaded_process) -> None:
    with planner.part_of_job(500_000, 500_000):  # the whole job in one part: as before
        assert planner.kernel_path("scan", 500_000, cached=True) == "numpy"
    with planner.part_of_job(0, 500_000):  # the job's rows unknown
        assert planner.kernel_path("scan", 500_000, cached=True) == "numpy"
    with planner.part_of_job(100, 500_000):  # a part larger than its job: scale 1
        assert planner.job_scale() == 1.0
    with planner.part_of_job(3_367_760, 500_000):  # loaded: always Numba
        assert planner.kernel_path("scan", 500_000, cached=True, loaded=True) == "numba"


def test_a_compile_is_weighed_against_the_whole_jobs_saving(numba_loaded_process) -> None:
    # compile 2.3 s: the 3.4M-row job saves ~27 ms on it (one process would not compile
    # either); a 2-billion-row job saves ~16 s
    with planner.part_of_job(3_367_760, 500_000):
        assert planner.kernel_path("scan", 500_000, cached=False) == "numpy"
        assert "larger job's share" in planner.PATHS["scan"]
    with planner.part_of_job(2_000_000_000, 500_000):
        assert planner.kernel_path("scan", 500_000, cached=False) == "numba"


def test_import_is_decided_by_the_jobs_rows(monkeypatch) -> None:
    monkeypatch.delenv("FASTPREP_KERNEL_PATH", raising=False)
    monkeypatch.setattr(planner, "numba_imported", lambda: False)  # a fresh process
    assert planner.kernel_path("scan", 500_000, cached=True) == "numpy"
    assert "would not repay its import" in planner.PATHS["scan"]
    with planner.part_of_job(50_000_000, 500_000):
        assert planner.kernel_path("scan", 500_000, cached=True) == "numba"


def test_the_scale_is_the_calling_threads_own() -> None:
    seen = []
    with planner.part_of_job(10_000_000, 500_000):
        thread = threading.Thread(target=lambda: seen.append(planner.job_scale()))
        thread.start()
        thread.join()
        assert planner.job_scale() == 20.0
    assert seen == [1.0]  # another task's thread, in the same worker: not this job's


def test_partition_tasks_run_as_parts_of_their_job(flights_parquet, flights_pipeline) -> None:
    spec = plan_partitions(str(flights_parquet), 5_000)[0]
    job = partition_tasks.Job(flights_pipeline.optimized, flights_pipeline.schema, rows=80_000)

    @partition_tasks.part_of_job
    def task(job: partition_tasks.Job, spec, extra: int = 0) -> float:
        return planner.job_scale() + extra

    assert task(job, spec, extra=1) == 80_000 / spec.n_rows + 1
    assert planner.job_scale() == 1.0
    assert partition_tasks.fit_partials.__name__ == "fit_partials"  # Dask's task names


def test_a_partitions_calls_on_numpy_rewrite_the_ledger_at_most_once_a_second(
    tmp_path, monkeypatch, numba_loaded_process
) -> None:
    """Every task of a job on a kernel not yet compiled adds to its debt dozens of times;
    the file is rewritten at most once per interval, the rest when the process exits."""
    import json

    monkeypatch.setenv("FASTPREP_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(planner, "_DISK", None)
    monkeypatch.setattr(planner, "_LAST_SAVE", [float("-inf")])
    ledger = tmp_path / "kernels" / "forgone.json"
    for _ in range(50):
        assert planner.kernel_path("scan", 500_000, cached=False) == "numpy"
    first = json.loads(ledger.read_text())["helper:scan"]
    assert 0.0 < first < planner._disk_forgone("helper:scan")  # one write, the first call's
    assert planner._SAVE_REGISTERED  # the rest: at exit
    planner._save_forgone()
    assert json.loads(ledger.read_text())["helper:scan"] == planner._disk_forgone("helper:scan")

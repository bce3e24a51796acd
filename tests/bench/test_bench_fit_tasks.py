"""Smoke run of benchmarks/bench_fit_tasks.py on the bundled sample with one worker: every
first-pass task of the fit is timed (stages, CPU, faults, result size) and the passes'
timeline is reported. Benchmarks are not tests; this keeps the instrument working (slow: a
LocalCluster and three jobs, ~10-40 s on 2 shared cores)."""

from __future__ import annotations

import sys

import pytest
from support import REPO


@pytest.mark.slow
def test_fit_task_timers_cover_every_first_pass_task() -> None:
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import bench_fit_tasks
    finally:
        sys.path.pop(0)
    path = REPO / "data_samples" / "flights.parquet"
    runs, tasks = bench_fit_tasks.measure(["1"], path, 5_000, repeat=1, show=False)
    first = [t for t in tasks["1"] if t["first_pass"]]
    assert sum(t["rows"] for t in first) == 20_000
    for task in first:
        assert 0 < task["read"] <= task["total"] and task["prepare"] > 0 and task["pack"] > 0
        assert task["thread"] > 0 and task["bytes"] > 0 and task["faults"] >= 0
    (run,) = runs["1"]
    assert {"fit level 0", "transform"} <= set(run["spans"])
    line = bench_fit_tasks.describe("1", run, tasks["1"])
    assert "first pass per row" in line and "median window" in line
    assert bench_fit_tasks.summarize("1", tasks["1"])

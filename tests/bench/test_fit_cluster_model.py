"""The cluster cost model's fit (benchmarks/fit_cluster_model.py) recovers the constants
of runs made by the model itself, from bench_cluster.py's JSON layout, and the planner
predicts with the same formula."""

from __future__ import annotations

import json

import pytest

from benchmarks import fit_cluster_model as model
from fastprep.planning import planner

TRUE = {"dask_job_seconds": 0.3, "dask_task_seconds": 0.02, "dask_row_seconds": 5e-7,
        "dask_scheduler_task_seconds": 0.01}  # fmt: skip


def _point(rows: int, partition: int) -> dict:
    tasks = -(-rows // partition)
    runs = {}
    for config, workers in model.WORKERS.items():
        seconds = model.predict(TRUE, rows, tasks, workers, 3, 3)
        runs[config] = [{"seconds": seconds, "tasks": 3 * tasks,
                         "pass_seconds": {"fit level 0": 0, "fit level 0 median": 0, "transform": 0}}]  # fmt: skip
    runs["single"] = [{"seconds": 1.0}]  # not a cluster run: not fitted
    return {"rows": rows, "partition": partition, "runs": runs}


def test_fit_recovers_the_model_and_the_planner_agrees(tmp_path) -> None:
    points = [_point(r, p) for r in (336_776, 3_367_760) for p in (25_000, 100_000, 500_000)]
    file = tmp_path / "runs.json"
    file.write_text(json.dumps({"points": points}))
    obs = model.observations([file])
    assert len(obs) == 12 and {o["passes"] for o in obs} == {3}
    fitted = model.fit(obs)
    for name, value in TRUE.items():
        assert fitted[name] == pytest.approx(value, rel=1e-6, abs=1e-9)
    profile = planner.CostProfile(**fitted)
    assert planner.dask_job_seconds(profile, 3_367_760, 7, 2, 3) == pytest.approx(
        model.predict(fitted, 3_367_760, 7, 2, 3, 3)
    )
    # 7 tasks on 2 workers: the busiest runs 4 of them per pass
    assert model.predict(fitted, 3_367_760, 7, 2, 3, 3) == pytest.approx(
        model.predict(fitted, 3_367_760, 8, 2, 3, 3)
        - 3 * TRUE["dask_scheduler_task_seconds"]
        + 3 * 4 * 3_367_760 * 5e-7 * (1 / 7 - 1 / 8)
    )
    # a worker more stops paying where it gains < 10%, each N with the partitions planned
    # for it (a multiple of N)
    stops = model.scaling_stops(fitted, 10_000_000, 500_000, 3, 3)

    def wall(n: int) -> float:
        return model.balanced_predict(fitted, 10_000_000, 500_000, n, 3, 3)

    assert wall(stops) - wall(stops + 1) < 0.1 * wall(stops)
    assert wall(stops - 1) - wall(stops) >= 0.1 * wall(stops - 1)


def test_a_pass_run_from_kept_values_counts_no_rows() -> None:
    # the median pass's tasks computed for milliseconds against the first pass's seconds
    run = {"pass_seconds": {"fit level 0": 1.9, "fit level 0 median": 0.04, "transform": 1.6},
           "per_pass": {"fit level 0": {"compute_seconds": 1.97},
                        "fit level 0 median": {"compute_seconds": 0.025},
                        "transform": {"compute_seconds": 1.6}}}  # fmt: skip
    assert model._reading(run) == 2
    assert model._reading({"pass_seconds": run["pass_seconds"]}) == 3  # no per-pass times
    light = model.predict(TRUE, 3_367_760, 8, 2, 3, 2)
    assert model.predict(TRUE, 3_367_760, 8, 2, 3, 3) - light == pytest.approx(
        3_367_760 * TRUE["dask_row_seconds"] / 2
    )


def test_the_warm_tiny_jobs_are_observations(tmp_path) -> None:
    file = tmp_path / "runs.json"
    file.write_text(json.dumps({"fixed": {"1w": 0.2, "2w": 0.15}, "points": []}))
    obs = model.observations([file])
    assert [(o["workers"], o["tasks"], o["rows"], o["seconds"]) for o in obs] == [
        (1, 2, 20_000, 0.2), (2, 2, 20_000, 0.15)]  # fmt: skip

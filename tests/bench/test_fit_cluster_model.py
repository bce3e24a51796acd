"""The cluster cost model's fit (benchmarks/fit_cluster_model.py) recovers the constants
of runs made by the model itself, from bench_cluster.py's JSON layout, and the planner
predicts with the same formula."""

from __future__ import annotations

import json

import pytest

from benchmarks import fit_cluster_model as model
from fastprep.planning import planner

TRUE = {"dask_job_seconds": 0.3, "dask_task_seconds": 0.02, "dask_row_seconds": 5e-7,
        "dask_scheduler_task_seconds": 0.01, "dask_transform_row_seconds": 3e-7,
        "dask_pass_latency_seconds": 0.015, "dask_light_row_seconds": 4e-9}  # fmt: skip
STAGES = ("fit level 0", "fit level 0 median", "transform")


def _run(rows: int, partitions: int, workers: int, kept: int) -> dict:
    """A run as bench_cluster.py records it, its passes' walls from the model."""
    passes = model.flights_passes(kept / partitions)
    walls = {stage: model.predict(TRUE, rows, partitions, workers, [p]) - TRUE["dask_job_seconds"]
             for stage, p in zip(STAGES, passes)}  # fmt: skip
    # the transform: a task per worker for its kept partitions, one per partition read
    tasks = {"fit level 0": partitions, "fit level 0 median": min(partitions, workers),
             "transform": partitions - kept + (min(partitions, workers) if kept else 0)}  # fmt: skip
    return {"seconds": TRUE["dask_job_seconds"] + sum(walls.values()),
            "tasks": sum(tasks.values()), "pass_seconds": walls, "kept_partitions": kept,
            "outside_passes_seconds": TRUE["dask_job_seconds"],
            "per_pass": {s: {"tasks": tasks[s], "compute_seconds": 1.0 if s != STAGES[1] else 0.01}
                         for s in STAGES}}  # fmt: skip


def _point(rows: int, partition: int) -> dict:
    partitions = -(-rows // partition)
    runs = {config: [_run(rows, partitions, workers, partitions - (rows > 1_000_000))]
            for config, workers in model.WORKERS.items()}  # fmt: skip
    runs["single"] = [{"seconds": 1.0}]  # not a cluster run: not fitted
    return {"rows": rows, "partition": partition, "runs": runs}


def test_fit_recovers_the_model_and_the_planner_agrees(tmp_path) -> None:
    points = [_point(r, p) for r in (336_776, 3_367_760) for p in (25_000, 100_000, 500_000)]
    file = tmp_path / "runs.json"
    file.write_text(json.dumps({"points": points}))
    obs = model.observations([file])
    assert len([o for o in obs if o["what"] == "run"]) == 12
    fitted = model.fit(obs)
    for name, value in TRUE.items():
        assert fitted[name] == pytest.approx(value, rel=1e-6, abs=1e-9)
    profile = planner.CostProfile(**fitted)
    # flights: a reading fit pass, its median's from the kept values, the transform from
    # the kept partitions (7 of 8 here: the eighth read and validated again)
    assert planner.dask_job_seconds(profile, 3_367_760, 8, 2, 1, light=1, kept=7 / 8) == (
        pytest.approx(model.predict(fitted, 3_367_760, 8, 2, model.flights_passes(7 / 8)))
    )
    # 7 tasks on 2 workers: the busiest runs 4 of them per pass (and scans their kept
    # values in the light pass); one task fewer for the scheduler (the reading pass: the
    # transform's kept partitions are a task per worker)
    assert model.predict(fitted, 3_367_760, 7, 2) == pytest.approx(
        model.predict(fitted, 3_367_760, 8, 2)
        - 1 * TRUE["dask_scheduler_task_seconds"]
        + 4 * 3_367_760 * (5e-7 + 3e-7 + 4e-9) * (1 / 7 - 1 / 8)
    )
    # a worker more stops paying where it gains < 10%, each N with the partitions planned
    # for it (a multiple of N)
    stops = model.scaling_stops(fitted, 10_000_000, 500_000)

    def wall(n: int) -> float:
        return model.balanced_predict(fitted, 10_000_000, 500_000, n)

    assert wall(stops) - wall(stops + 1) < 0.1 * wall(stops)
    assert wall(stops - 1) - wall(stops) >= 0.1 * wall(stops - 1)


def test_a_pass_run_from_kept_values_counts_no_rows() -> None:
    # the median pass's tasks computed for milliseconds against the first pass's seconds
    run = {"pass_seconds": {"fit level 0": 1.9, "fit level 0 median": 0.04, "transform": 1.6},
           "per_pass": {"fit level 0": {"compute_seconds": 1.97, "tasks": 8},
                        "fit level 0 median": {"compute_seconds": 0.025, "tasks": 2},
                        "transform": {"compute_seconds": 1.6, "tasks": 8}}}  # fmt: skip
    assert [p["kind"] for p in model._kinds(run, 8)] == ["read", "light", "transform"]
    light = model._pass_features("light", 3_367_760, 8, 2, None, 1.0)
    # a task per worker, no rows read: its latency, and the busiest worker's kept values
    assert light == [0.0, 1, 0.0, 2, 0.0, 1.0, 4 * 3_367_760 / 8]
    assert planner.dask_light_pass_seconds(
        planner.CostProfile(**TRUE), 8, 2, 3_367_760
    ) == pytest.approx(
        TRUE["dask_pass_latency_seconds"] + TRUE["dask_task_seconds"]
        + 2 * TRUE["dask_scheduler_task_seconds"] + 4 * 3_367_760 / 8 * 4e-9
    )  # fmt: skip


def test_the_warm_tiny_jobs_are_observations(tmp_path) -> None:
    file = tmp_path / "runs.json"
    file.write_text(json.dumps({"fixed": {"1w": 0.2, "2w": 0.15}, "points": []}))
    obs = model.observations([file])
    assert [(o["workers"], o["tasks"], o["rows"], o["seconds"]) for o in obs] == [
        (1, 2, 20_000, 0.2), (2, 2, 20_000, 0.15)]  # fmt: skip


def test_compute_per_row_by_workers_and_the_recorded_budget(tmp_path) -> None:
    """The check of one `row` for every N: the tasks' compute a row per pass on 1 and 2
    workers (and their ratio); files say whether their workers kept to one core a task."""
    point = _point(3_367_760, 500_000)
    point["runs"]["2w"][0]["per_pass"]["transform"]["compute_seconds"] = 1.5
    point["runs"]["2w-fan"] = point["runs"]["2w"]  # the budget's A/B: not fitted
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    before.write_text(json.dumps({"points": [point]}))
    one = {"fastprep": 1, "pool": 1, "arrow": 1, "numba": 1, "numba_launched": 1}
    after.write_text(json.dumps({"points": [point], "budget": {"1w": [one], "2w": [one, one]}}))
    lines = model.compute_per_row([before])
    transform = next(line for line in lines if "transform" in line)
    assert "1 worker(s) 0.297 us" in transform and "(2 / 1: 1.50x)" in transform
    said = model.budgets([before, after])
    assert "not recorded" in said[0]
    assert said[1:] == ["  after.json 1w: (fastprep, Numba, Arrow) threads per task (1, 1, 1)",
                        "  after.json 2w: (fastprep, Numba, Arrow) threads per task (1, 1, 1)"]  # fmt: skip


def test_write_replaces_the_fitted_block_only(tmp_path) -> None:
    """``--write``: the block between the markers becomes the constants with their
    provenance; the rest of the file is untouched, and writing again changes nothing."""
    points = [_point(r, p) for r in (336_776, 3_367_760) for p in (25_000, 100_000, 500_000)]
    file = tmp_path / "runs.json"
    file.write_text(json.dumps({"points": points}))
    obs = model.observations([file])
    block = model.constants_block(model.fit(obs), obs, [file])
    target = tmp_path / "planner.py"
    before = "class CostProfile:\n    a: float = 1.0\n" + model.BEGIN + "    old: float = 2.0\n"
    target.write_text(before + model.END + "    source: str = 'defaults'\n")
    model.write_block(block, target)
    text = target.read_text()
    assert text.startswith("class CostProfile:\n    a: float = 1.0\n" + model.BEGIN)
    assert text.endswith(model.END + "    source: str = 'defaults'\n") and "old" not in text
    assert "benchmarks/cluster_runs/runs.json" in text
    assert "    dask_row_seconds: float = 5e-07\n" in text  # recovered exactly, a float literal
    assert "    dask_fit_error: float = 0.00\n" in text
    model.write_block(block, target)
    assert target.read_text() == text

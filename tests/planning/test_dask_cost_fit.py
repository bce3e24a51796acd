"""The planner's Dask constants predict the quiet cluster run they were fitted to: each
configuration's median whole job within the fit's own largest error (``dask_fit_error``),
the prediction made the way ``explain`` and the pre-flight make it."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import pytest

from fastprep.planning import planner

REPO = Path(__file__).resolve().parents[2]
#: the constants are rounded to 3 significant digits and the error to 2 decimals
ROUNDING = 0.01


def _fitted_files() -> list[Path]:
    """The runs the fitted block of ``CostProfile`` names as its provenance."""
    text = (REPO / "fastprep" / "planning" / "planner.py").read_text()
    block = text[
        text.index("fitted dask constants: begin") : text.index("fitted dask constants: end")
    ]
    names = re.findall(r"benchmarks/cluster_runs/([\w.\-]+\.json)", block)
    assert names, "the fitted block names the runs it was fitted to"
    return [REPO / "benchmarks" / "cluster_runs" / name for name in names]


def _configurations(file: Path) -> list[tuple[str, int, int, int, float, float]]:
    """(what, rows, partitions, workers, kept share, median seconds) per configuration."""
    data = json.loads(file.read_text())
    out = []
    for config, seconds in data.get("fixed", {}).items():
        if config in ("1w", "2w"):  # the warm 20,000-row job: 2 partitions, all kept
            out.append((f"{config} 20,000 rows", 20_000, 2, int(config[0]), 1.0, seconds))
    for point in data["points"]:
        for config in ("1w", "2w"):
            runs = point["runs"][config]
            first = runs[0]
            # the reading pass's tasks: one per partition (older runs: the tasks per pass)
            passes = first.get("per_pass") or {}
            partitions = max((p["tasks"] for p in passes.values()),
                             default=first["tasks"] // max(len(first["pass_seconds"]), 1))  # fmt: skip
            kept = statistics.median(r.get("kept_partitions", partitions) for r in runs)
            median = statistics.median(r["seconds"] for r in runs)
            what = f"{config} {point['rows']:,} rows"
            out.append((what, point["rows"], partitions, int(config[0]), kept / partitions, median))
    return out


@pytest.mark.parametrize("file", _fitted_files(), ids=lambda f: f.name)
def test_the_fitted_runs_are_predicted_within_the_fits_error(file: Path) -> None:
    profile = planner.CostProfile()
    assert 0.0 < profile.dask_fit_error < 0.5
    found = _configurations(file)
    assert len(found) >= 4
    for what, rows, partitions, workers, kept, measured in found:
        # flights: a reading fit pass, its median's pass from the kept values, the transform
        predicted = planner.dask_job_seconds(
            profile, rows, partitions, workers, 1, light=1, kept=kept
        )
        error = abs(predicted - measured) / measured
        assert error <= profile.dask_fit_error + ROUNDING, (what, predicted, measured)


def test_a_pass_is_its_latency_rounds_and_scheduler() -> None:
    profile = planner.CostProfile(
        dask_pass_latency_seconds=0.02, dask_task_seconds=0.1, dask_row_seconds=1e-6,
        dask_scheduler_task_seconds=0.01, dask_transform_row_seconds=5e-7,
        dask_light_row_seconds=1e-8,
    )  # fmt: skip
    # 8 tasks of 1M rows on 2 workers: 4 rounds of (0.1 + 125,000 rows) on the busiest
    assert planner.dask_pass_seconds(profile, 1_000_000, 8, 2) == pytest.approx(
        0.02 + 4 * (0.1 + 0.125) + 8 * 0.01
    )
    # from the kept values: a task per worker, scanning its 4 partitions' values
    assert planner.dask_light_pass_seconds(profile, 8, 2, 1_000_000) == pytest.approx(
        0.02 + 0.1 + 2 * 0.01 + 500_000 * 1e-8
    )
    # the transform from kept partitions: a task per worker for the scheduler, but the
    # busiest worker's 4 partitions each their fixed cost and rows
    assert planner.dask_transform_seconds(profile, 1_000_000, 8, 2, 1.0) == pytest.approx(
        0.02 + 4 * (0.1 + 125_000 * 5e-7) + 2 * 0.01
    )


def test_a_stored_profile_follows_the_shipped_dask_constants(tmp_path) -> None:
    """A calibrated profile stores what it measured: a later re-fit of the Dask constants
    (which calibrate does not measure) reaches a machine that calibrated before it."""
    profile = planner.CostProfile(numba_compile_seconds=1.5, source="calibrated")
    stored = profile.to_dict()
    assert stored == {"format_version": planner.PROFILE_VERSION, "numba_compile_seconds": 1.5,
                      "source": "calibrated"}  # fmt: skip
    path = planner.save_profile(profile, tmp_path / "p.json")
    assert planner.load_profile(path) == profile
    assert planner.load_profile(path).dask_row_seconds == planner.CostProfile().dask_row_seconds


def test_the_busiest_worker_of_unequal_partitions() -> None:
    # a file's row groups packed into 500,000-row partitions, some of 250,000: largest
    # first, each to the first worker free, one worker ends with 1.75M rows of 3,367,760
    sizes = [500_000, 250_000, 500_000, 500_000, 250_000, 500_000, 500_000, 367_760]
    assert planner.busiest_worker_rows(sizes, 2) == 1_750_000
    assert planner.busiest_worker_rows([5_000] * 4, 2) == 10_000  # equal: ceil(T / N) shares
    assert planner.busiest_worker_rows([7], 4) == 7
    profile = planner.CostProfile()
    equal = planner.dask_pass_seconds(profile, 3_367_760, 8, 2)
    unequal = planner.dask_pass_seconds(profile, 3_367_760, 8, 2, busiest=1_750_000)
    assert unequal - equal == pytest.approx(
        (1_750_000 - 4 * 3_367_760 / 8) * profile.dask_row_seconds
    )

"""A cost profile stored by an earlier fastprep (every constant written, the Dask ones
included, though ``calibrate`` never measured them) and profiles with values no cost can
take."""

from __future__ import annotations

import json
import math

import pytest

from fastprep.planning import planner

#: ``CostProfile.to_dict()`` of the version before the Dask constants were re-fitted (and
#: before a profile stored only what differs from the shipped constants): a machine that
#: ran ``fastprep calibrate`` then has this file, its measured constants beside copies of
#: that version's shipped ones
STORED_BEFORE = {
    "format_version": 1, "pandas_stage_seconds": 0.00031, "pandas_row_unit_seconds": 2.1e-08,
    "pandas_hash_row_unit_seconds": 1.1e-07, "numba_stage_seconds": 0.00012,
    "numba_row_unit_seconds": 9e-09, "numba_hash_row_unit_seconds": 4e-08,
    "numba_import_seconds": 0.6, "numba_cache_load_seconds": 0.011,
    "numba_compile_seconds": 2.7, "numba_hash_load_seconds": 0.02,
    "numba_hash_compile_seconds": 4.0, "memory_headroom": 0.25, "memory_working_copies": 4.7,
    "run_row_seconds": 1e-06, "dask_cluster_start_seconds": 4.0, "dask_job_seconds": 0.0675,
    "dask_task_seconds": 0.0, "dask_scheduler_task_seconds": 0.00531,
    "dask_row_seconds": 3.55e-07, "dask_transform_row_seconds": 3.71e-07,
    "source": "fastprep calibrate on vm (x86_64), 2026-12-04T10:00:00+00:00",
}  # fmt: skip

DASK = ("dask_job_seconds", "dask_task_seconds", "dask_row_seconds",
        "dask_scheduler_task_seconds", "dask_transform_row_seconds")  # fmt: skip


def test_a_profile_calibrated_before_follows_the_refitted_dask_constants(tmp_path) -> None:
    path = tmp_path / "cost_profile.json"
    path.write_text(json.dumps(STORED_BEFORE))
    loaded = planner.load_profile(path)
    assert loaded.numba_compile_seconds == 2.7  # what calibrate measured stays
    shipped = planner.CostProfile()
    assert {n: getattr(loaded, n) for n in DASK} == {n: getattr(shipped, n) for n in DASK}
    # the job's prediction is the shipped model's (1.55 s against 1.01 s otherwise)
    assert planner.dask_job_seconds(loaded, 3_367_760, 7, 2, 1, light=1, kept=1.0) == (
        pytest.approx(planner.dask_job_seconds(shipped, 3_367_760, 7, 2, 1, light=1, kept=1.0))
    )


@pytest.mark.parametrize("value", [math.inf, True])
def test_a_value_no_cost_can_take_is_a_clear_error(value) -> None:
    with pytest.raises(ValueError, match="dask_row_seconds"):
        planner.CostProfile.from_dict({"format_version": 2, "dask_row_seconds": value})

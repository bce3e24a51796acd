"""A fit pass keeps its order-statistic values in its process; the window pass after it
takes them back (no read) and gets the same partials as a pass that reads the partition."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fastprep.cli import load_pipeline_file
from fastprep.data.partitions import plan_partitions
from fastprep.runtime import kept_values
from fastprep.runtime.levels import fit_levels
from fastprep.runtime.partition_tasks import Job, fit_partials

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data_samples" / "flights.parquet"


def _passes(pipeline=None):
    """A fit's passes (default: the flights pipeline's two) over the sample's first
    partition: (job, spec, the learned state and targets of each pass)."""
    pipeline = pipeline or load_pipeline_file(REPO / "pipelines" / "flights.py")
    job = Job(pipeline.optimized, pipeline._fit_schema())
    spec = plan_partitions(SAMPLE, 5_000)[0]
    seen = []

    def run_pass(learned, targets, stage):
        seen.append(({k: list(v) for k, v in learned.items()}, targets))
        return [fit_partials(job, spec, learned, targets)]

    fit_levels(job.plan, SAMPLE, run_pass, spec.n_rows)
    return job, spec, seen


def test_window_pass_from_kept_values_equals_a_reading_pass() -> None:
    job, spec, ((learned, targets), (learned2, windows)) = _passes()
    assert any(t[3] == "summary" for t in targets) and all(t[3] == "window" for t in windows)
    chains = tuple(sorted({(f, name) for f, name, *_ in windows}))
    first = fit_partials(job, spec, learned, targets, keep_as="fit-1", inputs=chains)
    assert first["kept"] is True and kept_values.held_bytes() == 8 * first["rows_fit"]
    reused = fit_partials(job, spec, learned2, windows, reuse="fit-1")
    read = fit_partials(job, spec, learned2, windows)
    assert reused.get("reused") and not read.get("reused")
    _same_partials(reused, read)
    assert [reused[k] for k in ("rows_in", "rows_fit")] == [
        read[k] for k in ("rows_in", "rows_fit")
    ]
    assert kept_values.drop(["fit-1"]) == 1 and kept_values.held_bytes() == 0


def test_every_later_level_from_kept_inputs() -> None:
    """A chain fitted over two levels (a fill, a non-linear step, then a scaler): the
    second level's statistics from the kept input equal a reading pass's."""
    import fastprep as fp

    base = load_pipeline_file(REPO / "pipelines" / "flights.py")
    pipeline = fp.Pipeline(
        schema=base.schema,
        features=[fp.col("air_time") >> fp.FillMissing("median") >> fp.Log1p() >> fp.Standardize(),
                  fp.cols("origin") >> fp.OneHot()],
        target=fp.expr("late = arr_delay > 15"),
    )  # fmt: skip
    job, spec, seen = _passes(pipeline)
    assert len(seen) == 3  # level 0, its median pass, level 1
    chains = tuple(sorted({(f, n) for _, targets in seen[1:] for f, n, *_ in targets}))
    fit_partials(job, spec, *seen[0], keep_as="fit-2", inputs=chains)
    for learned, targets in seen[1:]:
        reused = fit_partials(job, spec, learned, targets, reuse="fit-2")
        assert reused.get("reused")
        _same_partials(reused, fit_partials(job, spec, learned, targets))
    kept_values.clear()


def _same_partials(a, b) -> None:
    assert a["partials"].keys() == b["partials"].keys()
    for key, part in b["partials"].items():
        assert repr(a["partials"][key]) == repr(part)


def test_missing_kept_values_read_the_partition() -> None:
    job, spec, (_, (learned2, windows)) = _passes()
    reused = fit_partials(job, spec, learned2, windows, reuse="never-kept")
    assert not reused.get("reused") and reused["rows_in"] == spec.n_rows


def test_store_is_bounded_oldest_out(monkeypatch) -> None:
    monkeypatch.setattr(kept_values, "KEPT_BYTES", 3 * 800)
    values = {"a": np.zeros(100)}  # 800 bytes
    for key in ("k1", "k2", "k3", "k4"):
        assert kept_values.keep(key, {"values": values}, kept_values.nbytes(values))
    assert kept_values.get("k1") is None  # evicted: the least recently used
    assert kept_values.held_bytes() == 3 * 800
    assert not kept_values.keep("big", {}, 4 * 800)  # never fits: not kept
    assert kept_values.drop(["k2", "k3", "k4", "absent"]) == 3
    assert kept_values.held_bytes() == 0

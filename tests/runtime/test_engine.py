"""The run engine: one sequence for every entry point, over a ``FittedState``.

The façade (``Pipeline`` / ``FittedPipeline``) only declares and delegates: what a fit
learned is a :class:`FittedState` that batches, the torch dataset and every later run
consume; the in-memory fit-and-transform asks the engine for the fit rows' output in one
place, and a partitioned one refuses a step whose fit rows get other values."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from support import REPO, assert_same_matrix, streaming_budget

import fastprep as fp
from fastprep.runtime import engine
from fastprep.runtime.batches import BatchStream
from fastprep.runtime.fitted import FittedState

SCHEMA = fp.Schema({
    "dep_delay": fp.Float(nullable=True, min=-120, max=2000),
    "arr_delay": fp.Float(nullable=False),
    "distance": fp.Float(min=0),
    "origin": fp.Category(["EWR", "JFK", "LGA"]),
})  # fmt: skip


def small_pipeline(*steps: fp.plan.steps.Step) -> fp.Pipeline:
    numbers = fp.cols("dep_delay", "distance") >> fp.FillMissing(0)
    for step in steps or (fp.Standardize(),):
        numbers = numbers >> step
    return fp.Pipeline(SCHEMA, [numbers, fp.col("origin") >> fp.OneHot()],
                       target=fp.expr("late = arr_delay > 15"), name="small")  # fmt: skip


def test_fitted_pipeline_wraps_the_state_the_runs_consume(flights_sample):
    pipeline = small_pipeline()
    fitted = pipeline.fit(flights_sample)
    state = fitted.state
    assert isinstance(state, FittedState)
    assert state.plan == pipeline.optimized and state.schema is pipeline.schema
    assert state.name == "small" and state.profile is not None
    assert fitted.params is state.params and fitted.fit_report is state.fit_report
    # batches over the bare state: the rows transform gives, in order
    out = fitted.transform(flights_sample)
    stream = BatchStream(state, flights_sample, batch_size=len(flights_sample))
    (X, y), = list(stream)  # fmt: skip
    assert_same_matrix(X, out.X)
    assert np.array_equal(y, out.y)


def test_every_entry_point_gives_the_same_output(flights_sample, tmp_path):
    """fit_transform's fit-rows output (``engine.transform_fitted_rows``) is
    ``fit().transform()`` for every step today; write_shards streams the same rows."""
    pipeline = small_pipeline()
    fitted, out = pipeline.fit_and_transform(flights_sample)
    again = fitted.transform(flights_sample)
    assert_same_matrix(out.X, again.X)
    assert np.array_equal(out.row_ids, again.row_ids)
    stats = fitted.write_shards(flights_sample, tmp_path / "shards", rows_per_partition=7_000)
    assert stats.partitions == 3 and stats.rows_out == len(out.row_ids)
    assert_same_matrix(fp.open_output(tmp_path / "shards").whole().X, out.X)


@dataclass(frozen=True)
class OutOfFoldStandardize(fp.Standardize):
    """A real Standardize that declares its fit rows would get other values (as a
    cross-fitted encoding does): what the engine's partitioned path must not hide."""

    fit_transform_differs = True


def test_partitioned_fit_transform_refuses_a_step_whose_fit_rows_differ(tmp_path):
    source = tmp_path / "flights.parquet"
    pq.write_table(pq.read_table(REPO / "data_samples" / "flights.parquet"), source,
                   row_group_size=2_500)  # fmt: skip
    pipeline = flights_with(OutOfFoldStandardize())
    budget = streaming_budget(pipeline, str(source))
    with pytest.raises(fp.PipelineDefinitionError, match="not supported with it yet"):
        pipeline.fit_transform(str(source), memory_budget=budget, output_dir=tmp_path / "out")
    # in memory the engine runs it (its fit rows come from transform_fitted_rows)
    out = pipeline.fit_transform(str(source))
    assert out.report.rows_out > 0


def flights_with(step: fp.plan.steps.Step) -> fp.Pipeline:
    """``pipelines/flights.py`` with ``step`` standardizing the departure delay (wide enough
    a run for the pre-flight to choose streaming under a budget between the two peaks)."""
    from fastprep.cli import load_pipeline_file

    flights = load_pipeline_file(REPO / "pipelines" / "flights.py")
    first = flights.plan.features[0]
    features = [fp.cols("dep_delay") >> fp.FillMissing(0) >> fp.Clip(-60, 600) >> step,
                *flights.plan.features[1:]]  # fmt: skip
    assert first.steps[-1] == fp.Standardize()
    return fp.Pipeline(flights.schema, features, target=fp.expr("late = arr_delay > 15"))


def test_validate_only_counts_without_fitting(flights_sample):
    missing = int(flights_sample["arr_delay"].isna().sum())  # no target: quarantined
    pipeline = small_pipeline()
    report = engine.validate_only(pipeline.optimized, pipeline.schema, flights_sample)
    assert report.rows_in == len(flights_sample)
    assert report.rows_quarantined == missing > 0 and "fit" not in report.stages
    assert report.anomaly_patterns[0]["rows"] == missing


def test_the_run_layer_imports_nothing_above_it():
    """No module of fastprep/runtime imports the façade, the CLI or an integration: not at
    the top, not inside a function, not under TYPE_CHECKING, not relatively."""
    root = REPO / "fastprep"
    above = ("fastprep.pipeline", "fastprep.cli", "fastprep.integrations")
    found = []
    for path in sorted((root / "runtime").rglob("*.py")):
        for name in _imported(path, root):
            if name.startswith(above):
                found.append(f"{path.relative_to(REPO)} imports {name}")
    assert found == []


def _imported(path: Path, root: Path) -> list[str]:
    package = ".".join(path.relative_to(root.parent).parent.parts)
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            module = node.module if node.level == 0 else ".".join(base + [node.module or ""])
            names += [module] + [f"{module}.{alias.name}" for alias in node.names]
    return names


def test_a_saved_runs_quarantine_is_built_by_the_writer_and_equals_the_eager_one(
    flights_parquet, tmp_path
):
    # a run that saves at once leaves the rejected rows to the writer's background thread;
    # the file and the output's frame are the same rows as an unsaved run gathers eagerly
    pipeline = small_pipeline()
    eager = pipeline.fit_transform(str(flights_parquet))
    assert type(eager.quarantine_rows).__name__ != "_DeferredQuarantine"  # gathered now
    _, saved = pipeline.fit_and_transform(str(flights_parquet), output_dir=tmp_path / "out")
    assert len(eager.quarantine) > 0
    opened = fp.open_output(tmp_path / "out")
    assert opened.quarantine.equals(eager.quarantine)
    assert saved.quarantine.equals(eager.quarantine)
    assert opened.manifest["shards"][0]["quarantine"]["rows"] == len(eager.quarantine)


def test_a_saved_transforms_quarantine_equals_the_eager_one(flights_parquet, tmp_path):
    fitted = small_pipeline().fit(str(flights_parquet))
    eager = fitted.transform(str(flights_parquet))
    saved = fitted.transform(str(flights_parquet), output_dir=tmp_path / "out")
    assert len(eager.quarantine) > 0
    assert fp.open_output(tmp_path / "out").quarantine.equals(eager.quarantine)
    assert saved.quarantine.equals(eager.quarantine)

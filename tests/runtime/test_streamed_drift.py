"""A streamed transform measures drift as the in-memory one does: each partition is measured
against the fit's profile and the measures merged; a streamed fit records the profile (the
partitions' merged) that an in-memory fit records."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support import REPO, assert_same_drift, assert_same_matrix

import fastprep as fp
from fastprep.runtime import streamed
from fastprep.validate import drift

ROW_GROUP = 2_500


@pytest.fixture(scope="module")
def pipeline():
    from fastprep.cli import load_pipeline_file

    return load_pipeline_file(REPO / "pipelines" / "flights.py")


@pytest.fixture(scope="module")
def grouped(tmp_path_factory):
    path = tmp_path_factory.mktemp("drift") / "flights.parquet"
    pq.write_table(pq.read_table(REPO / "data_samples" / "flights.parquet"), path,
                   row_group_size=ROW_GROUP)  # fmt: skip
    return str(path)


@pytest.fixture(scope="module")
def shifted(tmp_path_factory):
    """The sample drifted: dep_delay shifted, air_time a third missing, an unseen carrier
    in the second half, distance spread out (8 row groups)."""
    frame = pq.read_table(REPO / "data_samples" / "flights.parquet").to_pandas()
    rng = np.random.default_rng(5)
    frame["dep_delay"] = frame["dep_delay"] + 120
    frame.loc[rng.random(len(frame)) < 0.33, "air_time"] = np.nan
    frame.loc[frame.index[10_000::3], "carrier"] = "ZZ"
    frame["distance"] = frame["distance"] * rng.uniform(0.1, 6.0, len(frame))
    path = tmp_path_factory.mktemp("shifted") / "flights_shifted.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path,
                   row_group_size=ROW_GROUP)  # fmt: skip
    return str(path)


def test_streamed_fit_records_the_in_memory_profile(pipeline, grouped):
    plan, schema = pipeline.optimized, pipeline.schema
    fitted = pipeline.fit(grouped)
    _, _, profile = streamed.fit_with_profile(plan, schema, grouped,
                                              rows_per_partition=ROW_GROUP)  # fmt: skip
    assert_same_drift(profile, fitted.profile)
    assert profile["carrier"]["vocabulary"] == fitted.profile["carrier"]["vocabulary"]


def test_streamed_transform_reports_the_in_memory_drift(pipeline, grouped, shifted, tmp_path):
    plan, schema = pipeline.optimized, pipeline.schema
    fitted = pipeline.fit(grouped)
    memory = fitted.transform(shifted)
    opened = streamed.transform(plan, schema, fitted.params, shifted, tmp_path / "out",
                                rows_per_partition=ROW_GROUP, profile=fitted.profile)  # fmt: skip
    assert len(opened) == 8
    got = opened.report["drift"]
    assert_same_drift(got, memory.report.drift)
    alerts = {c: e["alerts"] for c, e in got.items() if e["alerts"]}
    assert alerts == {c: e["alerts"] for c, e in memory.report.drift.items() if e["alerts"]}
    assert {"dep_delay", "air_time", "carrier", "distance"} <= alerts.keys()
    assert got["carrier"]["unseen_examples"] == ["ZZ"]
    assert_same_matrix(opened.whole().X, memory.X)


def test_over_the_budget_transform_alerts_on_drift(pipeline, grouped, shifted, tmp_path):
    """Through the public API: the budget streams the transform; its drift is in the
    published report and is alerted."""
    from test_streamed import streaming_budget

    fitted = pipeline.fit(grouped, memory_budget="100GB")
    sent = []
    opened = fitted.transform(shifted, memory_budget=streaming_budget(pipeline, shifted),
                              output_dir=tmp_path / "t", on_alert=sent.append)  # fmt: skip
    assert len(opened) >= 2
    assert "mean_shift" in opened.report["drift"]["dep_delay"]["alerts"]
    assert any(a.rule == "drift:dep_delay:mean_shift" for a in sent), sent
    # a fit streamed under the budget records the profile, saved with the pipeline
    streamed_fit = pipeline.fit(grouped, memory_budget=streaming_budget(pipeline, grouped))
    assert any("streamed in one process" in n for n in streamed_fit.fit_report.notes)
    assert_same_drift(streamed_fit.profile, fitted.profile)
    streamed_fit.save(tmp_path / "state.fastprep")
    assert fp.load(tmp_path / "state.fastprep").profile.keys() == fitted.profile.keys()


def test_merge_of_one_partition_is_the_partition():
    part = {"x": {"rows": 4, "null_rate": 0.25, "mean": 2.0, "std": 1.0}}
    assert drift.merge_profiles([part]) == part

"""A streamed run retries a read that fails for a moment (a flaky mount, an object store) and
says so in its report, as a cluster job does; the output is the same."""

from __future__ import annotations

import os
import threading

import pyarrow.parquet as pq
import pytest
from support import REPO, assert_same_matrix

from fastprep.runtime import streamed


@pytest.fixture(scope="module")
def pipeline():
    from fastprep.cli import load_pipeline_file

    return load_pipeline_file(REPO / "pipelines" / "flights.py")


@pytest.fixture
def two_files(tmp_path):
    """The sample as two Parquet files of 2,500-row row groups, in one folder."""
    table = pq.read_table(REPO / "data_samples" / "flights.parquet")
    folder = tmp_path / "flights"
    folder.mkdir()
    for i, start in enumerate((0, 10_000)):
        pq.write_table(table.slice(start, 10_000), folder / f"part-{i}.parquet",
                       row_group_size=2_500)  # fmt: skip
    return folder


def flaky(folder, tmp_path):
    """The second file vanishes now and is back 0.6 s later."""
    path, away = folder / "part-1.parquet", tmp_path / "away.parquet"
    os.replace(path, away)
    timer = threading.Timer(0.6, os.replace, (away, path))
    timer.start()
    return timer


def test_streamed_fit_reports_retried_reads(pipeline, two_files, tmp_path):
    plan, schema = pipeline.optimized, pipeline.schema
    expected, _ = streamed.fit(plan, schema, str(two_files), rows_per_partition=2_500)
    parts = streamed.Partitions(str(two_files), 2_500, streamed.job_for(plan, schema))
    timer = flaky(two_files, tmp_path)
    try:
        params, report = streamed.fit(plan, schema, str(two_files), partitions=parts)
    finally:
        timer.join()
    assert params == expected
    assert any("transient read error(s) retried" in n for n in report.notes), report.notes


def test_streamed_transform_reports_retried_reads(pipeline, two_files, tmp_path):
    plan, schema = pipeline.optimized, pipeline.schema
    fitted = pipeline.fit(str(two_files))
    parts = streamed.Partitions(str(two_files), 2_500, streamed.job_for(plan, schema))
    timer = flaky(two_files, tmp_path)
    try:
        opened = streamed.transform(plan, schema, fitted.params, str(two_files),
                                    tmp_path / "out", partitions=parts)  # fmt: skip
    finally:
        timer.join()
    assert any("transient read error(s) retried" in n for n in opened.report["notes"])
    assert any("transient read error(s) retried" in n for n in opened.notes)
    assert_same_matrix(opened.whole().X, fitted.transform(str(two_files)).X)

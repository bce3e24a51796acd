"""One CSV file on a cluster is cut into chunks, counted by a first pass as CSV files are,
and each read by its own task: the fit and the output equal one process's."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

distributed = pytest.importorskip("distributed")

from support import REPO, assert_same_params  # noqa: E402

from fastprep.data.partitions import plan_partitions  # noqa: E402

CSV = str(REPO / "data_samples" / "flights.csv")
ROWS = 5_000


def test_a_csv_file_cut_into_chunks_on_a_cluster_equals_one_process(client) -> None:
    from fastprep.cli import load_pipeline_file

    chunks = plan_partitions(CSV, ROWS, workers=2)
    assert len(chunks) >= 4 and all(c.byte_range for c in chunks)
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    single = pipeline.fit(CSV)
    expected = single.transform(CSV)
    fitted = pipeline.fit(CSV, client=client, rows_per_partition=ROWS)
    assert_same_params(single.params, fitted.params)
    out = fitted.transform(CSV, client=client, rows_per_partition=ROWS)
    assert out.X.shape == expected.X.shape
    assert abs(out.X - expected.X).max() <= 1e-6
    assert np.array_equal(out.row_ids, expected.row_ids)
    assert np.array_equal(out.y, expected.y)
    pd.testing.assert_frame_equal(out.quarantine, expected.quarantine, check_dtype=False)
    assert (out.report.rows_in, out.report.rows_out, out.report.rows_quarantined) == (
        20_000, expected.report.rows_out, expected.report.rows_quarantined)  # fmt: skip
    assert fitted.fit_report.rows_in == 20_000


def test_explain_on_a_cluster_shows_the_chunks(client) -> None:
    from fastprep.cli import load_pipeline_file

    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    text = pipeline.explain(CSV, client=client, rows_per_partition=ROWS)
    assert "count rows" in text  # chunk sizes are known once read, as a CSV file's
    assert "6 partition(s)" in text and "6 CSV chunk(s) of 1 file(s), cut at line ends, ~" in text

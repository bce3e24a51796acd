"""The flights pipeline on a real cluster (scheduler + 2 worker processes) gives the
single-machine fit and output; shards plus quarantine hold exactly the input rows."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support import assert_same_matrix

import fastprep as fp
from fastprep.cli import main
from fastprep.errors import DataValidationError
from fastprep.runtime import cluster as fd

REPO = Path(__file__).resolve().parents[3]
ROWS = 5_000  # 4 partitions of 2 row groups each


def assert_same_params(single, dist) -> None:
    """Exact for counts, vocabularies, min/max and flags; 1e-9 relative for floats."""
    assert len(single) == len(dist)
    for a, b in zip(single, dist):
        assert a.keys() == b.keys()
        for name in a:
            for sa, sb in zip(a[name], b[name], strict=True):
                assert sa.keys() == sb.keys(), name
                for key, va in sa.items():
                    vb = sb[key]
                    if key in ("data_min", "data_max") or not isinstance(va, float):
                        assert va == vb, (name, key)
                    else:
                        assert math.isclose(va, vb, rel_tol=1e-9, abs_tol=1e-12), (name, key)


@pytest.fixture(scope="module")
def single(flights_row_groups):
    from fastprep.cli import load_pipeline_file

    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    fitted = pipeline.fit(flights_row_groups)
    return pipeline, fitted, fitted.transform(flights_row_groups)


@pytest.fixture(scope="module")
def dist_fitted(single, flights_row_groups, cluster):
    cluster.ensure_two_workers()
    pipeline = single[0]
    return pipeline.fit(flights_row_groups, client=cluster.client, rows_per_partition=ROWS)


def test_fit_equals_single_machine(single, dist_fitted) -> None:
    _, fitted, _ = single
    assert_same_params(fitted.params, dist_fitted.params)
    assert dist_fitted.fit_report.rows_in == fitted.fit_report.rows_in == 20_000
    assert dist_fitted.fit_report.rows_out == fitted.fit_report.rows_out
    assert dist_fitted.fit_report.rows_quarantined == fitted.fit_report.rows_quarantined


def test_gathered_transform_equals_single_machine(single, dist_fitted, flights_row_groups,
                                                  client) -> None:  # fmt: skip
    _, _, expected = single
    out = dist_fitted.transform(flights_row_groups, client=client, rows_per_partition=ROWS)
    # same fitted state on one machine: bit-identical
    assert_same_matrix(out.X, dist_fitted.transform(flights_row_groups).X)
    # the single-machine fit: equal up to float32 rounding of 1e-15 parameter differences
    assert out.X.shape == expected.X.shape
    assert abs(out.X - expected.X).max() <= 1e-6
    assert np.array_equal(out.row_ids, expected.row_ids)
    assert np.array_equal(out.y, expected.y)
    assert list(out.feature_names) == list(expected.feature_names)
    pd.testing.assert_frame_equal(out.quarantine, expected.quarantine, check_dtype=False)
    assert (out.report.rows_in, out.report.rows_out, out.report.rows_quarantined) == (
        20_000, expected.report.rows_out, expected.report.rows_quarantined)  # fmt: skip


def test_shards_and_quarantine_are_exactly_the_input_rows(
    single, dist_fitted, flights_row_groups, client, tmp_path
) -> None:
    _, _, expected = single
    manifest = dist_fitted.transform(
        flights_row_groups, client=client, output_dir=tmp_path, rows_per_partition=ROWS
    )
    assert len(manifest.partitions) == 4
    assert sorted(p.name[:10] for p in tmp_path.glob("part-*.X.data.npy")) == [
        f"part-{i:05d}" for i in range(4)
    ]
    assert not list(tmp_path.glob(".*.tmp"))  # every temp file was renamed into place
    opened = fp.open_output(tmp_path)
    assert len(opened) == 4
    kept = np.concatenate([shard.row_ids for shard in opened])
    quarantined = opened.quarantine["row_id"].to_numpy()
    assert len(np.intersect1d(kept, quarantined)) == 0
    assert np.array_equal(np.sort(np.concatenate([kept, quarantined])), np.arange(20_000))
    loaded = fd.load_shards(tmp_path)
    assert_same_matrix(loaded.X, dist_fitted.transform(flights_row_groups).X)
    assert np.array_equal(loaded.y, expected.y)
    assert opened.report["rows_in"] == 20_000


def test_empty_and_all_null_partitions_get_fitted_shapes(
    dist_fitted, flights_sample, client, tmp_path
) -> None:
    folder = tmp_path / "src"
    folder.mkdir()
    nulls = flights_sample.iloc[:300].copy()
    for column in ("dep_delay", "air_time", "tailnum"):  # the nullable columns
        nulls[column] = None
    nulls["dep_delay"] = nulls["dep_delay"].astype("float64")
    nulls["air_time"] = nulls["air_time"].astype("float64")
    pq.write_table(pa.Table.from_pandas(flights_sample.iloc[300:600], preserve_index=False),
                   folder / "a.parquet")  # fmt: skip
    pq.write_table(pa.Table.from_pandas(flights_sample.iloc[:0], preserve_index=False),
                   folder / "b.parquet")  # fmt: skip
    pq.write_table(pa.Table.from_pandas(nulls, preserve_index=False), folder / "c.parquet")
    manifest = dist_fitted.transform(folder, client=client, output_dir=tmp_path / "out")
    shapes = [p["shape"] for p in manifest.partitions]
    width = shapes[0][1]
    assert shapes[1] == [0, width]  # the empty file: zero rows, the fitted width
    assert all(s[1] == width for s in shapes)
    loaded = fd.load_shards(tmp_path / "out")
    single = dist_fitted.transform(folder)
    assert_same_matrix(loaded.X, single.X)
    assert loaded.X.dtype == np.float32
    assert np.array_equal(loaded.row_ids, single.row_ids)


def test_validation_failure_under_raise_names_partition_and_rows(
    single, flights_row_groups, client
) -> None:
    pipeline = single[0]
    columns = dict(pipeline.schema.items())
    columns["distance"] = fp.Float(min=0, max=2_000, on_invalid="raise")
    strict = fp.Pipeline(
        fp.Schema(columns), pipeline.plan.features, fp.expr("late = arr_delay > 15")
    )
    bad = np.flatnonzero(
        pd.read_parquet(flights_row_groups, columns=["distance"])["distance"].to_numpy() > 2_000
    )
    with pytest.raises(DataValidationError) as info:
        strict.fit(flights_row_groups, client=client, rows_per_partition=ROWS)
    message = str(info.value)
    found = re.match(r"partition (\d+) \((.*), row groups", message)
    assert found and found.group(2) == str(flights_row_groups), message
    part = int(found.group(1))
    rows = [
        int(r) for r in re.search(r"first rows ([\d, ]+)", message).group(1).split(",") if r.strip()
    ]
    expected = [int(r) for r in bad if part * ROWS <= r < (part + 1) * ROWS][: len(rows)]
    assert "distance" in message and rows == expected  # global row ids of that partition


def test_cli_run_with_scheduler(cluster, flights_row_groups, tmp_path, capsys) -> None:
    cluster.ensure_two_workers()
    code = main(["run", "pipelines/flights.py", "--input", str(flights_row_groups),
                 "--output", str(tmp_path), "--scheduler", cluster.address])  # fmt: skip
    assert code == 0
    assert "on tcp://127.0.0.1" in capsys.readouterr().out
    # the rows written are the fit's own, as in one process: no drift against themselves
    assert not fp.open_output(tmp_path).report.get("drift")
    loaded = fd.load_shards(tmp_path)
    fitted = fp.load(tmp_path / "pipeline.fastprep")
    assert_same_matrix(loaded.X, fitted.transform(flights_row_groups).X)


def test_dask_dataframe_source(single, dist_fitted, flights_row_groups, client) -> None:
    """A dask DataFrame: its partitions are computed from its graph inside the job."""
    dd = pytest.importorskip("dask.dataframe")
    pipeline, _, expected = single
    frame = dd.read_parquet(str(flights_row_groups), split_row_groups=2)
    assert frame.npartitions > 1
    fitted = pipeline.fit(frame, client=client)
    assert_same_params(dist_fitted.params, fitted.params)
    out = fitted.transform(frame, client=client)
    assert_same_matrix(out.X, fitted.transform(flights_row_groups).X)
    assert np.array_equal(out.row_ids, expected.row_ids)
    assert np.array_equal(out.y, expected.y)


def test_fit_transform_on_a_cluster_without_output_dir_says_what_to_pass(
    single, flights_row_groups, client
) -> None:
    pipeline = single[0]
    with pytest.raises(fp.PipelineDefinitionError, match=r"on a Dask cluster .* pass output_dir="):
        pipeline.fit_and_transform(flights_row_groups, client=client, rows_per_partition=ROWS)

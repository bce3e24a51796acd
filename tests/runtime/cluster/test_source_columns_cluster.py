"""What a cluster job knows of its source's columns, as one process knows it: the columns
the schema does not declare are reported (or refused under ``unexpected="raise"``) though no
task reads them; CSV files are counted and read by their own header, whatever the
pipeline's columns are (a lookup's joined column, a target absent from new data); files
whose column types differ; whole-column fit warnings over all partitions; the quarantine's
column types; a kept partition whose transform quarantines rows the fit did not."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support import REPO, assert_same_matrix

import fastprep as fp
from fastprep.cli import load_pipeline_file
from fastprep.runtime.cluster import load_shards

SAMPLES = REPO / "data_samples"
ROWS = 3_000


def _findings(report) -> list[tuple[str, str, int]]:
    return sorted((f.column, f.rule, f.count) for f in report.findings)


def _weather(tmp_path, unexpected: str = "ignore") -> tuple[fp.Pipeline, str]:
    """Weather in two files (one without rows); the pipeline declares 3 of its 15 columns."""
    table = pq.read_table(SAMPLES / "weather.parquet").slice(0, 6_000)
    pq.write_table(table, tmp_path / "a.parquet", row_group_size=1_000)
    pq.write_table(table.slice(0, 0), tmp_path / "b.parquet")
    schema = fp.Schema(
        {"origin": fp.Category(), "temp": fp.Float(nullable=True), "precip": fp.Float()},
        unexpected=unexpected,
    )
    features = [fp.col("temp") >> fp.FillMissing("median") >> fp.Standardize()]
    pipeline = fp.Pipeline(schema, features, target=fp.expr("rain = precip > 0"))
    return pipeline, str(tmp_path / "*.parquet")


def test_undeclared_columns_are_reported_as_in_one_process(client, tmp_path) -> None:
    pipeline, source = _weather(tmp_path)
    fitted = pipeline.fit(source)
    expected = fitted.transform(source)
    undeclared = [f for f in fitted.fit_report.findings if f.rule == "unexpected_column"]
    assert len(undeclared) == 12  # the rule this test is about is there in one process

    dist = pipeline.fit(source, client=client, rows_per_partition=ROWS)
    assert _findings(dist.fit_report) == _findings(fitted.fit_report)
    out = fitted.transform(source, client=client, rows_per_partition=ROWS)
    assert _findings(out.report) == _findings(expected.report)
    assert_same_matrix(out.X, expected.X)
    folder = tmp_path / "shards"
    manifest = fitted.transform(source, client=client, rows_per_partition=ROWS, output_dir=folder)
    assert _findings(manifest.report) == _findings(expected.report)
    assert _findings(load_shards(folder).report) == _findings(expected.report)


def test_undeclared_columns_refused_before_any_task(client, tmp_path) -> None:
    pipeline, source = _weather(tmp_path, unexpected="raise")
    with pytest.raises(fp.SchemaError, match="does not declare"):
        pipeline.fit(source)
    with pytest.raises(fp.SchemaError, match="does not declare"):
        pipeline.fit(source, client=client, rows_per_partition=ROWS)
    narrow = tmp_path / "narrow.parquet"  # only the declared columns: fitted
    pq.write_table(pq.read_table(tmp_path / "a.parquet", columns=["origin", "temp", "precip"]),
                   narrow)  # fmt: skip
    fitted = pipeline.fit(narrow, client=client, rows_per_partition=ROWS)
    with pytest.raises(fp.SchemaError, match="does not declare"):
        fitted.transform(source)
    with pytest.raises(fp.SchemaError, match="does not declare"):
        fitted.transform(source, client=client, rows_per_partition=ROWS)


def _csv_files(folder, flights_sample, target: bool) -> str:
    """The flights sample as 4 CSV files of uneven sizes (one of a single row)."""
    folder.mkdir()
    frame = flights_sample if target else flights_sample.drop(columns=["arr_delay"])
    for k, (start, stop) in enumerate([(0, 5_000), (5_000, 5_001), (5_001, 13_000),
                                       (13_000, 20_000)]):  # fmt: skip
        frame.iloc[start:stop].to_csv(folder / f"f{k}.csv", index=False)
    return str(folder / "f*.csv")


def test_csv_files_with_a_lookup_and_without_the_target(client, tmp_path, flights_sample) -> None:
    planes = fp.Schema({"tailnum": fp.String(), "year": fp.Int(nullable=True), "seats": fp.Int()})
    schema = fp.Schema({"tailnum": fp.String(nullable=True), "arr_delay": fp.Float(),
                        "dep_delay": fp.Float(nullable=True)})  # fmt: skip
    lookup = fp.Lookup(SAMPLES / "planes.parquet", key={"tailnum": "tailnum"}, schema=planes)
    pipeline = fp.Pipeline(
        schema,
        [
            # the lookup's column comes first among the plan's columns
            fp.expr("age = 2013 - planes.year") >> fp.FillMissing("median") >> fp.Standardize(),
            fp.col("dep_delay") >> fp.FillMissing(0),
        ],
        target=fp.expr("late = arr_delay > 15"),
        lookups={"planes": lookup},
    )
    source = _csv_files(tmp_path / "with", flights_sample, target=True)
    fitted = pipeline.fit(source)
    dist = pipeline.fit(source, client=client, rows_per_partition=ROWS)
    assert dist.params == fitted.params
    expected = fitted.transform(source)
    out = dist.transform(source, client=client, rows_per_partition=ROWS)
    assert_same_matrix(out.X, expected.X)
    assert np.array_equal(out.y, expected.y) and np.array_equal(out.row_ids, expected.row_ids)

    new = _csv_files(tmp_path / "without", flights_sample, target=False)
    expected = fitted.transform(new)
    out = fitted.transform(new, client=client, rows_per_partition=ROWS)
    assert expected.y is None and out.y is None
    assert_same_matrix(out.X, expected.X)
    assert np.array_equal(out.row_ids, expected.row_ids)
    assert "the source has no target column(s): transformed without y" in out.report.notes


def test_files_whose_column_types_differ_as_in_one_process(client, tmp_path) -> None:
    """Numbers in one file, their text in another: each partition validates its file's
    text as one process validates the files' column read as text."""
    weather = pq.read_table(SAMPLES / "weather.parquet").slice(0, 8_000)
    rest = weather.slice(5_000)
    i = rest.schema.get_field_index("temp")
    rest = rest.set_column(i, "temp", rest.column(i).cast(pa.string()))
    pq.write_table(weather.slice(0, 5_000), tmp_path / "a.parquet", row_group_size=1_000)
    pq.write_table(rest, tmp_path / "b.parquet", row_group_size=1_000)
    source = str(tmp_path / "*.parquet")
    schema = fp.Schema({"temp": fp.Float(nullable=True), "origin": fp.Category()})
    pipeline = fp.Pipeline(schema, [fp.col("temp") >> fp.FillMissing("median") >> fp.Standardize(),
                                    fp.cols("origin") >> fp.OneHot()])  # fmt: skip
    fitted = pipeline.fit(source)
    dist = pipeline.fit(source, client=client, rows_per_partition=ROWS)
    assert dist.params == fitted.params
    out = dist.transform(source, client=client, rows_per_partition=ROWS)
    assert_same_matrix(out.X, fitted.transform(source).X)


def test_broken_and_clean_csv_files_quarantine_as_in_one_process(client, tmp_path) -> None:
    for name in ("flights_broken.csv", "flights.csv"):
        (tmp_path / name).write_bytes((SAMPLES / name).read_bytes())
    source = str(tmp_path / "*.csv")
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    fitted = pipeline.fit(source)
    expected = fitted.transform(source)
    out = fitted.transform(source, client=client, rows_per_partition=ROWS)
    assert out.report.rows_quarantined == expected.report.rows_quarantined > 17
    assert np.array_equal(out.row_ids, expected.row_ids)
    pd.testing.assert_frame_equal(out.quarantine, expected.quarantine, check_dtype=False)
    assert_same_matrix(out.X, expected.X)


def test_whole_column_fit_warnings_as_in_one_process(client, tmp_path) -> None:
    """``month`` one value per file, a different one in each: not constant; ``level`` one
    value where present and all missing in one file: constant."""
    for k in range(3):
        n = 700 + 300 * k
        level = np.full(n, np.nan if k == 1 else 2.5)
        table = pa.table({"month": np.full(n, k + 1), "level": level, "x": np.arange(n) * 0.5})
        pq.write_table(table, tmp_path / f"part-{k}.parquet", row_group_size=250)
    source = str(tmp_path / "*.parquet")
    schema = fp.Schema({"month": fp.Int(), "level": fp.Float(nullable=True), "x": fp.Float()})
    pipeline = fp.Pipeline(schema, [fp.cols("month") >> fp.OneHot(),
                                    fp.col("level") >> fp.FillMissing("median"),
                                    fp.col("x") >> fp.Standardize()])  # fmt: skip
    expected = pipeline.fit(source).fit_report
    dist = pipeline.fit(source, client=client, rows_per_partition=500).fit_report
    assert [(f.column, f.rule) for f in expected.findings] == [("level", "constant")]
    assert _findings(dist) == _findings(expected)
    assert dist.findings[0].first_rows == expected.findings[0].first_rows
    assert dist.findings[0].detail == expected.findings[0].detail


def test_quarantine_of_a_file_whose_column_is_all_missing(client, tmp_path, flights_sample) -> None:
    """A CSV file whose ``time_hour`` and ``dep_delay`` are empty (no type of their own):
    the quarantine's columns keep the types one read of the whole source gives them, in
    the gathered output and in the shards."""
    frame = flights_sample.iloc[:6_000]
    frame.iloc[:2_000].to_csv(tmp_path / "a.csv", index=False)
    empty = frame.iloc[2_000:3_500].assign(dep_delay=None, time_hour=None)
    empty.to_csv(tmp_path / "b.csv", index=False)
    frame.iloc[3_500:].to_csv(tmp_path / "c.csv", index=False)
    source = str(tmp_path / "*.csv")
    schema = fp.Schema({"dep_delay": fp.Float(nullable=True), "arr_delay": fp.Float(),
                        "time_hour": fp.Datetime(tz="UTC", nullable=True)})  # fmt: skip
    pipeline = fp.Pipeline(schema, [fp.col("dep_delay") >> fp.FillMissing(0),
                                    fp.expr("h = hour(time_hour)") >> fp.FillMissing(-1)],
                           target=fp.expr("late = arr_delay > 15"))  # fmt: skip
    fitted = pipeline.fit(source)
    expected = fitted.transform(source).quarantine
    assert len(expected) > 10 and expected["time_hour"].isna().any()
    out = fitted.transform(source, client=client, rows_per_partition=ROWS)
    pd.testing.assert_frame_equal(out.quarantine, expected)
    # written: as one process's output written and read back (Parquet keeps ms, not s)
    fitted.transform(source, output_dir=tmp_path / "one")
    fitted.transform(source, client=client, rows_per_partition=ROWS, output_dir=tmp_path / "o")
    written = load_shards(tmp_path / "one").quarantine
    pd.testing.assert_frame_equal(load_shards(tmp_path / "o").quarantine, written)


def test_kept_partition_whose_transform_quarantines_more_rows(client, tmp_path) -> None:
    """``where(b, 1, 0)`` is missing where ``b`` is: rows the transform quarantines that
    the fit did not, so not kept as read: the partition is read again, the output gathered
    with its rejected rows as one process gives them."""
    b = [None if i % 17 == 0 else i % 3 == 0 for i in range(4_000)]
    table = pa.table({"b": pa.array(b, pa.bool_()), "v": np.arange(4_000) * 0.25})
    pq.write_table(table, tmp_path / "a.parquet", row_group_size=700)
    source = str(tmp_path / "a.parquet")
    schema = fp.Schema({"b": fp.Bool(nullable=True), "v": fp.Float()})
    pipeline = fp.Pipeline(schema, [fp.expr("b2 = where(b, 1, 0)") >> fp.MinMax(),
                                    fp.col("v") >> fp.Standardize()])  # fmt: skip
    expected = pipeline.fit(source).transform(source)
    assert expected.report.rows_quarantined > 200
    dist = pipeline.fit(source, client=client, rows_per_partition=1_400)
    out = dist.transform(source, client=client, rows_per_partition=1_400)
    assert_same_matrix(out.X, expected.X)
    pd.testing.assert_frame_equal(out.quarantine, expected.quarantine)

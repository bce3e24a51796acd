"""Sources users have — a pyarrow Table or Dataset, a Polars DataFrame or LazyFrame — give
X, y, row ids and quarantine identical to the same data read from its Parquet file, in
every entry point that takes a source (fit, transform, fit_transform, batches,
write_shards, explain, Schema.infer)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp
from support import assert_same_matrix

import fastprep as fp
from fastprep.data.partitions import plan_partitions
from fastprep.runtime import execute

pl = pytest.importorskip("polars")

KINDS = ["arrow_table", "arrow_dataset", "polars", "polars_lazy"]


@pytest.fixture(scope="module")
def broken_parquet(tmp_path_factory, _flights_sample_cached):
    """The real sample with faults that quarantine rows (range, category, null, target),
    written in several row groups."""
    frame = _flights_sample_cached.copy()
    frame.loc[[3, 50, 51], "dep_delay"] = 5000.0  # above max
    frame.loc[[7, 900], "origin"] = "BOS"  # outside the category domain
    frame.loc[[11], "dest"] = None  # null in a non-nullable string
    frame.loc[[19], "distance"] = -1  # below min (an int64 column)
    path = tmp_path_factory.mktemp("src") / "flights.parquet"
    frame.to_parquet(path, index=False, row_group_size=6_000)
    return path


def make_source(kind: str, path):
    if kind == "arrow_table":
        return pq.read_table(path)
    if kind == "arrow_dataset":
        return pads.dataset(path)
    if kind == "polars":
        return pl.read_parquet(path)
    return pl.scan_parquet(path)


def assert_same(a: execute.Output, b: execute.Output) -> None:
    assert_same_matrix(a.X, b.X)
    np.testing.assert_array_equal(a.y, b.y)
    np.testing.assert_array_equal(a.row_ids, b.row_ids)
    assert a.feature_names == b.feature_names
    pd.testing.assert_frame_equal(a.quarantine, b.quarantine)


@pytest.mark.parametrize("kind", KINDS)
def test_fit_transform_matches_the_parquet_file(flights_pipeline, broken_parquet, kind):
    reference = flights_pipeline.fit_transform(broken_parquet)
    assert reference.report.rows_quarantined > 300  # arr_delay nulls + the faults above
    out = flights_pipeline.fit_transform(make_source(kind, broken_parquet))
    assert_same(out, reference)
    assert out.report.rows_in == reference.report.rows_in
    # text was encoded from Arrow buffers, not from pandas objects
    assert {e["source_dtype"] for e in out.report.text_encoding.values()} == {"large_string"}


@pytest.mark.parametrize("kind", KINDS)
def test_fit_then_transform_matches(flights_pipeline, broken_parquet, kind):
    source = make_source(kind, broken_parquet)
    fitted = flights_pipeline.fit(source)
    reference = flights_pipeline.fit(broken_parquet)
    assert fitted.params == reference.params
    assert_same(fitted.transform(source), reference.transform(broken_parquet))


@pytest.mark.parametrize("kind", KINDS)
def test_batches_and_shards_match(flights_pipeline, broken_parquet, kind, tmp_path):
    fitted = flights_pipeline.fit(broken_parquet)
    source = make_source(kind, broken_parquet)
    full = fitted.transform(broken_parquet)
    batches = list(fitted.batches(source, batch_size=4096, rows_per_partition=7_000,
                                  return_row_ids=True))  # fmt: skip
    X = sp.vstack([b[0] for b in batches]).tocsr()  # the hashed block: CSR
    ids = np.concatenate([b[2] for b in batches])
    np.testing.assert_array_equal(ids, full.row_ids)
    assert_same_matrix(X, full.X)
    np.testing.assert_array_equal(np.concatenate([b[1] for b in batches]), full.y)
    stats = fitted.write_shards(source, tmp_path / "shards", rows_per_partition=7_000)
    assert stats.rows_out == len(full.row_ids)
    opened = fp.open_output(tmp_path / "shards")
    shard_ids = np.concatenate([np.asarray(shard.row_ids) for shard in opened])
    np.testing.assert_array_equal(shard_ids, full.row_ids)


def test_dataset_partitions_follow_fragments_and_row_groups(broken_parquet, tmp_path):
    table = pq.read_table(broken_parquet)
    folder = tmp_path / "ds"
    folder.mkdir()
    pq.write_table(table.slice(0, 12_000), folder / "a.parquet", row_group_size=5_000)
    pq.write_table(table.slice(12_000), folder / "b.parquet", row_group_size=5_000)
    specs = plan_partitions(pads.dataset(folder), rows_per_partition=5_000)
    assert [(s.kind, s.fragment, s.row_groups, s.n_rows, s.row_offset) for s in specs] == [
        ("dataset", 0, (0,), 5_000, 0), ("dataset", 0, (1,), 5_000, 5_000),
        ("dataset", 0, (2,), 2_000, 10_000), ("dataset", 1, (0,), 5_000, 12_000),
        ("dataset", 1, (1,), 3_000, 17_000),
    ]  # fmt: skip
    arrow = [s for s in plan_partitions(table, rows_per_partition=7_000)]
    assert [(s.kind, s.start, s.stop) for s in arrow] == [
        ("frame", 0, 7_000), ("frame", 7_000, 14_000), ("frame", 14_000, 20_000)
    ]  # fmt: skip


def test_lazy_frame_reads_only_the_needed_columns(flights_pipeline, broken_parquet):
    """A column the pipeline does not use may even fail to compute: it is never collected."""
    lazy = pl.scan_parquet(broken_parquet).with_columns(
        pl.col("time_hour").str.to_datetime("%Y", strict=True).alias("unused")
    )
    assert_same(
        flights_pipeline.fit_transform(lazy), flights_pipeline.fit_transform(broken_parquet)
    )


@pytest.mark.parametrize("kind", KINDS)
def test_explain_and_infer(flights_pipeline, broken_parquet, kind):
    source = make_source(kind, broken_parquet)
    text = flights_pipeline.explain(source)
    assert "backends for" in text
    inferred = fp.Schema.infer(source)
    assert inferred.to_dict() == fp.Schema.infer(broken_parquet).to_dict()


def test_arrow_source_missing_column_and_bad_type(flights_pipeline, broken_parquet):
    table = pq.read_table(broken_parquet).drop_columns(["distance"])
    with pytest.raises(fp.SchemaError, match="distance"):
        flights_pipeline.fit(table)
    with pytest.raises(fp.SourceError, match="Polars"):
        flights_pipeline.fit({"not": "a table"})


def test_integers_beyond_2_53_with_nulls_are_caught_on_arrow(tmp_path):
    """An Arrow int64 column with a missing value is checked on the integers themselves
    (pandas would have rounded it to float64 before any check could see it)."""
    table = pa.table({"n": pa.array([1, None, 2**53 + 1, 5], pa.int64())})
    pipe = fp.Pipeline(fp.Schema({"n": fp.Int(nullable=True)}), [fp.col("n") >> fp.FillMissing(0)])
    out = pipe.fit_transform(table)
    assert out.quarantine["row_id"].tolist() == [2]
    assert "inexact_int" in out.quarantine["reason"].iloc[0]
    assert out.quarantine["n"].dtype == np.float64  # as the whole column converts (nulls)


def test_unsigned_integers_beyond_2_63_are_an_inexact_int_finding(flights_parquet):
    """uint64 values past int64's range (real distances, two made huge) are flagged as
    from pandas, not a pyarrow error: an unsigned column has no lower bound to check."""
    distance = pq.read_table(flights_parquet, columns=["distance"]).column(0).to_pylist()
    distance[3], distance[8] = 2**63 + 5, None
    table = pa.table({"distance": pa.array(distance, pa.uint64())})
    pipe = fp.Pipeline(fp.Schema({"distance": fp.Int(nullable=True)}),
                       [fp.col("distance") >> fp.FillMissing(0)])  # fmt: skip
    out, reference = pipe.fit_transform(table), pipe.fit_transform(table.to_pandas())
    assert out.quarantine["row_id"].tolist() == [3]
    assert out.quarantine["reason"].tolist() == ["distance: inexact_int"]
    assert_same(out, reference)


def test_arrow_types_validate_as_their_pandas_conversion():
    """Every Arrow type gives what the same table converted to pandas gives: dictionary and
    view strings, bools, timestamps, narrow and unsigned integers, float32, decimals, an
    all-null column; the quarantine keeps each column's dtype as read."""
    import datetime
    import decimal

    table = pa.table({
        "c": pa.array(["a", "b", None, "a", "c", "b", "a", "a"]).dictionary_encode(),
        "sv": pa.array(["x", "y", "x", None, "", "y", "x", "z"], pa.string_view()),
        "b": pa.array([True, False, None, True, True, False, True, False]),
        "ts": pa.array([datetime.datetime(2020, 1, d) for d in range(1, 9)], pa.timestamp("us")),
        "i32": pa.array([1, 2, None, 4, 5, 6, 7, 8], pa.int32()),
        "f32": pa.array([1.5, 2, 3, None, 5, 6, 7, 8], pa.float32()),
        "u64": pa.array([1, 2, 3, 4, 5, 6, 7, 2**60], pa.uint64()),
        "dec": pa.array([decimal.Decimal(f"1.{i}") for i in range(8)], pa.decimal128(5, 2)),
        "nul": pa.nulls(8),
        "y": pa.array(np.arange(8, dtype=float)),
    })  # fmt: skip
    schema = fp.Schema({
        "c": fp.Category(nullable=True), "sv": fp.String(nullable=True),
        "b": fp.Bool(nullable=True), "ts": fp.Datetime(), "i32": fp.Int(nullable=True),
        "f32": fp.Float(nullable=True), "u64": fp.Int(), "dec": fp.Float(),
        "nul": fp.Float(nullable=True), "y": fp.Float(),
    })  # fmt: skip
    features = [
        fp.cols("c", "sv") >> fp.OneHot(),
        fp.cols("b", "ts", "i32", "f32", "u64", "dec", "nul") >> fp.FillMissing(0),
    ]
    pipe = fp.Pipeline(schema, features, target="y")
    out, reference = pipe.fit_transform(table), pipe.fit_transform(table.to_pandas())
    assert_same(out, reference)
    assert out.quarantine["reason"].tolist() == ["u64: inexact_int"]
    polars_frame = pl.DataFrame({
        "c": pl.Series(["a", "b", None, "a"], dtype=pl.Categorical),
        "e": pl.Series(["u", "v", "u", "u"], dtype=pl.Enum(["v", "u"])), "y": [1.0, 2, 3, 4],
    })  # fmt: skip
    pipe = fp.Pipeline(
        fp.Schema({"c": fp.Category(nullable=True), "e": fp.Category(), "y": fp.Float()}),
        [fp.cols("c", "e") >> fp.OneHot()], target="y",
    )  # fmt: skip
    assert_same(pipe.fit_transform(polars_frame), pipe.fit_transform(polars_frame.to_pandas()))


def test_filtered_dataset_streams_its_filtered_rows(flights_pipeline, broken_parquet, tmp_path):
    """A filtered Dataset (whose fragments pyarrow will not list) gives in batches and
    write_shards what fit and transform give: the filtered rows, with row ids their
    positions in the filtered result."""
    import pyarrow.compute as pc

    keep = pc.field("month") >= 7
    filtered = pads.dataset(broken_parquet).filter(keep)
    table = pq.read_table(broken_parquet).filter(keep)
    fitted = flights_pipeline.fit(filtered)
    assert fitted.params == flights_pipeline.fit(table).params
    full = fitted.transform(table)
    assert_same(fitted.transform(filtered), full)
    stream = fitted.batches(filtered, batch_size=2048, rows_per_partition=3_000,
                            return_row_ids=True)  # fmt: skip
    batches = list(stream)
    assert stream.stats.rows_in == table.num_rows == full.report.rows_in
    np.testing.assert_array_equal(np.concatenate([b[2] for b in batches]), full.row_ids)
    assert_same_matrix(sp.vstack([b[0] for b in batches]).tocsr(), full.X)
    np.testing.assert_array_equal(np.concatenate([b[1] for b in batches]), full.y)
    stats = fitted.write_shards(filtered, tmp_path / "shards", rows_per_partition=3_000)
    assert stats.rows_out == len(full.row_ids)
    opened = fp.open_output(tmp_path / "shards")
    shard_ids = np.concatenate([np.asarray(shard.row_ids) for shard in opened])
    np.testing.assert_array_equal(shard_ids, full.row_ids)


def test_a_lazy_frame_query_runs_once_per_run(flights_pipeline, broken_parquet, monkeypatch):
    """fit, transform, fit_transform and each batches pass collect the LazyFrame once (the
    pre-flight's row count, the read and every partition's slice share that result)."""
    collects = []
    original = pl.LazyFrame.collect

    def counting(self, *args, **kwargs):
        collects.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(pl.LazyFrame, "collect", counting)
    lazy = pl.scan_parquet(broken_parquet)

    def runs(action) -> int:
        collects.clear()
        action()
        return len(collects)

    assert runs(lambda: flights_pipeline.fit_transform(lazy)) == 1
    fitted = flights_pipeline.fit(broken_parquet)
    assert runs(lambda: flights_pipeline.fit(lazy)) == 1
    assert runs(lambda: fitted.transform(lazy)) == 1
    stream = fitted.batches(lazy, batch_size=4096, rows_per_partition=5_000)
    assert runs(lambda: list(stream)) == 1
    assert stream.stats.partitions == 4
    assert runs(lambda: list(stream)) == 1  # a second epoch: one more
    reference = fitted.transform(broken_parquet)
    out = fitted.transform(lazy)
    assert_same(out, reference)
    assert out.report.source.startswith("Polars LazyFrame (20,000 rows")

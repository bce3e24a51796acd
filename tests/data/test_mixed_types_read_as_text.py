"""A source whose files hold one column as numbers or bools in some and text in others is
read as text in every file; the text must be the one validation gives those values when it
reads such a file alone (``True``, ``100000000000000000000``, missing for NaN), so a fit of
the whole source in one process learns what a partitioned fit of the same files learns."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

import fastprep as fp
from fastprep.runtime import streamed


def _fits(tmp_path, values: pa.Array) -> tuple[list, list]:
    pq.write_table(pa.table({"c": values, "x": [1.0, 2.0, 3.0]}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"c": ["True", "b", "true"], "x": [1.0, 2.0, 3.0]}),
                   tmp_path / "b.parquet")  # fmt: skip
    schema = fp.Schema({"c": fp.Category(nullable=True), "x": fp.Float()})
    pipeline = fp.Pipeline(schema, [fp.col("c") >> fp.OneHot(), fp.col("x") >> fp.Standardize()])
    source = str(tmp_path / "*.parquet")
    in_memory = pipeline.fit(source).params
    partitioned, _ = streamed.fit(pipeline.optimized, schema, source, rows_per_partition=2)
    return in_memory, partitioned


def test_bools_beside_text_read_as_one_file_alone(tmp_path) -> None:
    in_memory, partitioned = _fits(tmp_path, pa.array([True, False, True]))
    assert in_memory == partitioned


def test_floats_beside_text_read_as_one_file_alone(tmp_path) -> None:
    in_memory, partitioned = _fits(tmp_path, pa.array([1e20, float("nan"), 0.5]))
    assert in_memory == partitioned


def test_all_missing_file_beside_numbers_and_text(tmp_path) -> None:
    pq.write_table(pa.table({"c": pa.array([1, 2, 3]), "x": [1.0, 2.0, 3.0]}),
                   tmp_path / "a.parquet")  # fmt: skip
    pq.write_table(pa.table({"c": pa.array([None] * 3, pa.null()), "x": [1.0, 2.0, 3.0]}),
                   tmp_path / "b.parquet")  # fmt: skip
    pq.write_table(pa.table({"c": ["z", "1", "q"], "x": [1.0, 2.0, 3.0]}), tmp_path / "c.parquet")
    schema = fp.Schema({"c": fp.Category(nullable=True), "x": fp.Float()})
    pipeline = fp.Pipeline(schema, [fp.col("c") >> fp.OneHot(), fp.col("x") >> fp.Standardize()])
    source = str(tmp_path / "*.parquet")
    partitioned, _ = streamed.fit(pipeline.optimized, schema, source, rows_per_partition=3)
    assert pipeline.fit(source).params == partitioned

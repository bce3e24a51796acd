"""A partitioned fit learns the in-memory fit's parameters bit for bit, so X is the same.

The data make float64 sums depend on their order (a large mean, a tiny spread, missing
values filled by the mean) and the Parquet row groups are uneven, so every partition
boundary moves what a per-partition sum would round."""

from __future__ import annotations

import copy
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import fastprep as fp
from fastprep.runtime import streamed
from fastprep.storage.state import encode_floats

SCHEMA = fp.Schema(
    {"a": fp.Float(nullable=True), "b": fp.Float(nullable=True), "c": fp.Float(nullable=True)}
)
FEATURES = [
    fp.col("a") >> fp.Standardize(),
    fp.col("b") >> fp.FillMissing("mean") >> fp.Standardize(),  # folded into the fill's pass
    fp.col("c") >> fp.FillMissing("mean"),
    fp.expr("b2 = b * 1.0") >> fp.MinMax(),
]


def _write(path, n_rows: int, seed: int) -> str:
    rng = np.random.default_rng(seed)
    columns = {
        "a": rng.normal(1e6, 1e-3, n_rows),
        "b": rng.normal(3e7, 0.25, n_rows),
        "c": rng.normal(-7.5e4, 1e-2, n_rows) + rng.integers(0, 3, n_rows) * 1e-9,
    }
    for values in columns.values():
        values[rng.random(n_rows) < 0.07] = np.nan
    table = pa.table(columns)
    sizes = [1, 999, 31_337]  # then uneven groups to the end
    while sum(sizes) < n_rows:
        sizes.append(int(rng.integers(5_000, 400_000)))
    with pq.ParquetWriter(path, table.schema) as writer:
        start = 0
        for size in sizes:
            if start < n_rows:
                writer.write_table(table.slice(start, size))
            start += size
    return str(path)


def _same_bits(a, b) -> bool:
    return json.dumps(encode_floats(a)) == json.dumps(encode_floats(b))


def _check(path: str) -> None:
    pipeline = fp.Pipeline(SCHEMA, FEATURES)
    plan = pipeline.optimized
    assert pq.ParquetFile(path).num_row_groups > 3
    fitted = {b: pipeline.fit(path, backend=b) for b in ("pandas", "numba")}
    assert _same_bits(fitted["pandas"].params, fitted["numba"].params)
    X = fitted["pandas"].transform(path, backend="pandas").X
    for backend in ("pandas", "numba"):
        params, _ = streamed.fit(plan, SCHEMA, path, backend=backend, rows_per_partition=1)
        assert _same_bits(params, fitted[backend].params), backend
        from_partitions = copy.copy(fitted[backend])
        from_partitions.params = params
        assert np.array_equal(from_partitions.transform(path, backend=backend).X, X)


def test_partitioned_fit_is_the_in_memory_fit(tmp_path) -> None:
    _check(_write(tmp_path / "awkward.parquet", 120_000, seed=1))


@pytest.mark.slow
def test_partitioned_fit_is_the_in_memory_fit_at_two_million_rows(tmp_path) -> None:
    _check(_write(tmp_path / "awkward.parquet", 2_000_000, seed=2))

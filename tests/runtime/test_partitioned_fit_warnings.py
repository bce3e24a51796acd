"""A partitioned fit's whole-column warnings are those of one process over the whole source:
a column with one value in each file but not the same one is not constant; a column
constant where present and all missing in one file is."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import fastprep as fp
from fastprep.runtime import streamed


def _source(folder) -> str:
    """Three files: ``month`` and ``site`` one value per file (different ones); ``level``
    and ``kind`` one value where present, all missing in the second file."""
    for k, month in enumerate((1, 2, 3)):
        n = 400 + 100 * k
        rng = np.random.default_rng(k)
        level = np.full(n, np.nan if k == 1 else 0.1)
        kind = [None if k == 1 else "ü"] * n
        table = pa.table({"month": np.full(n, month), "site": [f"s{k}"] * n, "level": level,
                          "kind": pa.array(kind, pa.string()), "x": rng.normal(size=n)})  # fmt: skip
        pq.write_table(table, folder / f"part-{k}.parquet", row_group_size=150)
    return str(folder / "*.parquet")


def _warnings(report) -> list[tuple[str, str, int, tuple[int, ...], str]]:
    rules = ("constant", "all_null")
    return sorted((f.column, f.rule, f.count, tuple(f.first_rows), f.detail)
                  for f in report.findings if f.rule in rules)  # fmt: skip


@pytest.mark.parametrize("rows", [150, 1_000])
def test_whole_column_warnings_as_in_one_process(tmp_path, rows) -> None:
    source = _source(tmp_path)
    schema = fp.Schema({"month": fp.Int(), "site": fp.Category(), "level": fp.Float(nullable=True),
                        "kind": fp.String(nullable=True), "x": fp.Float()})  # fmt: skip
    pipeline = fp.Pipeline(schema, [
        fp.cols("month", "site") >> fp.OneHot(), fp.col("level") >> fp.FillMissing(0),
        fp.cols("kind") >> fp.CountEncode(), fp.col("x") >> fp.Standardize(),
    ])  # fmt: skip
    expected = _warnings(pipeline.fit(source).fit_report)
    assert [(c, r) for c, r, *_ in expected] == [("kind", "constant"), ("level", "constant")]
    _, report = streamed.fit(pipeline.optimized, schema, source, rows_per_partition=rows)
    assert _warnings(report) == expected

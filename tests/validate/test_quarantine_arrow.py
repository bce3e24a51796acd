"""A file source's quarantine is gathered as Arrow, without pandas: it equals the pandas
frame the rows as read give (columns, values and dtypes), and falls back to that frame
for the types pandas rewrites."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from fastprep.validate.findings import Quarantine


def _quarantine(n_rows: int) -> Quarantine:
    quarantine = Quarantine()
    quarantine.add(np.arange(0, n_rows, 7), "arr_delay: null")
    quarantine.add(np.arange(0, n_rows, 5), "dep_delay: above_max")
    return quarantine


def test_arrow_quarantine_equals_the_frame(flights_parquet) -> None:
    raw = pq.read_table(flights_parquet)
    quarantine = _quarantine(raw.num_rows)
    table = quarantine.to_arrow(raw)
    assert table is not None
    pd.testing.assert_frame_equal(table.to_pandas(), quarantine.to_frame(raw))


def test_an_integer_column_with_missing_values_elsewhere_is_float64() -> None:
    raw = pa.table({
        "n": pa.array([1, None, 3, 4, 5, 6, 7, 8], pa.int64()),
        "flag": pa.array([True, False] * 4),
        "text": pa.array(["a", None, "c", "d", "e", "f", "g", "h"]),
    })  # fmt: skip
    quarantine = Quarantine()
    quarantine.add(np.array([2, 3, 7]), "n: above_max")
    table = quarantine.to_arrow(raw, first_row_id=0)
    assert table.schema.field("n").type == pa.float64()
    pd.testing.assert_frame_equal(table.to_pandas(), quarantine.to_frame(raw))


def test_types_pandas_rewrites_fall_back_to_the_frame() -> None:
    quarantine = Quarantine()
    quarantine.add(np.array([0]), "x: type")
    for column in (
        pa.array([b"\xff", b"a"]),
        pa.array([["a"], ["b"]]),
        pa.array(["a", "b"]).dictionary_encode(),
        pa.array([True, None]),
    ):
        assert quarantine.to_arrow(pa.table({"x": column})) is None
    assert quarantine.to_arrow(pa.table({"reason": pa.array(["a", "b"])})) is None


def test_text_read_as_dictionaries_is_quarantined_as_the_file_holds_it(flights_parquet) -> None:
    from fastprep.data.sources import read_source

    columns = ["carrier", "tailnum", "dep_delay"]
    raw, _ = read_source(flights_parquet, columns, ["carrier", "tailnum"])
    assert pa.types.is_dictionary(raw.schema.field("tailnum").type)
    quarantine = _quarantine(raw.num_rows)
    table = quarantine.to_arrow(raw)
    assert table is not None  # Arrow all the way, not the pandas fallback
    expected = quarantine.to_arrow(pq.read_table(flights_parquet, columns=columns))
    assert table.equals(expected)
    pd.testing.assert_frame_equal(table.to_pandas(), quarantine.to_frame(raw))

"""``take_rows``: rows of a raw table by position, chunk by chunk when the positions are
ascending, equal to Arrow's own ``take`` (values, types, order) on real data."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support import REPO

from fastprep.data.sources import decoded, read_source, take_rows


@pytest.fixture(scope="module")
def raw(tmp_path_factory) -> pa.Table:
    """The flights sample re-written in row groups of 3,000 rows and read as fastprep
    reads it: text columns as per-row-group dictionaries, numbers in several chunks."""
    path = tmp_path_factory.mktemp("take") / "flights.parquet"
    pq.write_table(pq.read_table(REPO / "data_samples" / "flights.parquet"), path,
                   row_group_size=3_000)  # fmt: skip
    names = ["dep_delay", "hour", "carrier", "tailnum", "dest"]
    table, _ = read_source(str(path), names, ["carrier", "tailnum", "dest"])
    return table


@pytest.mark.parametrize("pick", ["missing target", "every 7th", "first and last", "none",
                                  "unsorted", "repeated"])  # fmt: skip
def test_take_rows_equals_arrow_take(raw, pick) -> None:
    n = raw.num_rows
    arr_delay = pq.read_table(REPO / "data_samples" / "flights.parquet", columns=["arr_delay"])
    positions = {
        "missing target": np.flatnonzero(arr_delay.column(0).is_null().to_numpy(False)),
        "every 7th": np.arange(0, n, 7),
        "first and last": np.array([0, n - 1]),
        "none": np.empty(0, np.int64),
        "unsorted": np.array([n - 1, 5, 3_001, 0]),
        "repeated": np.array([2, 2, 2_999, 3_000, 3_000]),
    }[pick]
    assert max(c.num_chunks for c in raw.columns) > 1
    got = decoded(take_rows(raw, positions))
    want = decoded(raw.take(pa.array(positions, type=pa.int64())))
    assert got.schema == want.schema and got.num_rows == len(positions)
    for name in raw.column_names:
        assert got.column(name).combine_chunks().equals(want.column(name).combine_chunks())

"""Row ids as a range that is not materialized during a run: indexing it gives what the
same ``arange`` gives, and ``out.row_ids`` is the int64 array on first access."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastprep.data.columns import RowRange


@settings(deadline=None)
@given(
    start=st.integers(0, 10**12),
    n=st.integers(0, 50),
    data=st.data(),
)
def test_row_range_indexes_like_arange(start, n, data):
    ids, ref = RowRange(start, n), np.arange(start, start + n, dtype=np.int64)
    assert len(ids) == n and ids.shape == (n,) and ids.tolist() == ref.tolist()
    np.testing.assert_array_equal(np.asarray(ids), ref)
    mask = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    np.testing.assert_array_equal(ids[mask], ref[mask])
    if n:
        positions = np.array(data.draw(st.lists(st.integers(-n, n - 1), max_size=20)), np.int64)
        np.testing.assert_array_equal(ids[positions], ref[positions])
        k = data.draw(st.integers(-n, n - 1))
        assert ids[k] == ref[k]
    lo, hi, step = (data.draw(st.one_of(st.none(), st.integers(-n - 2, n + 2))) for _ in "abc")
    step = step if step != 0 else None
    np.testing.assert_array_equal(np.asarray(ids[lo:hi:step]), ref[lo:hi:step])


def test_row_range_rejects_what_arange_rejects():
    ids = RowRange(10, 5)
    with pytest.raises(IndexError):
        ids[5]
    with pytest.raises(IndexError):
        ids[np.ones(4, dtype=bool)]


def test_output_row_ids_are_materialized_on_first_access(flights_pipeline, flights_sample):
    out = flights_pipeline.fit_transform(flights_sample.dropna(subset=["arr_delay"]))
    assert out.report.rows_quarantined == 0
    assert isinstance(out.row_ids_source, RowRange)  # not built during the run
    ids = out.row_ids
    assert ids.dtype == np.int64 and not ids.flags.writeable
    np.testing.assert_array_equal(ids, np.arange(len(ids)))
    assert out.row_ids is ids  # built once
    with_bad = flights_pipeline.fit_transform(flights_sample)
    assert with_bad.report.rows_quarantined > 0
    assert len(with_bad.row_ids) == with_bad.X.shape[0]
    assert not np.isin(with_bad.quarantine["row_id"], with_bad.row_ids).any()

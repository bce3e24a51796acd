"""The target on Numba's generated kernel against the reference: same float32 y, the same
rows quarantined (missing, undefined, beyond float32), serial and parallel chunks."""

from __future__ import annotations

import numpy as np
import pytest

import fastprep as fp

pytest.importorskip("numba")

from fastprep.backends.numba import backend as numba_

SCHEMA = {
    "dep_delay": fp.Float(nullable=True),
    "arr_delay": fp.Float(nullable=True),
    "distance": fp.Float(min=0),
    "hour": fp.Int(min=0, max=24),
}
TARGETS = [
    "late = arr_delay > 15",
    "ratio = arr_delay / dep_delay",  # x/0 -> inf, 0/0 -> undefined: both quarantined
    "huge = arr_delay * 1e37",  # finite in float64, beyond float32: quarantined
    "mixed = where(hour < 12, log1p(distance), -arr_delay) + isnull(dep_delay)",
    "arr_delay",  # a plain column
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("parallel_chunks", [False, True], ids=["serial", "parallel"])
def test_numba_target_equals_the_reference(flights_sample, monkeypatch, target, parallel_chunks):
    if parallel_chunks:
        monkeypatch.setattr(numba_, "PARALLEL_MIN_ROWS", 0)
    frame = flights_sample[list(SCHEMA)].copy()
    frame.loc[frame.index[::97], "dep_delay"] = 0.0  # ratio: divisions by zero
    pipeline = fp.Pipeline(
        schema=fp.Schema(SCHEMA),
        features=[fp.col("distance") >> fp.Standardize()],
        target=fp.expr(target) if "=" in target else fp.col(target),
    )
    reference = pipeline.fit_transform(frame, backend="pandas")
    fused = pipeline.fit_transform(frame, backend="numba")
    assert fused.y.dtype == reference.y.dtype == np.float32
    np.testing.assert_array_equal(fused.y.view(np.uint32), reference.y.view(np.uint32))
    np.testing.assert_array_equal(fused.row_ids, reference.row_ids)
    assert np.isfinite(fused.y).all()
    assert (
        fused.quarantine_reasons().reset_index(drop=True)
        .equals(reference.quarantine_reasons().reset_index(drop=True))
    )  # fmt: skip
    if target.startswith(("ratio", "huge")):
        assert reference.report.rows_quarantined > frame["arr_delay"].isna().sum()

"""The fused fit's median (a histogram of top-16-bit buckets counted in the fit pass,
then the median's bucket computed again from the inputs) is exactly ``np.nanmedian`` of
the values before the fill, whatever the lanes, for odd/even counts and for the two
middle values falling in different buckets."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import fastprep as fp

pytest.importorskip("numba")

from fastprep.backends.numba import backend as numba_


def fitted_fill(frame: pd.DataFrame, expr: str) -> float:
    pipeline = fp.Pipeline(
        schema=fp.Schema({"a": fp.Float(nullable=True), "b": fp.Float(nullable=True)}),
        features=[fp.expr(expr) >> fp.FillMissing("median") >> fp.Standardize()],
    )
    fitted = pipeline.fit(frame, backend="numba")
    (params,) = fitted.params[0].values()
    return params[0]["fill"]


CASES = {
    "smooth": lambda rng, n: (rng.normal(400, 90, n), rng.uniform(1, 3, n)),
    # half the values 1, half 1e10: the middle pair straddles two buckets
    "straddle": lambda rng, n: (np.r_[np.ones(n // 2), np.full(n - n // 2, 1e10)], np.ones(n)),
    "ties": lambda rng, n: (np.round(rng.normal(size=n) * 3), np.ones(n)),
    "negative": lambda rng, n: (-np.abs(rng.standard_cauchy(n)), rng.uniform(0.5, 2, n)),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("n", [9_999, 10_000])
@pytest.mark.parametrize("parallel", [False, True], ids=["serial", "lanes"])
def test_fused_median_is_numpys_nanmedian(monkeypatch, case, n, parallel):
    if parallel:
        monkeypatch.setattr(numba_, "PARALLEL_MIN_ROWS", 0)
    rng = np.random.default_rng(7)
    a, b = CASES[case](rng, n)
    a = a.copy()
    a[rng.random(n) < 0.1] = np.nan
    b[rng.random(n) < 0.05] = 0.0  # a / 0 -> inf -> missing, as the reference says
    frame = pd.DataFrame({"a": a, "b": b})
    with np.errstate(all="ignore"):
        values = a / b * 2.0
    values[~np.isfinite(values)] = np.nan
    assert fitted_fill(frame, "v = a / b * 2") == np.nanmedian(values)


@pytest.mark.parametrize("spread", ["wide", "low_bits", "ties"])
def test_radix_selection_matches_a_sort_at_every_level(spread):
    """8-bit selection levels down to the last key bit: values that differ only in their
    lowest mantissa bits need every level; more than 4,096 candidates per level."""
    from fastprep.backends.numba.kernels import _select_pair

    rng = np.random.default_rng(5)
    n = 20_001
    if spread == "wide":
        values = rng.standard_cauchy(n)
    elif spread == "low_bits":
        values = (
            np.float64(1234.5).view(np.uint64) + rng.integers(0, 50_000, n).astype(np.uint64)
        ).view(np.float64)
    else:
        values = rng.integers(-3, 3, n).astype(np.float64)
    ordered = np.sort(values)
    for k in (1, n // 2, n - 1):
        lower, upper = _select_pair(values.copy(), n, k)
        assert (lower, upper) == (ordered[k - 1], ordered[k])

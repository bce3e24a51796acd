"""The reference fit's median (``FillMissing("median")``) is ``np.nanmedian``'s value to
the bit: odd and even counts, ties, missing values, float32 and float64."""

from __future__ import annotations

import numpy as np
import pytest

from fastprep.backends.reference.stats import nanmedian


@pytest.mark.parametrize("n", [1, 2, 3, 4, 599, 600, 601, 10_000, 10_001])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_equals_numpy(n: int, dtype) -> None:
    rng = np.random.default_rng(n)
    for scale in (1.0, 1e-3, 1e12):
        values = (rng.standard_normal(n) * scale).astype(dtype)
        if n > 3:
            values[rng.integers(0, n, size=n // 4)] = np.nan
            values[: n // 10] = values[n // 10]  # ties
        assert nanmedian(values) == float(np.nanmedian(values))

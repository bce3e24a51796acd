"""The fused multiply-add intrinsic rounds once: the exact rounding error of a square equals
Veltkamp's split and Dekker's product (the numpy twin's), and ``a * b + c`` equals the
correctly rounded exact value."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

numba = pytest.importorskip("numba")

from fastprep.backends.moments import _dekker_square  # noqa: E402
from fastprep.native.exact_ops import fma  # noqa: E402


@numba.njit
def _square_errors(x):
    out = np.empty_like(x)
    for i in range(len(x)):
        out[i] = fma(x[i], x[i], -(x[i] * x[i]))
    return out


@numba.njit
def _fused(a, b, c):
    return fma(a, b, c)


def test_square_errors_equal_dekkers_product():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(0, 1e3, 10_000), rng.normal(0, 1e-3, 1_000),
                        [0.0, -0.0, 1.0, 3.0, 0.1, 1e150, -1e-150]])  # fmt: skip
    np.testing.assert_array_equal(_square_errors(x), _dekker_square(x)[1])


def test_one_rounding():
    rng = np.random.default_rng(1)
    for a, b, c in rng.normal(0, 10, (500, 3)):
        want = float(Fraction(a) * Fraction(b) + Fraction(c))
        assert _fused(a, b, c) == want
    assert _fused(0.1, 10.0, -1.0) == float(Fraction(0.1) * 10 - 1)  # 5.55e-17, not 0

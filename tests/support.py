"""Helpers shared by test modules (``from support import ...``): comparing outputs.

Test modules never import ``conftest``: with one conftest per folder, which of them answers
to that module name depends on collection order.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp

REPO = Path(__file__).resolve().parent.parent


def to_dense(X) -> np.ndarray:
    return X.toarray() if sp.issparse(X) else np.asarray(X)


def assert_same_matrix(a, b) -> None:
    """Exactly the same matrix: same layout, dtype, shape and bits (CSR arrays compared)."""
    assert sp.issparse(a) == sp.issparse(b)
    assert a.dtype == b.dtype
    assert a.shape == b.shape
    if sp.issparse(a):
        assert a.format == b.format == "csr"
        assert np.array_equal(a.indptr, b.indptr)
        assert np.array_equal(a.indices, b.indices)
        assert np.array_equal(a.data, b.data)
    else:
        assert np.array_equal(a, b)

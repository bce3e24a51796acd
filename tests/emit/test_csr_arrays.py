"""CSR as its three arrays (no scipy until asked): rows taken, and the scipy matrix over
the same arrays, equal scipy's own."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from fastprep.emit.csr import CsrArrays, as_scipy, is_csr


def _random_csr(seed: int) -> sp.csr_matrix:
    matrix = sp.random(40, 9, density=0.3, format="csr", dtype=np.float32, random_state=seed)
    matrix.sort_indices()
    return matrix


def test_take_rows_and_to_scipy_equal_scipy() -> None:
    for seed in range(5):
        matrix = _random_csr(seed)
        arrays = CsrArrays(matrix.data, matrix.indices, matrix.indptr, matrix.shape)
        assert arrays.nnz == matrix.nnz and arrays.dtype == matrix.dtype
        rows = np.random.default_rng(seed).integers(0, 40, 25)
        taken = arrays.take_rows(rows).to_scipy()
        assert (taken != matrix[rows]).nnz == 0
        whole = as_scipy(arrays)
        assert sp.issparse(whole) and whole.data is arrays.data  # no copy
        assert (whole != matrix).nnz == 0


def test_is_csr_tells_both_kinds() -> None:
    matrix = _random_csr(0)
    assert is_csr(matrix) and is_csr(CsrArrays(matrix.data, matrix.indices, matrix.indptr,
                                               matrix.shape))  # fmt: skip
    assert not is_csr(np.zeros((2, 2)))

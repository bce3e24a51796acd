"""A CSR matrix as its three arrays, without scipy.

A job that writes X to disk needs only ``data``, ``indices`` and ``indptr`` (the output
stores them as they are), and importing ``scipy.sparse`` costs a fresh process ~0.1 s. So
the run builds :class:`CsrArrays`; a ``scipy.sparse.csr_matrix`` over the same arrays (no
copy) is made when a user asks for one (``out.X``).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import scipy.sparse as sp


class CsrArrays:
    """``shape`` rows × columns stored as CSR: ``indptr`` (rows + 1 offsets), ``indices``
    (sorted within each row, no duplicates) and ``data``."""

    format = "csr"
    ndim = 2

    def __init__(
        self, data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, shape: tuple[int, int]
    ) -> None:
        self.data, self.indices, self.indptr = data, indices, indptr
        self.shape = (int(shape[0]), int(shape[1]))

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    @property
    def nnz(self) -> int:
        return int(self.indptr[-1])

    def take_rows(self, rows: np.ndarray) -> CsrArrays:
        """The rows ``rows`` (positions, in that order) as a new CSR."""
        rows = np.asarray(rows, dtype=np.int64)
        starts, ends = self.indptr[rows], self.indptr[rows + 1]
        counts = ends - starts
        indptr = np.zeros(len(rows) + 1, dtype=self.indptr.dtype)
        np.cumsum(counts, out=indptr[1:])
        # each kept entry's position in the source: its row's start plus its rank in the row
        at = np.repeat(starts - indptr[:-1], counts) + np.arange(int(indptr[-1]))
        return CsrArrays(self.data[at], self.indices[at], indptr, (len(rows), self.shape[1]))

    def to_scipy(self) -> sp.csr_matrix:
        """A ``scipy.sparse.csr_matrix`` over these arrays (no copy)."""
        import scipy.sparse as sp

        index = np.promote_types(self.indices.dtype, self.indptr.dtype)  # scipy wants one
        matrix = sp.csr_matrix(self.shape, dtype=np.float32)
        # set directly: the constructor refuses float16 and would check every index
        matrix.data = self.data
        matrix.indices = self.indices.astype(index, copy=False)
        matrix.indptr = self.indptr.astype(index, copy=False)
        matrix.has_sorted_indices = True
        return matrix


def is_csr(X: Any) -> bool:
    """Whether ``X`` is a CSR matrix: :class:`CsrArrays`, or a scipy sparse matrix (which
    exists only once scipy.sparse is imported, so nothing is imported to tell)."""
    if isinstance(X, CsrArrays):
        return True
    sparse = sys.modules.get("scipy.sparse")
    return sparse is not None and sparse.issparse(X)


def as_scipy(X: Any) -> Any:
    """``X`` as users get it: a scipy CSR matrix for :class:`CsrArrays`, else as it is."""
    return X.to_scipy() if isinstance(X, CsrArrays) else X

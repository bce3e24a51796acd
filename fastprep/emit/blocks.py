"""Blocks: the output columns one feature produces, before they are placed into X."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from fastprep.emit.csr import CsrArrays

if TYPE_CHECKING:
    import scipy.sparse as sp


@dataclass
class CodesBlock:
    """One-hot output as one code per row and input (-1 = all zeros), ``widths`` per input."""

    names: list[str]
    codes: list[np.ndarray]
    widths: list[int]
    sparse: bool = False

    @property
    def width(self) -> int:
        return sum(self.widths)

    def take(self, rows: np.ndarray) -> CodesBlock:
        return CodesBlock(self.names, [c[rows] for c in self.codes], self.widths, self.sparse)

    def to_csr(self, dtype: np.dtype) -> sp.csr_matrix:
        import scipy.sparse as sp

        n_rows = len(self.codes[0]) if self.codes else 0
        offsets = np.cumsum([0] + self.widths[:-1])
        stacked = np.stack([c.astype(np.int64) + o for c, o in zip(self.codes, offsets)], axis=1)
        present = np.stack([c >= 0 for c in self.codes], axis=1)
        counts = present.sum(axis=1)
        indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        indices = stacked[present]
        data = np.ones(len(indices), dtype=dtype)
        return sp.csr_matrix((data, indices, indptr), shape=(n_rows, self.width))


@dataclass
class SparseBlock:
    """A CSR block (feature hashing); ``names`` may be produced lazily by ``name_fn``."""

    prefix: str
    matrix: sp.csr_matrix | CsrArrays
    sparse = True

    @property
    def width(self) -> int:
        return int(self.matrix.shape[1])

    @property
    def names(self) -> Sequence[str]:
        return [f"{self.prefix}[{i}]" for i in range(self.width)]

    def take(self, rows: np.ndarray) -> SparseBlock:
        if isinstance(self.matrix, CsrArrays):
            return SparseBlock(self.prefix, self.matrix.take_rows(rows))
        return SparseBlock(self.prefix, self.matrix[rows])


Block = CodesBlock | SparseBlock

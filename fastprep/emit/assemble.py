"""Place blocks into X: dense blocks go straight into one preallocated C-order array.

X is CSR when any block is sparse, otherwise a C-contiguous dense array written in place
(no per-block temporaries, no final concatenation copy).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

from fastprep.emit.blocks import Block, CodesBlock, NumericBlock, SparseBlock


def assemble(
    blocks: Sequence[Block], n_rows: int, dtype: np.dtype | type = np.float32
) -> tuple[np.ndarray | sp.csr_matrix, list[str]]:
    """Return ``(X, feature_names)`` with columns in block order."""
    dtype = np.dtype(dtype)
    names = [name for block in blocks for name in block.names]
    if any(block.sparse for block in blocks):
        return _assemble_csr(blocks, n_rows, dtype), names
    width = sum(block.width for block in blocks)
    out = np.zeros((n_rows, width), dtype=dtype, order="C")
    offset = 0
    for block in blocks:
        _write_dense(block, out, offset)
        offset += block.width
    return out, names


def _write_dense(block: Block, out: np.ndarray, offset: int) -> None:
    if isinstance(block, NumericBlock):
        for j, column in enumerate(block.columns):
            out[:, offset + j] = column
        return
    assert isinstance(block, CodesBlock)
    rows = np.arange(out.shape[0])
    start = offset
    for codes, width in zip(block.codes, block.widths):
        present = codes >= 0
        out[rows[present], start + codes[present]] = 1
        start += width


def _assemble_csr(blocks: Sequence[Block], n_rows: int, dtype: np.dtype) -> sp.csr_matrix:
    parts = []
    for block in blocks:
        if isinstance(block, SparseBlock):
            parts.append(block.matrix.astype(dtype, copy=False))
        elif isinstance(block, CodesBlock):
            parts.append(block.to_csr(dtype))
        else:
            dense = np.column_stack(block.columns).astype(dtype) if block.columns else None
            parts.append(sp.csr_matrix(dense if dense is not None else (n_rows, 0), dtype=dtype))
    if not parts:
        return sp.csr_matrix((n_rows, 0), dtype=dtype)
    matrix = sp.hstack(parts, format="csr", dtype=dtype)
    matrix.sort_indices()
    return sp.csr_matrix(matrix)

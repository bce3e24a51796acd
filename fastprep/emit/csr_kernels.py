"""Assemble X as CSR from its blocks in two passes, without ``scipy.sparse.hstack``.

Blocks occupy increasing column ranges of X, so writing each row's entries block by block
(a dense block's nonzeros in column order, one-hot codes in input order, a hashed block's
already-sorted indices) gives sorted indices without any sort. Pass 1 counts entries per
row, pass 2 fills; both run over rows in parallel.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange
from numba.typed import List

DENSE, CODES, SPARSE = 0, 1, 2


@njit(parallel=True, cache=True)
def _count(n, kinds, ranges, dense, codes, sp_indptr, counts):  # pragma: no cover - compiled
    for i in prange(n):
        total = 0
        for b in range(kinds.shape[0]):
            lo, hi = ranges[b, 0], ranges[b, 1]
            if kinds[b] == DENSE:
                for j in range(lo, hi):
                    if dense[i, j] != 0:
                        total += 1
            elif kinds[b] == CODES:
                for j in range(lo, hi):
                    if codes[j, i] >= 0:
                        total += 1
            else:
                total += sp_indptr[lo][i + 1] - sp_indptr[lo][i]
        counts[i] = total


@njit(parallel=True, cache=True)
def _fill(n, kinds, ranges, offsets, dense, codes, code_offsets, sp_indptr, sp_indices,
          sp_data, indptr, indices, data):  # fmt: skip  # pragma: no cover - compiled
    for i in prange(n):
        k = indptr[i]
        for b in range(kinds.shape[0]):
            lo, hi = ranges[b, 0], ranges[b, 1]
            if kinds[b] == DENSE:
                for j in range(lo, hi):
                    v = dense[i, j]
                    if v != 0:
                        indices[k] = offsets[b] + j - lo
                        data[k] = v
                        k += 1
            elif kinds[b] == CODES:
                for j in range(lo, hi):
                    c = codes[j, i]
                    if c >= 0:
                        indices[k] = offsets[b] + code_offsets[j] + c
                        data[k] = 1
                        k += 1
            else:
                block_indptr, block_indices, block_data = sp_indptr[lo], sp_indices[lo], sp_data[lo]
                for p in range(block_indptr[i], block_indptr[i + 1]):
                    indices[k] = offsets[b] + block_indices[p]
                    data[k] = block_data[p]
                    k += 1


def assemble_csr(blocks: list[tuple], n_rows: int, width: int, dense: np.ndarray, dtype: np.dtype):
    """``blocks``: in X order, ``("dense", x_offset, first_col, last_col)`` into ``dense``,
    ``("codes", x_offset, [codes...], [widths...])`` or ``("sparse", x_offset, csr)``.
    Returns ``(data, indices, indptr)`` of X."""
    kinds, ranges, offsets = [], [], []
    code_arrays: list[np.ndarray] = []
    code_offsets: list[int] = []
    sp_indptr, sp_indices, sp_data = List(), List(), List()
    for block in blocks:
        offsets.append(block[1])
        if block[0] == "dense":
            kinds.append(DENSE)
            ranges.append((block[2], block[3]))
        elif block[0] == "codes":
            kinds.append(CODES)
            start = len(code_arrays)
            local = 0
            for codes, block_width in zip(block[2], block[3], strict=True):
                code_arrays.append(np.asarray(codes, dtype=np.int64))
                code_offsets.append(local)
                local += block_width
            ranges.append((start, len(code_arrays)))
        else:
            kinds.append(SPARSE)
            matrix = block[2]
            ranges.append((len(sp_indptr), len(sp_indptr) + 1))
            sp_indptr.append(np.asarray(matrix.indptr, dtype=np.int64))
            # no copies for the common types: int32 indices, data already in the output dtype
            sp_indices.append(np.asarray(matrix.indices, dtype=np.int32))
            sp_data.append(np.asarray(matrix.data, dtype=dtype))
    if not len(sp_indptr):  # typed lists need one element to have a type
        sp_indptr.append(np.zeros(1, np.int64))
        sp_indices.append(np.zeros(0, np.int32))
        sp_data.append(np.zeros(0, dtype))
    codes_2d = np.stack(code_arrays) if code_arrays else np.zeros((0, n_rows), np.int64)
    kinds_a = np.asarray(kinds, dtype=np.int64)
    ranges_a = np.asarray(ranges, dtype=np.int64).reshape(-1, 2)
    counts = np.empty(n_rows, dtype=np.int64)
    _count(n_rows, kinds_a, ranges_a, dense, codes_2d, sp_indptr, counts)
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    nnz = int(indptr[-1])
    index_dtype = np.int32 if max(nnz, width) < 2**31 - 1 else np.int64
    indices = np.empty(nnz, dtype=index_dtype)
    data = np.empty(nnz, dtype=dtype)
    _fill(n_rows, kinds_a, ranges_a, np.asarray(offsets, dtype=np.int64), dense, codes_2d,
          np.asarray(code_offsets, dtype=np.int64), sp_indptr, sp_indices, sp_data, indptr,
          indices, data)  # fmt: skip
    return data, indices, indptr.astype(index_dtype, copy=False)

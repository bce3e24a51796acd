"""Assemble X as CSR from its blocks in two passes, without ``scipy.sparse.hstack``.

Blocks occupy increasing column ranges of X, so writing each row's entries block by block
(a dense block's nonzeros in column order, one-hot codes in input order, a hashed block's
already-sorted indices) gives sorted indices without any sort. Pass 1 counts entries per
row, pass 2 fills; each block is one parallel kernel over rows that appends at a per-row
cursor, so every kernel takes plain arrays (typed lists of arrays inside a row loop were
measured ~10× slower: each access updates a shared reference count from both threads).

Rows dropped at the end (quarantined for a non-finite value) are skipped through ``rows``,
the source row of each output row, instead of copying every block first.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from fastprep.emit.arena import ARENA

#: below this many rows the kernels' serial twins run (thread wake-up costs more)
PARALLEL_MIN_ROWS = 200_000


@njit(parallel=True, cache=True)
def _count_dense(rows, dense, lo, hi, counts):  # pragma: no cover - compiled
    for r in prange(rows.shape[0]):
        i = rows[r]
        total = 0
        for j in range(lo, hi):
            if dense[i, j] != 0:
                total += 1
        counts[r] += total


@njit(parallel=True, cache=True)
def _count_codes(rows, codes, counts):  # pragma: no cover - compiled
    for r in prange(rows.shape[0]):
        if codes[rows[r]] >= 0:
            counts[r] += 1


@njit(parallel=True, cache=True)
def _count_sparse(rows, indptr, counts):  # pragma: no cover - compiled
    for r in prange(rows.shape[0]):
        i = rows[r]
        counts[r] += indptr[i + 1] - indptr[i]


@njit(parallel=True, cache=True)
def _fill_dense(rows, dense, lo, hi, offset, cursor, indices, data):  # pragma: no cover
    for r in prange(rows.shape[0]):
        i = rows[r]
        k = cursor[r]
        for j in range(lo, hi):
            v = dense[i, j]
            if v != 0:
                indices[k] = offset + j - lo
                data[k] = v
                k += 1
        cursor[r] = k


@njit(parallel=True, cache=True)
def _fill_codes(rows, codes, offset, cursor, indices, data):  # pragma: no cover - compiled
    for r in prange(rows.shape[0]):
        c = codes[rows[r]]
        if c >= 0:
            k = cursor[r]
            indices[k] = offset + c
            data[k] = 1
            cursor[r] = k + 1


@njit(parallel=True, cache=True)
def _fill_sparse(rows, indptr, block_indices, block_data, offset, cursor, indices, data):
    for r in prange(rows.shape[0]):  # pragma: no cover - compiled
        i = rows[r]
        k = cursor[r]
        for p in range(indptr[i], indptr[i + 1]):
            indices[k] = offset + block_indices[p]
            data[k] = block_data[p]
            k += 1
        cursor[r] = k


_KERNELS = (_count_dense, _count_codes, _count_sparse, _fill_dense, _fill_codes, _fill_sparse)
_SERIAL = {kernel: njit(cache=True)(kernel.py_func) for kernel in _KERNELS}


def _run(kernel, n_rows: int, *args) -> None:
    (kernel if n_rows >= PARALLEL_MIN_ROWS else _SERIAL[kernel])(*args)


def assemble_csr(
    blocks: list[tuple],
    rows: np.ndarray,
    width: int,
    dense: np.ndarray,
    dtype: np.dtype,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``blocks``: in X order, ``("dense", x_offset, first_col, last_col)`` into ``dense``,
    ``("codes", x_offset, [codes...], [widths...])`` or ``("sparse", x_offset, csr)``;
    ``rows``: for each output row, its row in the blocks (int64).
    Returns ``(data, indices, indptr)`` of X."""
    n_rows = len(rows)
    plan = [_prepare(block, dtype) for block in blocks]
    counts = ARENA.zeros(n_rows, np.int64)
    for kind, _offset, args in plan:
        if kind == "dense":
            _run(_count_dense, n_rows, rows, dense, args[0], args[1], counts)
        elif kind == "codes":
            for codes, _ in args:
                _run(_count_codes, n_rows, rows, codes, counts)
        else:
            _run(_count_sparse, n_rows, rows, args[0], counts)
    starts = ARENA.empty(n_rows + 1, np.int64)
    starts[0] = 0
    np.cumsum(counts, out=starts[1:])
    nnz = int(starts[-1])
    index_dtype = np.int32 if max(nnz, width) < 2**31 - 1 else np.int64
    indptr = starts if index_dtype == np.int64 else ARENA.empty(n_rows + 1, index_dtype)
    if indptr is not starts:
        np.copyto(indptr, starts, casting="same_kind")
    indices = ARENA.empty(nnz, index_dtype)
    data = ARENA.empty(nnz, dtype)
    cursor = counts  # reused: the counts are in starts now
    cursor[:] = starts[:-1]
    for kind, offset, args in plan:
        if kind == "dense":
            _run(_fill_dense, n_rows, rows, dense, args[0], args[1], offset, cursor, indices, data)
        elif kind == "codes":
            for codes, local in args:
                _run(_fill_codes, n_rows, rows, codes, offset + local, cursor, indices, data)
        else:
            _run(_fill_sparse, n_rows, rows, *args, offset, cursor, indices, data)
    return data, indices, indptr


def _prepare(block: tuple, dtype: np.dtype) -> tuple[str, int, tuple]:
    """Each block's arrays in the kernels' types (no copies for the common types)."""
    kind, offset = block[0], int(block[1])
    if kind == "dense":
        return kind, offset, (int(block[2]), int(block[3]))
    if kind == "codes":
        inputs, local = [], 0
        for codes, block_width in zip(block[2], block[3], strict=True):
            inputs.append((np.ascontiguousarray(codes), local))
            local += block_width
        return kind, offset, tuple(inputs)
    matrix = block[2]
    return (
        kind,
        offset,
        (
            np.asarray(matrix.indptr, dtype=np.int64),
            np.asarray(matrix.indices, dtype=np.int32),
            np.asarray(matrix.data, dtype=dtype),
        ),
    )

"""The join back onto the rows for the Numba twin of
:mod:`fastprep.backends.reference.group_stats`: each row's statistics gathered from the
per-group table by its group (-1, a group unseen at fit: the table's last row), in place
into X's columns, large contiguous rows by non-temporal stores; text keys' codes combined
as each row is written. Row ranges on the pool's threads.
"""

from __future__ import annotations

import numpy as np

from fastprep.backends.numba.group_keys import read_only, row_codes, row_group, row_ranges
from fastprep.native import threads
from fastprep.native.arena import ARENA
from fastprep.native.kernel_files import intrinsic, jit

#: an unsigned index, a signed code's -1 reading the last slot (no negative-index test)
slot = intrinsic("fastprep.native.indexing", "slot")


stream_store = intrinsic("fastprep.native.streaming", "stream_store")
store_fence = intrinsic("fastprep.native.streaming", "store_fence")


@jit(cache=True, nogil=True)
def _take(lookup, combined, out):  # pragma: no cover - compiled
    # -1: the last slot (see ``slot``)
    last = np.uint64(len(lookup) - 1)
    for i in range(np.uint64(len(combined))):
        out[i] = lookup[slot(combined[i], last)]


@jit(cache=True, nogil=True)
def _put_rows_texts(out, per_code, codes, luts, sizes):  # pragma: no cover - compiled
    last = per_code.shape[0] - 1
    width = np.uint64(per_code.shape[1])
    for i in range(np.uint64(len(out))):
        row = np.uint64(row_group(codes, luts, sizes, i, last))
        for j in range(width):
            out[i, j] = per_code[row, j]


@jit(cache=True, nogil=True)
def _stream_rows_texts(flat, per_code, codes, luts, sizes):  # pragma: no cover - compiled
    """:func:`_put_rows_texts` into rows of 8-byte words laid end to end (``flat``),
    by non-temporal stores."""
    last = per_code.shape[0] - 1
    width = np.uint64(per_code.shape[1])
    for i in range(np.uint64(len(codes[0]))):
        row = np.uint64(row_group(codes, luts, sizes, i, last))
        for j in range(width):
            stream_store(flat, i * width + j, per_code[row, j])
    store_fence()


def put_rows_texts(
    out: np.ndarray, per_code: np.ndarray, parts: list[tuple[np.ndarray, np.ndarray | None]],
    sizes: list[int],
) -> None:  # fmt: skip
    """:func:`put_rows` of the rows' combined codes (-1: the last row), combined from the
    text keys' codes and luts as each row is written (no combined array)."""
    radix = np.asarray(sizes, dtype=np.int64)
    luts = tuple(np.ascontiguousarray(lut, dtype=np.int64) for _, lut in parts)
    words = _as_words(out, per_code)

    def run(r: tuple[int, int]) -> None:
        codes = tuple(read_only(c[r[0] : r[1]]) for c, _ in parts)
        if words is None:
            _put_rows_texts(out[r[0] : r[1]], per_code, codes, luts, radix)
        else:
            flat, table = words
            width = table.shape[1]
            _stream_rows_texts(flat[r[0] * width : r[1] * width], table, codes, luts, radix)

    threads.map_all(run, row_ranges(len(out)))


def take(lookup: np.ndarray, combined: np.ndarray) -> np.ndarray:
    """``lookup[combined]`` (-1: the last slot), row ranges on the pool's threads."""
    combined = row_codes(combined)
    out = ARENA.empty(len(combined), np.int64)
    threads.map_all(lambda r: _take(lookup, combined[r[0] : r[1]], out[r[0] : r[1]]),
                    row_ranges(len(combined)))  # fmt: skip
    return out


@jit(cache=True, nogil=True)
def _put_rows(out, per_group, index):  # pragma: no cover - compiled
    last = np.uint64(per_group.shape[0] - 1)
    width = np.uint64(per_group.shape[1])
    for i in range(np.uint64(len(index))):
        g = slot(index[i], last)  # -1: the last row
        for j in range(width):
            out[i, j] = per_group[g, j]


@jit(cache=True, nogil=True)
def _stream_rows(flat, per_group, index):  # pragma: no cover - compiled
    """:func:`_put_rows` into rows of 8-byte words laid end to end (``flat``), by
    non-temporal stores."""
    last = np.uint64(per_group.shape[0] - 1)
    width = np.uint64(per_group.shape[1])
    for i in range(np.uint64(len(index))):
        g = slot(index[i], last)  # -1: the last row
        for j in range(width):
            stream_store(flat, i * width + j, per_group[g, j])
    store_fence()


#: rows from this many bytes on are written by non-temporal stores (smaller ones stay in
#: the cache for whatever reads them next)
STREAM_BYTES = 8 << 20


def _as_words(out: np.ndarray, per_group: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``out`` as its rows' 8-byte words laid end to end and ``per_group`` as rows of those
    words, for the streaming gather: when ``out``'s rows are contiguous, large, whole
    words and 8-byte aligned (else None: a row with other columns between would write
    partial lines, which non-temporal stores make slower)."""
    row_bytes = out.shape[1] * out.itemsize if out.ndim == 2 else 0
    if (out.nbytes < STREAM_BYTES or not out.flags.c_contiguous or row_bytes % 8
            or out.ctypes.data % 8 or per_group.dtype != out.dtype):  # fmt: skip
        return None
    words = row_bytes // 8
    table = np.ascontiguousarray(per_group).view(np.uint64).reshape(-1, words)
    return out.reshape(-1).view(np.uint64), table


def put_rows(out: np.ndarray, per_group: np.ndarray, index: np.ndarray) -> None:
    """``out[i] = per_group[index[i]]`` (index -1: the last row) row by row, in place: no
    temporary (n, width) array as numpy's gather-then-copy makes. Large contiguous rows
    by non-temporal stores of 8-byte words (see :mod:`fastprep.native.streaming`)."""
    index = row_codes(index)
    words = _as_words(out, per_group)
    if words is None:
        threads.map_all(lambda r: _put_rows(out[r[0] : r[1]], per_group, index[r[0] : r[1]]),
                        row_ranges(len(index)))  # fmt: skip
        return
    flat, table = words
    width = table.shape[1]
    threads.map_all(lambda r: _stream_rows(flat[r[0] * width : r[1] * width], table,
                                           index[r[0] : r[1]]), row_ranges(len(index)))  # fmt: skip


#: the kernels of this module a GroupStats fit and transform run (the planner asks
#: whether they are loaded or cached)
KERNELS = (_put_rows, _stream_rows)

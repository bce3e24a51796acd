"""An Arrow number column read into numpy and scanned by the number checks in one pass.

``ChunkedArray.to_numpy()`` of a float64 column with missing values (or of several
chunks) copies the chunks and writes NaN for the missing ones on one thread into fresh
memory, and the scan then reads the whole copy again. Here each scan task (see
``number_checks``) copies its own rows out of the Arrow chunks (NaN where the validity
bit is clear) into memory the arena keeps warm, then scans them while they are still in
the core's cache: one read of the source, on every core.

The values are what ``coerce.arrow_numbers`` gives (float64 with NaN for missing, int64
kept as is) and the scan is what ``number_checks.scan_column`` gives for them, bit for
bit (the same tasks, chunks and shift).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from fastprep.native import threads
from fastprep.native.arena import ARENA
from fastprep.native.kernel_files import jit as njit
from fastprep.validate import number_checks as nc


@njit(cache=True, nogil=True)
def _fill_nan(src, bitmap, bit_offset, lo, hi, out, at):  # pragma: no cover - compiled
    """Rows ``lo:hi`` of one chunk's values into ``out[at:]``, NaN where the validity bit
    (``bit_offset`` < 0: no bitmap) is clear: a plain copy (vectorized), then the bitmap
    byte by byte, a byte whose eight rows are all present skipped with one test (a loop
    over rows, eight at a time where it could, took longer than the copy)."""
    for i in range(lo, hi):
        out[at + i - lo] = src[i]
    if bit_offset < 0 or hi <= lo:
        return
    for k in range((lo + bit_offset) >> 3, ((hi - 1 + bit_offset) >> 3) + 1):
        byte = bitmap[k]
        if byte == 255:
            continue
        row = k * 8 - bit_offset  # the row of the byte's first bit
        for b in range(8):
            if not (byte >> b) & 1 and lo <= row + b < hi:
                out[at + row + b - lo] = np.nan


@njit(cache=True, nogil=True)
def _first_finite_at(src, bitmap, bit_offset, n):  # pragma: no cover - compiled
    """Position of the first present, finite value of a chunk's ``n`` values, or -1."""
    for i in range(n):
        if bit_offset >= 0:
            bit = i + bit_offset
            if not (bitmap[bit >> 3] >> (bit & 7)) & 1:
                continue
        if abs(src[i]) < np.inf:
            return i
    return -1


_NO_BITMAP = np.ones(1, dtype=np.uint8)
_NO_BITMAP.flags.writeable = False


def kernels() -> tuple:
    """The kernels this path runs besides the scan's."""
    return (_fill_nan, _first_finite_at)


def _chunk(chunk: pa.Array, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray, int]:
    """(values, validity bitmap, its bit offset or -1), read-only views of the buffers."""
    validity, data = chunk.buffers()[:2]
    values = np.frombuffer(data, dtype=dtype)[chunk.offset : chunk.offset + len(chunk)]
    if chunk.null_count and validity is not None:
        return values, np.frombuffer(validity, dtype=np.uint8), chunk.offset
    return values, _NO_BITMAP, -1


def takes(column: pa.ChunkedArray) -> bool:
    """Whether this path reads ``column``: float64 that ``to_numpy`` would copy (missing
    values or several chunks), or int64 without missing values in several chunks, long
    enough for the pool. (A float64 chunk without missing values is read without a copy.)"""
    if len(column) < nc.PARALLEL_MIN:
        return False
    if pa.types.is_float64(column.type):
        return column.null_count > 0 or column.num_chunks > 1
    return pa.types.is_int64(column.type) and column.null_count == 0 and column.num_chunks > 1


def read_scanned(
    column: pa.ChunkedArray, lo: float, hi: float, integral: bool, range_on_inf: bool
) -> tuple[np.ndarray, nc.ColumnScan] | None:
    """``column`` as numpy and its :func:`number_checks.scan_column`, or None: a column
    this path does not read (see :func:`takes`), or the scan is on its numpy path (the
    caller converts the column, then scans it)."""
    if not takes(column) or nc.scan_path(len(column), kernels()) != "numba":
        return None
    return _read_scanned(column, lo, hi, integral, range_on_inf)


def _read_scanned(
    column: pa.ChunkedArray, lo: float, hi: float, integral: bool, range_on_inf: bool
) -> tuple[np.ndarray, nc.ColumnScan]:
    is_float = pa.types.is_float64(column.type)
    dtype = np.dtype(np.float64 if is_float else np.int64)
    chunks = [_chunk(c, dtype) for c in column.chunks if len(c)]
    starts = np.cumsum([0] + [len(c[0]) for c in chunks])
    n = int(starts[-1])
    out = ARENA.empty(n, dtype)
    shift = _shift(chunks) if is_float else float(chunks[0][0][0])
    size = (n + nc.N_CHUNKS - 1) // nc.N_CHUNKS
    counts = np.zeros((nc.N_CHUNKS // nc.LANES, 7), np.int64)
    stats = np.zeros((nc.N_CHUNKS, 4))
    scanned = out.view()
    scanned.flags.writeable = False  # the signature the scan has for Arrow's own arrays

    def task(t: int) -> None:
        first, last = min(n, t * nc.LANES * size), min(n, (t + 1) * nc.LANES * size)
        for (values, bitmap, bit_offset), at in zip(chunks, starts):
            lo_row, hi_row = max(first, at) - at, min(last, at + len(values)) - at
            if hi_row <= lo_row:
                continue
            if is_float:
                _fill_nan(values, bitmap, bit_offset, lo_row, hi_row, out, at + lo_row)
            else:
                out[at + lo_row : at + hi_row] = values[lo_row:hi_row]
        nc._scan_task(scanned, t, size, float(lo), float(hi), integral, range_on_inf,
                      not is_float, shift, counts, stats)  # fmt: skip

    threads.map_all(task, range(nc.N_CHUNKS // nc.LANES))
    return out, nc.column_scan(counts, stats, n, shift)


def _shift(chunks: list[tuple[np.ndarray, np.ndarray, int]]) -> float:
    """The first present, finite value (0.0 if none): ``number_checks.first_finite`` of
    the column as numpy."""
    for values, bitmap, bit_offset in chunks:
        at = _first_finite_at(values, bitmap, bit_offset, len(values))
        if at >= 0:
            return float(values[at])
    return 0.0

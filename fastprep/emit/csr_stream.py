"""X as CSR whose entries are made when they are needed: all at once, or a block of rows
at a time straight into the files of an output.

Why: a job that writes X to disk and exits (``fastprep run``) never needs X's ~225 MB of
``data`` and ``indices`` (3.4M rows of the flights pipeline) in memory at once. Made whole,
those arrays are fresh memory whose first touch (a page fault and a zeroed page each)
cost 0.2-0.8 s, more than the kernel filling them. :class:`PendingCsr` keeps X's row
starts (the count pass, which every caller needs: ``nnz``, ``indptr``) and fills the
entries of a range of rows at a time into two small buffers that are reused block after
block (:meth:`PendingCsr.pieces`), so the writer streams each block to its file while the
next one is filled. Anything else that reads ``data`` or ``indices`` (``out.X``, a cast
to float16, a compressed output) gets the whole arrays, made on first access, equal to
what the block-wise writer wrote.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from fastprep.emit.csr import CsrArrays
from fastprep.emit.csr_kernels import CountedCsr

#: the most entries one block of rows holds (each of the two buffers holds this many of
#: ``data`` and of ``indices``: 16 MiB each for float32/int32)
BLOCK_ENTRIES = 4 << 20


class PendingCsr(CsrArrays):
    """A :class:`CsrArrays` whose ``data`` and ``indices`` are filled on first access;
    ``indptr``, ``shape``, ``nnz`` and ``dtype`` are known from the start."""

    def __init__(self, counted: CountedCsr) -> None:
        self._counted: CountedCsr | None = counted
        self._data: np.ndarray | None = None
        self._indices: np.ndarray | None = None
        self.indptr = counted.indptr()
        self.shape = (counted.n_rows, int(counted.width))
        self._dtype = counted.dtype
        self.index_dtype = counted.index_dtype

    @property
    def pending(self) -> bool:
        """Whether the entries were not made yet (they can be written block by block)."""
        return self._data is None

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def data(self) -> np.ndarray:
        self._fill()
        assert self._data is not None
        return self._data

    @property
    def indices(self) -> np.ndarray:
        self._fill()
        assert self._indices is not None
        return self._indices

    def _fill(self) -> None:
        if self._counted is None:
            return
        self._data, self._indices, _ = self._counted.fill_all()
        self._counted = None  # its inputs (the dense buffer, the encoders' blocks) can go

    def pieces(
        self, unit: int = 1, block_entries: int | None = None
    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """X's entries in order as ``(data, indices)`` pieces, each (but the last) a
        multiple of ``unit`` entries long; a piece's arrays are overwritten once the
        generator has been resumed twice (two buffers take turns: the caller may write one
        piece while the next is filled). The entries beyond a multiple of ``unit`` move to
        the front of the next piece, so an ``O_DIRECT`` writer gets whole blocks (at most
        ``block_entries`` new entries per piece, :data:`BLOCK_ENTRIES` by default)."""
        block_entries = BLOCK_ENTRIES if block_entries is None else block_entries
        if not self.pending:
            yield from _whole(self.data, self.indices, unit, block_entries)
            return
        counted = self._counted
        assert counted is not None
        starts, n_rows = counted.starts, counted.n_rows
        room = max(min(block_entries, counted.nnz), 2 * unit)
        buffers = [
            (_aligned(room, self._dtype), _aligned(room, self.index_dtype)) for _ in range(2)
        ]
        local = np.empty(0, np.int64)
        r0, lead, turn = 0, 0, 0
        while r0 < n_rows:
            # the most rows whose entries fit after the carried ones (at least one row)
            r1 = int(np.searchsorted(starts, starts[r0] + room - lead, side="right")) - 1
            r1 = min(max(r1, r0 + 1), n_rows)
            need = lead + int(starts[r1] - starts[r0])
            if need > len(buffers[turn][0]):  # one row longer than a block: larger buffers
                old = buffers[turn]
                buffers[turn] = (_aligned(need, self._dtype), _aligned(need, self.index_dtype))
                buffers[turn][0][:lead], buffers[turn][1][:lead] = old[0][:lead], old[1][:lead]
            data, indices = buffers[turn]
            if len(local) < r1 - r0:
                local = np.empty(r1 - r0, np.int64)
            end = counted.fill_rows(r0, r1, lead, indices, data, local)
            r0 = r1
            keep = end if r0 >= n_rows else end - end % unit
            yield data[:keep], indices[:keep]
            lead = end - keep
            turn = 1 - turn
            if lead:  # the unaligned tail opens the other buffer (not being written)
                buffers[turn][0][:lead] = data[keep:end]
                buffers[turn][1][:lead] = indices[keep:end]
        if n_rows == 0:
            yield np.empty(0, self._dtype), np.empty(0, self.index_dtype)


#: buffers start on a page: an ``O_DIRECT`` write takes its pieces from where they are
ALIGN = 4096


def _aligned(n: int, dtype: np.dtype) -> np.ndarray:
    raw = np.empty(n * dtype.itemsize + ALIGN, np.uint8)
    start = -raw.ctypes.data % ALIGN
    return raw[start : start + n * dtype.itemsize].view(dtype)


def _whole(
    data: np.ndarray, indices: np.ndarray, unit: int, block_entries: int
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Already made: the arrays' own memory, in block-sized pieces."""
    step = max(block_entries - block_entries % unit, unit)
    for start in range(0, max(len(data), 1), step):
        yield data[start : start + step], indices[start : start + step]

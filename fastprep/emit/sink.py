"""The output being built: backends write numeric columns straight into their slice.

Dense output: X is allocated once (C order) and every stage writes into its columns — no
per-block temporaries, no final concatenation. Sparse output: numeric columns go to one
dense buffer, encoders hand over CSR/code blocks, and X is assembled once at the end.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from fastprep.emit.blocks import CodesBlock, SparseBlock
from fastprep.emit.csr import CsrArrays
from fastprep.emit.csr_kernels import CountedCsr, count_csr
from fastprep.emit.csr_stream import PendingCsr
from fastprep.emit.layout import Layout
from fastprep.native.arena import ARENA
from fastprep.native.kernel_files import jit, numba_cached, numba_loaded
from fastprep.planning.planner import kernel_path

if TYPE_CHECKING:
    import scipy.sparse as sp


class OutputSink:
    """Preallocated output for ``n_rows`` rows laid out as ``layout`` says."""

    def __init__(self, layout: Layout, n_rows: int, dtype: Any = np.float32) -> None:
        self.layout = layout
        self.n_rows = n_rows
        self.dtype = np.dtype(dtype)
        self.blocks: dict[int, CodesBlock | SparseBlock] = {}
        numeric = [i for i, s in enumerate(layout.slots) if s.kind == "numeric"]
        if layout.sparse:
            # numeric columns packed side by side in their own dense buffer
            self._numeric_offsets = {}
            offset = 0
            for i in numeric:
                self._numeric_offsets[i] = offset
                offset += layout.slots[i].width
            self.dense = ARENA.empty((n_rows, offset), self.dtype)
        else:
            self._numeric_offsets = {i: layout.slots[i].offset for i in numeric}
            # every stage writes all rows of its numeric columns; only encoders' one-hot
            # columns (a 1 per row) need the zeros (skipping the fill: 2 ms at 3.3M x 4)
            encoded = len(numeric) < len(layout.slots)
            allocate = ARENA.zeros if encoded else ARENA.empty
            self.dense = allocate((n_rows, layout.width), self.dtype)
        self.numeric_features = numeric

    def column_offset(self, feature: int) -> int:
        """Column of ``self.dense`` where numeric feature ``feature`` starts."""
        return self._numeric_offsets[feature]

    def numeric_view(self, feature: int) -> np.ndarray:
        start = self._numeric_offsets[feature]
        return self.dense[:, start : start + self.layout.slots[feature].width]

    def put(self, feature: int, block: CodesBlock | SparseBlock) -> None:
        """An encoder's output: written into X now (dense) or kept for CSR assembly."""
        if not self.layout.sparse and isinstance(block, CodesBlock):
            _write_codes(block, self.dense, self.layout.slots[feature].offset)
        elif not self.layout.sparse:  # a CSR block in dense X (a multi-hot OneHot of tags)
            _write_sparse(block.matrix, self.dense, self.layout.slots[feature].offset)
        else:
            self.blocks[feature] = block

    def bad_rows(self, skip: set[int] = frozenset()) -> dict[int, np.ndarray]:
        """Per numeric feature (but those in ``skip``), rows where a column is NaN or ±inf."""
        out = {}
        for feature in self.numeric_features:
            if feature in skip:
                continue
            view = self.numeric_view(feature)
            bad = ~np.isfinite(view).all(axis=1)
            if bad.any():
                out[feature] = bad
        return out

    def bad_sparse_rows(self) -> dict[str, np.ndarray]:
        """Per sparse block (by name prefix), rows holding a NaN or ±inf value."""
        out = {}
        for block in self.blocks.values():
            if not isinstance(block, SparseBlock):
                continue
            matrix = block.matrix
            with np.errstate(over="ignore"):
                finite = np.isfinite(matrix.data.astype(self.dtype, copy=False))
            if finite.all():
                continue
            rows = np.repeat(np.arange(matrix.shape[0]), np.diff(matrix.indptr))
            bad = np.zeros(matrix.shape[0], dtype=bool)
            bad[rows[~finite]] = True
            out[block.prefix] = bad
        return out

    def finish(self, keep: np.ndarray | None, deferred: bool = False) -> np.ndarray | CsrArrays:
        """X, dropping the rows where ``keep`` is False (only when some must go).
        ``deferred``: a CSR X's entries are made when first needed (a
        :class:`~fastprep.emit.csr_stream.PendingCsr`: an output written to disk next
        streams them block by block instead of holding them all)."""
        if not self.layout.sparse:
            return self.dense if keep is None else _compact_rows(self.dense, keep)
        blocks: list[tuple] = []
        for index, slot in enumerate(self.layout.slots):
            if slot.kind == "numeric":
                start = self._numeric_offsets[index]
                last = blocks[-1] if blocks else ("",)
                # the next columns of X and of the buffer extend the last dense block: one
                # pass per kernel for all numeric features, not one per feature
                if last[0] == "dense" and last[1] + last[3] - last[2] == slot.offset == (
                    last[1] + start - last[2]
                ):
                    blocks[-1] = (*last[:3], start + slot.width)
                    continue
                blocks.append(("dense", slot.offset, start, start + slot.width))
                continue
            block = self.blocks[index]
            if isinstance(block, CodesBlock):
                blocks.append(("codes", slot.offset, block.codes, block.widths))
            else:
                blocks.append(("sparse", slot.offset, block.matrix))
        rows = None if keep is None else np.flatnonzero(keep)
        counted = count_csr(blocks, rows, self.layout.width, self.dense, self.dtype)
        if isinstance(counted, CountedCsr):
            if deferred:
                return PendingCsr(counted)
            counted = counted.fill_all()
        data, indices, indptr = counted
        n_out = self.n_rows if rows is None else len(rows)
        return CsrArrays(data, indices, indptr, (n_out, self.layout.width))


def _write_codes(block: CodesBlock, out: np.ndarray, offset: int) -> None:
    rows = np.arange(out.shape[0])
    start = offset
    for codes, width in zip(block.codes, block.widths):
        present = codes >= 0
        out[rows[present], start + codes[present]] = 1
        start += width


def _write_sparse(matrix: sp.csr_matrix, out: np.ndarray, offset: int) -> None:
    rows = np.repeat(np.arange(matrix.shape[0]), np.diff(matrix.indptr))
    out[rows, offset + matrix.indices] = matrix.data


def _compact_rows(dense: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """The rows where ``keep`` is True, moved up in place: a view of the first rows of the
    same buffer (no second matrix; the dropped rows' memory stays with it)."""
    kept = np.flatnonzero(keep)
    first = int(np.argmin(keep)) if not keep.all() else len(keep)
    sources = kept[first:]
    path = kernel_path(
        "rows", sources.size * dense.shape[1], cached=numba_cached(_move_rows),
        loaded=numba_loaded(_move_rows), n_rows=dense.shape[0],
    )  # fmt: skip
    if path == "numba":
        _move_rows(dense, sources, first)
    else:  # numpy gathers the moved rows into a temporary first (the same values)
        dense[first : first + len(sources)] = dense[sources]
    return dense[: len(kept)]


@jit(cache=True)
def _move_rows(dense, sources, start):  # pragma: no cover - compiled
    # serial on purpose: a row moves up only into a row already moved or dropped
    for k in range(sources.shape[0]):
        dense[start + k, :] = dense[sources[k], :]

"""Assemble X as CSR from its blocks in two passes, without ``scipy.sparse.hstack``.

Blocks occupy increasing column ranges of X, so writing each row's entries block by block
(a dense block's nonzeros in column order, one-hot codes in input order, a hashed block's
already-sorted indices) gives sorted indices without any sort. Pass 1 counts each row's
entries, pass 2 writes them where ``indptr`` says.

Each pass is ONE kernel over rows that visits every block, generated for the blocks'
layout (how many dense ranges, code columns and CSR blocks, in X order) and cached on
disk like the fused kernels (``backends.kernel_files``). Why: one kernel per block read
and wrote a per-row cursor array in every pass — eight passes over two 26 MB arrays at
3.3M rows for the flights pipeline, most of emit's time — and a kernel taking a variable
number of arrays needs tuples or typed lists, whose per-access reference counting was
measured ~10x slower from two threads.

Rows dropped at the end (quarantined for a non-finite value) are skipped through ``rows``,
the source row of each output row, instead of copying every block first.

Without a compiled kernel at hand (a small job on a fresh install, or one that would not
repay importing Numba) the same arrays are built by numpy (:func:`assemble_numpy`):
each block's entries in row order, scattered to their row's place after the earlier
blocks' entries — the same ``(data, indices, indptr)``, bit for bit.
"""

from __future__ import annotations

import functools
import time
from typing import Any

import numpy as np

from fastprep.native import kernel_files
from fastprep.native.arena import ARENA
from fastprep.native.kernel_files import indent, load_module
from fastprep.planning.planner import kernel_path, note_helper

#: below this many rows the serial twins of the kernels run (thread wake-up costs more).
#: By rows, not by the task's thread budget: on one Numba thread (a one-thread Dask
#: worker's task) the parallel kernels cost the same as their twins (measured at 500k
#: rows: count within 3%, fill ~10% faster; the launch costs ~1 us a call)
PARALLEL_MIN_ROWS = 200_000


def assemble_csr(
    blocks: list[tuple],
    rows: np.ndarray | None,
    width: int,
    dense: np.ndarray,
    dtype: np.dtype,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``blocks``: in X order, ``("dense", x_offset, first_col, last_col)`` into ``dense``,
    ``("codes", x_offset, [codes...], [widths...])`` or ``("sparse", x_offset, csr)``;
    ``rows``: for each output row, its row in the blocks (int64), or None for all rows.
    Returns ``(data, indices, indptr)`` of X."""
    counted = count_csr(blocks, rows, width, dense, dtype)
    return counted if isinstance(counted, tuple) else counted.fill_all()


def count_csr(
    blocks: list[tuple],
    rows: np.ndarray | None,
    width: int,
    dense: np.ndarray,
    dtype: np.dtype,
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | CountedCsr:
    """:func:`assemble_csr`'s first pass: the row starts of X, with the kernels that fill
    it (a :class:`CountedCsr`, whose entries can be made all at once or a range of rows
    at a time); or, on the numpy path (no compiled kernels at hand), X's arrays at once."""
    n_rows = dense.shape[0] if rows is None else len(rows)
    layout = _layout(blocks)
    source = _source(layout, rows is not None)
    suffix = "" if n_rows >= PARALLEL_MIN_ROWS else "_serial"
    if csr_path(source, suffix, n_rows, len(layout)) == "numpy":
        started = time.perf_counter()
        assembled = assemble_numpy(blocks, rows, width, dense, dtype)
        note_helper("csr", n_rows * len(layout), time.perf_counter() - started)
        return assembled
    module = load_module(source, prefix="csr")
    arguments = _arguments(blocks, dtype)
    head = [n_rows, rows if rows is not None else _NO_ROWS, dense, *arguments]
    counts = ARENA.empty(n_rows + 1, np.int64)
    counts[0] = 0
    getattr(module, "count" + suffix)(*head, counts[1:])
    np.cumsum(counts, out=counts)  # in place: counts become the row starts
    return CountedCsr(module, suffix, rows, dense, arguments, layout, counts, width,
                      np.dtype(dtype))  # fmt: skip


class CountedCsr:
    """X's row starts (``starts``, int64) and what the fill kernel needs to write its
    entries: all rows into new arrays (:meth:`fill_all`), or rows ``r0:r1`` into a
    caller's buffers (:meth:`fill_rows`; the block-wise writer of an output reuses two
    small buffers instead of first touching X's full size)."""

    def __init__(
        self, module: Any, suffix: str, rows: np.ndarray | None, dense: np.ndarray,
        arguments: list[Any], layout: tuple[str, ...], starts: np.ndarray, width: int,
        dtype: np.dtype,
    ) -> None:  # fmt: skip
        self.module, self.suffix, self.rows, self.dense = module, suffix, rows, dense
        self.arguments, self.layout, self.starts = arguments, layout, starts
        self.width, self.dtype = width, dtype
        self.n_rows = len(starts) - 1
        self.nnz = int(starts[-1])
        self.index_dtype = _index_dtype(self.nnz, width)

    def indptr(self) -> np.ndarray:
        """X's ``indptr`` in the index type (``starts`` itself when that is int64)."""
        return _indptr(self.starts, self.index_dtype)

    def fill_all(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(data, indices, indptr)`` of X, every row at once."""
        indptr, indices, data = _allocate(self.starts, self.width, self.dtype)
        head = [self.n_rows, self.rows if self.rows is not None else _NO_ROWS, self.dense]
        getattr(self.module, "fill" + self.suffix)(*head, *self.arguments, self.starts,
                                                    indices, data)  # fmt: skip
        return data, indices, indptr

    def fill_rows(
        self, r0: int, r1: int, lead: int, indices: np.ndarray, data: np.ndarray,
        local: np.ndarray,
    ) -> int:  # fmt: skip
        """The entries of X's rows ``r0:r1`` into ``indices``/``data`` from position
        ``lead`` on (``local``: an int64 buffer of at least ``r1 - r0``); returns the
        position after the last. The same compiled kernels as :meth:`fill_all`: with no
        row selection each row-indexed input is passed as its slice of rows ``r0:r1``."""
        n = r1 - r0
        base = int(self.starts[r0]) - lead
        starts = np.subtract(self.starts[r0:r1], base, out=local[:n])
        if self.rows is not None:
            head = [n, self.rows[r0:r1], self.dense, *self.arguments]
        else:
            head = [
                n,
                _NO_ROWS,
                self.dense[r0:r1],
                *_row_slices(self.layout, self.arguments, r0, r1),
            ]
        getattr(self.module, "fill" + self.suffix)(*head, starts, indices, data)
        return int(self.starts[r1]) - base


def _row_slices(layout: tuple[str, ...], arguments: list[Any], r0: int, r1: int) -> list[Any]:
    """The kernel arguments with every row-indexed array cut to rows ``r0:r1``: code
    columns and CSR blocks' ``indptr`` (whose values still point into their full
    ``indices``/``data``)."""
    out, at = [], 0
    for kind in layout:
        if kind == "d":
            out += arguments[at : at + 3]
            at += 3
        elif kind == "c":
            out += [arguments[at][r0:r1], arguments[at + 1]]
            at += 2
        else:
            out += [arguments[at][r0 : r1 + 1], *arguments[at + 1 : at + 4]]
            at += 4
    return out


def _allocate(
    starts: np.ndarray, width: int, dtype: np.dtype
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """X's ``indptr`` (``starts`` itself when int64 is needed), ``indices`` and ``data``
    for the int64 row ``starts``."""
    nnz = int(starts[-1])
    index_dtype = _index_dtype(nnz, width)
    indptr = _indptr(starts, index_dtype)
    return indptr, ARENA.empty(nnz, index_dtype), ARENA.empty(nnz, dtype)


def _index_dtype(nnz: int, width: int) -> np.dtype:
    """int32 indices while they fit, as scipy makes them."""
    return np.dtype(np.int32 if max(nnz, width) < 2**31 - 1 else np.int64)


def _indptr(starts: np.ndarray, index_dtype: np.dtype) -> np.ndarray:
    if index_dtype == np.int64:
        return starts
    indptr = ARENA.empty(len(starts), index_dtype)
    np.copyto(indptr, starts, casting="same_kind")
    return indptr


_NO_ROWS = np.empty(0, dtype=np.int64)


def csr_path(source: str, suffix: str, n_rows: int, n_blocks: int) -> str:
    """``"numba"`` when the generated kernels for this layout are loaded or in Numba's disk
    cache and the planner predicts they pay for ``n_rows`` rows, else ``"numpy"``."""
    key = kernel_files.source_key(source)
    loaded = kernel_files.is_loaded(key)
    path = kernel_files.cache_dir() / f"csr_{key}.py"
    cached = loaded or (
        path.exists()
        and all(kernel_files.numba_cached(path, f + suffix) for f in ("count", "fill"))
    )
    return kernel_path("csr", n_rows * n_blocks, cached=cached, loaded=loaded,
                               n_rows=n_rows)  # fmt: skip


def assemble_numpy(
    blocks: list[tuple],
    rows: np.ndarray | None,
    width: int,
    dense: np.ndarray,
    dtype: np.dtype,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`assemble_csr` by numpy (no compile): the same arrays.

    Piece by piece (a dense column, a code column, a CSR block), in X order: first every
    piece's entries per row (the row starts), then each piece's entries scattered to their
    rows' next free places and dropped before the next piece is made. A row's entries
    stay in X's column order; only one piece's entries are in memory at a time (all of
    them at once took the 3.4M-row flights job to 2.0 GB, above the Numba kernels' 1.3)."""
    n_rows = dense.shape[0] if rows is None else len(rows)
    pieces = [piece for block in blocks for piece in _pieces(block, rows, dense, dtype)]
    counts = np.zeros(n_rows + 1, np.int64)
    for row_counts, _ in pieces:
        counts[1:] += row_counts
    starts = np.cumsum(counts, out=counts)  # in place: counts become the row starts
    indptr, indices, data = _allocate(starts, width, dtype)
    cursor = starts[:-1].copy()  # where each row's next piece's entries go
    for number, (row_counts, entries) in enumerate(pieces):
        columns, values = entries()
        if row_counts.dtype == np.bool_:  # at most one entry per row: where the mask is
            at = cursor[row_counts]
        else:
            at = np.repeat(cursor - (np.cumsum(row_counts) - row_counts), row_counts)
            at += np.arange(len(at))
        indices[at] = columns
        data[at] = values
        cursor += row_counts
        pieces[number] = (row_counts, _DONE)  # its entries' arrays are freed now
        del columns, values, at
    return data, indices, indptr


def _DONE() -> tuple[Any, Any]:
    raise AssertionError("a piece's entries are made once")


def _pieces(
    block: tuple, rows: np.ndarray | None, dense: np.ndarray, dtype: np.dtype
) -> list[tuple[np.ndarray, Any]]:
    """Per piece of ``block`` (a dense column, one code column, a CSR block): its entries
    per output row (a bool mask when at most one), and a function making the entries' X
    columns and values in row order."""
    kind, offset = block[0], int(block[1])
    if kind == "dense":
        out = []
        for k, j in enumerate(range(block[2], block[3])):
            column = dense[:, j] if rows is None else dense[rows, j]
            present = column != 0  # NaN is an entry, as in the kernels

            def entries(j: int = j, present: np.ndarray = present, at: int = offset + k):
                column = dense[:, j] if rows is None else dense[rows, j]
                return at, column[present]

            out.append((present, entries))
        return out
    if kind == "codes":
        out, local = [], 0
        for codes, block_width in zip(block[2], block[3], strict=True):
            picked = np.asarray(codes) if rows is None else np.asarray(codes)[rows]
            present = picked >= 0

            def entries(picked: np.ndarray = picked, present: np.ndarray = present,
                        first: int = offset + local):  # fmt: skip
                return first + picked[present].astype(np.int64), 1

            out.append((present, entries))
            local += block_width
        return out
    matrix = block[2]
    indptr = np.asarray(matrix.indptr, dtype=np.int64)
    first = indptr[:-1] if rows is None else indptr[rows]
    row_counts = (indptr[1:] if rows is None else indptr[rows + 1]) - first

    def entries() -> tuple[np.ndarray, np.ndarray]:
        if rows is None:
            taken: Any = slice(int(indptr[0]), int(indptr[-1]))
        else:
            taken = np.repeat(first - (np.cumsum(row_counts) - row_counts), row_counts)
            taken += np.arange(len(taken))
        columns = np.add(np.asarray(matrix.indices)[taken], offset, dtype=np.int64)  # one pass
        return columns, np.asarray(matrix.data)[taken].astype(dtype, copy=False)

    return [(row_counts, entries)]


def _layout(blocks: list[tuple]) -> tuple[str, ...]:
    """The blocks' layout: ``"d"`` a dense range, ``"c"`` one code column, ``"s"`` a CSR
    block (what the generated kernels are specialised for)."""
    layout: list[str] = []
    for block in blocks:
        if block[0] == "dense":
            layout.append("d")
        elif block[0] == "codes":
            layout += ["c"] * len(block[2])
        else:
            layout.append("s")
    return tuple(layout)


def _arguments(blocks: list[tuple], dtype: np.dtype) -> list[Any]:
    """The blocks' arrays and offsets in kernel-argument order (no copies for the common
    types; made only once the kernels are chosen)."""
    arrays: list[Any] = []
    for block in blocks:
        kind, offset = block[0], int(block[1])
        if kind == "dense":
            arrays += [int(block[2]), int(block[3]), offset]
        elif kind == "codes":
            local = 0
            for codes, block_width in zip(block[2], block[3], strict=True):
                arrays += [np.ascontiguousarray(codes), offset + local]
                local += block_width
        else:
            matrix = block[2]
            arrays += [
                np.asarray(matrix.indptr, dtype=np.int64),
                np.asarray(matrix.indices, dtype=np.int32),
                np.asarray(matrix.data, dtype=dtype),
                offset,
            ]
    return arrays


@functools.lru_cache(maxsize=64)
def _source(layout: tuple[str, ...], selected: bool) -> str:
    """The count and fill kernels (parallel and serial) for ``layout`` (kept: the numpy
    path also asks for it, to name the kernel it would have loaded)."""
    params, count, fill = [], [], []
    for b, kind in enumerate(layout):
        if kind == "d":
            params += [f"lo{b}", f"hi{b}", f"off{b}"]
            count += [
                f"for j in range(lo{b}, hi{b}):",
                "    if dense[i, j] != 0:",
                "        t += 1",
            ]
            fill += [
                f"for j in range(lo{b}, hi{b}):",
                "    v = dense[i, j]",
                "    if v != 0:",
                f"        indices[k] = off{b} + j - lo{b}",
                "        data[k] = v",
                "        k += 1",
            ]
        elif kind == "c":
            params += [f"codes{b}", f"off{b}"]
            count += [f"if codes{b}[i] >= 0:", "    t += 1"]
            fill += [
                f"c = codes{b}[i]",
                "if c >= 0:",
                f"    indices[k] = off{b} + c",
                "    data[k] = 1",
                "    k += 1",
            ]
        else:
            params += [f"indptr{b}", f"ix{b}", f"dt{b}", f"off{b}"]
            count += [f"t += indptr{b}[i + 1] - indptr{b}[i]"]
            fill += [
                f"for p in range(indptr{b}[i], indptr{b}[i + 1]):",
                f"    indices[k] = off{b} + ix{b}[p]",
                f"    data[k] = dt{b}[p]",
                "    k += 1",
            ]
    args = ", ".join(["n", "rows", "dense", *params])
    row = "i = rows[r]" if selected else "i = r"
    body_count = ["t = 0", *count, "counts[r] = t"]
    body_fill = ["k = starts[r]", *fill]
    lines = ["# generated by fastprep (CSR assembly); do not edit", "import numpy as np",
             "from numba import njit, prange", ""]  # fmt: skip
    for suffix, decorator, loop in (
        ("", "@njit(parallel=True, cache=True)", "prange"),
        ("_serial", "@njit(cache=True)", "range"),
    ):
        lines += [
            "", decorator, f"def count{suffix}({args}, counts):",
            f"    for r in {loop}(n):", f"        {row}", *indent(body_count, 2),
            "", decorator, f"def fill{suffix}({args}, starts, indices, data):",
            f"    for r in {loop}(n):", f"        {row}", *indent(body_fill, 2), "",
        ]  # fmt: skip
    return "\n".join(lines) + "\n"

"""Build :class:`~fastprep.data.tag_column.TagColumn` from Arrow: a ``list<string>`` column
flattened (``list_flatten``, ``list_parent_indices``), or delimited text split
(``split_pattern``).

A delimited text column is split on its *distinct* values and gathered by the rows'
dictionary codes: at 3.4M rows with a few thousand distinct tag strings, the split runs on
those few thousand.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from fastprep.data import text_encode
from fastprep.data.tag_column import TagColumn
from fastprep.native.kernel_files import jit as njit  # made on first use: no numba import
from fastprep.native.kernel_files import numba_cached, numba_loaded
from fastprep.planning.planner import kernel_path


def from_lists(values: pa.Array | pa.ChunkedArray) -> TagColumn:
    """A ``list<string>`` Arrow column as tags: null rows and null or empty elements give no
    tag, a repeated element in a row counts once."""
    import pyarrow.compute as pc  # on use: most jobs need none of it

    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    kind = values.type
    if pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):  # one layout
        values = values.cast(pa.list_(kind.value_type))  # (list views are read as they are)
    if pa.types.is_string_view(values.type.value_type):  # no take kernel for views
        values = values.cast(pa.list_(pa.large_string()))
    n = len(values)
    valid = pc.is_valid(values).to_numpy(zero_copy_only=False)
    present = None
    if not valid.all():  # a null row's slots are not read (a fixed-size list keeps them)
        present = np.flatnonzero(valid)
        values = values.filter(pa.array(valid))
    flat = pc.list_flatten(values)
    rows = pc.list_parent_indices(values).to_numpy(zero_copy_only=False).astype(np.int64)
    return _entries(n, rows if present is None else present[rows], flat)


def split_text(uniques: pa.Array, sep: str) -> TagColumn:
    """Each distinct text value split on ``sep`` (a literal, not a pattern): one row per
    distinct value, empty pieces dropped, a repeated piece kept once."""
    import pyarrow.compute as pc  # on use: most jobs need none of it

    uniques = uniques.cast(pa.large_string())
    pieces = pc.split_pattern(uniques, pattern=sep)
    flat = pc.list_flatten(pieces)
    rows = pc.list_parent_indices(pieces).to_numpy(zero_copy_only=False).astype(np.int64)
    return _entries(len(uniques), rows, flat)


def _entries(n_rows: int, rows: np.ndarray, flat: pa.Array) -> TagColumn:
    """Entries (row, text) in row order → a TagColumn without empties or repeats."""
    import pyarrow.compute as pc  # on use: most jobs need none of it

    if not pa.types.is_large_string(flat.type):
        flat = flat.cast(pa.large_string())
    keep = pc.fill_null(pc.greater(pc.binary_length(flat), 0), False)  # no null, no ""
    keep_np = keep.to_numpy(zero_copy_only=False)
    if not keep_np.all():
        flat = flat.filter(keep)
        rows = rows[keep_np]
    codes, uniques = text_encode.encode(flat) if len(flat) else (np.empty(0, np.int32), flat)
    codes = np.asarray(codes, dtype=np.int32)
    offsets = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n_rows), out=offsets[1:])
    keep = _first_in_row(offsets, rows, codes, len(uniques))
    if keep is not None:  # some row repeats a tag
        codes = codes[keep]
        np.cumsum(np.bincount(rows[keep], minlength=n_rows), out=offsets[1:])
    return TagColumn(offsets, codes, uniques)


def _first_in_row(
    offsets: np.ndarray, rows: np.ndarray, codes: np.ndarray, n_unique: int
) -> np.ndarray | None:
    """Which entries are the first of their tag in their row (rows grouped, ascending), or
    None when every entry is. One pass remembering each tag's last row (Numba), or its
    numpy twin: the first index of each distinct (row, tag) pair."""
    n = len(codes)
    if n < 2:
        return None
    path = kernel_path("tags", n, cached=numba_cached(_mark_first),
                       loaded=numba_loaded(_mark_first))  # fmt: skip
    if path == "numba":
        keep = np.empty(n, dtype=np.bool_)
        repeats = _mark_first(offsets, codes, np.full(max(n_unique, 1), -1, np.int64), keep)
        return keep if repeats else None
    if (int(rows[-1]) + 1) * max(n_unique, 1) < 2**62:  # one int64 per pair: the fast unique
        _, first = np.unique(rows * max(n_unique, 1) + codes, return_index=True)
    else:
        _, first = np.unique(np.stack([rows, codes], axis=1), axis=0, return_index=True)
    if len(first) == n:
        return None
    keep = np.zeros(n, dtype=np.bool_)
    keep[first] = True
    return keep


@njit(cache=True)
def _mark_first(offsets, codes, last_row, keep):  # pragma: no cover - compiled
    repeats = 0
    for r in range(offsets.shape[0] - 1):
        for e in range(offsets[r], offsets[r + 1]):
            c = codes[e]
            if last_row[c] == r:
                keep[e] = False
                repeats += 1
            else:
                last_row[c] = r
                keep[e] = True
    return repeats

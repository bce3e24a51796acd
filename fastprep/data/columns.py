"""The in-memory table every backend works on after validation.

Numbers keep their source dtype when it is exact (int64 without missing values, float64)
and are converted to float64 — NaN for missing — only when a backend asks for them
(:meth:`Table.__getitem__`); Numba kernels read the source arrays directly
(:meth:`Table.raw`). Text is dictionary-encoded once, at validation: int32 codes
(-1 = missing) into the distinct strings, so encoders and domain checks work on the few
distinct values. Dropping rows (quarantine) composes a *selection* of row positions
instead of copying every column; the copy happens only if a backend materializes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fastprep.data.dict_column import DictColumn
from fastprep.data.tag_column import TagColumn


class TextColumn:
    """Dictionary-encoded text: ``uniques[codes[i]]`` is row i's value, ``-1`` is missing.

    The distinct values may be given as an object array of ``str`` or as an Arrow string
    array (what the parallel encoder produces); each form is made from the other only when
    asked for, so hashing a column of 3.4M distinct IDs never builds Python strings.
    """

    __slots__ = ("_arrow", "_counts", "_uniques", "codes")

    def __init__(self, codes: np.ndarray, uniques: Any, counts: np.ndarray | None = None) -> None:
        """``counts``: rows per code (missing rows not counted), if the encoder counted
        them: :meth:`value_counts` then needs no pass over the codes."""
        self.codes = codes
        self._counts: np.ndarray | None = None
        if counts is not None:
            missing = len(codes) - int(counts.sum())
            self._counts = np.concatenate((np.array([missing], dtype=np.int64), counts))
        if isinstance(uniques, np.ndarray):
            self._uniques: np.ndarray | None = uniques
            self._arrow: Any = None
        else:  # an Arrow array (duck-typed: this layer does not import pyarrow)
            self._uniques, self._arrow = None, uniques

    @property
    def uniques(self) -> np.ndarray:
        """The distinct values as an object array of Python strings."""
        if self._uniques is None:
            self._uniques = np.asarray(self._arrow.to_numpy(zero_copy_only=False), dtype=object)
        return self._uniques

    @property
    def arrow_uniques(self) -> Any:
        """The distinct values as an Arrow array, or None if they were given as strings."""
        return self._arrow

    def value_counts(self, counter: Any = None) -> np.ndarray:
        """Rows per distinct value, the missing ones in slot 0 (``[missing, n(code 0),
        ...]``), computed once per column: fitting a one-hot and profiling drift both
        need them. ``counter(codes, n_unique)`` computes them (default: a numpy
        ``bincount``; validation passes its parallel kernel)."""
        if self._counts is None:
            if counter is None:
                counts = np.bincount(self.codes + 1, minlength=self.n_unique + 1)
            else:
                counts = counter(self.codes, self.n_unique)
            self._counts = counts
        return self._counts

    @property
    def n_unique(self) -> int:
        return len(self._uniques) if self._uniques is not None else len(self._arrow)

    def __len__(self) -> int:
        return len(self.codes)

    def __repr__(self) -> str:
        return f"TextColumn({len(self.codes):,} rows, {self.n_unique:,} distinct)"

    def take(self, rows: np.ndarray) -> TextColumn:
        taken = TextColumn(self.codes[rows], self._uniques)
        taken._uniques, taken._arrow = self._uniques, self._arrow
        return taken

    def values(self) -> np.ndarray:
        """Object array of Python strings with ``None`` for missing (for peers and reports)."""
        out = np.empty(len(self.codes), dtype=object)
        present = self.codes >= 0
        out[present] = self.uniques[self.codes[present]]
        return out


Column = np.ndarray | TextColumn | DictColumn | TagColumn

#: ``row_range`` keeps one read-only ``arange`` up to this many rows (8 bytes per row)
ROW_RANGE_CACHE_MAX = 1 << 28
_ROW_RANGE = np.arange(0, dtype=np.int64)


def row_range(start: int, n: int) -> np.ndarray:
    """Row ids ``start .. start+n-1`` as a read-only int64 view of one cached ``arange``.

    Every run numbers its rows; a fresh 26 MB ``arange`` at 3.4M rows is written at
    first-touch speed on each call, while a view of the kept one costs nothing.
    """
    global _ROW_RANGE
    stop = start + n
    # grown only for ranges that start near 0: a few rows at a large offset (a late
    # partition, an index) would otherwise make and keep an arange of every row before them
    grow = stop <= len(_ROW_RANGE) or start <= n
    if stop > ROW_RANGE_CACHE_MAX or start < 0 or not grow:
        return np.arange(start, stop, dtype=np.int64)
    if len(_ROW_RANGE) < stop:
        grown = np.arange(max(stop, min(2 * len(_ROW_RANGE), ROW_RANGE_CACHE_MAX)), dtype=np.int64)
        grown.flags.writeable = False
        _ROW_RANGE = grown
    return _ROW_RANGE[start:stop]


class RowRange:
    """Row ids ``start .. start+n-1``, not materialized: what a run numbers its rows with.

    Why: most runs quarantine few rows or none, and then the ids are only needed for the
    handful a finding names, or when a caller reads ``out.row_ids`` — an int64 ``arange``
    of every row was 26 MB at 3.3M rows, a fifth of the run's working memory. Indexing
    with a mask, positions or an int gives what the same ``arange`` would; a unit-step
    slice stays a ``RowRange``; ``np.asarray`` (or :meth:`materialize`) gives the array.
    """

    __slots__ = ("n", "start")
    ndim = 1
    dtype = np.dtype(np.int64)

    def __init__(self, start: int, n: int) -> None:
        self.start, self.n = int(start), int(n)

    def __len__(self) -> int:
        return self.n

    @property
    def shape(self) -> tuple[int]:
        return (self.n,)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, (int, np.integer)):
            position = int(key) + self.n if key < 0 else int(key)
            if not 0 <= position < self.n:
                raise IndexError(f"row {key} out of range for {self.n} rows")
            return self.start + position
        if isinstance(key, slice):
            first, stop, step = key.indices(self.n)
            if step == 1:
                return RowRange(self.start + first, max(stop - first, 0))
            return np.arange(self.start + first, self.start + stop, step, dtype=np.int64)
        key = np.asarray(key)
        if key.dtype == bool:
            if key.shape != (self.n,):
                raise IndexError(f"boolean index of shape {key.shape} for {self.n} rows")
            ids = np.flatnonzero(key)
            ids += self.start  # in place: flatnonzero's array is ours
            return ids
        positions = key.astype(np.int64, copy=False)
        if positions.size and positions.min() < 0:
            positions = np.where(positions < 0, positions + self.n, positions)
        # one new array for the usual case (a selection's positions, none negative): the
        # temporaries of a where() cost fresh pages, at 3.3M rows ~10x the add itself
        return positions + self.start

    def materialize(self) -> np.ndarray:
        """The ids as a read-only int64 array (a view of :func:`row_range`'s cache)."""
        return row_range(self.start, self.n)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        ids = self.materialize()
        return ids if dtype is None else ids.astype(dtype)

    def tolist(self) -> list[int]:
        return list(range(self.start, self.start + self.n))

    def __repr__(self) -> str:
        return f"RowRange({self.start}, {self.n})"


#: row ids of a table: an array, or a range not materialized
RowIds = np.ndarray | RowRange


def release_row_range() -> int:
    """Drop :func:`row_range`'s cached ``arange`` (views already handed out keep theirs);
    returns its bytes."""
    global _ROW_RANGE
    released = _ROW_RANGE.nbytes
    _ROW_RANGE = np.arange(0, dtype=np.int64)
    return released


@dataclass(frozen=True)
class FitTarget:
    """The target over a table's rows when those rows are the ones a fit learns from."""

    #: float64, one value per selected row (a ``Bool`` target as 0.0 / 1.0)
    values: np.ndarray
    #: a ``Bool`` target (a binary classification target), else continuous
    binary: bool
    #: what every input encoded against this target shares (its folds, their means),
    #: computed once per fit by the step that needs it
    shared: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)
    #: one partition of the fit's rows in a partitioned fit_transform: their folds and the
    #: per-fold encodings, learned from all the fit's rows (``values`` is then empty)
    folded: FoldedRows | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class FoldedRows:
    """A partition's share of a cross-fit learned over all the fit's rows: each of its
    rows' fold per ``(cv, seed)``, and per encoded input (keyed by the step's description
    on the input, as its errors name it) the encodings of every fold."""

    of_row: dict[tuple[int, int], np.ndarray]
    tables: dict[str, dict[str, Any]]


@dataclass
class Table:
    """Validated columns, fastprep's own row ids, and the selected rows (None = all)."""

    all_row_ids: RowIds
    columns: dict[str, Column] = field(default_factory=dict)
    selection: np.ndarray | None = None
    _cache: dict[str, Column] = field(default_factory=dict, repr=False)
    #: values computed from raw columns over all rows, kept for the table's lifetime (e.g.
    #: a column's log1p, needed by every fit round and by the transform); see ``derive``
    _derived: dict[Any, tuple[Any, Any]] = field(default_factory=dict, repr=False)
    #: set when these rows are a fit's own rows: steps fitted against the target read it,
    #: and a cross-fitted step (target encoding) gives these rows out-of-fold values when
    #: they are transformed too (``fit_transform``); None for rows only transformed. Not
    #: carried over by :meth:`take` (other rows, another target).
    fit_target: FitTarget | None = field(default=None, repr=False)

    def derive(self, key: Any, source: np.ndarray, compute: Any) -> np.ndarray:
        """``compute()`` once per ``key`` and source array (a repaired column is new)."""
        entry = self._derived.get(key)
        if entry is not None and entry[0] is source:
            return entry[1]
        value = compute()
        self._derived[key] = (source, value)
        return value

    def remember(self, key: Any, source: np.ndarray, value: Any) -> None:
        """Seed :meth:`derive` with a value already computed from ``source`` (all rows)."""
        self._derived[key] = (source, value)

    @property
    def n_rows(self) -> int:
        return len(self.all_row_ids) if self.selection is None else len(self.selection)

    @property
    def row_ids(self) -> RowIds:
        if self.selection is None:
            return self.all_row_ids
        ids, selection = self.all_row_ids, self.selection
        plain = isinstance(ids, RowRange) and ids.start == 0 and selection.dtype == np.int64
        if plain and (selection.size == 0 or selection.min() >= 0):
            # the ids are the positions themselves: a read-only view, not a 26 MB copy at
            # 3.3M rows (the run's output row ids, and every finding that names rows)
            view = selection.view()
            view.flags.writeable = False
            return view
        return ids[selection]

    def raw(self, name: str) -> Column:
        """The column over all source rows, in its stored dtype (pair with ``selection``)."""
        return self.columns[name]

    def __getitem__(self, name: str) -> Column:
        """The selected rows of a column; numbers as float64 with NaN for missing."""
        cached = self._cache.get(name)
        if cached is not None:
            return cached
        column = self.columns[name]
        if isinstance(column, (TextColumn, DictColumn, TagColumn)):
            value: Column = column if self.selection is None else column.take(self.selection)
            counted = self._derived.get(("selected_counts", name))
            if isinstance(value, TextColumn) and counted and counted[0] is self.selection:
                value._counts = counted[1]  # counted already (see selected_counts)
        else:
            value = column if self.selection is None else column[self.selection]
            if value.dtype != np.float64:
                value = value.astype(np.float64)
        self._cache[name] = value
        return value

    def unselected(self) -> np.ndarray:
        """Positions of the rows the selection leaves out (found once per selection)."""
        selection = self.selection
        if selection is None:
            return np.empty(0, dtype=np.int64)

        def find() -> np.ndarray:
            kept = np.zeros(len(self.all_row_ids), dtype=bool)
            kept[selection] = True
            return np.flatnonzero(~kept)

        return self.derive("unselected", selection, find)

    def selected_counts(self, name: str, counter: Any = None) -> np.ndarray:
        """Rows per distinct value of text column ``name`` over the selected rows (slot 0:
        missing): all rows' counts less the left-out rows'. Why not count the selected
        rows: gathering them copies the whole code column (13 MB at 3.3M rows), which the
        Numba kernels, reading codes through the selection, never need; a later
        ``self[name]`` starts with these counts."""
        column = self.columns[name]
        assert isinstance(column, TextColumn)
        counts = column.value_counts(counter)
        if self.selection is None:
            return counts

        def subtract() -> np.ndarray:
            gone = np.bincount(column.codes[self.unselected()] + 1, minlength=len(counts))
            return counts - gone

        return self.derive(("selected_counts", name), self.selection, subtract)

    def remembered(self) -> list[tuple[Any, Any, Any]]:
        """The values :meth:`derive` / :meth:`remember` hold, as (key, source, value)."""
        return [(key, source, value) for key, (source, value) in self._derived.items()]

    def forget_selected(self) -> None:
        """Release the selected rows' copies made by ``self[name]`` (made again when next
        asked for): a table kept for later use holds its columns, not the copies."""
        self._cache.clear()

    def drop(self, name: str) -> None:
        """Release a column whose last consumer has run."""
        column = self.columns.pop(name, None)
        self._cache.pop(name, None)
        for key in [k for k, (source, _) in self._derived.items() if source is column]:
            del self._derived[key]  # e.g. its log1p: released with it

    def take(self, rows: np.ndarray) -> Table:
        """Rows by position in the current selection (an index array or a boolean mask)."""
        positions = np.flatnonzero(rows) if rows.dtype == bool else np.asarray(rows, np.int64)
        if self.selection is not None:
            positions = self.selection[positions]
        # derived values are over all rows, whatever the selection: they carry over
        return Table(self.all_row_ids, self.columns, positions, _derived=self._derived)

"""A validated partition packed to be kept until its transform: only what the transform
(and the fit's later passes) read from it, compact, in one buffer of its own.

What :func:`pack` keeps of a :class:`~fastprep.runtime.execute.Prepared`:

- the validated table's columns the features read, text as its codes and dictionary;
  the row ids when they are an array; the fit's target values; ``y``. Each array is
  stored in the narrowest type that gives back every value bit for bit (a float64 column
  of whole minutes in float16, an int64 hour in int8, the codes of a 16-value dictionary
  in int8) and widened back to its own type when unpacked; the selected rows as a bit
  mask. A number column only the target reads is left out (``y`` holds what the
  transform needs of it), its drift measures taken when packing. 22-30 bytes a row for
  the flights job against ~117 for the partition as read and validated;
- of the rows as read, only those quarantined (what the quarantine's file shows) plus one
  row saying which columns had a missing value anywhere (a quarantine file's integer
  column with one is float64, whatever its own rows hold);
- the small values the table derived from its columns (validation's scans), the
  quarantine, the report.

Why compact: a worker keeps a fixed number of bytes of partitions in memory (so its
memory does not grow with the job), and writes those beyond them to its disk. Why one
buffer of their own: the arrays of an entry are views into one chunk of the memory the
process retains (:func:`fastprep.storage.spill_files.memory_for`), so an entry freed
leaves no hole among the worker's other arrays (which grew a long job's peak when entries
lived in its heap) and its chunk is reused whole by the next entry, without the fresh
pages' faults; and that buffer is all there is to write to a spill file (:meth:`KeptRows.without_buffer`)
and read back (:meth:`KeptRows.with_buffer`): the arrays are found in it by position,
the rest (dictionaries, quarantined rows, the report: ~1.4 MB of a 14.9 MB flights
partition) stays in memory.

A transform that quarantines rows the fit did not (non-finite results) needs rows as read
that were not kept: :func:`covers` says so, and the caller reads the partition again.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa

from fastprep.data.columns import FitTarget, Table, TextColumn
from fastprep.data.sources import take_rows
from fastprep.runtime import kept_values
from fastprep.runtime.execute import Prepared
from fastprep.storage import spill_files
from fastprep.validate import drift

#: an entry's arrays start at multiples of this many bytes of its buffer (whole cache
#: lines: the kernels read them as they would any array)
ALIGN = 64
#: a derived value larger than this is not kept (made again when asked for)
DERIVED_MAX = 1 << 20

_INTS = (np.int8, np.int16, np.int32)
#: tried narrowest first: values float16 holds, float32 holds too (one full check of a
#: column of whole numbers, not one per type)
_FLOATS = {np.dtype(np.float64): (np.float16, np.float32), np.dtype(np.float32): (np.float16,)}
#: a float column is tried on about this many values spread over it first (most columns
#: that do not fit show it there; a file's first rows can be unlike the rest)
_PROBE = 4096


def narrowest(values: np.ndarray) -> np.dtype:
    """The smallest type holding every value of ``values`` exactly (its own if none)."""
    kind = values.dtype.kind
    if not len(values) or kind not in "iuf":
        return values.dtype
    if kind in "iu":
        low, high = int(values.min()), int(values.max())
        for candidate in _INTS:
            info = np.iinfo(candidate)
            if candidate().itemsize < values.itemsize and info.min <= low and high <= info.max:
                return np.dtype(candidate)
        return values.dtype
    probe = values[:: max(1, len(values) // _PROBE)]
    for candidate in _FLOATS.get(values.dtype, ()):
        if _exact(probe, candidate) and _exact(values, candidate):
            return np.dtype(candidate)
    return values.dtype


def _exact(values: np.ndarray, candidate: type) -> bool:
    """Whether ``values`` in ``candidate`` come back the same: NaN (the missing value)
    as NaN, any other value bit for bit (-0.0 too)."""
    with np.errstate(all="ignore"):
        back = values.astype(candidate).astype(values.dtype)
    same = back.view(_uint(values)) == values.view(_uint(values))
    return bool((same | (np.isnan(back) & np.isnan(values))).all())


def _uint(values: np.ndarray) -> np.dtype:
    return np.dtype(f"u{values.itemsize}")


@dataclass
class _Stored:
    """One array in the entry's buffer: where it is there (``count`` values of type
    ``stored`` from byte ``offset``), its own type, and whether it was writable (a view of
    a file's Arrow buffer is not): Numba compiles a kernel for read-only arrays apart, so
    the flag is given back as it was. Positions, not views: the buffer can be written to
    a file and read back into other memory (:meth:`KeptRows.without_buffer`)."""

    offset: int
    count: int
    stored: np.dtype
    dtype: np.dtype
    writeable: bool
    #: the stored values are the bits of a mask over this many rows: the array is the
    #: positions of its set bits (ascending positions, a bit a row instead of 4-8 bytes)
    mask_of: int | None = None

    def view(self, buffer: np.ndarray) -> np.ndarray:
        """The stored values in ``buffer``."""
        end = self.offset + self.count * self.stored.itemsize
        return buffer[self.offset : end].view(self.stored)

    def unpack(self, buffer: np.ndarray) -> np.ndarray:
        view = self.view(buffer)
        if self.mask_of is not None:
            out = np.flatnonzero(np.unpackbits(view, count=self.mask_of)).astype(self.dtype)
        elif view.dtype == self.dtype:
            out = view.view()
        else:
            out = view.astype(self.dtype)
        out.flags.writeable = self.writeable
        return out


@dataclass
class KeptRows:
    """A packed partition (see the module); :meth:`unpack` gives it back."""

    #: the one buffer (bytes) every ``_Stored`` array is in; None while it is in a
    #: spill file (:meth:`without_buffer`, :meth:`with_buffer`)
    buffer: np.ndarray | None
    columns: dict[str, Any]  # name -> _Stored, or (_Stored codes, uniques), or the column
    selection: _Stored | None
    row_ids: Any  # a RowRange, or _Stored
    fit_target: tuple[_Stored, bool] | FitTarget | None  # a folded one kept as it is
    y: _Stored | None
    derived: list[tuple[Any, str | None, Any]]  # (key, column name / None: selection, value)
    raw: Any  # the quarantined rows as read, plus one row (see the module)
    raw_ids: np.ndarray
    prepared: Prepared  # quarantine, report, offset; its table, raw and y are dropped
    #: the names of the validated table's columns, in order, and the drift measures of
    #: those left out
    order: tuple[str, ...] = ()
    left_out: dict[str, Any] | None = None
    #: the buffer was read back from a spill file (:meth:`with_buffer`)
    spilled: bool = False

    def size(self) -> int:
        """Bytes held: the buffer (its own bytes, not the retained chunk it is cut from,
        which is a little larger and reused by the next entry), the rows as read kept,
        the rest's arrays."""
        held = 0 if self.buffer is None else int(self.buffer.nbytes)
        return held + kept_values.size_of(replace(self, buffer=None))

    def without_buffer(self) -> KeptRows:
        """This partition without its buffer (written elsewhere): what stays in memory
        while the buffer is in a spill file."""
        return replace(self, buffer=None)

    def with_buffer(self, buffer: np.ndarray) -> KeptRows:
        """This partition over ``buffer``: its bytes, read back from a spill file."""
        return replace(self, buffer=buffer, spilled=True)

    def unpack(self) -> Prepared:
        """The partition as validated, in fresh objects (each call its own)."""
        buffer = self.buffer
        if buffer is None:
            raise ValueError("the packed partition's buffer is in a spill file: read it back")
        columns: dict[str, Any] = {}
        for name, column in self.columns.items():
            if isinstance(column, _Stored):
                columns[name] = column.unpack(buffer)
            elif isinstance(column, tuple):
                codes, uniques = column
                columns[name] = TextColumn(codes.unpack(buffer), uniques)
            else:
                columns[name] = column
        selection = None if self.selection is None else self.selection.unpack(buffer)
        row_ids = self.row_ids
        if isinstance(row_ids, _Stored):
            row_ids = row_ids.unpack(buffer)
        table = Table(row_ids, columns, selection)
        for key, source, value in self.derived:
            table.remember(key, selection if source is None else columns[source], value)
        if isinstance(self.fit_target, tuple):
            values, binary = self.fit_target
            table.fit_target = FitTarget(values.unpack(buffer), binary)
        else:
            table.fit_target = self.fit_target
        y = None if self.y is None else self.y.unpack(buffer)
        return replace(self.prepared, table=table, raw=self.raw, raw_ids=self.raw_ids, y=y)

    def drift(self, measures: dict[str, Any], fitted: dict[str, Any]) -> dict[str, Any]:
        """``measures`` of the unpacked table against the ``fitted`` profile, with those
        of the columns left out, in the table's order (as if they had been measured)."""
        left_out = {k: v for k, v in (self.left_out or {}).items() if k in fitted}
        if not left_out:
            return measures
        return {name: measures.get(name, left_out.get(name)) for name in self.order
                if name in measures or name in left_out}  # fmt: skip

    def covers(self, prepared: Prepared) -> bool:
        """Whether every row ``prepared`` quarantined (after its transform) was kept as
        read."""
        ids = prepared.quarantine.row_ids()
        return bool(np.isin(ids, self.raw_ids, assume_unique=True).all())


def pack(prepared: Prepared, needed: set[str] | None = None) -> KeptRows | None:
    """``prepared`` packed (None when its rows as read are not an Arrow table: a caller's
    frame, kept by its caller anyway). ``needed``: the columns the features read (None:
    all); the other number columns are left out."""
    raw = prepared.raw
    if not isinstance(raw, pa.Table):
        return None
    table = prepared.table
    left_out = [n for n, c in table.columns.items()
                if needed is not None and n not in needed and isinstance(c, np.ndarray)]  # fmt: skip
    measured = drift.profile_for_drift(table, {n: {} for n in left_out}) if left_out else {}
    arrays: list[tuple[str, np.ndarray]] = []  # what goes in the buffer, by a name
    for name, column in table.columns.items():
        if name in left_out:
            continue
        if isinstance(column, np.ndarray):
            arrays.append((f"c:{name}", column))
        elif type(column) is TextColumn:
            arrays.append((f"t:{name}", column.codes))
    selection, mask_of = table.selection, None
    if selection is not None and _ascending(selection) and selection.dtype.kind in "iu":
        mask = np.zeros(len(table.all_row_ids), dtype=bool)
        mask[selection] = True
        selection, mask_of = np.packbits(mask), len(mask)
    if selection is not None:
        arrays.append(("selection", selection))
    if isinstance(table.all_row_ids, np.ndarray):
        arrays.append(("row_ids", table.all_row_ids))
    target = table.fit_target
    if target is not None and target.folded is None:
        arrays.append(("fit_target", np.asarray(target.values)))
    if prepared.y is not None:
        arrays.append(("y", prepared.y))
    buffer, stored = _into_buffer(arrays)
    if mask_of is not None:
        original = table.selection
        stored["selection"] = replace(stored["selection"], dtype=original.dtype,
                                      writeable=bool(original.flags.writeable), mask_of=mask_of)  # fmt: skip

    columns: dict[str, Any] = {}
    for name, column in table.columns.items():
        if name in left_out:
            continue
        if f"c:{name}" in stored:
            columns[name] = stored[f"c:{name}"]
        elif f"t:{name}" in stored:
            uniques = column.arrow_uniques
            columns[name] = (stored[f"t:{name}"], column.uniques if uniques is None else uniques)
        else:
            columns[name] = column  # kept as it is
    by_identity = {id(column): name for name, column in table.columns.items()
                   if name in columns}  # fmt: skip
    derived = []
    for key, source, value in table.remembered():
        if kept_values.size_of(value) > DERIVED_MAX:
            continue
        if source is table.selection and table.selection is not None:
            derived.append((key, None, value))
        elif id(source) in by_identity:
            derived.append((key, by_identity[id(source)], value))
    fit_target: Any = target
    if "fit_target" in stored:
        fit_target = (stored["fit_target"], target.binary)
    ids = prepared.quarantine.row_ids()
    return KeptRows(
        buffer=buffer, columns=columns, selection=stored.get("selection"),
        row_ids=stored.get("row_ids", table.all_row_ids), fit_target=fit_target,
        y=stored.get("y"), derived=derived, raw=_quarantined_as_read(raw, ids - prepared.row_offset),
        raw_ids=np.array(ids, dtype=np.int64),
        prepared=replace(prepared, table=None, raw=None, y=None, choices=None),
        order=tuple(table.columns), left_out=measured,
    )  # fmt: skip


def _ascending(positions: np.ndarray) -> bool:
    """Strictly ascending, within the table (what a bit mask gives back)."""
    return bool(len(positions) < 2 or (positions[1:] > positions[:-1]).all()) and (
        not len(positions) or positions[0] >= 0
    )


def _into_buffer(
    arrays: list[tuple[str, np.ndarray]],
) -> tuple[np.ndarray, dict[str, _Stored]]:
    """Each array in its narrowest type, copied into one buffer
    (:func:`~fastprep.storage.spill_files.memory_for`): its bytes and where each array is
    in them."""
    types = {name: narrowest(values) for name, values in arrays}
    offsets, end = {}, 0
    for name, values in arrays:
        offsets[name] = end
        end += -(-len(values) * types[name].itemsize // ALIGN) * ALIGN
    buffer = spill_files.memory_for(max(end, ALIGN))
    out = {}
    for name, values in arrays:
        size = len(values) * types[name].itemsize
        view = buffer[offsets[name] : offsets[name] + size].view(types[name])
        view[...] = values  # exact: the type holds every value
        out[name] = _Stored(offsets[name], len(values), types[name], values.dtype,
                            bool(values.flags.writeable))  # fmt: skip
    return buffer, out


def _quarantined_as_read(raw: pa.Table, positions: np.ndarray) -> pa.Table:
    """The rows at ``positions`` of ``raw``, plus one row missing in each column with a
    missing value anywhere in ``raw`` (the first row's value elsewhere): what decides the
    types of the quarantine's columns (``rows_as_read``, ``Quarantine.to_arrow``)."""
    taken = take_rows(raw, positions)
    if not raw.num_rows:
        return taken
    extra = [
        pa.nulls(1, column.type) if column.null_count else column.slice(0, 1).combine_chunks()
        for column in raw.columns
    ]
    tail = pa.Table.from_arrays(extra, schema=raw.schema)
    return pa.concat_tables([taken, tail])

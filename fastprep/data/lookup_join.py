"""A fitted lookup table and its left join onto a validated :class:`Table`.

The side table keeps only the columns the plan uses, numbers as float64 (NaN = missing) and
text dictionary-encoded, as the source's own columns are. A join is vectorized over
integer codes, never per row in Python: each key column of the source is mapped to the
side table's code of the same value (text: once per *distinct* value, then gathered by
the row's code; numbers and timestamps: a binary search in the side's sorted distinct
values), the key columns' codes are combined into one int64 code, and the side row of
each code is gathered (a dense array of side rows when the code space is small, else a
binary search). A source row whose key is missing or absent from the side table gets row
``-1``, which gathers the sentinel appended after the side values: missing.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from fastprep.data.columns import Column, RowIds, TextColumn
from fastprep.data.dict_column import DictColumn, EntryRows
from fastprep.data.tag_column import TagColumn
from fastprep.errors import DataValidationError, StateFormatError

#: a combined key space up to this size (and a few times the side's rows) is joined
#: through a dense array of side rows (8 bytes a slot)
DENSE_CODES = 1 << 25
#: duplicated keys an error lists
SHOW_DUPLICATES = 5


@dataclass
class _KeyIndex:
    """How one key column's values become the side table's codes ``0 .. size-1``."""

    size: int
    #: text: the side's distinct values; numbers: the side's sorted distinct values
    values: Any
    text: bool
    #: whole numbers on a regular grid (hourly UTC seconds): (first, step, code per slot),
    #: so a source value's code is one division and one gather, not a binary search
    grid: tuple[float, float, np.ndarray] | None = None


#: a combined key code stays below this (an int64, see :func:`_combined`)
CODE_SPACE = 1 << 62

#: the side's key indexes, combined codes, dense array of side rows (small code spaces)
#: and the prefixes each key column's codes were renumbered by (see :func:`_combined`)
_Built = tuple[list[_KeyIndex], np.ndarray, np.ndarray | None, list[np.ndarray | None]]


@dataclass
class LookupTable:
    """A validated side table: key columns and the used value columns, over its rows."""

    name: str
    key: tuple[str, ...]
    key_values: tuple[Column, ...]
    values: dict[str, Column]
    _index: _Built | None = field(default=None, repr=False)

    @property
    def n_rows(self) -> int:
        return len(self.key_values[0])

    def rows_for(self, keys: list[Column]) -> np.ndarray:
        """The side row of each source row (int64, -1 = no match); ``keys`` are the source's
        key columns in key order, over all its rows."""
        indexes, side_codes, dense, renumbered = self._built()
        codes = _combined([_source_codes(k, ix) for k, ix in zip(keys, indexes, strict=True)],
                          indexes, renumbered)[0]  # fmt: skip
        if dense is not None:
            return dense[codes]  # -1 (no match) reads the -1 appended at the end
        present = np.flatnonzero(side_codes >= 0)
        if not len(present):
            return np.full(len(codes), -1, dtype=np.int64)
        order = present[np.argsort(side_codes[present], kind="stable")]
        ordered = side_codes[order]
        position = np.searchsorted(ordered, codes)
        np.minimum(position, len(ordered) - 1, out=position)
        hit = (codes >= 0) & (ordered[position] == codes)
        return np.where(hit, order[position], -1).astype(np.int64)

    def join(self, keys: list[Column], columns: list[str]) -> dict[str, Column]:
        """The value columns ``columns`` gathered onto the source's rows (missing if no match)."""
        rows = self.rows_for(keys)
        return {name: _gather(self.values[name], rows) for name in columns}

    def check_unique(
        self, row_ids: RowIds, timestamps: tuple[bool, ...] = (), integers: tuple[bool, ...] = ()
    ) -> None:
        """A duplicated key is an error naming the key values and the side rows
        (``timestamps``: which key columns to show as times, not seconds; ``integers``:
        which as whole numbers, not floats)."""
        side_codes = self._built()[1]
        present = side_codes >= 0
        unique, counts = np.unique(side_codes[present], return_counts=True)
        repeated = unique[counts > 1]
        if not len(repeated):
            return
        positions = np.flatnonzero(present)
        lines = []
        for code in repeated[:SHOW_DUPLICATES]:
            rows = positions[side_codes[present] == code]
            shown = ", ".join(str(int(row_ids[int(r)])) for r in rows[:10])
            value = ", ".join(
                f"{k}={_value(col, int(rows[0]), _flag(timestamps, i), _flag(integers, i))!r}"
                for i, (k, col) in enumerate(zip(self.key, self.key_values, strict=True))
            )
            lines.append(f"{value} at rows {shown}")
        more = f" (and {len(repeated) - SHOW_DUPLICATES} more)" if len(repeated) > 5 else ""
        raise DataValidationError(
            f"lookup {self.name!r}: its key ({', '.join(self.key)}) is not unique: "
            f"{len(repeated):,} key value(s) repeat{more}:\n  "
            + "\n  ".join(lines)
            + "\nkeep one row per key in the side table"
        )

    def _built(self) -> _Built:
        if self._index is None:
            indexes = [_key_index(column) for column in self.key_values]
            side, renumbered, space = _combined(
                [_own_codes(c, ix) for c, ix in zip(self.key_values, indexes, strict=True)],
                indexes,
            )
            dense = None
            if space <= min(DENSE_CODES, 8 * len(side) + (1 << 16)):
                dense = np.full(space + 1, -1, dtype=np.int64)  # the last slot: no match
                present = np.flatnonzero(side >= 0)
                dense[side[present]] = present
            self._index = (indexes, side, dense, renumbered)
        return self._index

    def digest(self) -> str:
        """A hash of the table's names and arrays (a resumed job's outputs must match it)."""
        digest = hashlib.sha256(repr((self.name, self.key, sorted(self.values))).encode())
        for column in (*self.key_values, *(self.values[n] for n in sorted(self.values))):
            for part in _column_to_dict(column).values():
                digest.update(np.ascontiguousarray(part).tobytes())
        return digest.hexdigest()

    # ---------------------------------------------------------------- fitted state
    def to_dict(self) -> dict[str, Any]:
        """Arrays only (numbers, codes, fixed-width unicode): saved without pickle."""
        return {
            "name": self.name,
            "key": list(self.key),
            "key_values": [_column_to_dict(c) for c in self.key_values],
            "values": {n: _column_to_dict(c) for n, c in self.values.items()},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LookupTable:
        try:
            keys = tuple(_column_from_dict(c) for c in data["key_values"])
            values = {str(n): _column_from_dict(c) for n, c in data["values"].items()}
            table = cls(str(data["name"]), tuple(map(str, data["key"])), keys, values)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise StateFormatError(f"malformed lookup table in the fitted state: {exc}") from None
        lengths = {len(c) for c in (*keys, *values.values())}
        if len(lengths) != 1 or len(keys) != len(table.key):
            raise StateFormatError(f"lookup table {table.name!r}: columns of unequal length")
        return table


def _key_index(column: Column) -> _KeyIndex:
    if isinstance(column, TextColumn):
        uniques = column.arrow_uniques
        if uniques is None:
            uniques = pa.array(column.uniques.tolist(), type=pa.large_string())
        return _KeyIndex(column.n_unique, uniques, True)
    values = np.asarray(column, dtype=np.float64)
    distinct = np.unique(values[~np.isnan(values)])
    return _KeyIndex(len(distinct), distinct, False, _grid(distinct))


def _grid(distinct: np.ndarray) -> tuple[float, float, np.ndarray] | None:
    """The regular grid of whole numbers ``distinct`` lies on, if it is small enough."""
    if len(distinct) < 2 or not np.all(np.isfinite(distinct)):
        return None
    if abs(distinct[0]) > 2**52 or abs(distinct[-1]) > 2**52 or np.any(distinct % 1):
        return None
    step = int(np.gcd.reduce(np.diff(distinct).astype(np.int64)))
    slots = int((distinct[-1] - distinct[0]) // step) + 1
    if slots > max(64 * len(distinct), 1 << 16) or slots > DENSE_CODES:
        return None
    codes = np.full(slots, -1, dtype=np.int64)
    codes[((distinct - distinct[0]) // step).astype(np.int64)] = np.arange(len(distinct))
    return float(distinct[0]), float(step), codes


def _own_codes(column: Column, index: _KeyIndex) -> np.ndarray:
    """The side table's codes of its own key column."""
    if index.text:
        assert isinstance(column, TextColumn)
        return column.codes.astype(np.int64)
    return _search(np.asarray(column, dtype=np.float64), index.values)


def _source_codes(column: Column, index: _KeyIndex) -> np.ndarray:
    """The side's code of each source row's key value (-1: missing, or not in the side)."""
    import pyarrow.compute as pc  # on use: most jobs need none of it

    if index.text:
        if not isinstance(column, TextColumn):
            raise DataValidationError("a text lookup key met a non-text source column")
        uniques = column.arrow_uniques
        if uniques is None:
            uniques = pa.array(column.uniques.tolist(), type=pa.large_string())
        side = index.values
        if uniques.type != side.type:
            uniques = uniques.cast(side.type)
        found = pc.index_in(uniques, value_set=side).fill_null(-1)
        per_unique = np.append(found.to_numpy(zero_copy_only=False).astype(np.int64), -1)
        return per_unique[column.codes]  # code -1 (missing) reads the -1 appended
    values = np.asarray(column, dtype=np.float64)
    if index.grid is None:
        return _search(values, index.values)
    first, step, codes = index.grid
    position = (values - first) / step
    inside = (position >= 0) & (position < len(codes))  # False for NaN
    slot = np.where(inside, position, 0).astype(np.int64)
    return np.where(inside & (slot == position), codes[slot], -1)


def _search(values: np.ndarray, distinct: np.ndarray) -> np.ndarray:
    """Position of each value among the sorted ``distinct`` ones, -1 if absent or NaN."""
    if not len(distinct):
        return np.full(len(values), -1, dtype=np.int64)
    position = np.searchsorted(distinct, values)
    np.minimum(position, len(distinct) - 1, out=position)
    return np.where(distinct[position] == values, position, -1).astype(np.int64)


def _combined(
    codes: list[np.ndarray], indexes: list[_KeyIndex],
    renumbered: list[np.ndarray | None] | None = None,
) -> tuple[np.ndarray, list[np.ndarray | None], int]:  # fmt: skip
    """One int64 code per row from the key columns' codes (mixed radix), -1 if any is -1;
    with the side's distinct prefixes each key column after the first was renumbered by,
    and the size of the code space.

    A code space past int64 (several key columns of many values each) would wrap and make
    two keys one: before such a column the codes so far are renumbered by the side's
    distinct ones (the side's own rows: ``renumbered`` None, found here; the source's: the
    side's, where a prefix the side lacks matches no row)."""
    found = [] if renumbered is None else renumbered
    out = codes[0].astype(np.int64)  # a copy
    missing = out < 0
    size = max(int(indexes[0].size), 1)  # Python ints: the product never wraps
    for j, (column, index) in enumerate(zip(codes[1:], indexes[1:], strict=True)):
        width = max(int(index.size), 1)
        if renumbered is None:
            found.append(np.unique(out[~missing]) if size * width > CODE_SPACE else None)
        distinct = found[j]
        if distinct is not None:
            position = np.searchsorted(distinct, out)
            np.minimum(position, max(len(distinct) - 1, 0), out=position)
            hit = (
                ~missing & (distinct[position] == out) if len(distinct) else np.zeros_like(missing)
            )
            missing |= ~hit
            out = np.where(hit, position, 0)
            size = max(len(distinct), 1)
        missing |= column < 0
        out *= width
        out += column
        size *= width
    out[missing] = -1
    return out, found, size


def _gather(values: Column, rows: np.ndarray) -> Column:
    if isinstance(values, EntryRows):  # tags, dicts: row -1 takes an empty row (missing)
        return values.take(rows)
    if isinstance(values, TextColumn):
        codes = np.append(values.codes, np.int32(-1)).astype(np.int32, copy=False)
        uniques = values.arrow_uniques if values.arrow_uniques is not None else values.uniques
        return TextColumn(codes[rows], uniques)
    return np.append(np.asarray(values, dtype=np.float64), np.nan)[rows]


def _flag(flags: tuple[bool, ...], i: int) -> bool:
    return i < len(flags) and flags[i]


def _value(column: Column, row: int, timestamp: bool = False, integer: bool = False) -> Any:
    if isinstance(column, TextColumn):
        code = int(column.codes[row])
        return None if code < 0 else str(column.uniques[code])
    value = float(np.asarray(column)[row])
    if timestamp and np.isfinite(value):
        return str(np.datetime64(round(value * 1e6), "us"))
    if integer and value.is_integer():
        return int(value)
    return value


def as_stored(column: Column) -> Column:
    """A validated column as a lookup table keeps it: numbers as float64; text, tags and
    dicts as they are."""
    if isinstance(column, (TextColumn, EntryRows)):
        return column
    return np.asarray(column, dtype=np.float64)


def _column_to_dict(column: Column) -> dict[str, Any]:
    if isinstance(column, TagColumn):
        return {"tag_offsets": np.asarray(column.offsets, dtype=np.int64),
                "codes": column.codes.astype(np.int32),
                **_utf8(column.uniques.to_pylist())}  # fmt: skip
    if isinstance(column, DictColumn):
        return {"dict_offsets": np.asarray(column.offsets, dtype=np.int64),
                "key_codes": column.key_codes.astype(np.int32),
                **_utf8(column.key_uniques.to_pylist(), "key_"),
                "value_codes": column.value_codes.astype(np.int32),
                **_utf8(column.value_uniques.to_pylist(), "value_"),
                "numbers": np.asarray(column.numbers, dtype=np.float64)}  # fmt: skip
    if isinstance(column, TextColumn):
        return {"codes": column.codes.astype(np.int32), **_utf8(column.uniques)}
    return {"numbers": np.asarray(column, dtype=np.float64)}


def _utf8(values: Any, prefix: str = "") -> dict[str, np.ndarray]:
    """Text values as UTF-8 bytes and each one's end: a fixed-width unicode array would
    drop trailing NULs, so "a\x00" would come back as "a" (and match it)."""
    encoded = [str(v).encode("utf-8", "surrogatepass") for v in values]
    return {
        f"{prefix}utf8": np.frombuffer(b"".join(encoded), dtype=np.uint8),
        f"{prefix}ends": np.cumsum([len(b) for b in encoded], dtype=np.int64),
    }


def _texts(data: dict[str, Any], prefix: str = "") -> list[str]:
    """The inverse of :func:`_utf8`."""
    raw = np.asarray(data[f"{prefix}utf8"], dtype=np.uint8).tobytes()
    ends = np.asarray(data[f"{prefix}ends"], dtype=np.int64).reshape(-1)
    starts = np.concatenate([[0], ends[:-1]]).astype(np.int64)
    if len(ends) and (np.any(ends < starts) or ends[-1] != len(raw)):
        raise ValueError("text value ends outside the stored bytes")
    return [raw[a:b].decode("utf-8", "surrogatepass") for a, b in zip(starts, ends)]


def _codes(data: dict[str, Any], name: str, n_values: int, low: int) -> np.ndarray:
    """Stored codes into ``n_values`` values, ``low`` the least allowed (-1: missing)."""
    codes = np.asarray(data[name], dtype=np.int32).reshape(-1)
    if len(codes) and (codes.max(initial=low) >= n_values or codes.min(initial=0) < low):
        raise ValueError("text codes outside the stored values")
    return codes


def _offsets(data: dict[str, Any], name: str, n_entries: int) -> np.ndarray:
    offsets = np.asarray(data[name], dtype=np.int64).reshape(-1)
    if (
        not len(offsets)
        or offsets[0] != 0
        or offsets[-1] != n_entries
        or np.any(np.diff(offsets) < 0)
    ):
        raise ValueError("entry offsets outside the stored entries")
    return offsets


def _column_from_dict(data: dict[str, Any]) -> Column:
    if "tag_offsets" in data:
        tags = _texts(data)
        codes = _codes(data, "codes", len(tags), 0)
        offsets = _offsets(data, "tag_offsets", len(codes))
        return TagColumn(offsets, codes, pa.array(tags, type=pa.large_string()))
    if "dict_offsets" in data:
        keys, texts = _texts(data, "key_"), _texts(data, "value_")
        key_codes = _codes(data, "key_codes", len(keys), 0)
        value_codes = _codes(data, "value_codes", len(texts), -1)
        numbers = np.asarray(data["numbers"], dtype=np.float64).reshape(-1)
        if not len(key_codes) == len(value_codes) == len(numbers):
            raise ValueError("dict entries of unequal length")
        return DictColumn(_offsets(data, "dict_offsets", len(key_codes)), key_codes,
                          pa.array(keys, type=pa.large_string()), value_codes,
                          pa.array(texts, type=pa.large_string()), numbers)  # fmt: skip
    if "numbers" in data:
        return np.asarray(data["numbers"], dtype=np.float64)
    if "utf8" in data:
        texts = _texts(data)
        uniques = np.empty(len(texts), dtype=object)
        uniques[:] = texts
    else:  # a state saved before the values were kept as UTF-8
        uniques = np.asarray(data["uniques"]).astype(object)
    return TextColumn(_codes(data, "codes", len(uniques), -1), uniques)

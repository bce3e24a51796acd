"""Validate a column of lists of strings (``fp.ListOf``, or a ``String``/``Category``
column whose source holds lists) into a :class:`TagColumn`.

An Arrow ``list<string>`` column (Parquet, pyarrow, Polars) is flattened by Arrow compute,
without a Python object per row. A pandas column of Python lists is checked row by row
(that is what it holds). Rules:

- ``type``: the row is not a list (tuple, numpy array) of strings (``None`` elements are
  allowed and are no tag); its row is treated as having no tags;
- ``null``: the row is missing (None/NaN) and the column is not ``nullable``.

A source column whose every present row is of another type (``list<int64>``, plain text)
is a :class:`~fastprep.errors.SchemaError` naming the fix.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from fastprep.api.schema import ColumnType
from fastprep.data.pandas_objects import is_pandas_na
from fastprep.data.tag_column import TagColumn
from fastprep.data.tag_split import from_lists
from fastprep.errors import Reason, SchemaError

if TYPE_CHECKING:
    import pandas as pd

Violation = tuple[str, np.ndarray, str]
_LIST_TYPES = (
    pa.types.is_list,
    pa.types.is_large_list,
    pa.types.is_fixed_size_list,
    pa.types.is_list_view,
    pa.types.is_large_list_view,
)


def holds_lists(arrow: pa.ChunkedArray | None, series: Any) -> bool:
    """Whether a source column holds lists (an Arrow list type, or Python lists/arrays in a
    pandas object column): a text column declared over it is read as tags."""
    if arrow is not None:
        return any(test(arrow.type) for test in _LIST_TYPES)
    values = series()
    if values.dtype != object:
        return False
    head = values.dropna().head(1000).tolist()  # a mixed column stays text (type rule)
    return bool(head) and all(isinstance(v, (list, tuple, np.ndarray)) for v in head)


def check_lists(
    name: str, arrow: pa.ChunkedArray | None, series: Any, spec: ColumnType
) -> tuple[TagColumn, list[Violation], tuple[bool, bool]]:
    """The flattened column, the rules it broke, and the fit checks (no tag at all, never)."""
    if arrow is not None and any(test(arrow.type) for test in _LIST_TYPES):
        values = _string_lists(name, arrow)
        bad_type = np.zeros(len(values), dtype=bool)
    elif arrow is not None and not pa.types.is_null(arrow.type):
        raise SchemaError(_wrong_type(name, str(arrow.type)))
    else:
        values, bad_type = _from_python(name, series() if arrow is None else arrow.to_pandas())
    missing = values.is_null().to_numpy(zero_copy_only=False) & ~bad_type
    column = from_lists(values)
    rules: list[Violation] = []
    if bad_type.any():
        rules.append((Reason.TYPE.value, bad_type, "(not a list of strings)"))
    if not spec.nullable and missing.any():
        rules.append((Reason.NULL.value, missing, "(missing value in a non-nullable column)"))
    return column, rules, (column.n_entries == 0, False)


def _wrong_type(name: str, found: str) -> str:
    return (
        f"column {name!r} is declared ListOf (a list of strings per row) but the source "
        f"holds {found}; for delimited text ('a|b|c') declare it fp.String() and use "
        f"fp.Tags({name!r}, sep='|'), or fix the schema"
    )


def _string_lists(name: str, arrow: pa.ChunkedArray) -> pa.Array:
    """The column as one Arrow list array of text (or dictionary-encoded text) elements."""
    value_type = arrow.type.value_type
    if pa.types.is_dictionary(value_type):
        value_type = value_type.value_type
    if not (
        pa.types.is_string(value_type)
        or pa.types.is_large_string(value_type)
        or pa.types.is_string_view(value_type)
        or pa.types.is_null(value_type)
    ):
        raise SchemaError(_wrong_type(name, str(arrow.type)))
    return arrow.combine_chunks() if arrow.num_chunks != 1 else arrow.chunk(0)


def _from_python(name: str, series: pd.Series) -> tuple[pa.Array, np.ndarray]:
    """Python lists (or tuples, numpy arrays) of strings, row by row; the others flagged."""
    rows: list[Any] = []
    bad = np.zeros(len(series), dtype=bool)
    for i, value in enumerate(series.tolist()):
        if value is None or (isinstance(value, float) and value != value) or is_pandas_na(value):
            rows.append(None)
        elif isinstance(value, (list, tuple, np.ndarray)) and all(
            v is None or isinstance(v, str) for v in value
        ):
            rows.append(list(value))
        else:
            rows.append(None)
            bad[i] = True
    present = np.fromiter((r is not None for r in rows), dtype=bool, count=len(rows))
    if bad.any() and not present.any():
        examples = ", ".join(repr(v) for v in series[bad].head(3).tolist())
        raise SchemaError(_wrong_type(name, f"values such as {examples}"))
    return pa.array(rows, type=pa.list_(pa.large_string())), bad

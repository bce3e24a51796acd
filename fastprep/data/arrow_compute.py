"""The Arrow compute functions a job calls, without importing pyarrow.compute.

``import pyarrow.compute`` wraps and documents each of Arrow's ~290 compute functions in
Python: 23 ms of a fresh process, for the handful a job calls. These call the same
kernels through ``call_function`` of the compiled module it wraps, with the options the
``pyarrow.compute`` functions (and pyarrow's array methods ``cast``, ``take``,
``fill_null``, ``dictionary_encode``, which import pyarrow.compute on first use) pass.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pyarrow import _compute


def cast(values: Any, to: pa.DataType, safe: bool = True) -> Any:
    """``values.cast(to, safe=safe)``: safe, an overflow or a lossy conversion raises."""
    options = _compute.CastOptions.safe(to) if safe else _compute.CastOptions.unsafe(to)
    return _compute.call_function("cast", [values], options)


def take(values: Any, indices: Any) -> Any:
    """``values.take(indices)`` (an array, chunked array or table), bounds-checked."""
    return _compute.call_function("take", [values, indices], _compute.TakeOptions(boundscheck=True))


def fill_null(values: Any, fill: Any) -> Any:
    """``values.fill_null(fill)``: nulls replaced by ``fill`` (a Python value)."""
    return _compute.call_function("coalesce", [values, pa.scalar(fill, type=values.type)])


def unique(values: Any) -> Any:
    """``pc.unique(values)``: the distinct values in order of first appearance."""
    return _compute.call_function("unique", [values])


def dictionary_encode(values: Any) -> Any:
    """``values.dictionary_encode()``: nulls stay nulls of the indices."""
    options = _compute.DictionaryEncodeOptions("mask")
    return _compute.call_function("dictionary_encode", [values], options)


def is_in(values: Any, value_set: pa.Array) -> Any:
    """``pc.is_in(values, value_set=value_set)`` (a null matches a null of the set)."""
    options = _compute.SetLookupOptions(value_set, skip_nulls=False)
    return _compute.call_function("is_in", [values], options)


def count_distinct(values: Any) -> int:
    """``pc.count_distinct(values).as_py()`` (nulls not counted)."""
    options = _compute.CountOptions("only_valid")
    return int(_compute.call_function("count_distinct", [values], options).as_py())

"""Infer a starting-point :class:`~fastprep.api.schema.Schema` from a sample of the data.

The result is a draft to read, edit and save (``schema.save("schema.json")``), not a
contract: ranges are left open unless ``ranges=True`` (a sample's min/max is tighter than
the data's), nullability follows the sample, and text with few distinct values becomes a
``Category`` with its observed domain. ``fp.Schema.infer(source)`` calls this.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import numpy as np

from fastprep.api.schema import (
    Bool,
    Category,
    ColumnType,
    Datetime,
    DictOf,
    Float,
    Int,
    ListOf,
    Schema,
    String,
    set_inferrer,
)
from fastprep.data.sources import Source, as_pandas, read_source, source_columns
from fastprep.validate.coerce import NULL_TOKENS
from fastprep.validate.datetimes import OFFSET as _OFFSET

if TYPE_CHECKING:
    import pandas as pd

#: text with at most this many distinct values (and not mostly distinct) is a Category
MAX_CATEGORIES = 50


def infer_schema(
    source: Source, *, ranges: bool = False, max_categories: int = MAX_CATEGORIES
) -> Schema:
    """One column type per column of ``source`` (any source :func:`fastprep.data.sources.read_source`
    takes: a CSV/Parquet path, a pandas or Polars frame, a pyarrow Table or Dataset)."""
    columns = source_columns(source)
    if columns is None:
        raise ValueError(f"cannot list the columns of {source!r}")
    raw, _ = read_source(source, columns)
    frame = as_pandas(raw)  # inference reads pandas Series (a one-off, on a sample)
    return Schema({str(name): _infer(frame[name], ranges, max_categories) for name in columns})


#: text that starts like an ISO 8601 date (2013-01-01...)
_ISO_DATE = r"\d{4}-\d{2}-\d{2}"


def _infer(series: pd.Series, ranges: bool, max_categories: int) -> ColumnType:
    import pandas as pd

    nullable = bool(series.isna().any())
    dtype = series.dtype
    if pd.api.types.is_bool_dtype(dtype):
        return Bool(nullable=nullable)
    if pd.api.types.is_integer_dtype(dtype):
        return _number(Int, series.astype("float64"), nullable, ranges)
    if pd.api.types.is_float_dtype(dtype):
        return _number(Float, series, nullable, ranges)
    if pd.api.types.is_datetime64_any_dtype(dtype):
        tz = getattr(dtype, "tz", None)
        return Datetime(tz=None if tz is None else "UTC", nullable=nullable)
    if pd.api.types.is_object_dtype(dtype):  # a column of dicts is a DictOf
        head = series.dropna().head(1000).tolist()
        if head and all(isinstance(v, dict) for v in head):
            return DictOf(nullable=nullable)
        if head and all(isinstance(v, (list, tuple, np.ndarray)) for v in head):
            return ListOf(nullable=nullable)  # lists of tags (Parquet list<string>)
    text = series.dropna().astype("str").str.strip()
    missing_tokens = text.str.lower().isin(NULL_TOKENS)
    present = text[~missing_tokens]
    nullable = nullable or bool(missing_tokens.any())
    parsed = pd.to_numeric(present, errors="coerce")
    if len(present) and parsed.notna().all():
        integral = bool(np.all(np.mod(parsed.to_numpy(dtype=np.float64), 1) == 0))
        kind = Int if integral and not present.str.contains(r"[.eE]").any() else Float
        return _number(kind, parsed.astype("float64"), nullable, ranges)
    if len(present) and present.str.match(_ISO_DATE).all():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            stamps = pd.to_datetime(present, errors="coerce", utc=True, format="ISO8601")
        aware = present.str.contains(_OFFSET, regex=True)
        if stamps.notna().all() and (aware.all() or not aware.any()):  # ISO 8601 text
            return Datetime(tz="UTC" if aware.all() else None, nullable=nullable)
    distinct = present.unique()
    if 0 < len(distinct) <= max_categories and len(distinct) <= max(1, len(present) // 2):
        return Category(sorted(str(v) for v in distinct), nullable=nullable)
    return String(nullable=nullable)


def _number(kind: type, values: pd.Series, nullable: bool, ranges: bool) -> ColumnType:
    array = values.to_numpy(dtype=np.float64, na_value=np.nan)
    finite = array[np.isfinite(array)]
    bounds: dict[str, Any] = {}
    if ranges and len(finite):
        low, high = float(finite.min()), float(finite.max())
        bounds = {"min": int(low), "max": int(high)} if kind is Int else {"min": low, "max": high}
    if kind is Float:
        has_inf = bool(np.isinf(array).any())
        return Float(nullable=nullable, allow_inf=has_inf, **bounds)
    return Int(nullable=nullable, **bounds)


set_inferrer(infer_schema)
__all__ = ["MAX_CATEGORIES", "infer_schema"]

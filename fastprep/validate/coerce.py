"""Bring a raw column to its declared logical type, marking values that do not fit.

Each function returns ``(values, bad_type_mask)``: values coerced (numbers as float64 with
NaN for missing, text dictionary-encoded), and where a present value could not be coerced.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from fastprep.columns import TextColumn
from fastprep.validate import text_encode

#: text spellings of "missing" accepted in number columns read as text
NULL_TOKENS = frozenset({"", "nan", "na", "n/a", "null", "none", "<na>", "#n/a"})
_TRUE = frozenset({"true", "t", "yes", "y", "1", "1.0"})
_FALSE = frozenset({"false", "f", "no", "n", "0", "0.0"})


def to_numbers(series: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Numbers: int64/float64 arrays kept as they are (no copy), anything else as float64
    with NaN for missing; text is parsed, and text that is not a number is a type error."""
    dtype = series.dtype
    no_errors = np.zeros(len(series), dtype=bool)
    if isinstance(dtype, np.dtype) and dtype.kind in "if" and dtype.itemsize == 8:
        return series.to_numpy(copy=False), no_errors
    if pd.api.types.is_bool_dtype(dtype) or pd.api.types.is_numeric_dtype(dtype):
        values = series.to_numpy(dtype=np.float64, na_value=np.nan)
        return values, no_errors
    text = series.astype("str")
    stripped = text.str.strip()
    is_null_token = stripped.str.lower().isin(NULL_TOKENS) | series.isna().to_numpy()
    parsed = pd.to_numeric(stripped.where(~is_null_token), errors="coerce")
    values = parsed.to_numpy(dtype=np.float64, na_value=np.nan, copy=True)
    bad = np.isnan(values) & ~is_null_token.to_numpy(dtype=bool)
    values[bad] = np.nan
    return values, bad


def to_bools(series: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """0.0/1.0 values from bools, 0/1 numbers, or true/false-like text."""
    if pd.api.types.is_bool_dtype(series.dtype) or pd.api.types.is_numeric_dtype(series.dtype):
        values = series.to_numpy(dtype=np.float64, na_value=np.nan, copy=True)
        bad = ~np.isnan(values) & (values != 0) & (values != 1)
        values[bad] = np.nan
        return values, bad
    lowered = series.astype("str").str.strip().str.lower()
    missing = series.isna().to_numpy() | lowered.isin(NULL_TOKENS).to_numpy(dtype=bool)
    true = lowered.isin(_TRUE).to_numpy(dtype=bool)
    false = lowered.isin(_FALSE).to_numpy(dtype=bool)
    values = np.where(true, 1.0, np.where(false, 0.0, np.nan))
    bad = ~missing & ~true & ~false
    return values, bad


def to_text(series: pd.Series) -> tuple[TextColumn, np.ndarray]:
    """Dictionary-encoded strings; numbers become their plain text (``7``, not ``7.0``)."""
    if not (pd.api.types.is_string_dtype(series.dtype) or series.dtype == object):
        series = _numbers_as_text(series)
    elif series.dtype == object:
        series = series.map(_object_as_text, na_action="ignore").astype("str")
    arrow = _arrow_strings(series)
    if arrow is not None:  # the parallel encoder over the Arrow buffers: same codes
        codes, arrow_uniques = text_encode.encode(arrow)
        return TextColumn(codes, arrow_uniques), np.zeros(len(codes), bool)
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    uniques_arr = np.asarray(uniques, dtype=object)
    return TextColumn(codes.astype(np.int32, copy=False), uniques_arr), np.zeros(len(codes), bool)


def _arrow_strings(series: pd.Series) -> pa.ChunkedArray | None:
    """The Arrow string data behind a pandas string Series, without a copy (else None)."""
    to_arrow = getattr(series.array, "__arrow_array__", None)
    if to_arrow is None or not pd.api.types.is_string_dtype(series.dtype):
        return None
    try:
        arrow = to_arrow()  # ArrowStringArray: its own chunks, zero-copy
    except (TypeError, pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    if isinstance(arrow, pa.Array):
        arrow = pa.chunked_array([arrow])
    if pa.types.is_string(arrow.type) or pa.types.is_large_string(arrow.type):
        return arrow
    return None


def _numbers_as_text(series: pd.Series) -> pd.Series:
    values = series.to_numpy(dtype=object, na_value=None)
    return pd.Series([None if v is None else _object_as_text(v) for v in values], dtype="str")


def _object_as_text(value: object) -> str:
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)

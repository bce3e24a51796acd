"""Bring a raw column to its declared logical type, marking values that do not fit.

Each function returns ``(values, bad_type_mask)``: values coerced (numbers as float64 with
NaN for missing, text dictionary-encoded), and where a present value could not be coerced.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from fastprep.data import arrow_compute as ac
from fastprep.data import text_encode
from fastprep.data.columns import TextColumn
from fastprep.data.pandas_objects import is_pandas_time

if TYPE_CHECKING:
    import pandas as pd

#: text spellings of "missing" accepted in number columns read as text
NULL_TOKENS = frozenset({"", "nan", "na", "n/a", "null", "none", "<na>", "#n/a"})
#: float64 holds every integer up to this magnitude exactly
EXACT_INT = 2**53
_TRUE = frozenset({"true", "t", "yes", "y", "1", "1.0"})
_FALSE = frozenset({"false", "f", "no", "n", "0", "0.0"})


def to_numbers(series: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Numbers: int64/float64 arrays kept as they are (no copy), anything else as float64
    with NaN for missing; text is parsed, and text that is not a number is a type error."""
    import pandas as pd

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


def arrow_numbers(
    column: pa.ChunkedArray,
) -> tuple[np.ndarray, np.ndarray | None] | None:
    """An Arrow number column as numpy, as :func:`to_numbers` gives it from pandas: int64
    without missing values and float64 as they are (zero-copy for one chunk), other
    integers and floats as float64 with NaN for missing. Also where an integer lies beyond
    2**53 (None: nowhere, or int64 kept exact for the scan to check). None: not a plain
    number column (bools, decimals, text...): the caller converts it through pandas."""
    kind = column.type
    if pa.types.is_int64(kind) and column.null_count == 0:
        return column.to_numpy(), None
    if pa.types.is_float64(kind):
        return column.to_numpy(), None  # missing values become NaN
    if not (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
        return None
    values = ac.cast(column, pa.float64(), safe=False).to_numpy()  # rounding: flagged below
    inexact = None
    if kind.bit_width == 64 and pa.types.is_integer(kind) and len(column):
        import pyarrow.compute as pc  # on use: integers past 2**53 are rare

        extremes = pc.min_max(column).as_py()
        if extremes["max"] is not None and (
            extremes["max"] > EXACT_INT or extremes["min"] < -EXACT_INT
        ):
            # bounds of the column's own type: a plain int would cast uint64 to int64, which
            # fails for values past 2**63
            big = pc.greater(column, pa.scalar(EXACT_INT, kind))
            if pa.types.is_signed_integer(kind):
                big = pc.or_(big, pc.less(column, pa.scalar(-EXACT_INT, kind)))
            inexact = big.fill_null(False).to_numpy()
    return values, inexact


def arrow_text(column: pa.ChunkedArray) -> TextColumn | None:
    """An Arrow text column (string, large_string, or a dictionary of them) encoded
    straight from its buffers (a dictionary from its indices: only the dictionary is
    hashed); None for anything else (numbers as text, bytes...)."""
    kind = column.type
    if pa.types.is_dictionary(kind):
        if not (pa.types.is_string(kind.value_type) or pa.types.is_large_string(kind.value_type)):
            return None
    elif not (
        pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind)
    ):
        return None
    codes, uniques, counts = text_encode.encode_counted(column)
    return TextColumn(codes, uniques, counts=counts)


def inexact_ints(series: pd.Series, values: np.ndarray) -> np.ndarray | None:
    """Where an integer of the source lies beyond 2**53, so float64 would round it.

    Integer columns (numpy or nullable ``Int64``) are checked on the integers themselves
    (two reductions; a mask only when some value is that large); text is checked on the
    few parsed values at or beyond 2**53 by exact integer comparison. None: nothing found.
    """
    import pandas as pd

    dtype = series.dtype
    if pd.api.types.is_integer_dtype(dtype):
        unsigned = pd.api.types.is_unsigned_integer_dtype(dtype)
        ints = series.to_numpy(dtype=np.uint64 if unsigned else np.int64, na_value=0)
        if len(ints) == 0 or (ints.max() <= EXACT_INT and (unsigned or ints.min() >= -EXACT_INT)):
            return None
        big = ints > EXACT_INT if unsigned else (ints > EXACT_INT) | (ints < -EXACT_INT)
        return big
    if values.dtype.kind != "f" or (isinstance(dtype, np.dtype) and dtype.kind == "f"):
        return None
    with np.errstate(invalid="ignore"):
        candidates = np.flatnonzero(np.abs(values) >= EXACT_INT)
    if not len(candidates):
        return None
    big = np.zeros(len(values), dtype=bool)
    for i in candidates:  # rare: exact integer text of the few huge values
        big[i] = _exact_text_int(series.iloc[i]) is not None and np.isfinite(values[i])
    return big if big.any() else None


def _exact_text_int(value: object) -> int | None:
    try:
        number = int(str(value).strip())
    except ValueError:
        return None
    return number if abs(number) > EXACT_INT else None


def to_bools(series: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """0.0/1.0 values from bools, 0/1 numbers, or true/false-like text."""
    import pandas as pd

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


def to_text(series: pd.Series) -> tuple[TextColumn, np.ndarray, np.ndarray]:
    """Dictionary-encoded strings; numbers become their plain text (``7``, not ``7.0``).

    Returns ``(text, bad_type, bad_encoding)``: values that are not scalars (lists, dicts,
    ...) and strings that are not valid Unicode (lone surrogates, bytes that are not
    UTF-8) become missing and are flagged, never stringified or replaced by U+FFFD.
    """
    import pandas as pd

    bad_type = bad_encoding = np.zeros(len(series), bool)
    if not (pd.api.types.is_string_dtype(series.dtype) or series.dtype == object):
        series = _numbers_as_text(series)
    elif series.dtype == object:
        as_text = series.map(_object_as_text, na_action="ignore")
        bad_type = as_text.map(lambda v: v is _NOT_SCALAR).to_numpy(dtype=bool)
        bad_encoding = as_text.map(lambda v: v is _NOT_UNICODE).to_numpy(dtype=bool)
        if bad_type.any() or bad_encoding.any():
            as_text = as_text.where(~(bad_type | bad_encoding), None)
        series = as_text.astype("str")
    arrow = _arrow_strings(series)
    if arrow is not None:  # the parallel encoder over the Arrow buffers: same codes
        codes, arrow_uniques = text_encode.encode(arrow)
        return TextColumn(codes, arrow_uniques), bad_type, bad_encoding
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    uniques_arr = np.asarray(uniques, dtype=object)
    return TextColumn(codes.astype(np.int32, copy=False), uniques_arr), bad_type, bad_encoding


def _arrow_strings(series: pd.Series) -> pa.ChunkedArray | None:
    """The Arrow string data behind a pandas string Series, without a copy (else None)."""
    import pandas as pd

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
    import pandas as pd

    values = series.to_numpy(dtype=object, na_value=None)
    return pd.Series([None if v is None else _object_as_text(v) for v in values], dtype="str")


_NOT_SCALAR = object()  # markers: a list/dict/... value; a string that is not valid Unicode
_NOT_UNICODE = object()
_SCALARS = (str, bool, int, float, np.generic)


def _object_as_text(value: object) -> object:
    if isinstance(value, str):
        try:
            value.encode("utf-8")  # a lone surrogate cannot be stored as UTF-8
        except UnicodeEncodeError:
            return _NOT_UNICODE
        return value
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return _NOT_UNICODE
    if not isinstance(value, _SCALARS) and not is_pandas_time(value):
        return _NOT_SCALAR
    return str(value)

"""Coerce a ``fp.Datetime`` column to float64 seconds since 1970-01-01 UTC (NaN = missing).

Zone-awareness is part of the declared type: ``tz=None`` wants naive timestamps,
``tz="UTC"`` (any zone name) wants aware ones, converted to UTC. A whole column of the
other kind, or of numbers (whose unit fastprep would have to guess), is a ``SchemaError``;
single text values of the other kind are rule ``timezone``, unparseable ones rule ``type``.
Seconds as float64 keep microseconds exactly for dates within a few centuries of 1970.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np

from fastprep.api.schema import Datetime
from fastprep.errors import SchemaError

if TYPE_CHECKING:
    import pandas as pd

#: a text timestamp that names its offset: "...Z", "...+01:00", "...-0500"
OFFSET = r"(?:[zZ]|[+-]\d\d:?\d\d)$"
_TICKS_PER_SECOND = {"s": 1.0, "ms": 1e3, "us": 1e6, "ns": 1e9}


def to_epoch_seconds(
    name: str, series: pd.Series, spec: Datetime
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(seconds, bad_type, wrong_zone)``: float64 seconds (NaN for missing or bad)."""
    import pandas as pd

    dtype = series.dtype
    none = np.zeros(len(series), dtype=bool)
    if isinstance(dtype, pd.DatetimeTZDtype):
        if spec.tz is None:
            raise SchemaError(_zone_message(name, f"carry the time zone {dtype.tz}", spec))
        return _seconds(series.dt.tz_convert("UTC").dt.tz_localize(None)), none, none
    if pd.api.types.is_datetime64_dtype(dtype):
        if spec.tz is not None:
            raise SchemaError(_zone_message(name, "are naive (no time zone)", spec))
        return _seconds(series), none, none
    if pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype):
        raise SchemaError(
            f"column {name!r} is declared Datetime but holds numbers (dtype {dtype}); "
            "fastprep does not guess their unit: convert them with pd.to_datetime(..., "
            "unit='s') in the source, or declare fp.Float()"
        )
    return _parse_text(name, series, spec)


def _parse_text(name: str, series: pd.Series, spec: Datetime) -> tuple[np.ndarray, ...]:
    """Parsed once per distinct text when values repeat (hourly stamps: ~9,000 distinct in
    3.4M flights), then gathered by code; the same result as parsing every row."""
    import pandas as pd

    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    if len(uniques) * 2 > len(series):
        return _parse_rows(name, series, spec)
    seconds, bad_type, wrong_zone = _parse_rows(name, pd.Series(uniques, dtype=object), spec)
    return (
        np.append(seconds, np.nan)[codes],  # code -1 (missing) reads the appended slot
        np.append(bad_type, False)[codes],
        np.append(wrong_zone, False)[codes],
    )


def _parse_rows(name: str, series: pd.Series, spec: Datetime) -> tuple[np.ndarray, ...]:
    import pandas as pd

    present = series.notna().to_numpy()
    text = series.astype("str").str.strip().where(present)
    aware = text.str.contains(OFFSET, regex=True, na=False).to_numpy(dtype=bool)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parsed = pd.to_datetime(text, errors="coerce", utc=True, format="ISO8601")
    seconds = _seconds(parsed.dt.tz_localize(None))
    bad_type = present & np.isnan(seconds)
    wrong_zone = (aware if spec.tz is None else ~aware) & present & ~bad_type
    if wrong_zone.any() and wrong_zone.sum() == (present & ~bad_type).sum():
        kind = "name a time zone offset" if spec.tz is None else "are naive (no offset)"
        raise SchemaError(_zone_message(name, kind, spec))
    seconds[bad_type | wrong_zone] = np.nan
    return seconds, bad_type, wrong_zone


def _seconds(naive: pd.Series) -> np.ndarray:
    # read in the column's own unit (pandas keeps s/ms/us for dates outside 1677-2262):
    # a cast to nanoseconds would wrap such a date silently to another century
    stamps = naive.to_numpy()
    if stamps.dtype.kind != "M":
        stamps = stamps.astype("datetime64[ns]")
    unit, count = np.datetime_data(stamps.dtype)
    ticks = stamps.view(np.int64)
    out = ticks / (_TICKS_PER_SECOND[unit] / count)
    out[ticks == np.iinfo(np.int64).min] = np.nan  # NaT
    return out


def _zone_message(name: str, found: str, spec: Datetime) -> str:
    declared = "naive (tz=None)" if spec.tz is None else f"time-zone-aware (tz={spec.tz!r})"
    fix = (
        "declare fp.Datetime(tz='UTC') (values are converted to UTC)"
        if spec.tz is None
        else "localize the source's timestamps, or declare fp.Datetime(tz=None)"
    )
    return f"column {name!r} is declared {declared} but its timestamps {found}; {fix}"

"""Calendar parts of ``fp.Datetime`` values (float64 seconds since 1970 UTC) in a zone.

:func:`date_part` is the reference: pandas' ``Series.dt`` accessor of the same meaning on
the values converted to the declared zone. :func:`zone_table` gives compiled kernels the
zone's UTC offsets as a step function (first second of each offset, and the offset), so a
kernel adds the offset and does calendar arithmetic without a time-zone library.

An instant outside the years 1..9999 (UTC; as stored when naive) has no part: missing,
counted like any undefined result (pandas cannot localize it to a zone).

Every part depends only on the whole second (``floor``): a value is converted at second
resolution, never through a float multiplication to nanoseconds (which can round a whole
second down by a few nanoseconds and change ``second``).
"""

from __future__ import annotations

import numpy as np

from fastprep.plan.expr import FIRST_SECOND, LAST_SECOND

#: our names -> pandas ``DatetimeIndex`` attributes
PANDAS_ATTRIBUTES = {
    "year": "year", "month": "month", "day": "day", "hour": "hour", "minute": "minute",
    "second": "second", "dayofweek": "day_of_week", "dayofyear": "day_of_year",
    "quarter": "quarter",
}  # fmt: skip
#: the part numbers compiled kernels use (same order as ``fastprep.plan.expr.DATE_PARTS``)
PART_CODES = {name: code for code, name in enumerate(PANDAS_ATTRIBUTES)}
_DAY = 86_400


def date_part(seconds: np.ndarray, part: str, tz: str | None) -> np.ndarray:
    """``part`` of each value in zone ``tz`` (None: as stored) as float64; NaN stays NaN."""
    import pandas as pd

    seconds = np.asarray(seconds, dtype=np.float64)
    out = np.full(seconds.shape, np.nan)
    # outside the years 1..9999 time-zone libraries have no local time: missing (counted)
    present = (seconds >= FIRST_SECOND) & (seconds < LAST_SECOND + 1)
    if not present.any():
        return out
    stamps = pd.DatetimeIndex(np.floor(seconds[present]).astype("datetime64[s]"))
    if tz is not None:
        stamps = stamps.tz_localize("UTC").tz_convert(tz)
    out[present] = np.asarray(getattr(stamps, PANDAS_ATTRIBUTES[part]), dtype=np.float64)
    return out


def zone_table(tz: str | None, seconds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(starts, offsets)``: from second ``starts[i]`` on, local time is UTC plus
    ``offsets[i]`` seconds, over the range of ``seconds`` (``starts[0]`` is -inf).

    The offsets are sampled once a day over the data's range and each change is found to
    the second by bisection (zones change offset at most once a day)."""
    finite = np.asarray(seconds, dtype=np.float64)
    finite = finite[np.isfinite(finite)]
    if tz is None or not len(finite):
        return np.array([-np.inf]), np.zeros(1)
    # the margin stays inside the years 1..9999 that time-zone libraries can convert
    lo = max(int(np.floor(finite.min())) - 2 * _DAY, FIRST_SECOND + _DAY)
    hi = min(int(np.floor(finite.max())) + 2 * _DAY, LAST_SECOND - _DAY)
    grid = np.arange(lo, hi + _DAY, _DAY, dtype=np.int64)
    offsets = _offsets(tz, grid)
    changes = np.flatnonzero(offsets[1:] != offsets[:-1])
    before, after = grid[changes], grid[changes + 1]
    old = offsets[changes]
    while len(changes) and (after - before > 1).any():  # first second of the new offset
        middle = (before + after) // 2
        moved = _offsets(tz, middle) != old
        after = np.where(moved, middle, after)
        before = np.where(moved, before, middle)
    starts = np.concatenate([[-np.inf], after.astype(np.float64)])
    return starts, np.concatenate([offsets[:1], offsets[changes + 1]]).astype(np.float64)


def _offsets(tz: str, seconds: np.ndarray) -> np.ndarray:
    import pandas as pd

    utc = pd.DatetimeIndex(seconds.astype("datetime64[s]")).tz_localize("UTC")
    local = np.asarray(utc.tz_convert(tz).tz_localize(None), dtype="datetime64[s]")
    return local.astype(np.int64) - seconds

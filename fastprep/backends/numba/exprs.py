"""Scalar helpers the generated fused kernels call for expression functions.

Each mirrors numpy's definition line by line, so a kernel gives the reference's value
bit for bit: ``floordiv`` is numpy's ``npy_floor_divide`` (itself CPython's float
``divmod``), ``date_part`` is the proleptic Gregorian calendar of pandas' ``Series.dt``
(Howard Hinnant's ``civil_from_days``) after adding the zone's UTC offset, looked up in a
table of the zone's offset changes (:func:`fastprep.backends.reference.datetime_parts.zone_table`).
"""

from __future__ import annotations

import numpy as np

from fastprep.native.kernel_files import jit as njit  # made on first use
from fastprep.plan.expr import FIRST_SECOND, LAST_SECOND

_FIRST_SECOND, _LAST_SECOND = float(FIRST_SECOND), float(LAST_SECOND)
_NJIT = {"cache": True, "error_model": "numpy", "fastmath": False}


@njit(**_NJIT)
def floordiv(a: float, b: float) -> float:
    if b == 0.0:  # ±inf or NaN: made missing (and counted) by the caller
        return a / b
    mod = np.fmod(a, b)
    div = (a - mod) / b
    if mod != 0.0 and (b < 0.0) != (mod < 0.0):
        div -= 1.0
    if div != 0.0:
        whole = np.floor(div)
        if div - whole > 0.5:
            whole += 1.0
        return whole
    return np.copysign(0.0, a / b)


@njit(**_NJIT)
def sign(a: float) -> float:
    if a > 0.0:
        return 1.0
    if a < 0.0:
        return -1.0
    return a if a != a else 0.0


@njit(**_NJIT)
def _days_from_civil(y: int, m: int, d: int) -> int:
    y -= 1 if m <= 2 else 0
    era = (y if y >= 0 else y - 399) // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


@njit(**_NJIT)
def date_part(x: float, part: int, starts: np.ndarray, offsets: np.ndarray) -> float:
    """Part ``part`` (0 year, 1 month, 2 day, 3 hour, 4 minute, 5 second, 6 day of week
    (Monday 0), 7 day of year, 8 quarter) of ``x`` seconds since 1970 UTC in the zone."""
    if not (x >= _FIRST_SECOND and x < _LAST_SECOND + 1.0):  # also NaN: see date_part
        return np.nan
    whole = np.floor(x)
    at = np.searchsorted(starts, whole, side="right") - 1
    local = np.int64(whole + offsets[at])
    days = local // 86400
    clock = local - days * 86400
    if part == 3:
        return float(clock // 3600)
    if part == 4:
        return float((clock % 3600) // 60)
    if part == 5:
        return float(clock % 60)
    if part == 6:
        return float((days + 3) % 7)
    z = days + 719468
    era = (z if z >= 0 else z - 146096) // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + 3 if mp < 10 else mp - 9
    y = yoe + era * 400 + (1 if m <= 2 else 0)
    if part == 0:
        return float(y)
    if part == 1:
        return float(m)
    if part == 2:
        return float(d)
    if part == 7:
        return float(days - _days_from_civil(y, 1, 1) + 1)
    return float((m - 1) // 3 + 1)

"""Fitted statistics, computed exactly the way the sklearn peers compute them.

``standardize_params`` follows ``StandardScaler`` (sklearn's ``_incremental_mean_and_var``
on a first pass, and its ``_is_constant_feature`` tolerance for near-constant columns);
``minmax_params`` follows ``MinMaxScaler``. Matching their arithmetic order keeps the
float32 output bit-identical to the peers, not merely close.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fastprep.errors import FitError

_EPS = np.finfo(np.float64).eps


def _present(values: np.ndarray, what: str) -> int:
    count = int(len(values) - np.count_nonzero(np.isnan(values)))
    require_values(count, len(values), what)
    return count


def require_values(count: int, total: int, what: str) -> None:
    if count == 0:
        counted = {0: " (the input has no rows)", -1: ""}.get(total, f" (all {total:,} missing)")
        raise FitError(f"{what}: no non-missing values at fit time{counted}")


def standardize_params(values: np.ndarray, what: str) -> dict[str, float]:
    """Mean and scale (population std; 1 for a constant or near-constant column)."""
    count = _present(values, what)
    has_nan = count != len(values)
    with np.errstate(over="ignore", invalid="ignore"):
        total = np.float64(np.nansum(values) if has_nan else np.sum(values))
        mean = float(total / count)
        temp = values - mean
        correction = np.float64(np.nansum(temp) if has_nan else np.sum(temp))
        temp **= 2
        unnormalized = np.float64(np.nansum(temp) if has_nan else np.sum(temp))
        unnormalized -= correction**2 / count
    return standardize_from_moments(count, mean, float(unnormalized / count), what)


def standardize_from_moments(count: int, mean: float, var: float, what: str) -> dict[str, Any]:
    """Scale from the population variance, with sklearn's near-constant tolerance.

    Values so large that the variance overflows float64 (|x| ~ 1e154 and beyond) are a
    :class:`FitError`, never a NaN scale that would silently quarantine every row.
    """
    if not (np.isfinite(mean) and np.isfinite(var)):
        raise FitError(
            f"{what}: the mean or variance is not finite (±inf values or magnitudes near "
            "float64's limit); clip or log-transform the column first"
        )
    constant = var <= count * _EPS * var + (count * mean * _EPS) ** 2
    scale = 1.0 if constant else float(np.sqrt(var))
    return {"mean": mean, "var": var, "scale": scale, "count": count, "constant": bool(constant)}


def minmax_params(values: np.ndarray, low: float, high: float, what: str) -> dict[str, float]:
    """``scale`` and ``min`` so that ``x * scale + min`` maps [data_min, data_max] to [low, high]."""
    _present(values, what)
    return minmax_from_range(float(np.nanmin(values)), float(np.nanmax(values)), low, high)


def minmax_from_range(
    data_min: float, data_max: float, low: float, high: float
) -> dict[str, float]:
    """MinMaxScaler's scale/min from the data range (a zero range is scaled by 1)."""
    data_range = data_max - data_min
    if data_range < 10 * _EPS:
        data_range = 1.0
    scale = (high - low) / data_range
    return {
        "data_min": data_min,
        "data_max": data_max,
        "scale": scale,
        "min": low - data_min * scale,
    }


def fill_value(values: np.ndarray, how: str, what: str) -> float:
    """The fitted mean or median of the non-missing values."""
    _present(values, what)
    return float(np.nanmean(values) if how == "mean" else np.nanmedian(values))

"""Fitted statistics of the reference fit.

``standardize_params`` and a mean fill come from :mod:`fastprep.backends.moments`: exact
sums, so the fitted mean and variance are the same bits however the rows are split (in
memory, by the Numba kernels' chunks, or by partitions); each is the exact value rounded
once, which is what ``StandardScaler``'s two-pass sums approximate. ``minmax_params``
follows ``MinMaxScaler``.
"""

from __future__ import annotations

import numpy as np

from fastprep.backends import moments
from fastprep.backends.moments import require_values

_EPS = np.finfo(np.float64).eps


def _present(values: np.ndarray, what: str) -> int:
    count = int(len(values) - np.count_nonzero(np.isnan(values)))
    require_values(count, len(values), what)
    return count


def standardize_params(values: np.ndarray, what: str) -> dict[str, object]:
    """Mean and scale (population std; 1 for a constant or near-constant column)."""
    found = moments.of(values)
    require_values(found.count, len(values), what)
    return moments.standardize_params(found, what)


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
    """The fitted mean (rounded once from the exact sum) or median of the non-missing
    values."""
    if how == "mean":
        found = moments.of(values)
        require_values(found.count, len(values), what)
        return found.mean()
    _present(values, what)
    return nanmedian(values)


def nanmedian(values: np.ndarray) -> float:
    """``np.nanmedian`` of a 1-d array with a value, the same bits (the middle value, or
    the mean of the two middle ones), by the same selection; not ``np.nanmedian`` itself,
    whose check for a masked array imports numpy.ma (~7 ms of a fresh process)."""
    present = values[~np.isnan(values)]
    middle = len(present) // 2
    if len(present) % 2:
        return float(np.partition(present, middle)[middle])
    part = np.partition(present, (middle - 1, middle))
    return float(np.mean(part[middle - 1 : middle + 1]))

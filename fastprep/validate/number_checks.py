"""Numeric rules in one parallel pass: count violations first, build masks only if any.

Clean data (the common case) costs one read of the column and no temporaries; a rule that
is broken gets its boolean mask computed afterwards, for the findings and the quarantine.
"""

from __future__ import annotations

import numpy as np
from numba import njit

NULL, INF, NOT_INTEGER, TOO_BIG, BELOW, ABOVE = range(6)
EXACT_INT = 2.0**53


@njit(cache=True)
def _count(values, lo, hi, integral, range_on_inf):  # pragma: no cover - compiled
    """Serial on purpose: a memory-bound scan; thread start-up cost more than it saved here."""
    n = values.shape[0]
    counts = np.zeros((1, 6), np.int64)
    for c in range(1):
        start = 0
        stop = n
        local = np.zeros(6, np.int64)
        smallest = np.inf
        largest = -np.inf
        for i in range(start, stop):
            v = np.float64(values[i])
            if v != v:
                local[NULL] += 1
                continue
            infinite = v == np.inf or v == -np.inf
            if not infinite:
                smallest = min(smallest, v)
                largest = max(largest, v)
            if infinite:
                local[INF] += 1
                if not range_on_inf:
                    continue
            elif integral:
                if v != np.floor(v):
                    local[NOT_INTEGER] += 1
                if abs(v) > EXACT_INT:
                    local[TOO_BIG] += 1
            if v < lo:
                local[BELOW] += 1
            if v > hi:
                local[ABOVE] += 1
        for j in range(6):
            counts[c, j] = local[j]
    return counts.sum(axis=0), smallest, largest


def rule_counts(
    values: np.ndarray, lo: float, hi: float, integral: bool, range_on_inf: bool
) -> np.ndarray:
    """Counts of [null, inf, not_integer, too_big, below, above] over ``values``."""
    return scan(values, lo, hi, integral, range_on_inf)[0]


def scan(
    values: np.ndarray, lo: float, hi: float, integral: bool, range_on_inf: bool
) -> tuple[np.ndarray, float, float]:
    """:func:`rule_counts` plus the smallest and largest finite value (inf, -inf if none),
    from the same pass: fit-time checks (an all-null or constant column) cost nothing more."""
    counts, smallest, largest = _count(values, lo, hi, integral, range_on_inf)
    return counts, float(smallest), float(largest)


def rule_masks(
    values: np.ndarray, counts: np.ndarray, lo: float, hi: float, integral: bool, range_on_inf: bool
) -> dict[int, np.ndarray]:
    """Boolean masks for the rules ``counts`` says are broken (the rare, slower path)."""
    masks: dict[int, np.ndarray] = {}
    with np.errstate(invalid="ignore"):
        as_float = values.astype(np.float64, copy=False)
        if counts[NULL]:
            masks[NULL] = np.isnan(as_float)
        if not (counts[INF] or counts[BELOW] or counts[ABOVE]):
            infinite = ranged = None  # the common broken rule is NULL alone: no temporaries
        else:
            infinite = np.isinf(as_float)
            ranged = as_float if range_on_inf else np.where(infinite, np.nan, as_float)
        if counts[INF]:
            masks[INF] = infinite
        if counts[NOT_INTEGER]:
            masks[NOT_INTEGER] = np.isfinite(as_float) & (as_float != np.floor(as_float))
        if counts[TOO_BIG]:
            masks[TOO_BIG] = np.isfinite(as_float) & (np.abs(as_float) > EXACT_INT)
        if counts[BELOW]:
            masks[BELOW] = ranged < lo
        if counts[ABOVE]:
            masks[ABOVE] = ranged > hi
    return masks

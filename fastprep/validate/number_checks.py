"""Numeric rules in one parallel pass: count violations first, build masks only if any.

Clean data (the common case) costs one read of the column and no temporaries; a rule that
is broken gets its boolean mask computed afterwards, for the findings and the quarantine.
The same pass also sums the finite values (relative to a shift, for a stable variance),
so the drift profile of a column that lost no rows costs nothing more (``drift.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit, prange

NULL, INF, NOT_INTEGER, TOO_BIG, BELOW, ABOVE = range(6)
EXACT_INT = 2.0**53
#: the same bound as an integer: int64 sources are compared exactly, never via float64
EXACT_INT_I = 2**53
#: fixed chunk count: sums merge in chunk order, so results do not depend on threads
N_CHUNKS = 16
#: below this many values the chunks run on the calling thread (waking threads costs more)
PARALLEL_MIN = 1 << 19
#: per-chunk statistics: smallest, largest (finite), finite count, shifted sum, squares
LOW, HIGH, FINITE, TOTAL, SQUARES = range(5)


@njit(cache=True, error_model="numpy")
def _scan_range(
    values, start, stop, lo, hi, integral, range_on_inf, int_source, shift, counts, stats, c
):  # pragma: no cover
    """One chunk's rule counts and moments into ``counts[c]`` / ``stats[c]`` (scalars in
    the loop, so they stay in registers)."""
    nulls = infs = not_integer = too_big = below = above = finite = 0
    smallest = np.inf
    largest = -np.inf
    total = 0.0
    squares = 0.0
    for i in range(start, stop):
        x = values[i]
        v = np.float64(x)
        if v != v:
            nulls += 1
            continue
        if v == np.inf or v == -np.inf:
            infs += 1
            if not range_on_inf:
                continue
        else:
            smallest = min(smallest, v)
            largest = max(largest, v)
            finite += 1
            d = v - shift
            total += d
            squares += d * d
            if int_source:  # exact: 2**53 + 1 is not rounded first
                if x > EXACT_INT_I or x < -EXACT_INT_I:
                    too_big += 1
            elif integral:
                if v != np.floor(v):
                    not_integer += 1
                if abs(v) > EXACT_INT:
                    too_big += 1
        if v < lo:
            below += 1
        if v > hi:
            above += 1
    counts[c, NULL] = nulls
    counts[c, INF] = infs
    counts[c, NOT_INTEGER] = not_integer
    counts[c, TOO_BIG] = too_big
    counts[c, BELOW] = below
    counts[c, ABOVE] = above
    stats[c, LOW] = smallest
    stats[c, HIGH] = largest
    stats[c, FINITE] = finite
    stats[c, TOTAL] = total
    stats[c, SQUARES] = squares


@njit(cache=True)
def _outputs(values, n_chunks):  # pragma: no cover - compiled
    """Row count, per-chunk counts and statistics (zeroed), and the chunk size."""
    n = values.shape[0]
    return (
        n,
        np.zeros((n_chunks, 6), np.int64),
        np.zeros((n_chunks, 5)),
        (n + n_chunks - 1) // n_chunks,
    )


@njit(cache=True, error_model="numpy", parallel=True)
def _parallel(
    values, lo, hi, integral, range_on_inf, int_source, shift, n_chunks
):  # pragma: no cover
    n, counts, stats, size = _outputs(values, n_chunks)
    for c in prange(n_chunks):
        _scan_range(values, c * size, min(n, c * size + size), lo, hi, integral,
                    range_on_inf, int_source, shift, counts, stats, c)  # fmt: skip
    return counts, stats


@njit(cache=True, error_model="numpy")
def _serial(
    values, lo, hi, integral, range_on_inf, int_source, shift, n_chunks
):  # pragma: no cover
    """The same chunks on the calling thread (a separate function: Numba's cache would mix
    up two dispatchers of one Python function)."""
    n, counts, stats, size = _outputs(values, n_chunks)
    for c in range(n_chunks):
        _scan_range(values, c * size, min(n, c * size + size), lo, hi, integral,
                    range_on_inf, int_source, shift, counts, stats, c)  # fmt: skip
    return counts, stats


@njit(cache=True)
def _first_finite(values):  # pragma: no cover - compiled
    for i in range(values.shape[0]):
        v = np.float64(values[i])
        if v == v and v != np.inf and v != -np.inf:
            return v
    return 0.0


@dataclass(frozen=True)
class ColumnScan:
    """What one pass over a column learned: rule counts and the finite values' moments."""

    counts: np.ndarray
    smallest: float
    largest: float
    n: int
    finite: int
    #: sums of ``v - shift`` and ``(v - shift)**2`` over the finite values
    shift: float
    total: float
    squares: float


def scan_column(
    values: np.ndarray, lo: float, hi: float, integral: bool, range_on_inf: bool
) -> ColumnScan:
    """Counts of [null, inf, not_integer, too_big, below, above], the finite range and
    moments of ``values`` (int64 sources: too_big is exact, for any declared type)."""
    shift = float(_first_finite(values))
    kernel = _parallel if len(values) >= PARALLEL_MIN else _serial
    int_source = values.dtype.kind == "i"
    counts, stats = kernel(
        values, float(lo), float(hi), integral, range_on_inf, int_source, shift, N_CHUNKS
    )
    return ColumnScan(
        counts.sum(axis=0), float(stats[:, LOW].min()), float(stats[:, HIGH].max()),
        len(values), int(stats[:, FINITE].sum()), shift,
        float(stats[:, TOTAL].sum()), float(stats[:, SQUARES].sum()),
    )  # fmt: skip


def moments_only(values: np.ndarray) -> ColumnScan:
    """:func:`scan_column` with no rules (for the drift profile of a column not scanned)."""
    return scan_column(values, -np.inf, np.inf, False, False)


def scan(
    values: np.ndarray, lo: float, hi: float, integral: bool, range_on_inf: bool
) -> tuple[np.ndarray, float, float]:
    """Rule counts plus the smallest and largest finite value (inf, -inf if none), from
    one pass: fit-time checks (an all-null or constant column) cost nothing more."""
    result = scan_column(values, lo, hi, integral, range_on_inf)
    return result.counts, result.smallest, result.largest


def rule_counts(
    values: np.ndarray, lo: float, hi: float, integral: bool, range_on_inf: bool
) -> np.ndarray:
    """Counts of [null, inf, not_integer, too_big, below, above] over ``values``."""
    return scan(values, lo, hi, integral, range_on_inf)[0]


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
            if values.dtype.kind == "i":
                masks[TOO_BIG] = (values > EXACT_INT_I) | (values < -EXACT_INT_I)
            else:
                masks[TOO_BIG] = np.isfinite(as_float) & (np.abs(as_float) > EXACT_INT)
        if counts[BELOW]:
            masks[BELOW] = ranged < lo
        if counts[ABOVE]:
            masks[ABOVE] = ranged > hi
    return masks

"""Numeric rules in one parallel pass: count violations first, build masks only if any.

Clean data (the common case) costs one read of the column and no temporaries; a rule that
is broken gets its boolean mask computed afterwards, for the findings and the quarantine.
The same pass also sums the finite values (relative to a shift, for a stable variance),
so the drift profile of a column that lost no rows costs nothing more (``drift.py``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from fastprep.native.kernel_files import jit as njit
from fastprep.native.kernel_files import numba_cached, numba_loaded, prange
from fastprep.planning.planner import kernel_path, note_helper

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
    moments of ``values`` (int64 sources: too_big is exact, for any declared type).

    On Numba's kernels when the planner predicts they pay (loaded or cached, and a column
    long enough), else on numpy: the same counts and bit-identical moments."""
    int_source = values.dtype.kind == "i"
    if scan_path(len(values)) == "numba":
        shift = float(_first_finite(values))
        kernel = _parallel if len(values) >= PARALLEL_MIN else _serial
        counts, stats = kernel(
            values, float(lo), float(hi), integral, range_on_inf, int_source, shift, N_CHUNKS
        )
    else:
        started = time.perf_counter()
        shift = first_finite(values)
        counts, stats = scan_numpy(
            values, float(lo), float(hi), integral, range_on_inf, int_source, shift, N_CHUNKS
        )
        note_helper("scan", len(values), time.perf_counter() - started)
    return ColumnScan(
        counts.sum(axis=0), float(stats[:, LOW].min()), float(stats[:, HIGH].max()),
        len(values), int(stats[:, FINITE].sum()), shift,
        float(stats[:, TOTAL].sum()), float(stats[:, SQUARES].sum()),
    )  # fmt: skip


def scan_path(n_values: int) -> str:
    """``"numba"`` or ``"numpy"`` for a scan of ``n_values`` (see :func:`planner.kernel_path`)."""
    kernels = (_first_finite, _parallel if n_values >= PARALLEL_MIN else _serial)
    return kernel_path(
        "scan",
        n_values,
        cached=all(numba_cached(k) for k in kernels),
        loaded=all(numba_loaded(k) for k in kernels),
    )


def first_finite(values: np.ndarray) -> float:
    """The first finite value of ``values`` as float64 (0.0 if none): numpy's twin of
    ``_first_finite``."""
    if not len(values):
        return 0.0
    as_float = values.astype(np.float64, copy=False)
    finite = np.isfinite(as_float)
    first = int(np.argmax(finite))
    return float(as_float[first]) if finite[first] else 0.0


def scan_numpy(
    values: np.ndarray,
    lo: float,
    hi: float,
    integral: bool,
    range_on_inf: bool,
    int_source: bool,
    shift: float,
    n_chunks: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The kernels' per-chunk counts and statistics, by numpy (no compile): the same
    chunks, and sums accumulated in row order (``np.cumsum`` adds sequentially, like the
    kernel's loop), so the moments are bit-identical."""
    n = len(values)
    counts = np.zeros((n_chunks, 6), np.int64)
    stats = np.zeros((n_chunks, 5))
    size = (n + n_chunks - 1) // n_chunks
    with np.errstate(invalid="ignore"):
        v = values.astype(np.float64, copy=False)
        # every value finite (always so for integers): no masks of missing or infinite
        # values, and the chunks' values are used as they are (the common case, fewer passes)
        finite = None if int_source else np.isfinite(v)
        if finite is not None and finite.all():
            finite = None
        null = inf = None
        if finite is not None:
            null = np.isnan(v)
            inf = ~(finite | null)
        ranged = finite if finite is None or not range_on_inf else finite | inf
        # a bound at ±inf is never crossed (NaN compares False): no pass for it
        below = None if lo == -np.inf else _within(ranged, v < lo)
        above = None if hi == np.inf else _within(ranged, v > hi)
        if int_source:
            too_big = (values > EXACT_INT_I) | (values < -EXACT_INT_I)
            not_integer = None
        elif integral:
            too_big = _within(finite, np.abs(v) > EXACT_INT)
            not_integer = _within(finite, v != np.floor(v))
        else:
            too_big = not_integer = None
    for c in range(n_chunks):
        part = slice(min(n, c * size), min(n, c * size + size))
        for rule, mask in ((NULL, null), (INF, inf), (NOT_INTEGER, not_integer),
                           (TOO_BIG, too_big), (BELOW, below), (ABOVE, above)):  # fmt: skip
            if mask is not None:
                counts[c, rule] = np.count_nonzero(mask[part])
        present = v[part] if finite is None else v[part][finite[part]]
        stats[c, LOW], stats[c, HIGH] = (
            (present.min(), present.max()) if len(present) else (np.inf, -np.inf)
        )
        stats[c, FINITE] = len(present)
        stats[c, TOTAL], stats[c, SQUARES] = sequential_sums(present - shift)
    return counts, stats


def _within(mask: np.ndarray | None, test: np.ndarray) -> np.ndarray:
    """``test`` where ``mask`` holds (None: everywhere)."""
    return test if mask is None else mask & test


def sequential_sums(d: np.ndarray) -> tuple[float, float]:
    """``sum(d)`` and ``sum(d * d)`` added left to right from 0.0, as a loop
    ``total += d[i]`` does (``0.0 +`` gives the loop's +0.0 where every term is zero)."""
    if not len(d):
        return 0.0, 0.0
    with np.errstate(over="ignore", invalid="ignore"):  # (the kernel's error_model="numpy")
        return 0.0 + float(np.cumsum(d)[-1]), 0.0 + float(np.cumsum(d * d)[-1])


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

"""Numeric rules in one parallel pass: count violations first, build masks only if any.

Clean data (the common case) costs one read of the column and no temporaries; a rule that
is broken gets its boolean mask computed afterwards, for the findings and the quarantine.
The same pass also sums the finite values (relative to a shift, for a stable variance),
so the drift profile of a column that lost no rows costs nothing more (``drift.py``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from fastprep.native import threads
from fastprep.native.kernel_files import jit as njit
from fastprep.native.kernel_files import numba_cached, numba_loaded
from fastprep.planning.planner import kernel_path, note_helper

NULL, INF, NOT_INTEGER, TOO_BIG, BELOW, ABOVE = range(6)
#: the kernels' counts have one more column: the finite values
FINITE = 6
EXACT_INT = 2.0**53
#: the same bound as an integer: int64 sources are compared exactly, never via float64
EXACT_INT_I = 2**53
#: fixed chunk count: sums merge in chunk order, so results do not depend on threads
N_CHUNKS = 64
#: chunks one kernel call (a *task*) reads side by side, each with its own sums and
#: extremes, so an add never waits for the previous row's: one running sum per column was
#: bound by the add's latency (~5 ns a value). The counts are per task (integers: the
#: order they are added in does not matter), which keeps the live values in registers.
LANES = 4
#: below this many values the chunks run on the calling thread (waking threads costs more)
PARALLEL_MIN = 1 << 19
#: numpy's twin sums chunks of up to this many rows in one call, longer ones one by one
SHORT_CHUNK = 4096
#: per-chunk statistics: smallest, largest (finite), shifted sum, squares
LOW, HIGH, TOTAL, SQUARES = range(4)


@njit(cache=True, error_model="numpy")
def _step(x, lo, hi, integral, range_on_inf, int_source, shift, k, f):  # pragma: no cover
    """One value into a task's counts ``k`` and its chunk's (smallest, largest, total,
    squares) ``f``, without a branch on the value: a missing or infinite value adds 0.0 to
    the sums (the same bits as skipping it: a sum that starts at +0.0 is never -0.0)."""
    nulls, infs, not_integer, too_big, below, above, finite = k
    smallest, largest, total, squares = f
    v = np.float64(x)
    present = v == v
    fin = abs(v) < np.inf
    ranged = fin | (range_on_inf & present)
    d = v - shift if fin else 0.0
    low = v if fin else np.inf  # selects, not min(): Numba's min() tests for NaN first
    high = v if fin else -np.inf
    if int_source:  # exact: 2**53 + 1 is not rounded first
        too_big += (x > EXACT_INT_I) | (x < -EXACT_INT_I)
    elif integral:
        not_integer += fin & (v != np.floor(v))
        too_big += fin & (abs(v) > EXACT_INT)
    counts = (
        nulls + (not present), infs, not_integer, too_big,
        below + (ranged & (v < lo)), above + (ranged & (v > hi)), finite + fin,
    )  # fmt: skip
    stats = (
        low if low < smallest else smallest, high if high > largest else largest,
        total + d, squares + d * d,
    )  # fmt: skip
    return counts, stats


@njit(cache=True, inline="always")
def _store(f, stats, c):  # pragma: no cover - compiled
    stats[c, LOW] = f[0]
    stats[c, HIGH] = f[1]
    stats[c, TOTAL] = f[2]
    stats[c, SQUARES] = f[3]


@njit(cache=True, inline="always")
def _bounds(n, size, c):  # pragma: no cover - compiled
    start = min(n, c * size)
    return start, min(n, start + size)


@njit(cache=True, inline="always", error_model="numpy")
def _lanes(
    values, task, size, lo, hi, integral, range_on_inf, int_source, shift, counts, stats
):  # pragma: no cover
    """:func:`_scan_task`'s loops (inlined: where its arguments are constants, the code
    for what they turn off is left out)."""
    n = values.shape[0]
    first = task * LANES
    b0, e0 = _bounds(n, size, first)
    b1, e1 = _bounds(n, size, first + 1)
    b2, e2 = _bounds(n, size, first + 2)
    b3, e3 = _bounds(n, size, first + 3)
    k = (0, 0, 0, 0, 0, 0, 0)
    f0 = f1 = f2 = f3 = (np.inf, -np.inf, 0.0, 0.0)
    common = e3 - b3  # every lane has at least the last one's rows
    # unsigned indices: a signed one is tested for a negative value at every access
    u0, u1, u2, u3 = np.uint64(b0), np.uint64(b1), np.uint64(b2), np.uint64(b3)
    for j in range(common):
        i = np.uint64(j)
        k, f0 = _step(values[u0 + i], lo, hi, integral, range_on_inf, int_source, shift, k, f0)
        k, f1 = _step(values[u1 + i], lo, hi, integral, range_on_inf, int_source, shift, k, f1)
        k, f2 = _step(values[u2 + i], lo, hi, integral, range_on_inf, int_source, shift, k, f2)
        k, f3 = _step(values[u3 + i], lo, hi, integral, range_on_inf, int_source, shift, k, f3)
    for i in range(b0 + common, e0):
        k, f0 = _step(values[i], lo, hi, integral, range_on_inf, int_source, shift, k, f0)
    for i in range(b1 + common, e1):
        k, f1 = _step(values[i], lo, hi, integral, range_on_inf, int_source, shift, k, f1)
    for i in range(b2 + common, e2):
        k, f2 = _step(values[i], lo, hi, integral, range_on_inf, int_source, shift, k, f2)
    for r in range(7):
        counts[task, r] = k[r]
    # neither missing nor finite: infinite. Not counted in the loop: one add fewer on the
    # counts the four lanes share ran the float loop ~20% faster
    rows = (e0 - b0) + (e1 - b1) + (e2 - b2) + (e3 - b3)
    counts[task, INF] = rows - k[NULL] - k[FINITE]
    _store(f0, stats, first)
    _store(f1, stats, first + 1)
    _store(f2, stats, first + 2)
    _store(f3, stats, first + 3)


#: the largest distance from the shift whose square is still exact in float64 (2**53)
EXACT_ROOT = 94906265


@njit(cache=True, inline="always")
def _int_chunk(values, b, e, lo, hi, bounded, shift):  # pragma: no cover - compiled
    """Rows ``b:e`` of an int64 column: smallest, largest, sums of ``x - shift`` and of
    its square in int64 (wrapping: the caller checks they are exact), and the rows below
    ``lo`` / above ``hi`` compared as float64 (as the float loop does). Integer extremes
    and sums do not depend on the order they are taken in, so the loop is vectorized."""
    smallest = np.int64(9223372036854775807)
    largest = np.int64(-9223372036854775807) - np.int64(1)
    total = np.int64(0)
    squares = np.int64(0)
    below = np.int64(0)
    above = np.int64(0)
    if bounded:
        for i in range(np.uint64(b), np.uint64(e)):  # unsigned: no negative-index test
            x = values[i]
            smallest = x if x < smallest else smallest
            largest = x if x > largest else largest
            d = x - shift
            total += d
            squares += d * d
            v = np.float64(x)
            below += v < lo
            above += v > hi
    else:
        for i in range(np.uint64(b), np.uint64(e)):
            x = values[i]
            smallest = x if x < smallest else smallest
            largest = x if x > largest else largest
            d = x - shift
            total += d
            squares += d * d
    return smallest, largest, total, squares, below, above


@njit(cache=True, nogil=True, error_model="numpy")
def _int_task(values, task, size, lo, hi, shift, counts, stats):  # pragma: no cover
    """:func:`_lanes` of an int64 column by integer arithmetic, when every value and
    partial sum is an integer float64 holds exactly (each value and the shift within
    2**53, a chunk's rows times its largest squared distance from the shift within
    2**53): then the float loop's sums, added in any order, are these exact sums, bit
    for bit. Returns False, having stored nothing it would keep, when they are not."""
    if not (-EXACT_INT <= shift <= EXACT_INT):
        return False
    s = np.int64(shift)
    n = values.shape[0]
    bounded = lo != -np.inf or hi != np.inf
    below, above, rows = 0, 0, 0
    for c in range(task * LANES, task * LANES + LANES):
        b, e = _bounds(n, size, c)
        if e <= b:
            stats[c, LOW], stats[c, HIGH], stats[c, TOTAL], stats[c, SQUARES] = (
                np.inf, -np.inf, 0.0, 0.0)  # fmt: skip
            continue
        smallest, largest, total, squares, low, high = _int_chunk(values, b, e, lo, hi,
                                                                  bounded, s)  # fmt: skip
        if smallest < -EXACT_INT_I or largest > EXACT_INT_I:
            return False
        far = max(largest - s, s - smallest)
        if far > EXACT_ROOT or far * far > EXACT_INT_I // (e - b):
            return False
        stats[c, LOW], stats[c, HIGH] = np.float64(smallest), np.float64(largest)
        stats[c, TOTAL], stats[c, SQUARES] = np.float64(total), np.float64(squares)
        below += low
        above += high
        rows += e - b
    counts[task, NULL], counts[task, INF], counts[task, NOT_INTEGER] = 0, 0, 0
    counts[task, TOO_BIG], counts[task, BELOW], counts[task, ABOVE] = 0, below, above
    counts[task, FINITE] = rows
    return True


@njit(cache=True, nogil=True, error_model="numpy")
def _scan_task(
    values, task, size, lo, hi, integral, range_on_inf, int_source, shift, counts, stats
):  # pragma: no cover
    """Task ``task``: its ``LANES`` chunks (``size`` rows each, the last cut at the
    column's end) read side by side, each row by row; its counts into ``counts[task]``,
    each chunk's statistics into ``stats[chunk]``.

    Float rules run copies of the loop compiled with the rules they do not use as
    constants, without their work: with no bound (a plain ``Float()``) 2x, with bounds
    1.4x faster than the loop that tests every rule's flag on every value. An int64
    column of a moderate range takes the integer loop (:func:`_int_task`)."""
    if int_source and _int_task(values, task, size, lo, hi, shift, counts, stats):
        return
    if not (integral or int_source) and lo == -np.inf and hi == np.inf:
        _lanes(values, task, size, -np.inf, np.inf, False, False, False, shift, counts, stats)
    elif not (integral or int_source or range_on_inf):
        _lanes(values, task, size, lo, hi, False, False, False, shift, counts, stats)
    else:
        _lanes(values, task, size, lo, hi, integral, range_on_inf, int_source, shift,
               counts, stats)  # fmt: skip


@njit(cache=True, nogil=True, error_model="numpy")
def _serial(
    values, lo, hi, integral, range_on_inf, int_source, shift, n_chunks
):  # pragma: no cover
    """Every task on the calling thread: per-task counts, per-chunk statistics."""
    n = values.shape[0]
    counts = np.zeros((n_chunks // LANES, 7), np.int64)
    stats = np.zeros((n_chunks, 4))
    size = (n + n_chunks - 1) // n_chunks
    for task in range(n_chunks // LANES):
        _scan_task(values, task, size, lo, hi, integral, range_on_inf, int_source, shift,
                   counts, stats)  # fmt: skip
    return counts, stats


def _parallel(
    values: np.ndarray, lo: float, hi: float, integral: bool, range_on_inf: bool,
    int_source: bool, shift: float, n_chunks: int,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """:func:`_serial`'s tasks on the process's thread pool."""
    n = len(values)
    counts = np.zeros((n_chunks // LANES, 7), np.int64)
    stats = np.zeros((n_chunks, 4))
    size = (n + n_chunks - 1) // n_chunks
    threads.map_all(
        lambda task: _scan_task(values, task, size, lo, hi, integral, range_on_inf,
                                int_source, shift, counts, stats),
        range(n_chunks // LANES),
    )  # fmt: skip
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
    return column_scan(counts, stats, len(values), shift)


def column_scan(counts: np.ndarray, stats: np.ndarray, n: int, shift: float) -> ColumnScan:
    """The column's scan from its tasks' counts and its chunks' statistics."""
    totals = counts.sum(axis=0)
    return ColumnScan(
        totals[:FINITE], float(stats[:, LOW].min()), float(stats[:, HIGH].max()),
        n, int(totals[FINITE]), shift,
        float(stats[:, TOTAL].sum()), float(stats[:, SQUARES].sum()),
    )  # fmt: skip


def scan_path(n_values: int, extra: tuple = ()) -> str:
    """``"numba"`` or ``"numpy"`` for a scan of ``n_values`` (see :func:`planner.kernel_path`);
    ``extra``: more kernels the caller runs with it."""
    kernels = (_first_finite, _scan_task if n_values >= PARALLEL_MIN else _serial, *extra)
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
    """The kernels' per-task counts and per-chunk statistics, by numpy (no compile): the
    full chunks as the rows of one 2-D view (a count or an extreme is one call over all
    of them), and each chunk's finite values summed in row order (``np.cumsum`` adds
    sequentially, like the kernel's loop, which adds 0.0 for the others: the same bits),
    so the moments are bit-identical."""
    n = len(values)
    counts = np.zeros((n_chunks // LANES, 7), np.int64)
    stats = np.zeros((n_chunks, 4))
    stats[:, LOW], stats[:, HIGH] = np.inf, -np.inf
    if n == 0:
        return counts, stats
    size = (n + n_chunks - 1) // n_chunks
    full = n // size  # chunks of ``size`` rows; then one shorter chunk (if any), then none

    def per_chunk(a: np.ndarray, reduce: Any, out: np.ndarray) -> None:
        out[:full] = reduce(a[: full * size].reshape(full, size), axis=1)
        if full * size < n:
            out[full] = reduce(a[full * size :][None, :], axis=1)[0]

    with np.errstate(invalid="ignore", over="ignore"):
        v = values.astype(np.float64, copy=False)
        finite = np.isfinite(v)
        null = np.isnan(v)
        ranged = ~null if range_on_inf else finite
        masks = {NULL: null, FINITE: finite}
        if lo != -np.inf:  # a bound at ±inf is never crossed: no pass for it
            masks[BELOW] = ranged & (v < lo)
        if hi != np.inf:
            masks[ABOVE] = ranged & (v > hi)
        if int_source:
            masks[TOO_BIG] = (values > EXACT_INT_I) | (values < -EXACT_INT_I)
        elif integral:
            masks[TOO_BIG] = finite & (np.abs(v) > EXACT_INT)
            masks[NOT_INTEGER] = finite & (v != np.floor(v))
        per = np.zeros(n_chunks, np.int64)
        rows = np.clip(n - np.arange(n_chunks) * size, 0, size)
        by_chunk = {}
        for rule, mask in masks.items():
            per[:] = 0
            per_chunk(mask, np.count_nonzero, per)
            by_chunk[rule] = per.copy()
        by_chunk[INF] = rows - by_chunk[NULL] - by_chunk[FINITE]  # neither missing nor finite
        for rule, per in by_chunk.items():  # per task: its LANES chunks together
            counts[:, rule] = per.reshape(-1, LANES).sum(axis=1)
        if not by_chunk[INF].any():  # the common case: fmin/fmax skip the missing values
            per_chunk(v, np.fmin.reduce, stats[:, LOW])
            per_chunk(v, np.fmax.reduce, stats[:, HIGH])
            empty = by_chunk[FINITE] == 0  # all missing: fmin gave NaN
            stats[empty, LOW], stats[empty, HIGH] = np.inf, -np.inf
        else:
            per_chunk(np.where(finite, v, np.inf), np.minimum.reduce, stats[:, LOW])
            per_chunk(np.where(finite, v, -np.inf), np.maximum.reduce, stats[:, HIGH])
        every = by_chunk[FINITE].sum() == n
        if size <= SHORT_CHUNK:  # one call over all chunks (accumulate adds in order too)
            d = v - shift if every else np.where(finite, v - shift, 0.0)
            last = lambda a, axis: np.add.accumulate(a, axis=axis)[:, -1]  # noqa: E731
            per_chunk(d, last, stats[:, TOTAL])
            per_chunk(d * d, last, stats[:, SQUARES])
            stats[:, TOTAL] += 0.0  # +0.0 for a sum of -0.0 terms, as the loop's
            stats[:, SQUARES] += 0.0
        else:  # a contiguous cumsum per chunk: accumulating a 2-D view row by row is slow
            for c in range(n_chunks):
                part = slice(min(n, c * size), min(n, c * size + size))
                present = v[part] if every else v[part][finite[part]]
                stats[c, TOTAL], stats[c, SQUARES] = sequential_sums(present - shift)
    return counts, stats


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

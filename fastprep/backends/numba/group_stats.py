"""Numba twin of :func:`fastprep.backends.reference.group_stats.group_statistics`: the
statistics of a column per group: count, min, max and the exact sums behind the mean and
std in one compiled scatter pass (:func:`fastprep.backends.moments.compiled_group_moments`:
the numpy twin's integers, so the same bits), and exact medians by a counting sort of the present values into per-group segments and a selection
(quickselect) in each: no sort of all rows by (group, value), which is what the numpy
twin pays ``O(n log n)`` for. Every kernel is a serial pass: memory-bound loops that two
cores speed up little, and a serial kernel compiles in a fraction of a parallel one's time.
"""

from __future__ import annotations

import numpy as np

from fastprep.backends import moments
from fastprep.backends.base import FeatureParams
from fastprep.backends.reference import backend as reference
from fastprep.backends.reference import group_stats as reference_group_stats
from fastprep.backends.reference.group_stats import GroupKernels
from fastprep.data.columns import Table
from fastprep.emit.sink import OutputSink
from fastprep.native.kernel_files import jit, numba_cached, numba_loaded
from fastprep.plan.nodes import Feature, LogicalPlan


@jit(cache=True, nogil=True)
def _moments(index, values, n_groups):  # pragma: no cover - compiled
    count = np.zeros(n_groups, np.int64)
    total = np.zeros(n_groups)
    low = np.full(n_groups, np.inf)
    high = np.full(n_groups, -np.inf)
    for i in range(len(index)):
        x = values[i]
        if x == x:
            g = index[i]
            count[g] += 1
            total[g] += x
            if x < low[g]:
                low[g] = x
            if x > high[g]:
                high[g] = x
    mean = np.full(n_groups, np.nan)
    for g in range(n_groups):
        if count[g] > 0:
            mean[g] = total[g] / count[g]
    shift = np.zeros(n_groups)
    m2 = np.zeros(n_groups)
    for i in range(len(index)):
        x = values[i]
        if x == x:
            g = index[i]
            d = x - mean[g]
            shift[g] += d
            m2[g] += d * d
    for g in range(n_groups):
        if count[g] > 0:
            correction = shift[g] / count[g]
            mean[g] += correction
            m2[g] = max(m2[g] - correction * correction * count[g], 0.0)
    return count, mean, m2, low, high


@jit(cache=True, nogil=True)
def _medians(index, values, count):  # pragma: no cover - compiled
    n_groups = len(count)
    start = np.zeros(n_groups + 1, np.int64)
    for g in range(n_groups):
        start[g + 1] = start[g] + count[g]
    ordered = np.empty(start[n_groups])
    fill = start[:n_groups].copy()
    for i in range(len(index)):
        x = values[i]
        if x == x:
            g = index[i]
            ordered[fill[g]] = x
            fill[g] += 1
    out = np.full(n_groups, np.nan)
    for g in range(n_groups):
        c = count[g]
        if c == 0:
            continue
        lo = start[g]
        k = lo + c // 2
        upper = _select(ordered, lo, lo + c, k)
        if c % 2 == 1:
            out[g] = upper
        else:  # the other middle value: the largest of those selected below it
            out[g] = (ordered[lo:k].max() + upper) / 2
    return out


@jit(cache=True, nogil=True)
def _select(a, lo, hi, k):  # pragma: no cover - compiled
    """The value of rank ``k`` within ``a[lo:hi]``, selected in place (Hoare's quickselect,
    median-of-three pivot): ``a[lo:k]`` holds values <= it afterwards."""
    while hi - lo > 2:
        mid = (lo + hi - 1) // 2
        x, y, z = a[lo], a[mid], a[hi - 1]
        pivot = max(min(x, y), min(max(x, y), z))
        i, j = lo, hi - 1
        while i <= j:
            while a[i] < pivot:
                i += 1
            while a[j] > pivot:
                j -= 1
            if i <= j:
                a[i], a[j] = a[j], a[i]
                i += 1
                j -= 1
        if k <= j:
            hi = j + 1
        elif k >= i:
            lo = i
        else:
            return a[k]
    if hi - lo == 2 and a[lo] > a[lo + 1]:
        a[lo], a[lo + 1] = a[lo + 1], a[lo]
    return a[k]


@jit(cache=True, nogil=True)
def _accumulate(combined, codes, lut, size, first):  # pragma: no cover - compiled
    for i in range(len(codes)):
        code = lut[codes[i]]  # code -1 reads the last slot (missing)
        if first:
            combined[i] = code
        elif code < 0 or combined[i] < 0:
            combined[i] = -1
        else:
            combined[i] = combined[i] * size + code


@jit(cache=True, nogil=True)
def _accumulate_codes(combined, codes, size, first):  # pragma: no cover - compiled
    for i in range(len(codes)):
        code = codes[i]
        if first:
            combined[i] = code
        elif code < 0 or combined[i] < 0:
            combined[i] = -1
        else:
            combined[i] = combined[i] * size + code


@jit(cache=True, nogil=True)
def _take(lookup, combined, out):  # pragma: no cover - compiled
    last = len(lookup) - 1
    for i in range(len(combined)):
        c = combined[i]
        out[i] = lookup[last if c < 0 else c]


def accumulate(
    combined: np.ndarray | None, codes: np.ndarray, lut: np.ndarray | None, size: int
) -> np.ndarray:
    """The numpy twin's ``combined * size + code`` in one pass per key."""
    first = combined is None
    out = np.empty(len(codes), np.int64) if combined is None else combined
    if lut is None:
        _accumulate_codes(out, np.ascontiguousarray(codes, np.int64), size, first)
    else:
        _accumulate(out, codes, lut, size, first)
    return out


def take(lookup: np.ndarray, combined: np.ndarray) -> np.ndarray:
    out = np.empty(len(combined), np.int64)
    _take(lookup, combined, out)
    return out


@jit(cache=True, nogil=True)
def _put_rows(out, per_group, index):  # pragma: no cover - compiled
    last = per_group.shape[0] - 1
    width = per_group.shape[1]
    for i in range(len(index)):
        g = index[i]
        if g < 0:
            g = last
        for j in range(width):
            out[i, j] = per_group[g, j]


def put_rows(out: np.ndarray, per_group: np.ndarray, index: np.ndarray) -> None:
    """``out[i] = per_group[index[i]]`` (index -1: the last row) row by row, in place: no
    temporary (n, width) array as numpy's gather-then-copy makes."""
    _put_rows(out, per_group, np.ascontiguousarray(index, dtype=np.int64))


def group_statistics(
    index: np.ndarray, values: np.ndarray, n_groups: int, stats: tuple[str, ...]
) -> dict[str, np.ndarray]:
    """Each statistic per group, as the numpy twin gives it (NaN where a group has no
    present value; count 0)."""
    index = np.ascontiguousarray(index, dtype=np.int64)
    values = np.ascontiguousarray(values, dtype=np.float64)
    exact: dict[str, np.ndarray] = {}
    if "mean" in stats or "std" in stats:
        found, low, high = moments_and_extremes(index, values, n_groups)
        count = found.count
        exact = reference_group_stats.exact_statistics(found)
    else:
        count, _, _, low, high = _moments(index, values, n_groups)
    empty = count == 0
    out = {
        "count": count.astype(np.float64),
        **exact,
        "min": np.where(empty, np.nan, low),
        "max": np.where(empty, np.nan, high),
    }
    if "median" in stats:
        out["median"] = _medians(index, values, count)
    return {s: out[s] for s in stats}


def moments_and_extremes(
    index: np.ndarray, values: np.ndarray, n_groups: int
) -> tuple[moments.GroupMoments, np.ndarray, np.ndarray]:
    """Per group: the exact moments, the min and the max in one compiled pass (the numpy
    twin's integers; its pass where the compiled one declines)."""
    found = moments.compiled_group_moments(index, values, n_groups)
    if found is not None:
        return found
    _, _, _, low, high = _moments(index, values, n_groups)
    return moments.group_moments(index, values, n_groups), low, high


@jit(cache=True, nogil=True)
def _number_codes(values, levels, out):  # pragma: no cover - compiled
    n = len(levels)
    whole = n > 0 and levels[n - 1] - levels[0] < 1 << 22
    whole = whole and levels[0] > -(2.0**52) and levels[n - 1] < 2.0**52  # exact as int64
    for v in levels:
        whole = whole and v == np.floor(v)
    low = int(levels[0]) if whole else 0
    table = np.full(int(levels[n - 1]) - low + 1 if whole else 0, -1, np.int64)
    for j in range(n if whole else 0):
        table[int(levels[j]) - low] = j
    for i in range(len(values)):
        v = values[i]
        if v != v:
            out[i] = n
        elif whole:
            if v < levels[0] or v > levels[n - 1] or v != np.floor(v):
                out[i] = -1
            else:
                out[i] = table[int(v) - low]
        else:
            j = np.searchsorted(levels, v)
            out[i] = j if j < n and levels[j] == v else -1


def number_codes(values: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """The numpy twin's codes of a numeric key in one pass (a table over the levels' range
    when they are whole numbers close together, else a binary search per value)."""
    out = np.empty(len(values), np.int64)
    _number_codes(np.ascontiguousarray(values, np.float64), levels, out)
    return out


NUMBA = GroupKernels(
    accumulate, take, group_statistics, put_rows, number_codes, moments_and_extremes
)


#: the kernels every GroupStats fit and transform runs (medians and numeric keys: when asked)
_KERNELS = (_moments, _accumulate, _take, _put_rows)


def readiness() -> str:
    """Loaded in this process, in Numba's disk cache, or to be compiled (``planner``'s
    states; found without importing Numba)."""
    from fastprep.planning import planner

    if all(numba_loaded(k) for k in _KERNELS):
        return planner.READY
    if all(numba_cached(k) for k in _KERNELS):
        return planner.CACHED
    return planner.COMPILE


def fit_feature(plan: LogicalPlan, index: int, table: Table) -> FeatureParams:
    """A ``GroupStats`` feature's fit (the table entry): the reference's, on these kernels."""
    return reference.fit_feature(plan.features[index], table, kernels=NUMBA)


def encode_feature(
    feature: Feature, fitted: FeatureParams, table: Table, sink: OutputSink, index: int,
    log: reference.Repairs,
) -> bool:  # fmt: skip
    """A ``GroupStats`` feature into X (the table entry); whether its values are finite."""
    return reference.group_rows(feature, fitted, table, sink.numeric_view(index), log, NUMBA)

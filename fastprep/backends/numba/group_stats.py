"""Numba twin of :func:`fastprep.backends.reference.group_stats.group_statistics`: the
statistics of a column per group: count, min, max and the exact sums behind the mean and
std by compiled passes (:func:`fastprep.backends.group_moments.compiled_group_moments`: a count,
a counting sort of the present values into per-group segments, exact sums per segment:
the numpy twin's integers, so the same bits), and exact medians by a selection
(quickselect) in each of those segments: no sort of all rows by (group, value), which is
what the numpy twin pays ``O(n log n)`` for. The per-row kernels run on row ranges and the
per-group ones on ranges of groups, on the pool's threads.

The rows' group codes (keys combined, number keys' levels) are
:mod:`fastprep.backends.numba.group_keys`'s, the join of the statistics back onto the rows
:mod:`fastprep.backends.numba.group_rows`'s; :data:`NUMBA` is the table of all three.
"""

from __future__ import annotations

import numpy as np

from fastprep.backends import group_moments, moments
from fastprep.backends.base import FeatureParams
from fastprep.backends.numba import group_keys, group_rows
from fastprep.backends.reference import backend as reference
from fastprep.backends.reference import group_stats as reference_group_stats
from fastprep.backends.reference.group_stats import GroupKernels
from fastprep.data.columns import Table
from fastprep.emit.sink import OutputSink
from fastprep.native import threads
from fastprep.native.kernel_files import intrinsic, jit, numba_cached, numba_loaded
from fastprep.plan.nodes import Feature, LogicalPlan

#: an unsigned index, a signed code's -1 reading the last slot (no negative-index test)
slot = intrinsic("fastprep.native.indexing", "slot")


@jit(cache=True, nogil=True)
def _moments(index, values, n_groups):  # pragma: no cover - compiled
    count = np.zeros(n_groups, np.int64)
    total = np.zeros(n_groups)
    low = np.full(n_groups, np.inf)
    high = np.full(n_groups, -np.inf)
    last = np.uint64(n_groups - 1)  # -1 (a code of no group): the last, as before
    for i in range(np.uint64(len(index))):
        x = values[i]
        if x == x:
            g = slot(index[i], last)  # unsigned: no negative-index test per access
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
    for i in range(np.uint64(len(index))):
        x = values[i]
        if x == x:
            g = slot(index[i], last)
            d = x - mean[g]
            shift[g] += d
            m2[g] += d * d
    for g in range(n_groups):
        if count[g] > 0:
            correction = shift[g] / count[g]
            mean[g] += correction
            m2[g] = max(m2[g] - correction * correction * count[g], 0.0)
    return count, mean, m2, low, high


#: the present values laid out by group (a counting sort on row ranges)
segments = group_moments.segments


@jit(cache=True, nogil=True)
def _medians(ordered, start, g0, g1, out):  # pragma: no cover - compiled
    """``out[g]`` = the median of segment g, for groups ``g0:g1`` (selected in place)."""
    sample = np.empty(_SAMPLE)
    for g in range(g0, g1):
        lo = start[g]
        c = start[g + 1] - lo
        if c == 0:
            out[g] = np.nan
            continue
        k = lo + c // 2
        low, high = _narrow(ordered, lo, lo + c, k, sample)
        upper = _select(ordered, low, high, k)
        if c % 2 == 1:
            out[g] = upper
        elif k > low:  # the other middle value: the largest selected below it
            out[g] = (ordered[low:k].max() + upper) / 2
        else:  # below the narrowed range: every value there is smaller
            out[g] = (ordered[lo:k].max() + upper) / 2


#: values sampled to choose the two pivots of :func:`_narrow`, and the sample ranks
#: each pivot stands from the target's
_SAMPLE = 64
_SPREAD = 6
#: ... for up to 8,192 values (the sample's sort is then a share of the work)
_SMALL_SAMPLE = 16
_SMALL_SPREAD = 3


@jit(cache=True, nogil=True)
def _narrow(a, lo, hi, k, sample):  # pragma: no cover - compiled
    """A range ``[low, high)`` of ``a[lo:hi]``, reordered in place, that holds rank ``k``:
    every value before it is <= each in it, and each in it <= every value after it.
    Two pivots bracketing the rank in an evenly spaced sample split the values in
    about 1.5 passes into a range a fifth as long (Floyd and Rivest's selection), where
    quickselect's halving would take about 3."""
    while hi - lo > 16 * _SMALL_SAMPLE:
        n = hi - lo
        size, spread = (_SAMPLE, _SPREAD) if n > 8192 else (_SMALL_SAMPLE, _SMALL_SPREAD)
        for i in range(size):
            sample[i] = a[lo + (i * n) // size]
        sample[:size].sort()
        r = ((k - lo) * size) // n
        p1 = sample[max(r - spread, 0)]
        p2 = sample[min(r + spread, size - 1)]
        j = _below(a, lo, hi, p1, False)  # the values < p1 first
        if k < j:
            hi = j
            continue
        j2 = _below(a, j, hi, p2, True)  # then those <= p2
        if k >= j2:
            lo = j2
            continue
        if p1 == p2 or (j == lo and j2 == hi):  # all equal, or no progress
            return j, j2
        lo, hi = j, j2
    return lo, hi


@jit(cache=True, inline="always")
def _below(a, lo, hi, p, or_equal):  # pragma: no cover - compiled
    """``a[lo:hi]`` reordered with the values < p (``or_equal``: <= p) first; returns
    where they end. Branch-free (every element swapped, the boundary advanced by the
    comparison): the branchy partition's mispredictions on unordered data cost 2x."""
    # unsigned indices: a signed one is tested for a negative value at each access
    j = np.uint64(lo)
    for i in range(np.uint64(lo), np.uint64(hi)):
        x = a[i]
        a[i] = a[j]
        a[j] = x
        j += np.uint64((x <= p) if or_equal else (x < p))
    return np.int64(j)


@jit(cache=True, nogil=True)
def _select(a, lo, hi, k):  # pragma: no cover - compiled
    """The value of rank ``k`` within ``a[lo:hi]``, selected in place (quickselect,
    median-of-three pivot, a three-way split so that many equal values end it at once):
    ``a[lo:k]`` holds values <= it afterwards."""
    while hi - lo > 16:
        mid = (lo + hi - 1) // 2
        x, y, z = a[lo], a[mid], a[hi - 1]
        pivot = max(min(x, y), min(max(x, y), z))
        j = _below(a, lo, hi, pivot, False)
        if k < j:
            hi = j
            continue
        equal_end = _below(a, j, hi, pivot, True)
        if k < equal_end:
            return pivot
        lo = equal_end
    for i in range(lo + 1, hi):  # insertion sort of the last few
        x = a[i]
        j = i - 1
        while j >= lo and a[j] > x:
            a[j + 1] = a[j]
            j -= 1
        a[j + 1] = x
    return a[k]


def medians(ordered: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Each segment's median; the groups cut into one range of about equal values per
    thread (selection is compute-bound: the two cores halve it)."""
    out = np.empty(len(start) - 1)
    threads.map_all(lambda r: _medians(ordered, start, r[0], r[1], out),
                    group_moments.segment_ranges(start))  # fmt: skip
    return out


def group_statistics(
    index: np.ndarray, values: np.ndarray, n_groups: int, stats: tuple[str, ...],
    lut: np.ndarray | None = None,
) -> dict[str, np.ndarray]:  # fmt: skip
    """Each statistic per group, as the numpy twin gives it (NaN where a group has no
    present value; count 0). ``lut``: row i's group is ``lut[index[i]]``."""
    values = np.ascontiguousarray(values, dtype=np.float64)
    exact: dict[str, np.ndarray] = {}
    median = np.full(n_groups, np.nan)
    selected = []  # the median's selection, run by the moments' passes if they complete

    def select(ordered: np.ndarray, start: np.ndarray, g0: int, g1: int) -> None:
        _medians(ordered, start, g0, g1, median)
        selected.append(g1 - g0)

    if "mean" in stats or "std" in stats:
        then = select if "median" in stats else None
        found, low, high = moments_and_extremes(index, values, n_groups, then, lut)
        count = found.count
        exact = reference_group_stats.exact_statistics(found)
    else:
        rows = np.ascontiguousarray(index, np.int64) if lut is None else group_rows.take(lut, index)
        count, _, _, low, high = _moments(rows, values, n_groups)
    empty = count == 0
    out = {
        "count": count.astype(np.float64),
        **exact,
        "min": np.where(empty, np.nan, low),
        "max": np.where(empty, np.nan, high),
    }
    if "median" in stats:
        if sum(selected) < n_groups:  # the moments took numpy's pass: a layout of its own
            start = np.zeros(n_groups + 1, np.int64)
            np.cumsum(count, out=start[1:])
            median = medians(segments(index, values, start, None, lut), start)
        out["median"] = median
    return {s: out[s] for s in stats}


def moments_and_extremes(
    index: np.ndarray, values: np.ndarray, n_groups: int,
    then: group_moments.SegmentWork | None = None, lut: np.ndarray | None = None,
) -> tuple[moments.GroupMoments, np.ndarray, np.ndarray]:  # fmt: skip
    """Per group: the exact moments, the min and the max by compiled passes (the numpy
    twin's integers; its pass where the compiled one declines); ``then``, ``lut``: see
    :func:`group_moments.compiled_group_moments`."""
    found = group_moments.compiled_group_moments(index, values, n_groups, then, lut)
    if found is not None:
        return found
    if lut is not None:
        index = group_rows.take(lut, index)
    _, _, _, low, high = _moments(index, values, n_groups)
    return moments.group_moments(index, values, n_groups), low, high


NUMBA = GroupKernels(
    group_keys.accumulate, group_rows.take, group_statistics, group_rows.put_rows,
    group_keys.number_codes, moments_and_extremes, group_keys.number_levels,
    group_keys.present, group_keys.combine_texts, group_rows.put_rows_texts,
    group_keys.number_levels_codes, group_keys.number_key_codes, group_keys.combine_present,
)  # fmt: skip


#: the kernels a GroupStats fit and transform run (the exact moments' pass, medians, several
#: keys combined; numeric keys and a fit without mean or std run others too)
_KERNELS = (*group_moments.GROUP_KERNELS, _medians, *group_keys.KERNELS, *group_rows.KERNELS)


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

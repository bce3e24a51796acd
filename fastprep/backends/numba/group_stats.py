"""Numba twin of :func:`fastprep.backends.reference.group_stats.group_statistics`: the
statistics of a column per group: count, min, max and the exact sums behind the mean and
std by compiled passes (:func:`fastprep.backends.group_moments.compiled_group_moments`: a count,
a counting sort of the present values into per-group segments, exact sums per segment:
the numpy twin's integers, so the same bits), and exact medians by a selection
(quickselect) in each of those segments: no sort of all rows by (group, value), which is
what the numpy twin pays ``O(n log n)`` for. The per-row kernels run on row ranges and the
per-group ones on ranges of groups, on the pool's threads.
"""

from __future__ import annotations

import numpy as np

from fastprep.backends import group_moments, moments
from fastprep.backends.base import FeatureParams
from fastprep.backends.reference import backend as reference
from fastprep.backends.reference import group_stats as reference_group_stats
from fastprep.backends.reference.group_stats import GroupKernels
from fastprep.data.columns import Table
from fastprep.emit.sink import OutputSink
from fastprep.native import threads
from fastprep.native.arena import ARENA
from fastprep.native.kernel_files import intrinsic, jit, numba_cached, numba_loaded
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
    j = lo
    for i in range(lo, hi):
        x = a[i]
        a[i] = a[j]
        a[j] = x
        j += (x <= p) if or_equal else (x < p)
    return j


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


stream_store = intrinsic("fastprep.native.streaming", "stream_store")
store_fence = intrinsic("fastprep.native.streaming", "store_fence")


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
    # retained pages (fastprep.native.arena): a fresh per-row int64 array's first touch
    # cost more than the pass that fills it
    out = ARENA.empty(len(codes), np.int64) if combined is None else combined
    if lut is None:
        codes = np.ascontiguousarray(codes, np.int64)
        kernel = lambda r: _accumulate_codes(out[r[0] : r[1]], codes[r[0] : r[1]], size, first)  # noqa: E731
    else:
        kernel = lambda r: _accumulate(out[r[0] : r[1]], codes[r[0] : r[1]], lut, size, first)  # noqa: E731
    threads.map_all(kernel, _row_ranges(len(codes)))
    return out


@jit(cache=True, nogil=True)
def _combine_texts(out, codes, luts, sizes):  # pragma: no cover - compiled
    for i in range(len(out)):
        combined = 0
        for k in range(len(codes)):
            code = luts[k][codes[k][i]]  # code -1 reads the last slot (missing)
            if code < 0:
                combined = -1
                break
            combined = combined * sizes[k] + code
        out[i] = combined


def combine_texts(
    parts: list[tuple[np.ndarray, np.ndarray | None]], sizes: list[int]
) -> np.ndarray:
    """The numpy twin's ``combine`` of text keys (int32 codes, each with its lut) in one
    pass over the rows, not a pass per key reading and writing the combined codes."""
    n = len(parts[0][0])
    out = ARENA.empty(n, np.int64)
    radix = np.asarray(sizes, dtype=np.int64)
    luts = tuple(np.ascontiguousarray(lut, dtype=np.int64) for _, lut in parts)

    def run(r: tuple[int, int]) -> None:
        codes = tuple(_read_only(c[r[0] : r[1]]) for c, _ in parts)
        _combine_texts(out[r[0] : r[1]], codes, luts, radix)

    threads.map_all(run, _row_ranges(n))
    return out


@jit(cache=True, nogil=True)
def _combine_marking(out, codes, luts, sizes, seen):  # pragma: no cover - compiled
    """:func:`_combine_texts` into unsigned ``out``, marking each code in ``seen``;
    False if a row's key has no level (its code could not be written)."""
    for i in range(len(out)):
        combined = 0
        for k in range(len(codes)):
            code = luts[k][codes[k][i]]  # code -1 reads the last slot (missing)
            if code < 0:
                return False
            combined = combined * sizes[k] + code
        out[i] = combined
        seen[combined] = True
    return True


def combine_present(
    parts: list[tuple[np.ndarray, np.ndarray | None]], sizes: list[int], space: int
) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`combine_texts` of a fit's keys (every key value a level: no code -1) and
    :func:`present` of the result in the same pass: each row range marks its own byte
    table, or-ed (no second read of the codes). The codes are the narrowest unsigned
    type holding the key space: the later passes read 2 or 4 bytes a row, not 8, and an
    unsigned index needs no check for a negative one (the count pass ran ~1.6x faster
    on uint16 than on int64 or int16 codes). None for a key space too large beside the
    rows for a table per range, or a row whose key has no level."""
    n = len(parts[0][0])
    if space * TABLE_SHARE > n or space > np.iinfo(np.uint32).max:
        return None
    radix = np.asarray(sizes, dtype=np.int64)
    out = ARENA.empty(n, np.uint16 if space <= np.iinfo(np.uint16).max else np.uint32)
    luts = tuple(np.ascontiguousarray(lut, dtype=np.int64) for _, lut in parts)

    def run(r: tuple[int, int]) -> np.ndarray | None:
        seen = np.zeros(space, dtype=np.bool_)
        codes = tuple(_read_only(c[r[0] : r[1]]) for c, _ in parts)
        return seen if _combine_marking(out[r[0] : r[1]], codes, luts, radix, seen) else None

    tables = threads.map_all(run, _row_ranges(n))
    if not tables or any(t is None for t in tables):
        return None
    return out, np.logical_or.reduce(tables)


@jit(cache=True, nogil=True)
def _put_rows_texts(out, per_code, codes, luts, sizes):  # pragma: no cover - compiled
    last = per_code.shape[0] - 1
    width = per_code.shape[1]
    for i in range(len(out)):
        combined = 0
        for k in range(len(codes)):
            code = luts[k][codes[k][i]]  # code -1 reads the last slot (missing)
            if code < 0:
                combined = last
                break
            combined = combined * sizes[k] + code
        for j in range(width):
            out[i, j] = per_code[combined, j]


@jit(cache=True, nogil=True)
def _stream_rows_texts(flat, per_code, codes, luts, sizes):  # pragma: no cover - compiled
    """:func:`_put_rows_texts` into rows of 8-byte words laid end to end (``flat``),
    by non-temporal stores."""
    last = per_code.shape[0] - 1
    width = per_code.shape[1]
    for i in range(len(codes[0])):
        combined = 0
        for k in range(len(codes)):
            code = luts[k][codes[k][i]]  # code -1 reads the last slot (missing)
            if code < 0:
                combined = last
                break
            combined = combined * sizes[k] + code
        for j in range(width):
            stream_store(flat, i * width + j, per_code[combined, j])
    store_fence()


def put_rows_texts(
    out: np.ndarray, per_code: np.ndarray, parts: list[tuple[np.ndarray, np.ndarray | None]],
    sizes: list[int],
) -> None:  # fmt: skip
    """:func:`put_rows` of the rows' combined codes (-1: the last row), combined from the
    text keys' codes and luts as each row is written (no combined array)."""
    radix = np.asarray(sizes, dtype=np.int64)
    luts = tuple(np.ascontiguousarray(lut, dtype=np.int64) for _, lut in parts)
    words = _as_words(out, per_code)

    def run(r: tuple[int, int]) -> None:
        codes = tuple(_read_only(c[r[0] : r[1]]) for c, _ in parts)
        if words is None:
            _put_rows_texts(out[r[0] : r[1]], per_code, codes, luts, radix)
        else:
            flat, table = words
            width = table.shape[1]
            _stream_rows_texts(flat[r[0] * width : r[1] * width], table, codes, luts, radix)

    threads.map_all(run, _row_ranges(len(out)))


def _read_only(codes: np.ndarray) -> np.ndarray:
    """A contiguous read-only view: codes over Arrow's buffers are read-only, codes a
    kernel wrote are not; one type lets the kernel index them as a tuple."""
    view = np.ascontiguousarray(codes).view()
    view.flags.writeable = False
    return view


def _row_codes(codes: np.ndarray) -> np.ndarray:
    """``codes`` as the kernels read them: int32 (a text column's own), uint16 or uint32
    (a fit's combined codes of a small key space) or int64."""
    if codes.dtype in group_moments.INDEX_TYPES:
        return np.ascontiguousarray(codes)
    return np.ascontiguousarray(codes, dtype=np.int64)


def take(lookup: np.ndarray, combined: np.ndarray) -> np.ndarray:
    """``lookup[combined]`` (-1: the last slot), row ranges on the pool's threads."""
    combined = _row_codes(combined)
    out = ARENA.empty(len(combined), np.int64)
    threads.map_all(lambda r: _take(lookup, combined[r[0] : r[1]], out[r[0] : r[1]]),
                    _row_ranges(len(combined)))  # fmt: skip
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


@jit(cache=True, nogil=True)
def _stream_rows(flat, per_group, index):  # pragma: no cover - compiled
    """:func:`_put_rows` into rows of 8-byte words laid end to end (``flat``), by
    non-temporal stores."""
    last = per_group.shape[0] - 1
    width = per_group.shape[1]
    for i in range(len(index)):
        g = index[i]
        if g < 0:
            g = last
        for j in range(width):
            stream_store(flat, i * width + j, per_group[g, j])
    store_fence()


#: rows from this many bytes on are written by non-temporal stores (smaller ones stay in
#: the cache for whatever reads them next)
STREAM_BYTES = 8 << 20


def _as_words(out: np.ndarray, per_group: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``out`` as its rows' 8-byte words laid end to end and ``per_group`` as rows of those
    words, for the streaming gather: when ``out``'s rows are contiguous, large, whole
    words and 8-byte aligned (else None: a row with other columns between would write
    partial lines, which non-temporal stores make slower)."""
    row_bytes = out.shape[1] * out.itemsize if out.ndim == 2 else 0
    if (out.nbytes < STREAM_BYTES or not out.flags.c_contiguous or row_bytes % 8
            or out.ctypes.data % 8 or per_group.dtype != out.dtype):  # fmt: skip
        return None
    words = row_bytes // 8
    table = np.ascontiguousarray(per_group).view(np.uint64).reshape(-1, words)
    return out.reshape(-1).view(np.uint64), table


def put_rows(out: np.ndarray, per_group: np.ndarray, index: np.ndarray) -> None:
    """``out[i] = per_group[index[i]]`` (index -1: the last row) row by row, in place: no
    temporary (n, width) array as numpy's gather-then-copy makes. Large contiguous rows
    by non-temporal stores of 8-byte words (see :mod:`fastprep.native.streaming`)."""
    index = _row_codes(index)
    words = _as_words(out, per_group)
    if words is None:
        threads.map_all(lambda r: _put_rows(out[r[0] : r[1]], per_group, index[r[0] : r[1]]),
                        _row_ranges(len(index)))  # fmt: skip
        return
    flat, table = words
    width = table.shape[1]
    threads.map_all(lambda r: _stream_rows(flat[r[0] * width : r[1] * width], table,
                                           index[r[0] : r[1]]), _row_ranges(len(index)))  # fmt: skip


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
        rows = np.ascontiguousarray(index, np.int64) if lut is None else take(lut, index)
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
        index = take(lut, index)
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
    when they are whole numbers close together, else a binary search per value), row
    ranges on the pool's threads (each builds its own small table)."""
    out = ARENA.empty(len(values), np.int64)
    values = np.ascontiguousarray(values, np.float64)
    threads.map_all(lambda r: _number_codes(values[r[0] : r[1]], levels, out[r[0] : r[1]]),
                    _row_ranges(len(values)))  # fmt: skip
    return out


@jit(cache=True, nogil=True)
def _fractions(values):  # pragma: no cover - compiled
    """How many values have a fractional part (NaN and ±inf do not)."""
    found = 0
    for i in range(len(values)):
        v = values[i]
        found += v - np.floor(v) > 0.0
    return found


def _whole_range(values: np.ndarray) -> tuple[float, float, bool]:
    """(lowest, highest, every one a whole number) of the present values (±inf and True
    without any). The extremes by numpy's NaN-skipping reductions: a compiled loop's
    comparison chain ran 4x slower (13 vs 3 ms at 3.4M rows) than their vector lanes.
    Integers are whole: no pass for fractions."""
    if not len(values):
        return np.inf, -np.inf, True
    low, high = float(np.fmin.reduce(values)), float(np.fmax.reduce(values))
    if low != low:  # only NaN
        return np.inf, -np.inf, True
    return low, high, values.dtype.kind in "iu" or _fractions(values) == 0


@jit(cache=True, nogil=True)
def _mark_present(values, low, seen):  # pragma: no cover - compiled
    for v in values:
        if v == v:
            seen[np.int64(v) - low] = True


#: whole-number keys spanning at most this many values get their levels from a presence
#: table (two passes) instead of a sort of every row
WHOLE_LEVELS_SPAN = 1 << 22


def _whole_span(values: np.ndarray, ranges: list[tuple[int, int]]) -> tuple[int, int] | None:
    """``(lowest, span)`` of present values that are whole numbers close together (the
    range pass on row ranges of the pool); None otherwise (or no present value)."""
    found = threads.map_all(lambda r: _whole_range(values[r[0] : r[1]]), ranges)
    low, high = min(f[0] for f in found), max(f[1] for f in found)
    whole = all(f[2] for f in found)
    if not (whole and -(2.0**52) < low <= high < 2.0**52 and high - low < WHOLE_LEVELS_SPAN):
        return None
    return int(low), int(high - low) + 1


def number_levels(values: np.ndarray) -> np.ndarray:
    """The numpy twin's sorted distinct values: for whole numbers close together (hours,
    years, small ids) a presence table over their range, not a sort of the rows (55 vs
    ~5 ms at 3.4M rows); both passes on row ranges of the pool's threads."""
    values = np.ascontiguousarray(values, np.float64)
    ranges = _row_ranges(len(values)) or [(0, 0)]
    whole = _whole_span(values, ranges)
    if whole is None:
        return np.unique(values[~np.isnan(values)])
    low, span = whole

    def mark(bounds: tuple[int, int]) -> np.ndarray:
        seen = np.zeros(span, dtype=np.bool_)  # each range its own: no shared writes
        _mark_present(values[bounds[0] : bounds[1]], np.int64(low), seen)
        return seen

    seen = np.logical_or.reduce(threads.map_all(mark, ranges))
    return (np.flatnonzero(seen) + np.int64(low)).astype(np.float64)


@jit(cache=True, nogil=True)
def _offsets(values, low, out, seen):  # pragma: no cover - compiled
    for i in range(len(values)):
        v = values[i]
        if v == v:
            offset = np.int64(v) - low
            out[i] = offset
            seen[offset] = True
        else:
            out[i] = -1


def number_levels_codes(
    values: np.ndarray,
) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]] | None:
    """A number key's levels (:func:`number_levels`) and its parts ``(codes, lut)`` for
    whole numbers close together, from the same passes: each row's offset from the
    lowest value (-1 if missing) is written while the presence table is marked, and the
    lut ranks the offsets (a pass fewer than levels, then codes); None otherwise.
    ``values``: float64, or integers as a table stores them (read as they are)."""
    values = _key_values(values)
    ranges = _row_ranges(len(values)) or [(0, 0)]
    whole = _whole_span(values, ranges)
    if whole is None:
        return None
    low, span = whole
    # int32 as a text key's codes: the keys then combine in one pass (combine_texts)
    out = ARENA.empty(len(values), np.int32)

    def mark(bounds: tuple[int, int]) -> np.ndarray:
        seen = np.zeros(span, dtype=np.bool_)  # each range its own: no shared writes
        a, b = bounds
        _offsets(values[a:b], np.int64(low), out[a:b], seen)
        return seen

    present = np.flatnonzero(np.logical_or.reduce(threads.map_all(mark, ranges)))
    lut = np.full(span + 1, -1, dtype=np.int64)
    lut[present] = np.arange(len(present))
    lut[-1] = len(present)  # offset -1 (missing) reads the last slot: the missing code
    return (present + np.int64(low)).astype(np.float64), (out, lut)


@jit(cache=True, nogil=True)
def _known_offsets(values, low, span, out):  # pragma: no cover - compiled
    top = low + span - 1
    for i in range(len(values)):
        v = values[i]
        if v != v:
            out[i] = -1
        elif low <= v <= top and v == np.floor(v):
            out[i] = np.int64(v) - low
        else:
            out[i] = span


def number_key_codes(
    values: np.ndarray, levels: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """A number key's parts against fitted whole levels close together: each row's
    int32 offset from the lowest level (-1: missing; ``span``: outside the levels' range
    or not whole) and a lut from offset to the level's index (-1: not a level; the last
    slot: the missing code), read like a text key's codes (the keys then combine, or
    gather, in one pass); None for other levels. ``values``: float64, or integers as a
    table stores them (read as they are)."""
    n = len(levels)
    if not n or not (levels[0] > -(2.0**52) and levels[-1] < 2.0**52):
        return None
    if levels[-1] - levels[0] >= WHOLE_LEVELS_SPAN or (levels != np.floor(levels)).any():
        return None
    low = int(levels[0])
    span = int(levels[-1]) - low + 1
    lut = np.full(span + 2, -1, dtype=np.int64)
    lut[levels.astype(np.int64) - low] = np.arange(n)
    lut[-1] = n  # offset -1 (missing) reads the last slot: the missing code
    values = _key_values(values)
    out = ARENA.empty(len(values), np.int32)
    threads.map_all(lambda r: _known_offsets(values[r[0] : r[1]], np.int64(low), np.int64(span),
                                             out[r[0] : r[1]]), _row_ranges(len(values)))  # fmt: skip
    return out, lut


def _key_values(values: np.ndarray) -> np.ndarray:
    """A number key's values as the offset kernels read them: int64 or float64."""
    exact = values.dtype.kind == "i" or (values.dtype.kind == "u" and values.dtype.itemsize < 8)
    return np.ascontiguousarray(values, np.int64 if exact else np.float64)


#: below this many rows a per-row kernel runs on the calling thread alone
PARALLEL_ROWS = 1 << 18
#: a per-row kernel that fills a table per group (or per code) runs on row ranges only
#: while the groups are at most this share of the rows (each range fills its own table)
TABLE_SHARE = 8


def _row_ranges(n: int) -> list[tuple[int, int]]:
    lanes = min(threads.workers(), 8) if n >= PARALLEL_ROWS else 1
    cuts = np.linspace(0, n, lanes + 1).astype(np.int64)
    return [(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:]) if b > a]


@jit(cache=True, nogil=True)
def _mark_codes(codes, seen):  # pragma: no cover - compiled
    for i in range(len(codes)):
        seen[codes[i]] = True


def present(combined: np.ndarray, space: int) -> np.ndarray:
    """The numpy twin's codes present, without counting: each row range marks its own
    byte table (no shared writes), the tables or-ed; one range for a space near the rows'
    count (a table per thread would cost more than the pass)."""
    combined = _row_codes(combined)
    if space * TABLE_SHARE > len(combined):
        ranges = [(0, len(combined))]
    else:
        ranges = _row_ranges(len(combined))

    def mark(bounds: tuple[int, int]) -> np.ndarray:
        seen = np.zeros(space, dtype=np.bool_)
        _mark_codes(combined[bounds[0] : bounds[1]], seen)
        return seen

    tables = threads.map_all(mark, ranges) if len(combined) else [np.zeros(space, np.bool_)]
    return np.logical_or.reduce(tables)


NUMBA = GroupKernels(
    accumulate, take, group_statistics, put_rows, number_codes, moments_and_extremes,
    number_levels, present, combine_texts, put_rows_texts, number_levels_codes,
    number_key_codes, combine_present,
)  # fmt: skip


#: the kernels a GroupStats fit and transform run (the exact moments' pass, medians, several
#: keys combined; numeric keys and a fit without mean or std run others too)
_KERNELS = (*group_moments.GROUP_KERNELS, _medians, _accumulate, _put_rows, _stream_rows, _mark_codes,
            _combine_marking)  # fmt: skip


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

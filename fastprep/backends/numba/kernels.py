"""Fixed Numba helpers the generated kernels call: block moments, Chan merges, selection.

Statistics are computed per block of rows held in a small buffer (two passes over the
buffer, which sits in cache), then merged across blocks and chunks with Chan's update:
one pass over memory, numerically stable, deterministic (fixed chunking, merged in order).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from fastprep.native.kernel_files import jit as njit  # made on first use
from fastprep.native.kernel_files import prange

#: rows per statistics block (the buffer is a few KiB, so it stays in cache)
BLOCK = 1024
#: statistics accumulator fields; MEAN is relative to SHIFT (a data value near the mean)
N, MEAN, M2, MIN, MAX, SHIFT = 0, 1, 2, 3, 4, 5
FIELDS = 6


@njit(cache=True, error_model="numpy")
def merge_block(acc, k, buf, m, extremes):  # pragma: no cover - compiled
    """Fold the first ``m`` values of ``buf`` (NaN = missing) into ``acc[k]``; their min
    and max too when ``extremes`` (a ``Standardize`` or a mean needs neither).

    Sums are taken relative to a shift (the first value the accumulator saw), so a column
    far from zero (1e9 ± 1) keeps its variance to ~1e-12 instead of ~1e-8, and block
    means merge as small numbers (Chan's update on relative means).
    """
    if acc[k, N] == 0.0:
        for j in range(m):
            if buf[j] == buf[j]:
                acc[k, SHIFT] = buf[j]
                break
    shift = acc[k, SHIFT]
    count, total, lo, hi = _block_sums(buf, m, shift, extremes)
    if count == 0.0:
        return
    mean = total / count
    _chan(acc, k, count, mean, _block_m2(buf, m, shift, mean), lo, hi)


@njit(cache=True, error_model="numpy")
def merge_range(acc, k, buf, m):  # pragma: no cover - compiled
    """:func:`merge_block` for a ``MinMax``: the count and extremes of ``buf[:m]``'s
    present values (mean and M2 stay 0)."""
    c0 = c1 = 0.0
    lo0 = lo1 = np.inf
    hi0 = hi1 = -np.inf
    m2 = m - m % 2
    for j in range(0, m2, 2):
        a, b = buf[j], buf[j + 1]
        c0 += 1.0 if a == a else 0.0
        c1 += 1.0 if b == b else 0.0
        lo0 = a if a < lo0 else lo0  # NaN compares False: missing values never win
        lo1 = b if b < lo1 else lo1
        hi0 = a if a > hi0 else hi0
        hi1 = b if b > hi1 else hi1
    for j in range(m2, m):
        a = buf[j]
        c0 += 1.0 if a == a else 0.0
        lo0 = a if a < lo0 else lo0
        hi0 = a if a > hi0 else hi0
    acc[k, N] += c0 + c1
    acc[k, MIN] = min(acc[k, MIN], min(lo0, lo1))
    acc[k, MAX] = max(acc[k, MAX], max(hi0, hi1))


@njit(cache=True, error_model="numpy")
def _block_sums(buf, m, shift, extremes):  # pragma: no cover - compiled
    """(count, sum of ``v - shift``, min, max) of the present values of ``buf[:m]``
    (min and max stay ±inf unless ``extremes``: the loop is unswitched on it).

    Four independent lanes (rows ``j % 4``), added in a fixed order at the end: one
    running sum waits ~4 cycles per value for the previous addition (without fastmath,
    LLVM may not reorder it), so the fit kernel spent most of its time in this loop."""
    c0 = c1 = c2 = c3 = 0.0
    t0 = t1 = t2 = t3 = 0.0
    lo0 = lo1 = lo2 = lo3 = np.inf
    hi0 = hi1 = hi2 = hi3 = -np.inf
    m4 = m - m % 4
    for j in range(0, m4, 4):
        a, b, c, d = buf[j], buf[j + 1], buf[j + 2], buf[j + 3]
        c0 += 1.0 if a == a else 0.0
        c1 += 1.0 if b == b else 0.0
        c2 += 1.0 if c == c else 0.0
        c3 += 1.0 if d == d else 0.0
        t0 += a - shift if a == a else 0.0
        t1 += b - shift if b == b else 0.0
        t2 += c - shift if c == c else 0.0
        t3 += d - shift if d == d else 0.0
        if extremes:
            lo0 = a if a < lo0 else lo0  # NaN compares False: missing values never win
            lo1 = b if b < lo1 else lo1
            lo2 = c if c < lo2 else lo2
            lo3 = d if d < lo3 else lo3
            hi0 = a if a > hi0 else hi0
            hi1 = b if b > hi1 else hi1
            hi2 = c if c > hi2 else hi2
            hi3 = d if d > hi3 else hi3
    for j in range(m4, m):
        a = buf[j]
        c0 += 1.0 if a == a else 0.0
        t0 += a - shift if a == a else 0.0
        if extremes:
            lo0 = a if a < lo0 else lo0
            hi0 = a if a > hi0 else hi0
    count = (c0 + c1) + (c2 + c3)
    total = (t0 + t1) + (t2 + t3)
    return count, total, min(min(lo0, lo1), min(lo2, lo3)), max(max(hi0, hi1), max(hi2, hi3))


@njit(cache=True, error_model="numpy")
def _block_m2(buf, m, shift, mean):  # pragma: no cover - compiled
    """Sum of ``(v - shift - mean)**2`` over the present values of ``buf[:m]`` (``mean``
    relative to ``shift``; four lanes, as :func:`_block_sums`)."""
    s0 = s1 = s2 = s3 = 0.0
    m4 = m - m % 4
    for j in range(0, m4, 4):
        a = buf[j] - shift - mean
        b = buf[j + 1] - shift - mean
        c = buf[j + 2] - shift - mean
        d = buf[j + 3] - shift - mean
        s0 += a * a if a == a else 0.0
        s1 += b * b if b == b else 0.0
        s2 += c * c if c == c else 0.0
        s3 += d * d if d == d else 0.0
    for j in range(m4, m):
        a = buf[j] - shift - mean
        s0 += a * a if a == a else 0.0
    return (s0 + s1) + (s2 + s3)


@njit(cache=True, error_model="numpy")
def _chan(acc, k, count, mean, m2, lo, hi):  # pragma: no cover - compiled
    """Chan et al.'s parallel update of (n, mean, M2) with another group's moments."""
    n_a = acc[k, N]
    if n_a == 0.0:
        acc[k, N] = count
        acc[k, MEAN] = mean
        acc[k, M2] = m2
    else:
        n = n_a + count
        delta = mean - acc[k, MEAN]
        acc[k, MEAN] = acc[k, MEAN] + delta * (count / n)
        acc[k, M2] = acc[k, M2] + m2 + delta * delta * (n_a * count / n)
        acc[k, N] = n
    if lo < acc[k, MIN]:
        acc[k, MIN] = lo
    if hi > acc[k, MAX]:
        acc[k, MAX] = hi


@njit(cache=True, error_model="numpy")
def merge_chunks(parts):  # pragma: no cover - compiled
    """Merge per-chunk accumulators ``parts[chunk, k, field]`` in chunk order.

    Returns ``out[k] = (n, mean, M2, min, max, shift)`` with an absolute mean.
    """
    n_chunks, n_stats = parts.shape[0], parts.shape[1]
    out = np.zeros((n_stats, FIELDS))
    for k in range(n_stats):
        out[k, MIN] = np.inf
        out[k, MAX] = -np.inf
        out[k, SHIFT] = np.nan
    for c in range(n_chunks):
        for k in range(n_stats):
            if parts[c, k, N] > 0.0:
                if out[k, N] == 0.0:
                    out[k, SHIFT] = parts[c, k, SHIFT]
                # re-express the chunk's mean relative to the common shift
                relative = parts[c, k, MEAN] + (parts[c, k, SHIFT] - out[k, SHIFT])
                _chan(out, k, parts[c, k, N], relative, parts[c, k, M2],
                      parts[c, k, MIN], parts[c, k, MAX])  # fmt: skip
    for k in range(n_stats):
        if out[k, N] > 0.0:
            out[k, MEAN] = out[k, SHIFT] + out[k, MEAN]
    return out


def new_accumulators(n_chunks: int, n_stats: int) -> np.ndarray:
    acc = np.zeros((n_chunks, n_stats, FIELDS))
    acc[:, :, MIN] = np.inf
    acc[:, :, MAX] = -np.inf
    return acc


@njit(cache=True)
def _compact_in_place(values):  # pragma: no cover - compiled
    """Move the non-missing values to the front; returns how many there are."""
    k = 0
    for i in range(values.shape[0]):
        v = values[i]
        if v == v:
            values[k] = v
            k += 1
    return k


@njit(cache=True)
def _key(v):  # pragma: no cover - compiled
    """An unsigned integer that sorts like the float ``v`` (sign-magnitude → offset)."""
    bits = np.float64(v).view(np.uint64)
    if bits >> np.uint64(63):
        return ~bits
    return bits | np.uint64(1) << np.uint64(63)


@njit(cache=True)
def top16(v):  # pragma: no cover - compiled
    """The bucket of ``v`` in the first radix level: the top 16 bits of its sort key."""
    return (_key(v) >> np.uint64(48)) & np.uint64(0xFFFF)


#: key bits per selection level after the first: 256 buckets (6 KiB of tables, in L1)
#: took a fifth of the time of 65,536 (1.5 MiB: cache misses per value) on the median
#: bucket of 350k speeds (0.96 vs 4.75 ms)
LEVEL_BITS = 8


@njit(cache=True)
def _select_pair_from(values, n, k, shift, counts, low, high):  # pragma: no cover - compiled
    """``(kth(k-1), kth(k))`` of ``values[:n]`` (no NaN; kth(-1) is NaN) by radix
    selection over ``LEVEL_BITS`` key bits per level, from bit ``shift + LEVEL_BITS``
    down: a histogram per level narrows the candidates to one bucket; when ranks k-1 and
    k fall in different buckets they are that pair's max and min. ``values`` is
    reordered; ``counts``/``low``/``high`` are reused scratch."""
    m = n
    mask = np.uint64((1 << LEVEL_BITS) - 1)
    while True:
        counts[:] = 0
        low[:] = np.inf
        high[:] = -np.inf
        for i in range(m):
            v = values[i]
            b = (_key(v) >> shift) & mask
            counts[b] += 1
            if v < low[b]:
                low[b] = v
            if v > high[b]:
                high[b] = v
        bucket = 0
        before = 0
        while before + counts[bucket] <= k:
            before += counts[bucket]
            bucket += 1
        if k == before and k > 0:  # rank k-1 is the last of an earlier bucket
            prev = bucket - 1
            while counts[prev] == 0:
                prev -= 1
            return high[prev], low[bucket]
        kept = 0
        for i in range(m):
            if (_key(values[i]) >> shift) & mask == bucket:
                values[kept] = values[i]
                kept += 1
        m = kept
        k -= before
        if m <= 4096 or shift == np.uint64(0):
            part = np.sort(values[:m])
            return (part[k - 1] if k > 0 else np.nan), part[k]
        shift -= np.uint64(LEVEL_BITS)


_LEVEL = (np.zeros(1 << LEVEL_BITS, np.int64), np.empty(1 << LEVEL_BITS), np.empty(1 << LEVEL_BITS))


def _select_pair(values: np.ndarray, n: int, k: int, known_bits: int = 0) -> tuple[float, float]:
    """:func:`_select_pair_from` for values sharing their top ``known_bits`` key bits."""
    return _select_pair_from(values, n, k, np.uint64(64 - known_bits - LEVEL_BITS), *_LEVEL)


#: above this many values the first selection level runs on threads (see _median_parallel)
PARALLEL_MEDIAN_MIN = 1 << 19
#: chunks of the parallel histogram (integer counts: the result is the same for any number)
MEDIAN_CHUNKS = 4
#: buckets of the first radix level (the top 16 bits of a value's sort key)
BUCKETS = _BUCKETS = 65536


@njit(parallel=True, cache=True)
def _histogram_top16(values, counts):  # pragma: no cover - compiled
    """Per chunk, how many non-missing values fall in each bucket of their top 16 key bits."""
    n = values.shape[0]
    n_chunks = counts.shape[0]
    size = (n + n_chunks - 1) // n_chunks
    for c in prange(n_chunks):
        row = counts[c]
        row[:] = 0
        for i in range(c * size, min(n, c * size + size)):
            v = values[i]
            if v == v:
                row[top16(v)] += 1


@njit(parallel=True, cache=True)
def _gather_bucket(values, bucket, offsets, out):  # pragma: no cover - compiled
    """Copy the values of one top-16-bit bucket into ``out`` (each chunk from its offset)."""
    n = values.shape[0]
    n_chunks = offsets.shape[0]
    size = (n + n_chunks - 1) // n_chunks
    for c in prange(n_chunks):
        k = offsets[c]
        for i in range(c * size, min(n, c * size + size)):
            v = values[i]
            if v == v and top16(v) == bucket:
                out[k] = v
                k += 1


@njit(cache=True)
def _max_below_bucket(values, bucket):  # pragma: no cover - compiled
    """The largest non-missing value whose top-16-bit bucket is below ``bucket``."""
    best = -np.inf
    for i in range(values.shape[0]):
        v = values[i]
        if v == v and top16(v) < bucket and v > best:
            best = v
    return best


_COUNTS = np.zeros((0, _BUCKETS), np.int64)


def _median_parallel(values: np.ndarray) -> tuple[float, int]:
    """Median and count of the non-missing values: the first radix level (a histogram of
    the top 16 key bits) runs on threads without compacting the missing values away; only
    the median's bucket is copied out for the serial levels."""
    global _COUNTS
    if _COUNTS.shape[0] != MEDIAN_CHUNKS:  # kept between calls: no fresh pages to touch
        _COUNTS = np.zeros((MEDIAN_CHUNKS, _BUCKETS), np.int64)
    _histogram_top16(values, _COUNTS)

    def gather(bucket: int) -> tuple[np.ndarray, Any]:
        offsets = np.cumsum(_COUNTS[:, bucket]) - _COUNTS[:, bucket]
        out = np.empty(int(_COUNTS[:, bucket].sum()))
        _gather_bucket(values, np.uint64(bucket), offsets, out)
        return out, lambda: _max_below_bucket(values, np.uint64(bucket))

    return median_by_buckets(_COUNTS.sum(axis=0), gather)


def median_by_buckets(
    per_bucket: np.ndarray, gather: Callable[[int], tuple[np.ndarray, Any]]
) -> tuple[float, int]:
    """``np.nanmedian`` and the count of values, from the histogram of their top-16-bit
    buckets (:func:`top16`): ``gather(bucket)`` returns that bucket's values and the
    largest value of an earlier bucket (or a function giving it: needed only when the
    two middle values fall in different buckets)."""
    present = int(per_bucket.sum())
    if present == 0:
        return float("nan"), 0
    half = present // 2
    before = np.cumsum(per_bucket) - per_bucket  # values in earlier buckets
    bucket = int(np.searchsorted(before + per_bucket, half, side="right"))
    k = half - int(before[bucket])
    out, below = gather(bucket)
    # every value of ``out`` shares the top 16 bits: selection goes on from the next 16
    lower, upper = _select_pair(out, len(out), k, known_bits=16)
    if k == 0 and half > 0:  # rank half-1 is the last value of an earlier bucket
        lower = below() if callable(below) else below
    return _middle(float(lower), float(upper), present)


def _middle(lower: float, upper: float, present: int) -> tuple[float, int]:
    if present % 2:
        return upper, present
    return float(np.mean(np.array([lower, upper]))), present


def nanmedian(values: np.ndarray) -> tuple[float, int]:
    """Median of the non-missing values by selection (O(n), no sort of the data), and
    their count. Equals ``np.nanmedian``: the middle value, or the mean of the two middle
    values. May reorder ``values`` (a scratch buffer): no allocation of its size.
    """
    if len(values) >= PARALLEL_MEDIAN_MIN:
        return _median_parallel(values)
    present = int(_compact_in_place(values))
    if present == 0:
        return float("nan"), 0
    lower, upper = _select_pair(values, present, present // 2)
    return _middle(float(lower), float(upper), present)


# ---------------------------------------------------------------- fitted-array steps
# The fitted arrays (bin edges, quantiles) sit in the parameter array ``p`` after the
# scalar slots: ``p[off:off + n]``; the generated code passes their offset and length.


@njit(cache=True, error_model="numpy")
def bin_of(p, off, n, x):  # pragma: no cover - compiled
    """``searchsorted(edges[1:-1], x, side="right")`` over ``edges = p[off:off + n]``
    as a float (NaN stays NaN): the ``Bin`` number of ``x``."""
    if x != x:
        return np.nan
    a = off + 1
    b = off + n - 1
    while a < b:
        mid = (a + b) // 2
        if p[mid] <= x:
            a = mid + 1
        else:
            b = mid
    return np.float64(a - off - 1)


@njit(cache=True, error_model="numpy")
def _point(p, off, n, i, rev):  # pragma: no cover - compiled
    return -p[off + n - 1 - i] if rev else p[off + i]


@njit(cache=True, error_model="numpy")
def _interp(x, p, xo, yo, n, rev):  # pragma: no cover - compiled
    """numpy's ``interp(x, xp, fp)`` for one value, line by line (its binary search finds
    the last ``j`` with ``xp[j] <= x``); ``rev``: over ``-xp[::-1]``, ``-fp[::-1]``."""
    if n == 1:
        return _point(p, yo, n, 0, rev)
    last = n - 1
    if x > _point(p, xo, n, last, rev):
        return _point(p, yo, n, last, rev)
    if x < _point(p, xo, n, 0, rev):
        return _point(p, yo, n, 0, rev)
    if x == _point(p, xo, n, last, rev):
        return _point(p, yo, n, last, rev)
    a, b = 0, n
    while a < b:
        mid = (a + b) // 2
        if _point(p, xo, n, mid, rev) <= x:
            a = mid + 1
        else:
            b = mid
    j = a - 1
    xj, yj = _point(p, xo, n, j, rev), _point(p, yo, n, j, rev)
    if j == last or xj == x:
        return yj
    xk, yk = _point(p, xo, n, j + 1, rev), _point(p, yo, n, j + 1, rev)
    slope = (yk - yj) / (xk - xj)
    r = slope * (x - xj) + yj
    if r != r:
        r = slope * (x - xk) + yk
        if r != r and yj == yk:
            r = yj
    return r


@njit(cache=True, error_model="numpy")
def quantile_uniform(p, qo, ro, n, x):  # pragma: no cover - compiled
    """``QuantileTransformer``'s forward map to uniform for one value: the interpolation
    averaged both ways (ties in the quantiles), 0 and 1 at the fitted ends."""
    if x != x:
        return np.nan
    if x == p[qo]:
        return 0.0
    if x == p[qo + n - 1]:
        return 1.0
    return 0.5 * (_interp(x, p, qo, ro, n, False) - _interp(-x, p, qo, ro, n, True))


@njit(cache=True, error_model="numpy")
def yeo_johnson(x, lam):  # pragma: no cover - compiled
    """scipy's Yeo-Johnson transform of one value (NaN stays NaN)."""
    if x != x:
        return np.nan
    eps = 2.220446049250313e-16
    if x >= 0:
        if abs(lam) < eps:
            return np.log1p(x)
        return np.expm1(lam * np.log1p(x)) / lam
    if abs(lam - 2) > eps:
        return -np.expm1((2 - lam) * np.log1p(-x)) / (2 - lam)
    return -np.log1p(-x)


@njit(cache=True, error_model="numpy")
def box_cox(x, lam):  # pragma: no cover - compiled
    """``scipy.special.boxcox`` of one value, branch for branch (NaN stays NaN); the
    caller has already set values <= 0 missing, as the reference does."""
    if x != x:
        return np.nan
    if abs(lam) < 1e-19:
        return np.log(x)
    t = lam * np.log(x)
    if t < 709.78:
        return np.expm1(t) / lam
    return np.copysign(1.0, lam) * np.exp(t - np.log(abs(lam))) - 1 / lam


# Cephes' ndtri (the inverse of the standard normal CDF), as scipy.special.ndtri computes it:
# the same rational approximations and coefficients, evaluated in the same order.
_NDTRI_P0 = np.array([-5.99633501014107895267e1, 9.80010754185999661536e1,
                      -5.66762857469070293439e1, 1.39312609387279679503e1,
                      -1.23916583867381258016e0])  # fmt: skip
_NDTRI_Q0 = np.array([1.0, 1.95448858338141759834e0, 4.67627912898881538453e0,
                      8.63602421390890590575e1, -2.25462687854119370527e2,
                      2.00260212380060660359e2, -8.20372256168333339912e1,
                      1.59056225126211695515e1, -1.18331621121330003142e0])  # fmt: skip
_NDTRI_P1 = np.array([4.05544892305962419923e0, 3.15251094599893866154e1,
                      5.71628192246421288162e1, 4.40805073893200834700e1,
                      1.46849561928858024014e1, 2.18663306850790267539e0,
                      -1.40256079171354495875e-1, -3.50424626827848203418e-2,
                      -8.57456785154685413611e-4])  # fmt: skip
_NDTRI_Q1 = np.array([1.0, 1.57799883256466749731e1, 4.53907635128879210584e1,
                      4.13172038254672030440e1, 1.50425385692907503408e1,
                      2.50464946208309415979e0, -1.42182922854787788574e-1,
                      -3.80806407691578277194e-2, -9.33259480895457427372e-4])  # fmt: skip
_NDTRI_P2 = np.array([3.23774891776946035970e0, 6.91522889068984211695e0,
                      3.93881025292474443415e0, 1.33303460815807542389e0,
                      2.01485389549179081538e-1, 1.23716634817820021358e-2,
                      3.01581553508235416007e-4, 2.65806974686737550832e-6,
                      6.23974539184983293730e-9])  # fmt: skip
_NDTRI_Q2 = np.array([1.0, 6.02427039364742014255e0, 3.67983563856160859403e0,
                      1.37702099489081330271e0, 2.16236993594496635890e-1,
                      1.34204006088543189037e-2, 3.28014464682127739104e-4,
                      2.89247864745380683936e-6, 6.79019408009981274425e-9])  # fmt: skip
_EXP_M2 = 0.13533528323661269189  # exp(-2)
#: QuantileTransformer clips its normal output at ndtri(BOUNDS_THRESHOLD - eps)
_NORMAL_BOUND = 1e-7 - 2.220446049250313e-16


@njit(cache=True, error_model="numpy")
def _polevl(x, coefs):  # pragma: no cover - compiled
    result = 0.0
    for c in coefs:
        result = result * x + c
    return result


@njit(cache=True, error_model="numpy")
def ndtri(y0):  # pragma: no cover - compiled
    """The x with standard normal CDF ``y0`` (scipy.special.ndtri)."""
    if y0 == 0.0:
        return -np.inf
    if y0 == 1.0:
        return np.inf
    if y0 < 0.0 or y0 > 1.0 or y0 != y0:
        return np.nan
    upper = True
    y = y0
    if y > 1.0 - _EXP_M2:
        y = 1.0 - y
        upper = False
    if y > _EXP_M2:
        y = y - 0.5
        y2 = y * y
        x = y + y * (y2 * _polevl(y2, _NDTRI_P0) / _polevl(y2, _NDTRI_Q0))
        return x * 2.50662827463100050242e0
    x = np.sqrt(-2.0 * np.log(y))
    x0 = x - np.log(x) / x
    z = 1.0 / x
    if x < 8.0:
        x1 = z * _polevl(z, _NDTRI_P1) / _polevl(z, _NDTRI_Q1)
    else:
        x1 = z * _polevl(z, _NDTRI_P2) / _polevl(z, _NDTRI_Q2)
    x = x0 - x1
    return -x if upper else x


@njit(cache=True, error_model="numpy")
def quantile_normal(p, qo, ro, n, x):  # pragma: no cover - compiled
    """``QuantileTransformer``'s forward map to a normal output for one value: 0 and 1
    within 1e-7 of the fitted ends, ``ndtri`` of the rest, clipped at the bounds."""
    if x != x:
        return np.nan
    if x - 1e-7 < p[qo]:
        u = 0.0
    elif x + 1e-7 > p[qo + n - 1]:
        u = 1.0
    else:
        u = 0.5 * (_interp(x, p, qo, ro, n, False) - _interp(-x, p, qo, ro, n, True))
    low = ndtri(_NORMAL_BOUND)
    high = ndtri(1.0 - _NORMAL_BOUND)
    r = ndtri(u)
    return low if r < low else (high if r > high else r)

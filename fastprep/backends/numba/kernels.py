"""Fixed Numba helpers the generated kernels call: block extremes, selection, bins,
quantiles, power transforms.

A fit round's statistics are computed per block of rows held in a small buffer (it sits
in cache): means and variances by :func:`fastprep.backends.moments.fold_block` (exact
sums, so they do not depend on the chunking or the threads), ranges here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from fastprep.backends.moments import COUNT, HIGH, LOW
from fastprep.native.kernel_files import jit as njit  # made on first use
from fastprep.native.kernel_files import prange

#: rows per statistics block (the buffer is a few KiB, so it stays in cache)
BLOCK = 1024


@njit(cache=True, error_model="numpy")
def merge_range(acc, k, buf, m):  # pragma: no cover - compiled
    """A ``MinMax``'s block ``buf[:m]``: the count and extremes of its present values
    into ``acc[k]`` (fields as :func:`fastprep.backends.moments.fold_block`)."""
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
    acc[k, COUNT] += c0 + c1
    acc[k, LOW] = min(acc[k, LOW], min(lo0, lo1))
    acc[k, HIGH] = max(acc[k, HIGH], max(hi0, hi1))


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

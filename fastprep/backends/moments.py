"""Moments with exact sums: the same fitted mean and variance however the rows are split.

A column's ``Moments`` are its count, the exact sum of its values, the exact sum of their
squares, and its extremes. The sums are Python integers in units of a fixed power of two
(every float64 is an integer multiple of ``2**EMIN``, its square one of ``2**(2*EMIN)``),
so merging two partials is integer addition: associative and commutative, hence the
same bits whether a column is fitted whole, in fixed chunks on threads, or partition by
partition on a cluster, in any order. The mean and the population variance are then each
rounded once from the exact sums (``float(int / int)`` is correctly rounded): at least as
accurate as a two-pass float64 sum, and never dependent on the summation order.

The sums are computed by :func:`exact_sums` (numpy: float64 sums of values rounded to
a common grid, which are exact, repeated on the remainders) and by the Numba fit
kernels' ``add_exact`` (:mod:`fastprep.backends.numba.kernels`: integer bins per
exponent); both give the same integers, which :func:`from_bins` reads back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from fastprep.errors import FitError
from fastprep.native.kernel_files import jit, numba_cached, numba_loaded
from fastprep.planning.planner import job_imports_numba, kernel_path, numba_imported

#: every float64 is an integer multiple of 2**EMIN: 2**-1074 (the smallest subnormal)
#: is 2**-1021 * 2**-53 in ``frexp``'s terms (a 53-bit integer significand)
EMIN = -1074 - 53
#: bins of :func:`add_exact` (per set): every ``u = E - EMIN`` (0 ... 2098) plus the
#: pieces' offsets and room for carries; the last slot is a counter
SUM_BINS = 2099 + 36 + 64 + 1
SQUARE_BINS = 2 * 2099 + 72 + 128 + 1
_EPS = np.finfo(np.float64).eps


@dataclass(frozen=True)
class Moments:
    """Count, exact sum and sum of squares (integers: units ``2**EMIN`` and
    ``2**(2 * EMIN)``), min and max of the present values."""

    count: int
    total: int
    squares: int
    low: float
    high: float
    #: False when a value was ±inf (the sums then leave it out): no mean, no variance
    finite: bool = True

    def mean(self) -> float:
        """The mean rounded once from the exact sum (NaN with an infinite value)."""
        if not self.finite:
            return np.nan
        return _ratio(self.total, self.count << -EMIN) if self.count else 0.0

    def variance(self) -> float:
        """The population variance rounded once from the exact sums (inf beyond float64;
        NaN with an infinite value)."""
        if not self.finite:
            return np.nan
        if not self.count:
            return 0.0
        n = self.count
        return _ratio(n * self.squares - self.total * self.total, (n * n) << (-2 * EMIN))


EMPTY = Moments(0, 0, 0, np.inf, -np.inf)


def _ratio(numerator: int, denominator: int) -> float:
    try:
        return numerator / denominator
    except OverflowError:
        return np.inf if numerator > 0 else -np.inf


def merge(parts: list[Moments]) -> Moments:
    """The moments of all the parts' values together (exact: any order gives the same)."""
    count, total, squares = 0, 0, 0
    low, high = np.inf, -np.inf
    finite = True
    for part in parts:
        if part.count:
            count, total, squares = count + part.count, total + part.total, squares + part.squares
            low, high = min(low, part.low), max(high, part.high)
            finite = finite and part.finite
    return Moments(count, total, squares, low, high, finite)


def constant(value: float, copies: int) -> Moments:
    """The moments of ``copies`` values equal to ``value`` (a fill's copies)."""
    if copies <= 0:
        return EMPTY
    significand, exponent = _integer_parts(value)
    unit = exponent - EMIN
    total = significand << unit if unit >= 0 else 0
    return Moments(copies, copies * total, copies * total * total, value, value)


def with_fill(present: Moments, fill: float, rows: int) -> Moments:
    """The moments of ``rows`` values after the missing ones were set to ``fill``."""
    return merge([present, constant(float(fill), rows - present.count)])


def _integer_parts(value: float) -> tuple[int, int]:
    """``(M, E)`` with ``value == M * 2**E`` exactly, ``|M| < 2**53``."""
    m, e = np.frexp(value)
    return int(m * 2.0**53), int(e) - 53


def of(values: np.ndarray) -> Moments:
    """The moments of the non-missing values of a float64 array."""
    missing = np.isnan(values)
    present = values[~missing] if missing.any() else values
    if not len(present):
        return EMPTY
    low, high = float(present.min()), float(present.max())
    every = -np.inf < low and high < np.inf  # no infinity (NaN is gone)
    summed = present if every else present[np.isfinite(present)]
    total, squares = sums_of(np.ascontiguousarray(summed, dtype=np.float64))
    return Moments(len(present), total, squares, low, high, every)


def sums_of(present: np.ndarray) -> tuple[int, int]:
    """:func:`exact_sums` of finite values, by the Numba kernel or numpy, whichever the
    planner predicts faster (the same integers either way)."""
    loaded = numba_loaded(exact_kernel)
    # the disk cache is looked at only when Numba could be chosen (it is a file read)
    cached = loaded or (
        (numba_imported() or job_imports_numba(len(present))) and numba_cached(exact_kernel)
    )
    if kernel_path("moments", len(present), cached=cached, loaded=loaded) == "numba":
        sums, squares = new_bins()
        exact_kernel(sums, squares, present, len(present))
        return from_bins(sums), from_bins(squares)
    return exact_sums(present)


#: values per block of :func:`exact_sums` (its passes stay in the CPU's cache); with
#: pieces of at most 38 bits on one grid, 2**14 of them sum exactly in float64
_BLOCK = 1 << 14
_PIECE_BITS = 38
#: beyond these magnitudes a square overflows or its rounding error underflows:
#: such values are squared scaled by a power of two
_SQUARE_LOW, _SQUARE_HIGH = 2.0**-400, 2.0**400
_LOW_FIELD, _HIGH_FIELD = 1023 - 400, 1023 + 400  # the same bounds as biased exponents


def exact_sums(values: np.ndarray) -> tuple[int, int]:
    """The exact sum and sum of squares of finite ``values`` (units as :class:`Moments`).

    Each square is split into two float64 whose sum it is exactly (Dekker's product);
    each array of float64 is then summed exactly by :func:`_float_sum`. Values whose
    square would overflow or underflow are squared scaled by a power of two."""
    total, squares = 0, 0
    for start in range(0, len(values), _BLOCK):
        block = values[start : start + _BLOCK]
        fields = (block.view(np.int64) >> 52) & 0x7FF  # biased exponents (0: zero, subnormal)
        top = int(fields.max())
        if top <= _HIGH_FIELD and not ((fields < _LOW_FIELD) & (block != 0.0)).any():
            emax = max(top - 1022, -1074)  # every |x| < 2**emax
            total += _float_sum(block, -EMIN, emax)
            squares += _squares_sum(block, 0, emax)
            continue
        magnitude = np.abs(block)
        big = magnitude >= 2.0**990  # the rounding constant of a sum must stay finite
        total += _float_sum(block[~big], -EMIN)
        total += _float_sum(block[big] * 2.0**-100, 100 - EMIN)
        tiny = (magnitude < _SQUARE_LOW) & (magnitude > 0.0)
        large = magnitude > _SQUARE_HIGH
        squares += _squares_sum(block[~(tiny | large)], 0)
        squares += _squares_sum(block[tiny] * 2.0**600, -600)
        squares += _squares_sum(block[large] * 2.0**-600, 600)
    return total, squares


def _squares_sum(x: np.ndarray, scale: int, emax: int | None = None) -> int:
    """``sum(x * x) * 2**(2 * scale)`` exactly, in units of ``2**(2 * EMIN)``
    (``p + e == x * x`` exactly: Veltkamp's split, Dekker's product). ``emax``: every
    ``|x| < 2**emax`` when known (then ``|p| <= 2**(2 emax)``, ``|e| <= 2**(2 emax - 53)``)."""
    if not len(x):
        return 0
    p, e = _dekker_square(x)
    shift = 2 * scale - 2 * EMIN
    if not e.any():  # every square exact in float64 (values of at most 26 bits)
        return _float_sum(p, shift, None if emax is None else 2 * emax + 1)
    if emax is None:
        return _float_sum(p, shift) + _float_sum(e, shift)
    return _float_sum(p, shift, 2 * emax + 1) + _float_sum(e, shift, 2 * emax - 52)


def _float_sum(values: np.ndarray, shift: int, emax: int | None = None) -> int:
    """``sum(values) * 2**shift`` exactly, as an integer (it must be one; at most
    ``_BLOCK`` values, each of magnitude below 2**990; ``emax``: a bound, every
    ``|v| <= 2**emax``, when known).

    Repeatedly: round every value to the grid ``2**q`` 38 bits below the bound
    (``(v + C) - C``, exact), sum those (integers of at most 38 bits times ``2**q``:
    exact in any order), keep the exact remainders ``v - rounded`` (below ``2**q``) and
    go on one grid lower while any is nonzero; a 53-bit value is used up in two rounds,
    a value of at most 38 bits (an integer below 2**38, say) in one."""
    if not len(values):
        return 0
    out = 0
    rest = values
    if emax is None:
        top = float(max(rest.max(), -rest.min()))
        if top == 0.0:
            return 0
        emax = math.frexp(top)[1]
    q = max(emax - _PIECE_BITS, -1074)
    while True:
        big = 1.5 * 2.0 ** (q + 52)
        rounded = rest + big
        rounded -= big
        out += _integer(float(np.sum(rounded)), shift)
        rest = rest - rounded
        if q == -1074 or not rest.any():
            return out
        q = max(q - _PIECE_BITS, -1074)


def _integer(value: float, shift: int) -> int:
    """``value * 2**shift`` as an integer (exact: the caller's units divide it)."""
    numerator, denominator = value.as_integer_ratio()
    bits = shift - (denominator.bit_length() - 1)
    assert bits >= 0, "a sum finer than its units"
    return numerator << bits


def add_exact(sums: np.ndarray, squares: np.ndarray, values: np.ndarray, m: int) -> int:
    """Add the present values of ``values[:m]`` (contiguous float64) into integer bins
    (compiled by Numba: :data:`exact_kernel`); returns how many were present.

    A value is ``M * 2**E`` (from its bits; ``|M| < 2**53``); with ``u = E - EMIN`` and
    ``M`` split into 18-bit pieces ``a, b, c``, ``a`` counts in bin ``u + 36`` of ``sums``,
    ``b`` in ``u + 18``, ``c`` in ``u``, and the square's pieces ``a*a ... c*c`` in bins
    ``2u + 72 ... 2u`` of ``squares``: bin ``i`` counts units of ``2**i`` (times
    ``2**EMIN``, ``2**(2 * EMIN)``). The bins come in two sets (``[2, bins]``), even and
    odd values alternating: consecutive values of one exponent would otherwise each wait
    for the previous addition to the same bin. ``sums[0, -1]`` counts infinities. No
    piece reaches 2**38, so an int64 takes 2**25 of them: every 2**23 values a carry
    pass moves each square bin's bits above 32 up 32 bins (the integer they stand for
    stays); ``squares[0, -1]`` counts values since the last pass."""
    last = squares.shape[1] - 1
    present = 0
    bits = values.view(np.int64)
    pending = squares[0, last]
    for j in range(m):
        x = values[j]
        if x != x:
            continue
        present += 1
        word = bits[j]
        field = (word >> 52) & 0x7FF
        if field == 0x7FF:  # ±inf: counted apart (the caller has no mean then)
            sums[0, sums.shape[1] - 1] += 1
            continue
        u = field + 52 if field else 53  # E - EMIN: E = field - 1075, or -1074
        whole = word & 0xFFFFFFFFFFFFF
        if field:  # a normal value's implicit leading bit
            whole |= 0x10000000000000
        if word < 0:
            whole = -whole
        a = whole >> 36
        rest = whole - (a << 36)
        b = rest >> 18
        c = rest - (b << 18)
        h = j & 1
        sums[h, u + 36] += a
        sums[h, u + 18] += b
        sums[h, u] += c
        v = 2 * u
        squares[h, v + 72] += a * a
        squares[h, v + 54] += 2 * a * b
        squares[h, v + 36] += 2 * a * c + b * b
        squares[h, v + 18] += 2 * b * c
        squares[h, v] += c * c
        pending += 1
        if pending == 1 << 23:
            for g in range(2):
                for i in range(last - 32):
                    carry = squares[g, i] >> 32
                    squares[g, i] -= carry << 32
                    squares[g, i + 32] += carry
            pending = 0
    squares[0, last] = pending
    return present


#: :func:`add_exact` compiled (on first use; Numba's disk cache keeps it)
exact_kernel = jit(cache=True, error_model="numpy")(add_exact)

#: fields of a fit kernel's per-chunk accumulator ``acc[chunk, statistic]``
COUNT, LOW, HIGH = 0, 1, 2
FIELDS = 3


@jit(cache=True, error_model="numpy")
def fold_block(acc, k, buf, m, extremes, sums, squares):  # pragma: no cover - compiled
    """A fit kernel's block of values ``buf[:m]`` (NaN = missing): their count into
    ``acc[k]``, their exact sums into the lane's bins ``sums`` / ``squares``, and their
    min and max when ``extremes`` (a ``Standardize`` or a mean needs neither).

    Defined here, beside :func:`add_exact`, so Numba's disk cache of this kernel is
    renewed whenever the function it calls changes."""
    acc[k, COUNT] += exact_kernel(sums, squares, buf, m)
    if extremes:
        lo, hi = acc[k, LOW], acc[k, HIGH]
        for j in range(m):
            v = buf[j]
            lo = v if v < lo else lo  # NaN compares False: missing values never win
            hi = v if v > hi else hi
        acc[k, LOW], acc[k, HIGH] = lo, hi


def new_accumulators(n_chunks: int, n_stats: int) -> np.ndarray:
    """Zeroed per-chunk accumulators for :func:`fold_block` (extremes at ±inf)."""
    acc = np.zeros((n_chunks, n_stats, FIELDS))
    acc[:, :, LOW] = np.inf
    acc[:, :, HIGH] = -np.inf
    return acc


def from_kernel(acc: np.ndarray, sums: np.ndarray, squares: np.ndarray, k: int) -> Moments:
    """Statistic ``k``'s moments from a fit kernel's chunk accumulators and lane bins."""
    count = int(acc[:, k, COUNT].sum())
    low, high = float(acc[:, k, LOW].min()), float(acc[:, k, HIGH].max())
    return from_lanes(count, low, high, sums[:, k], squares[:, k])


def new_bins(*shape: int) -> tuple[np.ndarray, np.ndarray]:
    """Zeroed ``(sums, squares)`` bins for :func:`add_exact`, with leading ``shape``."""
    sums = np.zeros((*shape, 2, SUM_BINS), np.int64)
    return sums, np.zeros((*shape, 2, SQUARE_BINS), np.int64)


def from_bins(bins: np.ndarray) -> int:
    """The integer ``sum(bins[s, i] * 2**i)`` of one call's bins ``[2, bins]`` (the last
    slot of each set is a counter, not a bin)."""
    both = bins[0, :-1] + bins[1, :-1]  # below 2**63: each set's bins stay below 2**62
    out = 0
    for i in np.flatnonzero(both):
        out += int(both[i]) << int(i)
    return out


def from_lanes(
    count: int, low: float, high: float, sums: np.ndarray, squares: np.ndarray
) -> Moments:
    """The moments of values added by :func:`add_exact` into several lanes' bins
    (``[lane, bin]``), with their count and extremes."""
    total = sum(from_bins(lane) for lane in sums)
    finite = not sums[:, 0, -1].any()
    return Moments(count, total, sum(from_bins(lane) for lane in squares), low, high, finite)


# ---------------------------------------------------------------- fitted parameters


def require_values(count: int, total: int, what: str) -> None:
    """A statistic of no values is a :class:`FitError` naming the step and the column
    (``total``: the rows left after validation; -1 when unknown)."""
    if count == 0:
        counted = {0: " (no rows)", -1: ""}.get(total, f" (all {total:,} missing)")
        raise FitError(f"{what}: no non-missing values at fit time{counted}")


def standardize_params(moments: Moments, what: str) -> dict[str, object]:
    """``Standardize``'s mean and scale (population std; 1 for a near-constant column,
    with ``StandardScaler``'s tolerance). Values whose variance is beyond float64 are a
    :class:`FitError`, never a NaN scale that would silently quarantine every row."""
    require_values(moments.count, -1, what)
    count, mean, var = moments.count, moments.mean(), moments.variance()
    if not (np.isfinite(mean) and np.isfinite(var)):
        raise FitError(
            f"{what}: the mean or variance is not finite (±inf values or magnitudes near "
            "float64's limit); clip or log-transform the column first"
        )
    constant = var <= count * _EPS * var + (count * mean * _EPS) ** 2
    scale = 1.0 if constant else float(np.sqrt(var))
    return {"mean": mean, "var": var, "scale": scale, "count": count, "constant": bool(constant)}


# ---------------------------------------------------------------- per group


@dataclass(frozen=True)
class GroupMoments:
    """Per group: the count of present values, the exact sum and sum of squares of the
    finite ones, and the float sum of the infinite ones (0 without any; ±inf, or NaN for
    both signs). The sums are object arrays of Python integers ``total << total_shift``
    and ``squares << squares_shift`` in :class:`Moments`' units: the common power of two
    is kept apart, so the integers stay as small as the values' bits (a column of whole
    numbers: a few dozen bits, not two thousand)."""

    count: np.ndarray
    total: np.ndarray
    squares: np.ndarray
    infinite: np.ndarray
    total_shift: int = 0
    squares_shift: int = 0

    def mean(self) -> np.ndarray:
        """Each group's mean rounded once from its exact sum (NaN for a group without
        values; an infinite value's sign, or NaN, for a group holding one)."""
        low = min(self.total_shift, -EMIN)
        numerator = self.total << (self.total_shift - low)
        return self._ratio(numerator, self.count.astype(object) << (-EMIN - low), self.infinite)

    def variance(self) -> np.ndarray:
        """Each group's population variance rounded once from its exact sums (NaN for a
        group without values or holding an infinite value)."""
        n = self.count.astype(object)
        low = min(self.squares_shift, 2 * self.total_shift, -2 * EMIN)
        spread = ((n * self.squares) << (self.squares_shift - low)) - (
            (self.total * self.total) << (2 * self.total_shift - low)
        )
        odd = np.where(self.infinite != 0, np.nan, 0.0)
        return self._ratio(spread, (n * n) << (-2 * EMIN - low), odd)

    def exact(self) -> tuple[list[int], list[int]]:
        """The sums as plain integers in :class:`Moments`' units (for comparisons)."""
        return ([int(t) << self.total_shift for t in self.total],
                [int(q) << self.squares_shift for q in self.squares])  # fmt: skip

    def _ratio(
        self, numerator: np.ndarray, denominator: np.ndarray, infinite: np.ndarray
    ) -> np.ndarray:
        out = np.full(len(self.count), np.nan)
        live = np.flatnonzero((self.count > 0) & (infinite == 0))
        if len(live):
            try:  # Python's int / int, correctly rounded, in numpy's object loop
                out[live] = (numerator[live] / denominator[live]).astype(np.float64)
            except OverflowError:  # a variance beyond float64: inf
                out[live] = [_ratio(a, b) for a, b in zip(numerator[live], denominator[live])]
        odd = np.flatnonzero((self.count > 0) & (infinite != 0))
        out[odd] = infinite[odd]
        return out


#: integers ``ints << shift``: an object array of Python integers and its common power of 2
Scaled = tuple[np.ndarray, int]


def _scaled_sum(parts: list[tuple[np.ndarray, int, np.ndarray | slice]], n: int) -> Scaled:
    """``sum(ints << shift)`` of parts placed at their indexes among ``n`` (exact)."""
    live = [(ints, shift, at) for ints, shift, at in parts if len(ints) and ints.any()]
    out = _zeros(n)
    if not live:
        return out, 0
    low = min(shift for _, shift, _ in live)
    for ints, shift, at in live:
        out[at] += ints << (shift - low)
    return out, low


def group_merge(parts: list[tuple[GroupMoments, np.ndarray]], n_groups: int) -> GroupMoments:
    """The moments of ``n_groups`` groups from parts whose groups are ``at`` (distinct
    indexes within a part): integer addition, so any order gives the same."""
    count = np.zeros(n_groups, np.int64)
    infinite = np.zeros(n_groups)
    for part, at in parts:
        count[at] += part.count
        infinite[at] += part.infinite
    total = _scaled_sum([(p.total, p.total_shift, at) for p, at in parts], n_groups)
    squares = _scaled_sum([(p.squares, p.squares_shift, at) for p, at in parts], n_groups)
    return GroupMoments(count, total[0], squares[0], infinite, total[1], squares[1])


def _zeros(n: int) -> np.ndarray:
    out = np.empty(n, dtype=object)
    out[:] = 0
    return out


def group_moments(index: np.ndarray, values: np.ndarray, n_groups: int) -> GroupMoments:
    """The :class:`GroupMoments` of ``values`` (float64, NaN = missing) by group index
    (0 ... ``n_groups - 1``), vectorized with numpy (:func:`_group_sum`)."""
    present = ~np.isnan(values)
    g, x = (index[present], values[present]) if not present.all() else (index, values)
    g = g.astype(np.int64, copy=False)
    count = np.bincount(g, minlength=n_groups).astype(np.int64)
    infinite = np.zeros(n_groups)
    finite = np.isfinite(x)
    if not finite.all():
        infinite = np.bincount(g[~finite], x[~finite], minlength=n_groups)
        g, x = g[finite], x[finite]
    magnitude = np.abs(x)
    # beyond these a square overflows or its rounding error underflows: summed per group
    # by exact_sums, which scales them
    extreme = (magnitude > _SQUARE_HIGH) | ((magnitude < _SQUARE_LOW) & (magnitude > 0.0))
    every = slice(None)
    totals: list[tuple[np.ndarray, int, Any]] = []
    squares: list[tuple[np.ndarray, int, Any]] = []
    if extreme.any():
        scaled_total, scaled_squares = _zeros(n_groups), _zeros(n_groups)
        for group in np.unique(g[extreme]):
            scaled_total[group], scaled_squares[group] = exact_sums(x[extreme & (g == group)])
        totals.append((scaled_total, 0, every))
        squares.append((scaled_squares, 0, every))
        g, x = g[~extreme], x[~extreme]
    if len(x):
        most = int(np.bincount(g).max())
        totals.append((*_group_sum(g, x, n_groups, most, -EMIN), every))
        p, e = _dekker_square(x)
        squares.append((*_group_sum(g, p, n_groups, most, -2 * EMIN), every))
        if e.any():
            squares.append((*_group_sum(g, e, n_groups, most, -2 * EMIN), every))
    total, total_shift = _scaled_sum(totals, n_groups)
    square, square_shift = _scaled_sum(squares, n_groups)
    return GroupMoments(count, total, square, infinite, total_shift, square_shift)


def _dekker_square(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``p + e == x * x`` exactly (Veltkamp's split, Dekker's product)."""
    p = x * x
    t = x * 134217729.0  # 2**27 + 1
    high = t - (t - x)
    low = x - high
    e = high * high - p
    e += 2.0 * high * low
    e += low * low
    return p, e


def _group_sum(g: np.ndarray, v: np.ndarray, n_groups: int, most: int, shift: int) -> Scaled:
    """Per group, ``sum(v) * 2**shift`` exactly as Python integers (each must be one;
    ``|v| < 2**990``; ``most``: the largest group's number of values), scaled.

    As :func:`_float_sum`, for every group at once: each round rounds every value to a
    grid ``2**q`` (exact), sums by group with ``np.bincount`` — exact, since a group's
    pieces are integers times ``2**q`` whose sum stays below ``2**52`` — and goes on with
    the exact remainders one grid lower."""
    top = float(np.max(np.abs(v)))
    if top == 0.0:
        return _zeros(n_groups), 0
    piece = 52 - most.bit_length()
    q = max(math.frexp(top)[1] - piece, -1074)
    rest = v
    rounds = []
    while True:
        big = 1.5 * 2.0 ** (q + 52)
        rounded = rest + big
        rounded -= big
        sums = np.bincount(g, rounded, minlength=n_groups)
        rounds.append((sums, q))
        rest = rest - rounded
        if q == -1074 or not rest.any():
            return _from_units(rounds, shift)
        q = max(q - piece, -1074)


def _from_units(rounds: list[tuple[np.ndarray, int]], shift: int) -> Scaled:
    """The exact float sums of ``rounds`` (each on its grid ``2**q``) times ``2**shift``,
    as scaled integers."""
    live = [(sums, int(q)) for sums, q in rounds if sums.any()]
    if not live:
        return _zeros(len(rounds[0][0]) if rounds else 0), 0
    low = min(q for _, q in live)
    assert low + shift >= 0, "a sum finer than its units"
    out = _zeros(len(live[0][0]))
    for sums, q in live:
        out += np.ldexp(sums, -q).astype(np.int64).astype(object) << (q - low)
    return out, low + shift

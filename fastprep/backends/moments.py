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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from fastprep.errors import FitError
from fastprep.native import threads
from fastprep.native.arena import ARENA
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
    (``total``: the rows there were; -1 when unknown)."""
    if count == 0:
        counted = {0: " (the input has no rows)", -1: ""}.get(total, f" (all {total:,} missing)")
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


#: rounds of grid pieces the compiled pass keeps per group (a value needing more, or more
#: groups than :data:`_COMPILED_GROUPS`, takes the numpy pass: the same integers)
_ROUNDS = 8
_COMPILED_GROUPS = 1 << 18
#: the compiled scan splits its rows across the pool's threads from this many rows on,
#: while each range's per-group arrays stay small beside its rows
_PARALLEL_ROWS = 1 << 18
_ROWS_PER_GROUP = 64
#: values of a segment split into pieces at a time (the buffers stay in the CPU's cache)
_SEGMENT_BLOCK = 1 << 11


def _ranges(n: int, n_groups: int) -> list[tuple[int, int]]:
    """Row ranges for the compiled scan: one per thread of the pool for many rows and
    few groups (each range fills its own per-group arrays)."""
    lanes = min(threads.workers(), 8)
    if n < _PARALLEL_ROWS or n_groups * _ROWS_PER_GROUP * lanes > n:
        lanes = 1
    cuts = np.linspace(0, n, lanes + 1).astype(np.int64)
    return [(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:]) if b > a] or [(0, n)]


def segment_ranges(start: np.ndarray) -> list[tuple[int, int]]:
    """Group ranges ``(g0, g1)`` holding about equal numbers of segment values, one per
    thread of the pool from :data:`_PARALLEL_ROWS` values on (per-group work on laid-out
    values is compute-bound: the cores divide it)."""
    n_groups, n = len(start) - 1, int(start[-1])
    lanes = min(threads.workers(), 8) if n >= _PARALLEL_ROWS else 1
    cuts = np.searchsorted(start, np.linspace(0, n, lanes + 1)[1:-1])
    bounds = [0, *sorted({int(c) for c in cuts if 0 < c < n_groups}), n_groups]
    return list(zip(bounds[:-1], bounds[1:]))


@jit(cache=True, nogil=True, error_model="numpy")
def _group_scan(index, lut, values, count, low, high):  # pragma: no cover - compiled
    """Per group (row i's: ``lut[index[i]]``) the count of present values and their
    extremes; returns the largest and the smallest biased exponent of the finite nonzero
    values (a subnormal's is 0)."""
    bits = values.view(np.int64)
    top, bottom = 0, 0x7FF
    for i in range(len(index)):
        x = values[i]
        if x != x:
            continue
        g = lut[index[i]]
        count[g] += 1
        low[g] = min(low[g], x)
        high[g] = max(high[g], x)
        word = bits[i]
        field = (word >> 52) & 0x7FF
        live = field != 0x7FF and (word & 0x7FFFFFFFFFFFFFFF) != 0  # not inf or 0
        top = max(top, field if live else 0)
        bottom = min(bottom, field if live else 0x7FF)
    return top, bottom


@jit(cache=True, nogil=True)
def _segments(index, lut, values, fill, ordered):  # pragma: no cover - compiled
    """The present values laid out by group (``lut[index[i]]``), in row order:
    ``ordered[fill[g]:...]`` (a counting sort, ``fill`` advanced in place)."""
    for i in range(len(index)):
        x = values[i]
        if x == x:
            g = lut[index[i]]
            ordered[fill[g]] = x
            fill[g] += 1


@jit(cache=True, nogil=True)
def _present_counts(index, lut, values, count):  # pragma: no cover - compiled
    for i in range(len(index)):
        if values[i] == values[i]:
            count[lut[index[i]]] += 1


def segments(
    index: np.ndarray, values: np.ndarray, start: np.ndarray,
    counted: list[tuple[tuple[int, int], np.ndarray]] | None = None,
    lut: np.ndarray | None = None,
) -> np.ndarray:  # fmt: skip
    """The present values laid out by group (``start``: each group's first slot), each
    group's in row order: on row ranges of the pool's threads, each range counting its
    rows per group and then writing from where the earlier ranges' values of each group
    end (the same array as one serial pass). ``counted``: row ranges covering the rows
    in order with their present values per group, already counted: no count pass.
    ``lut``: row i's group is ``lut[index[i]]`` (see :func:`row_groups`)."""
    n_groups = len(start) - 1
    index, lut = row_groups(index, lut, n_groups)
    # warm memory: a fresh 8-byte-per-row array cost more in page faults than the sort
    ordered = ARENA.empty(int(start[-1]), np.float64)
    if counted is not None and len(counted) > 1:
        ranges, per_range = [r for r, _ in counted], [c for _, c in counted]
    else:
        ranges, per_range = _ranges(len(index), n_groups), None
    if len(ranges) < 2:
        _segments(index, lut, values, start[:-1].copy(), ordered)
        return ordered

    def count(bounds: tuple[int, int]) -> np.ndarray:
        found = np.zeros(n_groups, np.int64)
        _present_counts(index[bounds[0] : bounds[1]], lut, values[bounds[0] : bounds[1]], found)
        return found

    fills, at = [], start[:-1].copy()
    for found in per_range or threads.map_all(count, ranges):
        fills.append(at.copy())
        at += found
    threads.map_all(
        lambda r: _segments(
            index[r[0][0] : r[0][1]], lut, values[r[0][0] : r[0][1]], r[1], ordered
        ),
        list(zip(ranges, fills)),
    )
    return ordered


@jit(cache=True, nogil=True, fastmath={"reassoc"})
def _exact_total(pieces, m):  # pragma: no cover - compiled
    """``sum(pieces[:m])``: values on one grid whose every partial sum is exact, so any
    order gives the same bits (the reassociation lets the compiler use vector lanes)."""
    out = 0.0
    for i in range(m):
        out += pieces[i]
    return out


@jit(cache=True, nogil=True, error_model="numpy")
def _split_round(rest, pieces, m, big):  # pragma: no cover - compiled
    """``rest[:m]`` rounded to the grid of ``big`` into ``pieces``, the exact remainders
    left in ``rest``; whether any remainder is nonzero."""
    more = False
    for i in range(m):
        v = rest[i]
        piece = (v + big) - big
        pieces[i] = piece
        v -= piece
        rest[i] = v
        more |= v != 0.0
    return more


@jit(cache=True, nogil=True, error_model="numpy")
def _add_rounds(rest, pieces, m, bigs, acc, g):  # pragma: no cover - compiled
    """``rest[:m]``'s pieces on the grids of ``bigs``, summed into ``acc[:, g]`` (False:
    more rounds than ``acc`` holds)."""
    for r in range(acc.shape[0]):
        more = _split_round(rest, pieces, m, bigs[r])
        acc[r, g] += _exact_total(pieces, m)
        if not more:
            return True
    return False


@jit(cache=True, nogil=True, error_model="numpy")
def _segment_pieces(ordered, start, g0, g1, big_s, big_p, big_e, sums, products, errors,
                    infinite, scratch):  # pragma: no cover - compiled  # fmt: skip
    """Groups ``g0:g1`` of the laid-out values: the infinite values' sum, and the grid
    pieces of each finite value, of its square and of the square's rounding error
    (Dekker) in ``[round, group]`` float64 sums, exact (as :func:`_group_sum`'s), a
    block of ``scratch``'s width at a time; False when a value needs more rounds than
    the arrays hold. ``ordered`` is only read."""
    xs, ps, es, pieces = scratch[0], scratch[1], scratch[2], scratch[3]
    block = scratch.shape[1]
    for g in range(g0, g1):
        for a in range(start[g], start[g + 1], block):
            m = min(block, start[g + 1] - a)
            for i in range(m):
                x = ordered[a + i]
                if abs(x) == np.inf:  # summed apart; 0 adds nothing to the pieces
                    infinite[g] += x
                    x = 0.0
                p = x * x
                t = x * 134217729.0  # 2**27 + 1: Veltkamp's split, Dekker's product
                hi = t - (t - x)
                lo = x - hi
                e = hi * hi - p
                e += 2.0 * hi * lo
                e += lo * lo
                xs[i], ps[i], es[i] = x, p, e
            if not (_add_rounds(xs, pieces, m, big_s, sums, g)
                    and _add_rounds(ps, pieces, m, big_p, products, g)
                    and _add_rounds(es, pieces, m, big_e, errors, g)):  # fmt: skip
                return False
    return True


def _grids(emax: int, piece: int) -> np.ndarray:
    """The first :data:`_ROUNDS` grid exponents for values below ``2**emax``."""
    out, q = [], max(emax - piece, -1074)
    for _ in range(_ROUNDS):
        out.append(q)
        q = max(q - piece, -1074)
    return np.array(out, dtype=np.int64)


def grouped(
    index: np.ndarray, values: np.ndarray, n_groups: int
) -> tuple[GroupMoments, np.ndarray | None, np.ndarray | None]:
    """The :class:`GroupMoments` by the compiled pass or numpy's, whichever the planner
    predicts faster (helper family ``moments``, as :func:`sums_of`; the same integers
    either way); with each group's min and max when the compiled pass ran."""
    loaded = numba_loaded(_segment_pieces)
    # the disk cache is looked at only when Numba could be chosen (it is a file read)
    cached = loaded or (
        (numba_imported() or job_imports_numba(len(values))) and numba_cached(_segment_pieces)
    )
    if kernel_path("moments", len(values), cached=cached, loaded=loaded) == "numba":
        found = compiled_group_moments(index, values, n_groups)
        if found is not None:
            return found
    return group_moments(index, values, n_groups), None, None


#: ``(ordered, start, g0, g1)``: work on groups ``g0:g1`` of the present values laid out by
#: group (``ordered[start[g]:start[g + 1]]``, in row order), which it may reorder in place
SegmentWork = Callable[[np.ndarray, np.ndarray, int, int], None]


def row_groups(
    index: np.ndarray, lut: np.ndarray | None, n_groups: int
) -> tuple[np.ndarray, np.ndarray]:
    """``(index, lut)`` as the compiled passes read them: row i's group is
    ``lut[index[i]]`` (-1 reads the last slot); ``index`` int32 (a text column's own codes)
    or int64, ``lut`` int64 (the identity when None: ``index`` holds the groups)."""
    kind = np.int32 if index.dtype == np.int32 else np.int64
    index = np.ascontiguousarray(index, dtype=kind)
    if lut is None:
        return index, np.arange(n_groups, dtype=np.int64)
    return index, np.ascontiguousarray(lut, dtype=np.int64)


def compiled_group_moments(
    index: np.ndarray, values: np.ndarray, n_groups: int, then: SegmentWork | None = None,
    lut: np.ndarray | None = None,
) -> tuple[GroupMoments, np.ndarray, np.ndarray] | None:  # fmt: skip
    """:func:`group_moments` by compiled passes, with each group's min and max (±inf for a
    group without values); None when the values need the numpy pass (magnitudes whose
    squares leave float64's range, very many groups or rounds).

    A scan counts each group's values (and their extremes) on row ranges, a counting sort
    lays the values out by group, and each group's exact sums are then taken from its
    contiguous values (on ranges of groups): the grid rounding of every value runs on
    vector lanes, where a scatter of each value's pieces to its group could not.
    ``then``, if given, runs on each range of groups right after its sums, on the same
    thread, while its values are in the CPU's cache (a median's selection); when the
    pass declines, some ranges may have run it. ``lut``: row i's group is
    ``lut[index[i]]`` (a text key's own codes read through its table: no per-row array
    of groups made first)."""
    if n_groups > _COMPILED_GROUPS:
        return None
    values = np.ascontiguousarray(values, dtype=np.float64)
    index, lut = row_groups(index, lut, n_groups)
    ranges = _ranges(len(values), n_groups)

    def scan(bounds: tuple[int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int]:
        a, b = bounds
        count = np.zeros(n_groups, np.int64)
        low, high = np.full(n_groups, np.inf), np.full(n_groups, -np.inf)
        top, bottom = _group_scan(index[a:b], lut, values[a:b], count, low, high)
        return count, low, high, top, bottom

    parts = threads.map_all(scan, ranges)
    top, bottom = max(p[3] for p in parts), min(p[4] for p in parts)
    if top > _HIGH_FIELD or bottom < _LOW_FIELD:  # squares beyond float64's range
        return None
    count, low, high = (a.copy() for a in parts[0][:3])
    # min/max keep the earlier range's value on a tie (as the scan keeps the earlier
    # row's: -0.0 against 0.0)
    for r_count, r_low, r_high, _, _ in parts[1:]:
        count += r_count
        low = np.where(r_low < low, r_low, low)
        high = np.where(r_high > high, r_high, high)
    start = np.zeros(n_groups + 1, np.int64)
    np.cumsum(count, out=start[1:])
    ordered = segments(index, values, start, [(r, p[0]) for r, p in zip(ranges, parts)], lut)
    found = _segment_moments(ordered, start, count, top, then)
    return None if found is None else (found, low, high)


def _segment_moments(
    ordered: np.ndarray, start: np.ndarray, count: np.ndarray, top: int,
    then: SegmentWork | None = None,
) -> GroupMoments | None:  # fmt: skip
    """The exact moments of laid-out values (``top``: their largest biased exponent)."""
    n_groups = len(count)
    emax = top - 1022 if top else 0  # every |x| < 2**emax
    # each round's per-group sum stays below 2**52 grid units: no group has more values
    piece = 52 - max(int(count.max()) if n_groups else 1, 1).bit_length()
    grids = (_grids(emax, piece), _grids(2 * emax, piece), _grids(2 * emax - 53, piece))
    bigs = [1.5 * np.exp2(q.astype(np.float64) + 52) for q in grids]
    sums, products, errors = (np.zeros((_ROUNDS, n_groups)) for _ in range(3))
    infinite = np.zeros(n_groups)

    def pieces(bounds: tuple[int, int]) -> bool:
        scratch = np.empty((4, _SEGMENT_BLOCK))
        done = _segment_pieces(ordered, start, bounds[0], bounds[1], bigs[0], bigs[1],
                               bigs[2], sums, products, errors, infinite, scratch)  # fmt: skip
        if done and then is not None:
            then(ordered, start, *bounds)
        return bool(done)

    # every group range writes only its own groups' columns
    if not all(threads.map_all(pieces, segment_ranges(start))):
        return None
    every = slice(None)
    total, total_shift = _from_units(list(zip(sums, grids[0])), -EMIN)
    squares = _scaled_sum([
        (*_from_units(list(zip(products, grids[1])), -2 * EMIN), every),
        (*_from_units(list(zip(errors, grids[2])), -2 * EMIN), every),
    ], n_groups)  # fmt: skip
    return GroupMoments(count, total, squares[0], infinite, total_shift, squares[1])

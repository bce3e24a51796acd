"""Per-group exact moments by compiled passes: the Numba twin of
:func:`fastprep.backends.moments.group_moments` (the same integers), with each group's
extremes, and the present values laid out by group, which a median then selects in.

A count of each group's present values on row ranges (and the values' exponent range), a
counting sort that lays the values out by group, and each range of groups then sums its
values' pieces on the grids of :func:`fastprep.backends.moments._group_sum` (exact; see
:class:`fastprep.backends.moments.GroupMoments`) and takes their extremes.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from fastprep.backends.moments import (
    _HIGH_FIELD,
    _LOW_FIELD,
    EMIN,
    GroupMoments,
    _from_units,
    _scaled_sum,
    group_moments,
)
from fastprep.native import threads
from fastprep.native.arena import ARENA
from fastprep.native.kernel_files import intrinsic, jit, numba_cached, numba_loaded
from fastprep.planning.planner import job_imports_numba, kernel_path, numba_imported

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
def _code_segments(index, values, fill, ordered):  # pragma: no cover - compiled
    """:func:`_segments` with ``fill`` by code (``fill[c]``: where the next value of code
    c's group goes): no read through the lut per row."""
    for i in range(len(index)):
        x = values[i]
        if x == x:
            c = index[i]
            f = fill[c]
            ordered[f] = x
            fill[c] = f + 1


stream_line = intrinsic("fastprep.native.streaming", "stream_line")
store_fence = intrinsic("fastprep.native.streaming", "store_fence")
fma = intrinsic("fastprep.native.exact_ops", "fma")


@jit(cache=True, nogil=True)
def _code_segments_streamed(index, values, fill, ordered, phase, lines):  # pragma: no cover
    """:func:`_code_segments` writing whole 64-byte lines by non-temporal stores: a
    code's values are gathered 8 at a time in its 8 slots of ``lines`` (which stay in the
    CPU's cache), and a line that lies within the code's slots of this call (from where
    ``fill`` starts) is stored whole when its last slot is filled (no read of the line
    first); a line shared with other groups or calls, and what is left of each code's
    last line, by plain stores. ``phase``: ``ordered``'s address / 8 mod 8 (slot f's line
    starts at slot ``f - (f + phase) % 8``)."""
    first = fill.copy()
    codes = len(fill)
    for i in range(len(index)):
        x = values[i]
        if x == x:
            c = index[i]
            if c < 0:  # code -1: the last slot (the raw store below does not wrap)
                c += codes
            f = fill[c]
            k = (f + phase) & 7
            if f - k >= first[c]:  # the line holds only this call's values of the group
                lines[c * 8 + k] = x
                if k == 7:
                    stream_line(ordered, f - 7, lines, c * 8)
            else:
                ordered[f] = x
            fill[c] = f + 1
    for c in range(len(fill)):  # the lines begun but not filled
        f = fill[c]
        k = (f + phase) & 7
        if f - k >= first[c]:
            for j in range(k):
                ordered[f - k + j] = lines[c * 8 + j]
    store_fence()


@jit(cache=True, nogil=True)
def _present_counts(index, lut, values, count):  # pragma: no cover - compiled
    for i in range(len(index)):
        if values[i] == values[i]:
            count[lut[index[i]]] += 1


@jit(cache=True, nogil=True)
def _code_counts(index, values, count):  # pragma: no cover - compiled
    for i in range(len(index)):
        count[index[i]] += values[i] == values[i]  # code -1 counts in the last slot


@jit(cache=True, nogil=True)
def _exponent_range(values):  # pragma: no cover - compiled
    """The largest and the smallest biased exponent of the finite nonzero values (a
    subnormal's is 0; 0 and 0x7FF without any): integer max/min over the bits, on
    vector lanes (the same in the counting sort's loop cost it ~20%)."""
    bits = values.view(np.int64)
    top, bottom = 0, 0x7FF
    for i in range(len(bits)):
        word = bits[i]
        field = (word >> 52) & 0x7FF
        live = field != 0x7FF and (word & 0x7FFFFFFFFFFFFFFF) != 0  # not NaN, inf or 0
        top = max(top, field if live else 0)
        bottom = min(bottom, field if live else 0x7FF)
    return top, bottom


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
    if counted is not None and len(counted) > 1:
        layout = Layout(index, lut, values, n_groups, by_code=False)
        return layout.lay_out(start, [r for r, _ in counted], [c for _, c in counted])
    layout = Layout(index, lut, values, n_groups)
    ranges = _ranges(len(index), n_groups)
    return layout.lay_out(start, ranges, threads.map_all(layout.count, ranges))


#: a lut over at most this many codes beyond twice the groups is read per code, not per
#: row: counts and fills by code (the lut is then read once per code)
_BY_CODE_SLACK = 1 << 12


class Layout:
    """How a counting sort reads the rows' groups (``lut[index[i]]``): by code when the
    lut is not much larger than the groups (counts and fills indexed by the row's code
    itself, each mapped to its group once: no lut read per row), else by group."""

    def __init__(
        self, index: np.ndarray, lut: np.ndarray, values: np.ndarray, n_groups: int,
        by_code: bool | None = None,
    ) -> None:  # fmt: skip
        self.index, self.lut, self.values, self.n_groups = index, lut, values, n_groups
        if by_code is None:
            by_code = len(lut) <= 2 * n_groups + _BY_CODE_SLACK and _one_code_per_group(lut)
        self.by_code = by_code

    def count(self, bounds: tuple[int, int]) -> np.ndarray:
        """The present values among rows ``bounds``, per code (or per group)."""
        a, b = bounds
        if self.by_code:
            found = np.zeros(len(self.lut), np.int64)
            _code_counts(self.index[a:b], self.values[a:b], found)
        else:
            found = np.zeros(self.n_groups, np.int64)
            _present_counts(self.index[a:b], self.lut, self.values[a:b], found)
        return found

    def per_group(self, found: np.ndarray) -> np.ndarray:
        """:meth:`count`'s result per group."""
        if not self.by_code:
            return found
        valid = (self.lut >= 0) & (self.lut < self.n_groups)
        weights = found[valid].astype(np.float64)  # exact: counts below 2**53
        summed = np.bincount(self.lut[valid], weights, minlength=self.n_groups)
        return summed.astype(np.int64)

    def lay_out(
        self, start: np.ndarray, ranges: list[tuple[int, int]], per_range: list[np.ndarray]
    ) -> np.ndarray:
        """The counting sort: each range writes from where the earlier ranges' values of
        each group end (``per_range``: :meth:`count` of each range)."""
        # warm memory: a fresh 8-byte-per-row array cost more in page faults than the sort
        ordered = ARENA.empty(int(start[-1]), np.float64)
        at = start[self.lut] if self.by_code else start[:-1].copy()  # lut -1: the end
        fills = []
        for found in per_range:
            fills.append(at.copy())
            at += found
        scatter = self._scatter(ordered)
        threads.map_all(lambda r: scatter(r[0][0], r[0][1], r[1]), list(zip(ranges, fills)))
        return ordered

    def _scatter(self, ordered: np.ndarray) -> Callable[[int, int, np.ndarray], None]:
        """Rows ``a:b`` into ``ordered`` from ``fill``: large outputs by code of a lut
        small enough for a line per code in the core's cache by whole lines stored
        non-temporally (:func:`_code_segments_streamed`: ~45% less time at 3.4M rows)."""
        index, values, lut = self.index, self.values, self.lut
        if not self.by_code:
            return lambda a, b, fill: _segments(index[a:b], lut, values[a:b], fill, ordered)
        if ordered.nbytes < STREAM_BYTES or len(lut) > STREAM_CODES or ordered.ctypes.data % 8:
            return lambda a, b, fill: _code_segments(index[a:b], values[a:b], fill, ordered)
        phase = np.int64(ordered.ctypes.data // 8 % 8)

        def run(a: int, b: int, fill: np.ndarray) -> None:
            lines = np.empty(len(fill) * 8)  # each call its own
            _code_segments_streamed(index[a:b], values[a:b], fill, ordered, phase, lines)

        return run


def _one_code_per_group(lut: np.ndarray) -> bool:
    """No two codes read as the same group (a fill per code would then write one group's
    slots twice)."""
    groups = lut[lut >= 0]
    return not len(groups) or int(np.bincount(groups).max()) == 1


#: a counting sort writing at least this many bytes stores whole lines non-temporally ...
STREAM_BYTES = 8 << 20
#: ... while a line per code (its values gathered there) stays in the core's cache
STREAM_CODES = 1 << 14


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
                    infinite, low, high, scratch):  # pragma: no cover - compiled  # fmt: skip
    """Groups ``g0:g1`` of the laid-out values: the infinite values' sum, the extremes
    (each segment in row order: a tie keeps the earlier row's, -0.0 against 0.0), and
    the grid pieces of each finite value, of its square and of the square's rounding
    error (a fused multiply-add: the value of Dekker's product in the numpy twin) in
    ``[round, group]`` float64 sums, exact (as :func:`_group_sum`'s),
    a block of ``scratch``'s width at a time; False when a value needs more rounds than
    the arrays hold. ``ordered`` is only read."""
    xs, ps, es, pieces = scratch[0], scratch[1], scratch[2], scratch[3]
    block = scratch.shape[1]
    lows, highs = np.empty(4), np.empty(4)
    for g in range(g0, g1):
        lows[:] = np.inf
        highs[:] = -np.inf
        for a in range(start[g], start[g + 1], block):
            m = min(block, start[g + 1] - a)
            _extremes(ordered, a, a + m, lows, highs)
            for i in range(m):
                x = ordered[a + i]
                if abs(x) == np.inf:  # summed apart; 0 adds nothing to the pieces
                    infinite[g] += x
                    x = 0.0
                p = x * x
                e = fma(x, x, -p)  # exact (no overflow: the caller checked the exponents)
                xs[i], ps[i], es[i] = x, p, e
            if not (_add_rounds(xs, pieces, m, big_s, sums, g)
                    and _add_rounds(ps, pieces, m, big_p, products, g)
                    and _add_rounds(es, pieces, m, big_e, errors, g)):  # fmt: skip
                return False
        low[g] = _first_equal(ordered, start[g], start[g + 1], lows.min())
        high[g] = _first_equal(ordered, start[g], start[g + 1], highs.max())
    return True


@jit(cache=True, inline="always")
def _extremes(a, lo, hi, lows, highs):  # pragma: no cover - compiled
    """``lows``/``highs`` lowered/raised by ``a[lo:hi]``, in four independent chains (one
    chain waits on each comparison: 2x the pass)."""
    l0, l1, l2, l3 = lows[0], lows[1], lows[2], lows[3]
    h0, h1, h2, h3 = highs[0], highs[1], highs[2], highs[3]
    i = lo
    while i + 4 <= hi:
        x0, x1, x2, x3 = a[i], a[i + 1], a[i + 2], a[i + 3]
        l0, l1, l2, l3 = min(l0, x0), min(l1, x1), min(l2, x2), min(l3, x3)
        h0, h1, h2, h3 = max(h0, x0), max(h1, x1), max(h2, x2), max(h3, x3)
        i += 4
    while i < hi:
        l0, h0 = min(l0, a[i]), max(h0, a[i])
        i += 1
    lows[0], lows[1], lows[2], lows[3] = l0, l1, l2, l3
    highs[0], highs[1], highs[2], highs[3] = h0, h1, h2, h3


@jit(cache=True, inline="always")
def _first_equal(a, lo, hi, value):  # pragma: no cover - compiled
    """``value``, or for a zero the first zero of ``a[lo:hi]`` with its sign: a scan in
    row order keeps the earlier of equal values, and only -0.0 and 0.0 are equal values
    of different bits (the segments hold no NaN)."""
    if value != 0.0:
        return value
    for i in range(lo, hi):
        if a[i] == 0.0:
            return a[i]
    return value


#: values of consecutive groups summed, then handed to ``then``, at a time: they are
#: still in the core's cache (1 MiB of its 2) when ``then`` reads them (the median's
#: selection: 10-15% less CPU for both at 3.4M rows than one run per thread's groups)
_CACHED_VALUES = 1 << 17


def _cached_runs(start: np.ndarray, g0: int, g1: int) -> list[tuple[int, int]]:
    """Groups ``g0:g1`` cut into runs of at most :data:`_CACHED_VALUES` values (a larger
    group a run of its own)."""
    runs, g = [], g0
    while g < g1:
        end = int(np.searchsorted(start, start[g] + _CACHED_VALUES, side="right")) - 1
        end = min(max(end, g + 1), g1)
        runs.append((g, end))
        g = end
    return runs


#: the compiled per-group pass's kernels (a caller asks whether they are loaded or cached)
GROUP_KERNELS = (_code_counts, _exponent_range, _code_segments, _code_segments_streamed,
                 _segment_pieces)  # fmt: skip


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


#: the types of a row's codes the compiled passes read as they are (others as int64)
INDEX_TYPES = (np.dtype(np.int32), np.dtype(np.uint16), np.dtype(np.uint32))


def row_groups(
    index: np.ndarray, lut: np.ndarray | None, n_groups: int
) -> tuple[np.ndarray, np.ndarray]:
    """``(index, lut)`` as the compiled passes read them: row i's group is
    ``lut[index[i]]`` (-1 reads the last slot); ``index`` int32 (a text column's own codes),
    uint16 or uint32 (a fit's combined codes of a small key space) or int64, ``lut``
    int64 (the identity when None: ``index`` holds the groups)."""
    kind = index.dtype if index.dtype in INDEX_TYPES else np.int64
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

    A count of each group's present values on row ranges (with the values' exponent
    range), a counting sort that lays them out by group, and each group's exact sums
    and extremes then taken from its contiguous values (on ranges of groups): the grid
    rounding of every value runs on vector lanes, where a scatter of each value's
    pieces to its group could not, and the extremes are no read-modify-write per row.
    ``then``, if given, runs on each range of groups right after its sums, on the same
    thread, while its values are in the CPU's cache (a median's selection); when the
    pass declines, some ranges may have run it. ``lut``: row i's group is
    ``lut[index[i]]`` (a text key's own codes read through its table: no per-row array
    of groups made first)."""
    if n_groups > _COMPILED_GROUPS:
        return None
    values = np.ascontiguousarray(values, dtype=np.float64)
    index, lut = row_groups(index, lut, n_groups)
    layout = Layout(index, lut, values, n_groups)
    ranges = _ranges(len(values), n_groups)

    def counted(bounds: tuple[int, int]) -> tuple[np.ndarray, tuple[int, int]]:
        return layout.count(bounds), _exponent_range(values[bounds[0] : bounds[1]])

    found = threads.map_all(counted, ranges)
    per_range = [f[0] for f in found]
    top = max([int(f[1][0]) for f in found] or [0])
    bottom = min([int(f[1][1]) for f in found] or [0x7FF])
    total = per_range[0].copy()
    for part in per_range[1:]:
        total += part
    count = layout.per_group(total)
    start = np.zeros(n_groups + 1, np.int64)
    np.cumsum(count, out=start[1:])
    ordered = layout.lay_out(start, ranges, per_range)
    if top > _HIGH_FIELD or bottom < _LOW_FIELD:  # squares beyond float64's range
        return None
    low, high = np.full(n_groups, np.inf), np.full(n_groups, -np.inf)
    found = _segment_moments(ordered, start, count, top, then, (low, high))
    return None if found is None else (found, low, high)


def _segment_moments(
    ordered: np.ndarray, start: np.ndarray, count: np.ndarray, top: int,
    then: SegmentWork | None = None, extremes: tuple[np.ndarray, np.ndarray] | None = None,
) -> GroupMoments | None:  # fmt: skip
    """The exact moments of laid-out values (``top``: their largest biased exponent);
    ``extremes``: each group's min and max written there (±inf without values)."""
    n_groups = len(count)
    emax = top - 1022 if top else 0  # every |x| < 2**emax
    # each round's per-group sum stays below 2**52 grid units: no group has more values
    piece = 52 - max(int(count.max()) if n_groups else 1, 1).bit_length()
    grids = (_grids(emax, piece), _grids(2 * emax, piece), _grids(2 * emax - 53, piece))
    bigs = [1.5 * np.exp2(q.astype(np.float64) + 52) for q in grids]
    sums, products, errors = (np.zeros((_ROUNDS, n_groups)) for _ in range(3))
    infinite = np.zeros(n_groups)
    low, high = extremes or (np.empty(n_groups), np.empty(n_groups))

    def pieces(bounds: tuple[int, int]) -> bool:
        scratch = np.empty((4, _SEGMENT_BLOCK))
        for g0, g1 in _cached_runs(start, *bounds):
            done = _segment_pieces(ordered, start, g0, g1, bigs[0], bigs[1], bigs[2], sums,
                                   products, errors, infinite, low, high, scratch)  # fmt: skip
            if not done:
                return False
            if then is not None:
                then(ordered, start, g0, g1)
        return True

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

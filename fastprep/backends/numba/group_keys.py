"""The rows' group codes for the Numba twin of
:mod:`fastprep.backends.reference.group_stats`: several keys' codes combined into one
code per row (text keys read through their luts in one pass; a fit's codes marked present
as they are written), a number key's levels and codes, and which codes are present. Fit and
transform both read them; the per-row kernels run on row ranges of the pool's threads.
"""

from __future__ import annotations

import numpy as np

from fastprep.backends import group_moments
from fastprep.native import threads
from fastprep.native.arena import ARENA
from fastprep.native.kernel_files import intrinsic, jit

#: an unsigned index, a signed code's -1 reading the last slot (no negative-index test)
slot = intrinsic("fastprep.native.indexing", "slot")


@jit(cache=True, nogil=True)
def _accumulate(combined, codes, lut, size, first):  # pragma: no cover - compiled
    # ``lut`` None (a key's own codes): Numba compiles that signature without the branch
    for i in range(np.uint64(len(codes))):
        code = codes[i] if lut is None else through(lut, codes[i])
        if first:
            combined[i] = code
        elif code < 0 or combined[i] < 0:
            combined[i] = -1
        else:
            combined[i] = combined[i] * size + code


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
    threads.map_all(lambda r: _accumulate(out[r[0] : r[1]], codes[r[0] : r[1]], lut, size, first),
                    row_ranges(len(codes)))  # fmt: skip
    return out


@jit(cache=True, inline="always")
def through(lut, code):  # pragma: no cover - compiled
    """``lut[code]``, code -1 reading the last slot (the missing code), by an unsigned
    index (no test for a negative one at each access)."""
    return lut[slot(code, np.uint64(len(lut) - 1))]


@jit(cache=True, inline="always")
def row_group(codes, luts, sizes, i, missing):  # pragma: no cover - compiled
    """Row ``i``'s group: its keys' codes (each through its lut) combined in the radix
    ``sizes``; ``missing`` when a key has no level (code -1)."""
    combined = 0
    for k in range(len(codes)):
        code = through(luts[k], codes[k][i])
        if code < 0:
            return missing
        combined = combined * sizes[k] + code
    return combined


@jit(cache=True, nogil=True)
def _combine_texts(out, codes, luts, sizes):  # pragma: no cover - compiled
    for i in range(np.uint64(len(out))):
        out[i] = row_group(codes, luts, sizes, i, -1)


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
        codes = tuple(read_only(c[r[0] : r[1]]) for c, _ in parts)
        _combine_texts(out[r[0] : r[1]], codes, luts, radix)

    threads.map_all(run, row_ranges(n))
    return out


@jit(cache=True, nogil=True)
def _combine_marking(out, codes, luts, sizes, seen):  # pragma: no cover - compiled
    """:func:`_combine_texts` into unsigned ``out``, marking each code in ``seen``;
    False if a row's key has no level (its code could not be written)."""
    for i in range(np.uint64(len(out))):
        combined = row_group(codes, luts, sizes, i, -1)
        if combined < 0:
            return False
        out[i] = combined
        seen[np.uint64(combined)] = True
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
        codes = tuple(read_only(c[r[0] : r[1]]) for c, _ in parts)
        return seen if _combine_marking(out[r[0] : r[1]], codes, luts, radix, seen) else None

    tables = threads.map_all(run, row_ranges(n))
    if not tables or any(t is None for t in tables):
        return None
    return out, np.logical_or.reduce(tables)


def read_only(codes: np.ndarray) -> np.ndarray:
    """A contiguous read-only view: codes over Arrow's buffers are read-only, codes a
    kernel wrote are not; one type lets the kernel index them as a tuple."""
    view = np.ascontiguousarray(codes).view()
    view.flags.writeable = False
    return view


def row_codes(codes: np.ndarray) -> np.ndarray:
    """``codes`` as the kernels read them: int32 (a text column's own), uint16 or uint32
    (a fit's combined codes of a small key space) or int64."""
    if codes.dtype in group_moments.INDEX_TYPES:
        return np.ascontiguousarray(codes)
    return np.ascontiguousarray(codes, dtype=np.int64)


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
                    row_ranges(len(values)))  # fmt: skip
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
            seen[np.uint64(np.int64(v) - low)] = True  # within the span


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
    ranges = row_ranges(len(values)) or [(0, 0)]
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
    for i in range(np.uint64(len(values))):
        v = values[i]
        if v == v:
            offset = np.int64(v) - low
            out[i] = offset
            seen[np.uint64(offset)] = True  # within the span: no negative-index test
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
    ranges = row_ranges(len(values)) or [(0, 0)]
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
    for i in range(np.uint64(len(values))):
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
                                             out[r[0] : r[1]]), row_ranges(len(values)))  # fmt: skip
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


def row_ranges(n: int) -> list[tuple[int, int]]:
    lanes = min(threads.workers(), 8) if n >= PARALLEL_ROWS else 1
    cuts = np.linspace(0, n, lanes + 1).astype(np.int64)
    return [(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:]) if b > a]


@jit(cache=True, nogil=True)
def _mark_codes(codes, seen):  # pragma: no cover - compiled
    # the codes are >= 0; a -1 would still mark the last slot, not past every slot
    last = np.uint64(len(seen) - 1)
    for i in range(np.uint64(len(codes))):
        seen[slot(codes[i], last)] = True


def present(combined: np.ndarray, space: int) -> np.ndarray:
    """The numpy twin's codes present, without counting: each row range marks its own
    byte table (no shared writes), the tables or-ed; one range for a space near the rows'
    count (a table per thread would cost more than the pass)."""
    combined = row_codes(combined)
    if space * TABLE_SHARE > len(combined):
        ranges = [(0, len(combined))]
    else:
        ranges = row_ranges(len(combined))

    def mark(bounds: tuple[int, int]) -> np.ndarray:
        seen = np.zeros(space, dtype=np.bool_)
        _mark_codes(combined[bounds[0] : bounds[1]], seen)
        return seen

    tables = threads.map_all(mark, ranges) if len(combined) else [np.zeros(space, np.bool_)]
    return np.logical_or.reduce(tables)


#: the kernels of this module a GroupStats fit and transform run (the planner asks
#: whether they are loaded or cached)
KERNELS = (_accumulate, _mark_codes, _combine_marking)

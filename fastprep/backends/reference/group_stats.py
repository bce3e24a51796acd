"""``GroupStats``: statistics of a numeric column per group of key columns, fitted and then
gathered back onto the rows (numpy; no pandas groupby, no per-row Python).

Each key column is coded against its fitted *levels* (its sorted distinct present values;
a missing key takes the code after them, so missing is a group value of its own, as in
pandas ``groupby(dropna=False)``); the per-key codes combine into one int64 per row (mixed
radix) and the fitted groups are the distinct combined codes, sorted. Counts come from
``np.bincount`` over group indexes, the mean and std from each group's exact sums
(:func:`fastprep.backends.moments.group_moments`: each rounded once), min/max from
``ufunc.at``, the median from
one sort by (group, value). :class:`GroupKernels` names the per-row work; the Numba backend
passes its twin's.

Fitted parameters, per output column: ``{"stat", "levels", "groups", "values"}`` — the
levels per key (a list of text values, or a float64 array), the groups' combined codes
and the statistic per group. Every output of one step shares levels and groups.

A partitioned fit merges per-partition :class:`GroupPartial` s: each partition's groups are
recoded into the union of levels, then the groups' exact sums (integers) add up, so the
merged mean and std are the one-process fit's bits; counts and extremes are exact too.
The median needs every value of a group, so
each partition sends its present values with their group (gathered on the client, in
partition order): one pass over the data either way.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from fastprep.backends import group_moments, moments
from fastprep.data.columns import Table, TextColumn
from fastprep.errors import FitError
from fastprep.plan.steps import GroupStats

Levels = list[str] | np.ndarray
#: combined codes up to this many possible groups index a dense table (else a sorted search)
DENSE_GROUPS = 1 << 22


# ---------------------------------------------------------------- key coding


def fit_levels(column: np.ndarray | TextColumn, kernels: GroupKernels | None = None) -> Levels:
    """A key column's sorted distinct present values."""
    if isinstance(column, TextColumn):
        used = np.flatnonzero(column.value_counts()[1:])  # slot 0: missing
        return sorted(str(v) for v in column.uniques[used])
    return (kernels or NUMPY).number_levels(np.asarray(column, dtype=np.float64))


def text_levels_parts(column: TextColumn) -> tuple[list[str], tuple[np.ndarray, np.ndarray]]:
    """A text key's :func:`fit_levels` and :func:`key_parts` at fit together: the values
    present, sorted, and the lut from the column's codes to their ranks (no lookup of the
    sorted values among the column's own: their order is the lut)."""
    used = np.flatnonzero(column.value_counts()[1:])  # slot 0: missing
    names = [str(v) for v in column.uniques[used]]
    # Python's string order, as sorted() (a stable sort of the indexes by their name:
    # ~2x faster than numpy's argsort of an object array)
    order = sorted(range(len(names)), key=names.__getitem__)
    lut = np.full(column.n_unique + 1, -1, dtype=np.int64)
    lut[used[np.asarray(order, dtype=np.int64)]] = np.arange(len(used))
    lut[-1] = len(used)  # code -1 (missing) reads the last slot: the missing code
    return [names[i] for i in order], (column.codes, lut)


def number_levels(values: np.ndarray) -> np.ndarray:
    """The sorted distinct values of a float64 array, NaN left out."""
    return np.unique(values[~np.isnan(values)])


def key_parts(
    column: np.ndarray | TextColumn, levels: Levels, kernels: GroupKernels | None = None
) -> tuple[np.ndarray, np.ndarray | None]:
    """A key's codes as ``(codes, lut)``: the code of a row is ``lut[codes[i]]`` (text:
    the column's own codes, -1 reading the lut's last slot, the missing code), or
    ``codes[i]`` itself when ``lut`` is None (numbers; or, by kernels that can, int32
    offsets read through a lut as a text key's codes). A code is the value's index among
    ``levels``, ``len(levels)`` for missing, -1 for a value unseen at fit."""
    if isinstance(column, TextColumn):
        found = _indexes(column.uniques, list(levels))
        return column.codes, np.append(found, np.int64(len(levels)))
    values = _numbers(np.asarray(column))
    levels = np.asarray(levels, dtype=np.float64)
    kernels = kernels or NUMPY
    if kernels.number_key_codes is not None:
        coded = kernels.number_key_codes(values, levels)
        if coded is not None:
            return coded
    return kernels.number_codes(np.asarray(values, dtype=np.float64), levels), None


def number_codes(values: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """Per value: its index among the sorted ``levels``, ``len(levels)`` if NaN, else -1."""
    position = np.searchsorted(levels, values)
    clipped = np.minimum(position, max(len(levels) - 1, 0))
    known = (position < len(levels)) & (levels[clipped] == values) if len(levels) else False
    return np.where(np.isnan(values), len(levels), np.where(known, position, -1))


def radices(levels: list[Levels], keys: tuple[str, ...]) -> list[int]:
    """Per key, its number of codes (levels + missing); refuses a key space beyond int64."""
    sizes = [len(lv) + 1 for lv in levels]
    if math.prod(sizes) >= 2**62:
        raise FitError(
            f"GroupStats keys {', '.join(keys)}: {' x '.join(f'{s:,}' for s in sizes)} possible "
            "key combinations do not fit a 62-bit group code; group by fewer or coarser keys"
        )
    return sizes


def accumulate(
    combined: np.ndarray | None, codes: np.ndarray, lut: np.ndarray | None, size: int
) -> np.ndarray:
    """``combined * size + code`` per row (the first key: its code); -1 stays -1."""
    code = codes.astype(np.int64) if lut is None else lut[codes]  # code -1: lut's last slot
    if combined is None:
        return code
    out = combined * size + code
    unseen = code < 0
    if unseen.any() or (combined < 0).any():
        out[unseen | (combined < 0)] = -1
    return out


def take(lookup: np.ndarray, combined: np.ndarray) -> np.ndarray:
    """``lookup[combined]`` (-1 reads the last slot)."""
    return lookup[combined]


def combine(
    parts: list[tuple[np.ndarray, np.ndarray | None]], sizes: list[int],
    kernels: GroupKernels | None = None,
) -> np.ndarray:  # fmt: skip
    """One int64 per row (mixed radix); -1 where some key is unseen."""
    kernels = kernels or NUMPY
    if len(parts) > 1 and _coded(parts) and kernels.combine_texts is not None:
        return kernels.combine_texts(parts, sizes)  # every text key in one pass
    step = kernels.accumulate
    combined: np.ndarray | None = None
    for (codes, lut), size in zip(parts, sizes):
        combined = step(combined, codes, lut, size)
    assert combined is not None
    return combined


def _coded(parts: list[tuple[np.ndarray, np.ndarray | None]]) -> bool:
    """Every key is int32 codes read through a lut (a text key's; a number key's offsets)."""
    return all(lut is not None and codes.dtype == np.int32 for codes, lut in parts)


def group_index(
    combined: np.ndarray, groups: np.ndarray, space: int, kernels: GroupKernels | None = None
) -> np.ndarray:
    """Per row: the index of its combined code among the sorted ``groups``, -1 if absent."""
    if space <= max(DENSE_GROUPS, 4 * len(combined)):
        lookup = np.full(space + 1, -1, dtype=np.int64)  # the last slot: code -1
        lookup[groups] = np.arange(len(groups))
        return (kernels or NUMPY).take(lookup, combined)
    if not len(groups):
        return np.full(len(combined), -1, dtype=np.int64)
    position = np.searchsorted(groups, combined)
    clipped = np.minimum(position, len(groups) - 1)
    return np.where((groups[clipped] == combined) & (combined >= 0), position, -1)


def distinct_groups(
    combined: np.ndarray, space: int, kernels: GroupKernels | None = None,
    as_lookup: bool = False,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The sorted distinct codes and each row's index among them (all codes present).
    ``as_lookup``: ``combined`` itself where a table over the key space would map it (the
    caller reads the rows through that table)."""
    if space <= max(DENSE_GROUPS, 4 * len(combined)):
        groups = np.flatnonzero((kernels or NUMPY).present(combined, space)).astype(np.int64)
        if as_lookup or not len(groups) or groups[-1] == len(groups) - 1:
            # every code up to the last present (one key: each level, and missing when
            # there is some): a code is its own group's index, no pass to look it up
            return groups, combined
        return groups, group_index(combined, groups, space, kernels)
    groups, inverse = np.unique(combined, return_inverse=True)
    return groups.astype(np.int64), inverse.astype(np.int64)


# ---------------------------------------------------------------- statistics


def present(combined: np.ndarray, space: int) -> np.ndarray:
    """Per code of ``range(space)``: whether a row has it (every code in ``combined`` >= 0)."""
    if not len(combined):
        return np.zeros(space, dtype=np.bool_)
    return np.bincount(combined, minlength=space) > 0


def group_statistics(
    index: np.ndarray, values: np.ndarray, n_groups: int, stats: tuple[str, ...],
    lut: np.ndarray | None = None,
) -> dict[str, np.ndarray]:  # fmt: skip
    """Each statistic per group (NaN where a group has no present value; count 0).
    ``lut``: row i's group is ``lut[index[i]]`` (-1 reads the last slot)."""
    if lut is not None:
        index = lut[index]
    present = ~np.isnan(values)
    g, x = index[present], values[present]
    count = np.bincount(g, minlength=n_groups).astype(np.float64)
    empty = count == 0
    out: dict[str, np.ndarray] = {"count": count}
    if "mean" in stats or "std" in stats:
        out.update(exact_statistics(group_moments.grouped(g, x, n_groups)[0]))
    if "median" in stats:
        out.update(sorted_statistics(g, x, n_groups))
    elif "min" in stats or "max" in stats:
        low, high = np.full(n_groups, np.inf), np.full(n_groups, -np.inf)
        np.minimum.at(low, g, x)
        np.maximum.at(high, g, x)
        out["min"], out["max"] = np.where(empty, np.nan, low), np.where(empty, np.nan, high)
    return {s: out[s] for s in stats}


def exact_statistics(found: moments.GroupMoments) -> dict[str, np.ndarray]:
    """Each group's mean and population std, each rounded once from the group's exact
    sums: the same bits however the rows were split or ordered."""
    return {"mean": found.mean(), "std": np.sqrt(found.variance())}


def sorted_statistics(g: np.ndarray, x: np.ndarray, n_groups: int) -> dict[str, np.ndarray]:
    """Min, max and median per group from the present values sorted by (group, value)."""
    if n_groups <= np.iinfo(np.uint16).max:  # by value, then a stable radix sort by group
        by_value = np.argsort(x)
        ordered = x[by_value[np.argsort(g[by_value].astype(np.uint16), kind="stable")]]
    else:
        ordered = x[np.lexsort((x, g))]
    count = np.bincount(g, minlength=n_groups)
    start = np.cumsum(count) - count
    filled = count > 0
    out = {s: np.full(n_groups, np.nan) for s in ("min", "max", "median")}
    first, n = start[filled], count[filled]
    out["min"][filled] = ordered[first]
    out["max"][filled] = ordered[first + n - 1]
    # an odd group's median is its middle value itself: averaging it with itself would
    # overflow to inf above half the largest float (pandas and the Numba twin do not)
    median = ordered[first + n // 2]
    even = n % 2 == 0
    median[even] = (ordered[(first + n // 2 - 1)[even]] + median[even]) / 2
    out["median"][filled] = median
    return out


# ---------------------------------------------------------------- fit and transform


def _key_columns(step: GroupStats, table: Table) -> list[np.ndarray | TextColumn]:
    """The keys' selected rows: text columns, and number columns as validated: integers
    where the table stores them so (a key needs their values, not float64 copies: the
    conversion was a fresh 8-byte-per-row array at every transform), else float64."""
    out: list[np.ndarray | TextColumn] = []
    for key in step.keys:
        stored = table.raw(key)
        if isinstance(stored, np.ndarray) and _exact_integers(stored):
            out.append(stored if table.selection is None else stored[table.selection])
        else:
            out.append(table[key])
    return out


def _exact_integers(values: np.ndarray) -> bool:
    """Integers whose every value converts to int64 (the number kernels' offsets)."""
    return values.dtype.kind == "i" or (values.dtype.kind == "u" and values.dtype.itemsize < 8)


def _numbers(column: np.ndarray) -> np.ndarray:
    """A number key's values as the kernels read them: its integers, else float64."""
    return column if _exact_integers(column) else np.asarray(column, dtype=np.float64)


#: ``(rows' codes, values, groups, stats, lut) -> {stat: per group}`` (row i's group:
#: ``lut[codes[i]]``, or ``codes[i]`` when ``lut`` is None): this module's numpy
#: function, or its Numba twin (:mod:`fastprep.backends.numba.group_stats`)
Statistics = Callable[
    [np.ndarray, np.ndarray, int, tuple[str, ...], np.ndarray | None], dict[str, np.ndarray]
]


def fit(
    step: GroupStats, table: Table, kernels: GroupKernels | None = None
) -> tuple[dict[str, dict[str, Any]], np.ndarray, np.ndarray | None]:
    """Per output column, its fitted parameters (one pass over the keys and values); and
    the fitted rows' groups as ``(codes, lut)`` (see :func:`_groups`)."""
    kernels = kernels or NUMPY
    levels, groups, codes, lut = _groups(step, table, kernels)
    # these rows' groups, for their transform by these parameters (a fit_transform: the
    # same table, the groups array of this fit), which then codes no key again; with the
    # selection they are of (a table's derived values carry over to its row subsets)
    table.remember((_FIT_ROWS, step), groups, (table.selection, codes, lut))
    values = np.asarray(table[step.column], dtype=np.float64)
    stats = kernels.statistics(codes, values, len(groups), step.stats, lut)
    return _params(step, levels, groups, stats), codes, lut


#: the key of a fit's rows' groups among the table's derived values
_FIT_ROWS = "GroupStats fit rows"


def _groups(
    step: GroupStats, table: Table, kernels: GroupKernels
) -> tuple[list[Levels], np.ndarray, np.ndarray, np.ndarray | None]:
    """The fit rows' key levels, distinct groups, and each row's group as ``(codes,
    lut)``: ``lut[codes[i]]`` (-1 reading the last slot), or ``codes[i]`` when ``lut`` is
    None. The kernels read the rows through the lut: no per-row array of groups is made
    where a key's own codes or the combined codes serve."""
    columns = _key_columns(step, table)
    levels: list[Levels] = []
    parts: list[tuple[np.ndarray, np.ndarray | None]] = []
    for column in columns:
        both = None
        if isinstance(column, TextColumn):
            both = text_levels_parts(column)
        elif kernels.number_levels_codes is not None:
            both = kernels.number_levels_codes(_numbers(column))
        if both is None:
            levels.append(fit_levels(column, kernels))
            parts.append(key_parts(column, levels[-1], kernels))
        else:  # the key's levels and codes from the same work
            levels.append(both[0])
            parts.append(both[1])
    sizes = radices(levels, step.keys)
    if len(columns) == 1 and isinstance(columns[0], TextColumn):
        # one text key: its levels are the values present, then missing if some row is:
        # a level's code is its group's index, the text codes read through the key's lut
        n_groups = len(levels[0]) + int(columns[0].value_counts()[0] > 0)
        return levels, np.arange(n_groups, dtype=np.int64), *parts[0]
    space = math.prod(sizes)
    marked = None
    if len(parts) > 1 and _coded(parts) and kernels.combine_present is not None:
        marked = kernels.combine_present(parts, sizes, space)
    if marked is None:
        combined = combine(parts, sizes, kernels)
        groups, index = distinct_groups(combined, space, kernels, as_lookup=True)
    else:  # the groups present, marked by the pass that combines the keys
        combined, index = marked[0], marked[0]
        groups = np.flatnonzero(marked[1]).astype(np.int64)
    if index is not combined:
        return levels, groups, index, None
    if len(groups) and groups[-1] != len(groups) - 1:  # a table from code to group
        lookup = np.full(space + 1, -1, dtype=np.int64)
        lookup[groups] = np.arange(len(groups))
        return levels, groups, combined, lookup
    return levels, groups, combined, None


def _params(
    step: GroupStats, levels: list[Levels], groups: np.ndarray, stats: dict[str, np.ndarray]
) -> dict[str, dict[str, Any]]:
    return {
        output: {"stat": stat, "levels": levels, "groups": groups, "values": stats[stat]}
        for output, stat in zip(step.outputs, step.stats)
    }


def rows_group(
    step: GroupStats, fitted: dict[str, Any], table: Table, kernels: GroupKernels | None = None
) -> np.ndarray:
    """Per row of ``table``: its fitted group's index, -1 for a group unseen at fit."""
    codes, lookup = rows_code(step, fitted, table, kernels)
    codes = combined_codes(codes, kernels)
    return codes if lookup is None else (kernels or NUMPY).take(lookup, codes)


@dataclass(frozen=True)
class KeyCodes:
    """The rows' keys not combined yet: each text key's int32 codes and lut, and the
    radix (the gather combines them row by row as it writes: no combined array)."""

    parts: list[tuple[np.ndarray, np.ndarray | None]]
    sizes: list[int]


def combined_codes(codes: np.ndarray | KeyCodes, kernels: GroupKernels | None = None) -> np.ndarray:
    """``codes`` as one combined code per row."""
    return combine(codes.parts, codes.sizes, kernels) if isinstance(codes, KeyCodes) else codes


#: a key space up to this many combinations is looked up by a table gathered per group
#: (the rows read their combined code straight from it: no pass for the group index)
SMALL_KEY_SPACE = 1 << 16


def rows_code(
    step: GroupStats, fitted: dict[str, Any], table: Table, kernels: GroupKernels | None = None
) -> tuple[np.ndarray | KeyCodes, np.ndarray | None]:
    """Per row of ``table``: its combined key code and ``lookup`` (combined code -> fitted
    group index, -1 unseen; the last slot: code -1) for a small key space; else its group
    index and None. One text key: its own codes and ``lookup`` by text code (-1, missing:
    the last slot), whatever the key space (a slot per distinct text value). Several
    text keys in a small space, with kernels that gather through them: :class:`KeyCodes`
    (combined as the rows are written). The rows a fit with ``fitted`` has just grouped
    (a ``fit_transform``): that fit's codes and lut, which read the same way."""
    kept = table.derive((_FIT_ROWS, step), fitted["groups"], lambda: None)
    if kept is not None and kept[0] is table.selection and len(kept[1]) == table.n_rows:
        return kept[1], kept[2]  # the rows this fit has just grouped: its codes and lut
    levels = fitted["levels"]
    sizes = [len(lv) + 1 for lv in levels]
    columns = _key_columns(step, table)
    parts = [key_parts(c, lv, kernels) for c, lv in zip(columns, levels)]
    space = math.prod(sizes)
    if len(parts) == 1 and parts[0][1] is not None:
        # no pass writing each row's combined code: the rows read the key's own codes
        codes, lut = parts[0]
        return codes, group_index(lut, fitted["groups"], space)
    if space <= SMALL_KEY_SPACE:
        lookup = np.full(space + 1, -1, dtype=np.int64)
        lookup[fitted["groups"]] = np.arange(len(fitted["groups"]))
        if _coded(parts) and (kernels or NUMPY).put_rows_texts is not None:
            return KeyCodes(parts, sizes), lookup
        return combine(parts, sizes, kernels), lookup
    combined = combine(parts, sizes, kernels)
    return group_index(combined, fitted["groups"], space, kernels), None


def gather(fitted: dict[str, Any], index: np.ndarray) -> np.ndarray:
    """The statistic of each row's group; missing (NaN) for an unseen group."""
    return np.append(np.asarray(fitted["values"], dtype=np.float64), np.nan)[index]


#: ``(out view, per-group rows with the unseen slot last, group per row (-1: unseen))``
Gather = Callable[[np.ndarray, np.ndarray, np.ndarray], None]


def put_rows(out: np.ndarray, per_group: np.ndarray, index: np.ndarray) -> None:
    """``out[i] = per_group[index[i]]`` (index -1: the last row, the unseen group's)."""
    out[...] = per_group[index]


def write_rows(
    out: np.ndarray, per_group: np.ndarray, index: np.ndarray | KeyCodes,
    kernels: GroupKernels | None = None, lookup: np.ndarray | None = None,
) -> bool:  # fmt: skip
    """Every row's values from its group's row of ``per_group`` (cast to ``out``'s dtype
    first: the same rounding as casting each row); whether every written value is finite.
    ``lookup`` (see :func:`rows_code`): ``index`` holds combined codes (or the keys'
    codes, :class:`KeyCodes`), read through it."""
    kernels = kernels or NUMPY
    if lookup is not None:
        per_group = per_group[lookup]  # a row per key combination; -1: the unseen row
    cast = np.ascontiguousarray(per_group, dtype=out.dtype)
    if isinstance(index, KeyCodes) and kernels.put_rows_texts is not None:
        kernels.put_rows_texts(out, cast, index.parts, index.sizes)
    else:
        index = combined_codes(index, kernels)
        kernels.put_rows(out, cast, index)
    slot_finite = np.isfinite(cast).all(axis=1)
    return bool(slot_finite.all() or slot_finite[combined_codes(index, kernels)].all())


# ---------------------------------------------------------------- partitioned fit


@dataclass(frozen=True)
class GroupPartial:
    """One partition's groups (codes in its own levels) with their exact moments and
    extremes; for a median, its present values with each value's group."""

    levels: list[Levels]
    groups: np.ndarray
    moments: moments.GroupMoments
    low: np.ndarray
    high: np.ndarray
    value_groups: np.ndarray | None = None
    values: np.ndarray | None = None


def partial_of(step: GroupStats, table: Table, kernels: GroupKernels | None = None) -> GroupPartial:
    """One partition's partial (its groups in its own levels, their moments)."""
    kernels = kernels or NUMPY
    levels, groups, codes, lut = _groups(step, table, kernels)
    index = codes if lut is None else kernels.take(lut, codes)
    values = np.asarray(table[step.column], dtype=np.float64)
    found, low, high = kernels.moments(index, values, len(groups))
    kept: dict[str, Any] = {}
    if "median" in step.stats:
        present = ~np.isnan(values)
        kept = {"value_groups": index[present], "values": values[present]}
    return GroupPartial(levels, groups, found, low, high, **kept)


def moments_and_extremes(
    index: np.ndarray, values: np.ndarray, n_groups: int
) -> tuple[moments.GroupMoments, np.ndarray, np.ndarray]:
    """Per group: the exact moments, the min and the max (±inf without values)."""
    found, low, high = group_moments.grouped(index, values, n_groups)
    if low is None or high is None:
        present = ~np.isnan(values)
        g, x = index[present], values[present]
        low, high = np.full(n_groups, np.inf), np.full(n_groups, -np.inf)
        np.minimum.at(low, g, x)
        np.maximum.at(high, g, x)
    return found, low, high


def _union_levels(parts: list[list[Levels]], n_keys: int) -> list[Levels]:
    out: list[Levels] = []
    for k in range(n_keys):
        each = [p[k] for p in parts]
        if any(isinstance(lv, list) for lv in each):
            out.append(sorted({str(v) for lv in each for v in lv}))
        else:
            out.append(np.unique(np.concatenate([np.asarray(lv, np.float64) for lv in each]
                                                or [np.empty(0)])))  # fmt: skip
    return out


def _recode(part: GroupPartial, levels: list[Levels]) -> np.ndarray:
    """``part``'s group codes in the merged levels' radix."""
    local = [len(lv) + 1 for lv in part.levels]
    codes = []
    rest = part.groups.copy()
    for size in reversed(local):
        codes.append(rest % size)
        rest //= size
    codes.reverse()
    mapped: list[tuple[np.ndarray, np.ndarray | None]] = []
    for code, own, merged in zip(codes, part.levels, levels):
        if isinstance(merged, list):
            table = _indexes(list(own), merged).astype(np.int64)
        else:
            table = np.searchsorted(merged, np.asarray(own, np.float64)).astype(np.int64)
        mapped.append((np.append(table, np.int64(len(merged)))[code], None))
    return combine(mapped, [len(lv) + 1 for lv in levels])


def _indexes(values: Any, levels: list[str]) -> np.ndarray:
    """Each of ``values``' index among ``levels`` (-1 if absent), by a dict: a pandas
    indexer built an Arrow-backed index of the levels first (~4x the time at 4,000
    levels, and the pandas import on a transform's path)."""
    where = {level: i for i, level in enumerate(levels)}
    return np.fromiter((where.get(v, -1) for v in values), np.int64, len(values))


def merge(step: GroupStats, parts: list[GroupPartial]) -> dict[str, dict[str, Any]]:
    """The partitions' partials merged, in partition order, into the fitted parameters."""
    levels = _union_levels([p.levels for p in parts], len(step.keys))
    recoded = [_recode(p, levels) for p in parts]
    groups = np.unique(np.concatenate(recoded)) if recoded else np.empty(0, np.int64)
    n = len(groups)
    low, high = np.full(n, np.inf), np.full(n, -np.inf)
    placed = []
    for part, codes in zip(parts, recoded):
        at = np.searchsorted(groups, codes)
        placed.append((part.moments, at))
        low[at] = np.minimum(low[at], part.low)
        high[at] = np.maximum(high[at], part.high)
    found = moments.group_merge(placed, n)
    empty = found.count == 0
    stats = {
        "count": found.count.astype(np.float64),
        **exact_statistics(found),
        "min": np.where(empty, np.nan, low),
        "max": np.where(empty, np.nan, high),
    }
    if "median" in step.stats:
        index = np.concatenate(
            [np.searchsorted(groups, codes)[p.value_groups] for p, codes in zip(parts, recoded)]
            or [np.empty(0, np.int64)]
        )
        values = np.concatenate([p.values for p in parts] or [np.empty(0)])
        stats["median"] = sorted_statistics(index, values, n)["median"]
    return _params(step, levels, groups.astype(np.int64), stats)


@dataclass(frozen=True)
class GroupKernels:
    """The per-row work of ``GroupStats``: numpy's (:data:`NUMPY`) or the Numba twin's
    (:data:`fastprep.backends.numba.group_stats.NUMBA`), the same values either way."""

    accumulate: Callable[[np.ndarray | None, np.ndarray, np.ndarray | None, int], np.ndarray]
    take: Callable[[np.ndarray, np.ndarray], np.ndarray]
    statistics: Statistics
    put_rows: Gather
    number_codes: Callable[[np.ndarray, np.ndarray], np.ndarray]
    #: ``(group per row, values, groups) -> (exact moments, min, max)`` per group
    moments: Callable[
        [np.ndarray, np.ndarray, int], tuple[moments.GroupMoments, np.ndarray, np.ndarray]
    ]
    number_levels: Callable[[np.ndarray], np.ndarray]
    #: ``(combined codes, space) -> bool per code``: which codes the rows hold
    present: Callable[[np.ndarray, int], np.ndarray]
    #: ``(parts, sizes) -> combined``: :func:`combine` of text keys' parts (int32 codes
    #: and their luts) in one pass; None: key by key
    combine_texts: (
        Callable[[list[tuple[np.ndarray, np.ndarray | None]], list[int]], np.ndarray] | None
    ) = None
    #: ``(out, per combined code, parts, sizes)``: :func:`put_rows` reading text keys'
    #: parts, combined row by row (no combined array); None: combined first
    put_rows_texts: (
        Callable[[np.ndarray, np.ndarray, list[tuple[np.ndarray, np.ndarray | None]], list[int]],
                 None] | None
    ) = None  # fmt: skip
    #: ``values -> (levels, (codes, lut)) | None``: a number key's :func:`fit_levels` and
    #: :func:`key_parts` at fit in fewer passes where it can (values float64, or integers
    #: as the table stores them); None: one after the other
    number_levels_codes: (
        Callable[[np.ndarray], tuple[np.ndarray, tuple[np.ndarray, np.ndarray]] | None] | None
    ) = None
    #: ``(values, levels) -> (codes, lut) | None``: :func:`key_parts` of a number key as
    #: int32 codes and a lut where it can (whole levels close together; values float64 or
    #: integers); None: its codes
    number_key_codes: (
        Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray] | None] | None
    ) = None
    #: ``(parts, sizes, space) -> (combined, bool per code) | None``: :func:`combine` of
    #: keys' int32 codes and luts with :func:`present` of the result in one pass where it
    #: can; None: one after the other
    combine_present: (
        Callable[[list[tuple[np.ndarray, np.ndarray | None]], list[int], int],
                 tuple[np.ndarray, np.ndarray] | None] | None
    ) = None  # fmt: skip


NUMPY = GroupKernels(
    accumulate, take, group_statistics, put_rows, number_codes, moments_and_extremes,
    number_levels, present,
)  # fmt: skip

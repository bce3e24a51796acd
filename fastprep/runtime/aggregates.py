"""Partial aggregates computed per partition and merged into fitted parameters.

Each fitted statistic has a small, mergeable partial:

- moments (``Standardize``, ``MinMax``, ``FillMissing("mean")``): count, the exact sum
  and sum of squares, min and max per partition (:mod:`fastprep.backends.moments`),
  merged by adding integers: the fitted mean and variance are bit-identical to the
  single-machine fit's, whatever the partitioning.
- vocabularies (``OneHot``, ``Categorify``): each distinct value with its count; merged
  exactly, then ``min_frequency`` / ``max_categories`` are applied to the global counts.
- medians (``FillMissing("median")``): **exact**, in two passes with bounded memory, not a
  t-digest/KLL sketch (whose rank error would make the fitted fill differ from the
  single-machine fit). Pass 1 returns per partition ``SUMMARY_POINTS`` exact order
  statistics at known ranks; from them the job derives bounds ``lo < median <= hi`` that
  hold for certain. Pass 2 returns per partition the count of values ``<= lo`` and the
  distinct values in ``(lo, hi]`` with their counts (about ``2 n / SUMMARY_POINTS``
  values in total), from which the two middle order statistics are picked exactly.
- a few percentiles (``RobustScale``, quantile ``Bin``): **exact**, like the median: pass 1
  the same summaries, then per needed rank (numpy's neighbouring indexes of each
  percentile) a window; the parameters are rebuilt from those order statistics with
  numpy's percentile arithmetic replayed (``scalers.params_from_order``). Uniform ``Bin``
  edges need only the extremes (moments).
- target encoding (``TargetEncode``): each partition sends its rows' categories (codes
  into its distinct values) and target values; the job renumbers them into one dictionary,
  concatenates in partition order and fits as one process does (same rows, same order:
  the same sums, so the same encodings). 12 bytes per row and input on the client, capped
  like the gathered values below.
- value counts (``CountEncode``): each distinct value's count and the missing count per
  partition, summed exactly.
- many quantiles or a likelihood search (``QuantileTransform``, ``PowerTransform``): each
  partition sends its present values; the job concatenates them in partition order and
  fits as one process does — the same values in the same order, so the same parameters.
  It costs 8 bytes per value on the client, so a job whose rows exceed
  :data:`MAX_GATHERED_VALUES` is refused up front.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fastprep.backends import moments
from fastprep.backends.moments import require_values
from fastprep.backends.reference import scalers
from fastprep.backends.reference.backend import REFERENCE
from fastprep.backends.reference.encoders import kept_positions
from fastprep.data.columns import FitTarget, TextColumn
from fastprep.data.tag_column import TagColumn
from fastprep.errors import FitError
from fastprep.plan.steps import (
    Step,
    TargetEncode,
)
from fastprep.runtime.cross_fit import CrossFit

#: exact order statistics each partition sends for the median's first pass
SUMMARY_POINTS = 2049
#: rows above which a step fitted on gathered values is refused on a cluster (~800 MB)
MAX_GATHERED_VALUES = 100_000_000


#: a partition's moments (count, exact sums, extremes) and their merge: exact, so the
#: merged statistics are those of the in-memory fit whatever the partitioning
Moments = moments.Moments
moments_of = moments.of
merge_moments = moments.merge
with_fill = moments.with_fill


def params_from_moments(step: Step, total: Moments, rows: int, what: str) -> dict[str, Any]:
    """The step's fitted parameters, in the shape the single-machine fit gives them."""
    require_values(total.count, rows, what)
    return REFERENCE.entry(step, "from_moments")(step, total, what)


# ---------------------------------------------------------------- vocabularies


@dataclass(frozen=True)
class Vocabulary:
    """Distinct present values with their counts, and whether missing was seen."""

    values: tuple[Any, ...]
    counts: tuple[int, ...]
    numeric: bool
    missing: bool


def vocabulary_of(values: np.ndarray | TextColumn | TagColumn) -> Vocabulary:
    if isinstance(values, TagColumn):  # tags: rows holding each; a missing row has none
        counts = values.counts()
        seen = np.flatnonzero(counts)
        tags = values.uniques.take(seen).to_pylist()
        return Vocabulary(tuple(tags), tuple(int(counts[i]) for i in seen), False, False)
    if isinstance(values, TextColumn):
        present = values.codes[values.codes >= 0]
        per_unique = np.bincount(present, minlength=len(values.uniques))
        seen = np.flatnonzero(per_unique)
        return Vocabulary(
            tuple(str(values.uniques[i]) for i in seen),
            tuple(int(per_unique[i]) for i in seen),
            False,
            bool(len(present) < len(values.codes)),
        )
    nan = np.isnan(values)
    uniques, counts = np.unique(values[~nan], return_counts=True)
    return Vocabulary(
        tuple(float(v) for v in uniques), tuple(int(c) for c in counts), True, bool(nan.any())
    )


def params_from_vocabularies(
    parts: list[Vocabulary], min_frequency: int, max_categories: int | None
) -> dict[str, Any]:
    """Merged counts → the same fitted vocabulary as ``fit_categories`` on all rows."""
    merged: dict[Any, int] = {}
    for part in parts:
        for value, count in zip(part.values, part.counts):
            merged[value] = merged.get(value, 0) + count
    categories = sorted(merged)
    counts = np.array([merged[c] for c in categories], dtype=np.int64)
    kept = kept_positions(counts, min_frequency, max_categories)
    return {
        "categories": [categories[i] for i in kept],
        "counts": [int(counts[i]) for i in kept],
        "numeric": parts[0].numeric if parts else True,
        "missing": any(p.missing for p in parts),
        "infrequent": len(categories) - len(kept),
    }


# ---------------------------------------------------------------- exact medians


@dataclass(frozen=True)
class Summary:
    """Exact order statistics of one partition's present values at known ranks."""

    count: int
    ranks: np.ndarray
    values: np.ndarray


def summary_of(values: np.ndarray, points: int = SUMMARY_POINTS) -> Summary:
    present = np.sort(values[~np.isnan(values)])
    n = len(present)
    if n == 0:
        return Summary(0, np.empty(0, np.int64), np.empty(0))
    ranks = np.unique(np.linspace(0, n - 1, min(points, n)).round().astype(np.int64))
    return Summary(n, ranks, present[ranks])


def _rank_steps(summary: Summary, candidates: np.ndarray) -> tuple[np.ndarray, ...]:
    """Where among ``candidates`` (sorted, holding every value of ``summary``) the bounds
    of ``count(values <= t)`` step up, and by how much (lower, upper): they change only at
    the partition's own summary values, so the bounds at every candidate are the running
    sums of these steps (:func:`rank_windows`)."""
    v, last = summary.values, len(summary.values) - 1
    if summary.count == 0:
        return np.empty(0, np.intp), np.empty(0, np.int64), np.empty(0, np.int64)
    # per distinct value, the last position j with values[j] <= value (ties: the run's end)
    j = np.flatnonzero(np.append(v[1:] != v[:-1], True))
    lower = np.where(j >= last, summary.count, summary.ranks[j] + 1)
    upper = np.where(j >= last, summary.count, summary.ranks[np.minimum(j + 1, last)])
    steps = np.searchsorted(candidates, v[j])
    return steps, np.diff(lower, prepend=0), np.diff(upper, prepend=0)


def median_window(parts: list[Summary], rows: int, what: str) -> tuple[float, float]:
    """Bounds ``lo < every middle order statistic <= hi``, certain from the summaries."""
    total = sum(p.count for p in parts)
    require_values(total, rows, what)
    return rank_window(parts, (total - 1) // 2, total // 2)


def rank_window(parts: list[Summary], first: int, last: int | None = None) -> tuple[float, float]:
    """Bounds ``lo < the order statistics of ranks first..last <= hi`` (0-based), certain
    from the summaries."""
    return rank_windows(parts, [(first, first if last is None else last)])[0]


def rank_windows(
    parts: list[Summary], ranks: list[tuple[int, int]]
) -> list[tuple[float, float]]:  # fmt: skip
    """:func:`rank_window` for each ``(first, last)``, the partitions' bounds summed once.

    Every partition's summary values are candidates for ``lo`` and ``hi``; per candidate
    ``t``, ``count(values <= t)`` over all partitions lies between the sums of each
    partition's bounds. Those sums are built from each partition's steps (its values),
    not by looking every candidate up in every partition: linear in the partitions, where
    the look-ups were quadratic (30 partitions: 64 ms on the client between two passes,
    its workers idle)."""
    total = sum(p.count for p in parts)
    candidates = np.unique(np.concatenate([p.values for p in parts] + [[-np.inf, np.inf]]))
    lower = np.zeros(len(candidates), np.int64)
    upper = np.zeros(len(candidates), np.int64)
    for part in parts:
        at, up_lower, up_upper = _rank_steps(part, candidates)
        lower[at] += up_lower  # one step per distinct value: no repeated positions
        upper[at] += up_upper
    lower, upper = np.cumsum(lower), np.cumsum(upper)
    upper[0], lower[-1] = 0, total  # -inf: nothing at or below; +inf: everything
    out = []
    for first, last in ranks:
        lo = candidates[np.flatnonzero(upper <= first).max()]
        hi = candidates[np.flatnonzero(lower >= last + 1).min()]
        out.append((float(lo), float(hi)))
    return out


@dataclass(frozen=True)
class Window:
    """One partition's values in ``(lo, hi]`` (distinct, with counts) and its count ``<= lo``."""

    below: int
    values: np.ndarray
    counts: np.ndarray


def window_of(values: np.ndarray, lo: float, hi: float) -> Window:
    """The present values in ``(lo, hi]`` (distinct, counted) and how many are ``<= lo``."""
    # a NaN is neither <= lo nor > lo: the comparisons leave the missing values out
    # without a copy of the present ones first (2.5x faster: this runs in the median's
    # pass, between two passes, while the client waits)
    return _window(np.count_nonzero(values <= lo), values[(values > lo) & (values <= hi)])


def windows_of(values: np.ndarray, bounds: list[tuple[float, float]]) -> list[Window]:
    """:func:`window_of` for each ``(lo, hi)``: the present values sorted once and each
    window found by binary search (a quantile Bin asks two windows per edge: one filter
    of the partition per window would be a pass each)."""
    if len(bounds) == 1:  # one window: a filter is cheaper than a sort
        return [window_of(values, *bounds[0])]
    ordered = np.sort(values[~np.isnan(values)])
    out = []
    for lo, hi in bounds:
        start, end = np.searchsorted(ordered, [lo, hi], side="right")
        out.append(_window(start, ordered[start : max(start, end)]))
    return out


def _window(below: int, inside: np.ndarray) -> Window:
    uniques, counts = np.unique(inside, return_counts=True)
    return Window(int(below), uniques, counts.astype(np.int64))


def median_from_windows(parts: list[Window], total: int) -> float:
    """The exact median (the mean of the two middle values for an even count, like numpy)."""
    k1, k2 = (total - 1) // 2, total // 2
    a, b = value_at(parts, k1), value_at(parts, k2)
    return a if k1 == k2 else float(np.mean([a, b]))


def value_at(parts: list[Window], rank: int) -> float:
    """The order statistic of ``rank`` (0-based) from the partitions' windows around it."""
    below = sum(p.below for p in parts)
    if rank < below:
        # only when the window starts at -inf (otherwise no more than ``rank`` values are
        # at or below its start): the values at or below it, this one too, are -inf
        return float("-inf")
    values = np.concatenate([p.values for p in parts])
    counts = np.concatenate([p.counts for p in parts])
    order = np.argsort(values, kind="stable")
    cumulative = np.cumsum(counts[order])
    return float(values[order][np.searchsorted(cumulative, rank - below, side="right")])


def partial_kind(step: Step) -> str:
    """What each partition computes for fitted ``step`` (the reference's table says):
    ``"order"`` for steps fitted from a few exact order statistics (percentiles), found
    like the median: two passes, bounded memory, no gather."""
    return REFERENCE.entry(step, "partial")(step)


def params_from_order(
    step: Step, summaries: list[Summary], windows: list[list[Window]], ranks: list[int], what: str
) -> dict[str, Any]:
    """The step's parameters from the order statistics of ``ranks`` (window ``i`` of every
    partition is around ``ranks[i]``)."""
    total = sum(p.count for p in summaries)
    known = {rank: value_at([w[i] for w in windows], rank) for i, rank in enumerate(ranks)}
    return scalers.params_from_order(step, total, known.__getitem__, what)


# ---------------------------------------------------------------- gathered values


def values_of(values: np.ndarray) -> np.ndarray:
    """The partition's present values in row order: concatenated in partition order they
    are the values one process fits on, in its order (a likelihood search's sums then
    round the same way)."""
    return values[~np.isnan(values)]


def check_gather_size(step: Step, name: str, rows: int) -> None:
    """Refuse, naming the step, a fit that would gather more than the cap on the client."""
    if rows > MAX_GATHERED_VALUES:
        raise FitError(
            f"{step.describe()} on {name!r}: fitting it on a cluster gathers every value "
            f"on the client ({rows:,} rows > {MAX_GATHERED_VALUES:,}); fit on a sample "
            "without client= (pipeline.fit(sample)) and transform on the cluster"
        )


def params_from_values(step: Step, parts: list[np.ndarray], what: str) -> dict[str, Any]:
    """The single-process fit on the partitions' values, concatenated in partition order."""
    from fastprep.backends.reference.backend import fit_step

    values = np.concatenate(parts) if parts else np.empty(0)
    return fit_step(step, values, what)


# ---------------------------------------------------------------- target and count encoding


@dataclass(frozen=True)
class TargetRows:
    """One partition's rows for target encoding: each row's category as a code into
    ``uniques`` (text; -1 missing) or its number (NaN missing), and the target."""

    codes: np.ndarray | None
    uniques: tuple[str, ...]
    numbers: np.ndarray | None
    target: np.ndarray
    binary: bool


def target_rows_of(values: np.ndarray | TextColumn, target: FitTarget | None) -> TargetRows:
    if target is None:
        raise FitError("target encoding on a partition without the target (no target column)")
    if isinstance(values, TextColumn):
        return TargetRows(values.codes, tuple(str(u) for u in values.uniques), None,
                          target.values, target.binary)  # fmt: skip
    return TargetRows(None, (), np.asarray(values, dtype=np.float64), target.values, target.binary)


def params_from_target_rows(
    step: Step, parts: list[TargetRows], what: str, cross_fit: CrossFit | None = None
) -> dict[str, Any]:
    """The single-process fit on the partitions' rows, renumbered into one dictionary and
    concatenated in partition order. ``cross_fit``: the fit is a partitioned fit_transform's,
    which also collects the out-of-fold encodings of these rows."""
    from fastprep.backends.reference.target_encoding import fit_target_encoding

    assert isinstance(step, TargetEncode)
    y = np.concatenate([p.target for p in parts]) if parts else np.empty(0)
    binary = bool(parts and parts[0].binary)
    target = FitTarget(y, binary) if cross_fit is None else cross_fit.target(y, binary)
    if parts and parts[0].codes is None:
        values: np.ndarray | TextColumn = np.concatenate([p.numbers for p in parts])  # type: ignore[misc]
    else:
        values = _text_rows(parts)
    params = fit_target_encoding(step, values, target, what)
    if cross_fit is not None:
        cross_fit.add(step, values, target, what)
    return params


def _text_rows(parts: list[TargetRows]) -> TextColumn:
    """The partitions' text rows as one dictionary-encoded column."""
    index: dict[str, int] = {}
    codes = []
    for part in parts:
        assert part.codes is not None
        mapping = np.array([index.setdefault(u, len(index)) for u in part.uniques] + [-1],
                           dtype=np.int32)  # fmt: skip
        codes.append(mapping[part.codes])  # code -1 reads the trailing -1
    uniques = np.empty(len(index), dtype=object)
    uniques[:] = list(index)
    return TextColumn(np.concatenate(codes) if codes else np.empty(0, np.int32), uniques)


def counts_of(values: np.ndarray | TextColumn) -> dict[str, Any]:
    """One partition's value counts (``CountEncode``'s fitted state on its rows)."""
    from fastprep.backends.reference.target_encoding import fit_counts

    return fit_counts(values)


def params_from_counts(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The partitions' counts summed: the fitted state of one process on all rows."""
    merged: dict[Any, int] = {}
    for part in parts:
        for value, count in zip(part["categories"], part["counts"]):
            merged[value] = merged.get(value, 0) + count
    categories = sorted(merged)
    return {
        "categories": categories,
        "numeric": parts[0]["numeric"] if parts else False,
        "counts": [merged[c] for c in categories],
        "missing": sum(p["missing"] for p in parts),
        "total": sum(p["total"] for p in parts),
    }

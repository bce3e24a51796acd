"""Partial aggregates merged across partitions equal the statistic over all rows."""

from __future__ import annotations

import numpy as np
import pytest

import fastprep as fp
from fastprep.backends.reference.encoders import fit_categories
from fastprep.backends.reference.stats import standardize_params
from fastprep.errors import FitError
from fastprep.runtime import aggregates as agg


def _splits(n: int, k: int, rng: np.random.Generator) -> list[slice]:
    cuts = np.sort(rng.choice(np.arange(1, n), size=k - 1, replace=False))
    edges = [0, *cuts.tolist(), n]
    return [slice(a, b) for a, b in zip(edges[:-1], edges[1:])]


def _exact_median(values: np.ndarray, parts: list[slice], points: int) -> float:
    summaries = [agg.summary_of(values[p], points) for p in parts]
    lo, hi = agg.median_window(summaries, len(values), "test")
    windows = [agg.window_of(values[p], lo, hi) for p in parts]
    return agg.median_from_windows(windows, sum(s.count for s in summaries))


@pytest.mark.parametrize("seed", range(6))
def test_exact_median_matches_numpy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 40_000))
    values = rng.standard_normal(n) * 100
    if seed % 2:  # heavy ties and missing values
        values = np.round(values / 50)
        values[rng.random(n) < 0.3] = np.nan
    parts = _splits(n, int(rng.integers(1, min(n, 12) + 1)), rng)
    points = int(rng.choice([3, 17, agg.SUMMARY_POINTS]))
    assert _exact_median(values, parts, points) == np.nanmedian(values)


def test_median_window_is_small() -> None:
    """The second pass sends about 2 n / SUMMARY_POINTS values, not the column."""
    rng = np.random.default_rng(0)
    values = rng.standard_normal(400_000)
    parts = _splits(len(values), 8, rng)
    summaries = [agg.summary_of(values[p]) for p in parts]
    lo, hi = agg.median_window(summaries, len(values), "test")
    sent = sum(len(agg.window_of(values[p], lo, hi).values) for p in parts)
    assert sent < 4 * len(values) / agg.SUMMARY_POINTS * len(parts)
    assert lo < np.median(values) <= hi


def test_median_of_nothing_is_a_fit_error() -> None:
    empty = [agg.summary_of(np.array([np.nan, np.nan]))]
    with pytest.raises(FitError, match="no non-missing values"):
        agg.median_window(empty, 2, "FillMissing('median') on 'x'")


def test_merged_moments_are_the_single_pass_bits() -> None:
    """Exact sums: the partitions' merge is the in-memory fit, bit for bit, in any order."""
    rng = np.random.default_rng(1)
    values = rng.standard_normal(100_001) * 1e3 + 5e4
    values[rng.random(len(values)) < 0.1] = np.nan
    parts = _splits(len(values), 9, rng) + [slice(0, 0)]  # an empty partition too
    total = agg.merge_moments([agg.moments_of(values[p]) for p in parts])
    assert total == agg.merge_moments([agg.moments_of(values[p]) for p in reversed(parts)])
    assert total == agg.moments_of(values)
    fitted = agg.params_from_moments(fp.Standardize(), total, len(values), "x")
    assert fitted == standardize_params(values, "x")
    assert fitted["mean"] == pytest.approx(np.nanmean(values), rel=1e-12)
    assert fitted["var"] == pytest.approx(np.nanvar(values), rel=1e-9)
    assert (total.low, total.high) == (np.nanmin(values), np.nanmax(values))


def test_vocabulary_merge_is_exact_with_min_frequency() -> None:
    rng = np.random.default_rng(2)
    values = rng.integers(0, 40, 5_000).astype(float)
    values[::97] = np.nan
    parts = _splits(len(values), 5, rng)
    merged = agg.params_from_vocabularies(
        [agg.vocabulary_of(values[p]) for p in parts], min_frequency=120, max_categories=20
    )
    assert merged == fit_categories(values, 120, 20)


@pytest.mark.parametrize("seed", range(4))
def test_fill_folded_into_moments_matches_filled_values(seed: int) -> None:
    """Moments of the present values + the fill value's copies = moments after filling."""
    rng = np.random.default_rng(seed)
    values = rng.normal(50, 20, int(rng.integers(10, 30_000)))
    values[rng.random(len(values)) < rng.uniform(0, 0.6)] = np.nan
    fill = float(np.nanmedian(values))
    parts = _splits(len(values), int(rng.integers(1, 8)) + 1, rng)
    present = agg.merge_moments([agg.moments_of(values[p]) for p in parts])
    total = agg.with_fill(present, fill, len(values))
    filled = np.where(np.isnan(values), fill, values)
    assert total == agg.moments_of(filled)  # exact: as if the pass had seen the copies
    assert (total.low, total.high) == (filled.min(), filled.max())
    assert np.isclose(total.mean(), filled.mean(), rtol=1e-12)
    assert np.isclose(total.variance(), filled.var(), rtol=1e-12)


def test_windows_from_one_sort_equal_one_filter_per_window(flights_parquet) -> None:
    """A quantile Bin asks ~2 windows per edge: one sort answers them all, bit for bit."""
    import pyarrow.parquet as pq

    column = pq.read_table(flights_parquet, columns=["dep_delay"]).column("dep_delay")
    values = column.to_numpy(zero_copy_only=False).astype(np.float64)
    summaries = [agg.summary_of(values, points=17)]
    ranks = range(0, int(summaries[0].count), 997)
    bounds = [agg.rank_window(summaries, r) for r in ranks] + [(5.0, 1.0), (-np.inf, np.inf)]
    for got, (lo, hi) in zip(agg.windows_of(values, bounds), bounds, strict=True):
        present = values[~np.isnan(values)]
        inside = present[(present > lo) & (present <= hi)]
        uniques, counts = np.unique(inside, return_counts=True)
        assert got.below == np.count_nonzero(present <= lo)
        assert got.values.tobytes() == uniques.tobytes()
        assert got.counts.tobytes() == counts.astype(np.int64).tobytes()


def _looked_up_window(parts: list[agg.Summary], first: int, last: int) -> tuple[float, float]:
    """The window by the definition: each candidate looked up in each partition."""
    total = sum(p.count for p in parts)
    candidates = np.unique(np.concatenate([p.values for p in parts] + [[-np.inf, np.inf]]))
    lower = np.zeros(len(candidates), np.int64)
    upper = np.zeros(len(candidates), np.int64)
    for part in parts:
        if part.count == 0:
            continue
        j = np.searchsorted(part.values, candidates, side="right") - 1
        end = len(part.ranks) - 1
        full = j >= end
        lower += np.where(full, part.count, np.where(j < 0, 0, part.ranks[np.clip(j, 0, end)] + 1))
        upper += np.where(full, part.count, np.where(j < 0, 0, part.ranks[np.clip(j + 1, 0, end)]))
    upper[0], lower[-1] = 0, total
    lo = candidates[np.flatnonzero(upper <= first).max()]
    hi = candidates[np.flatnonzero(lower >= last + 1).min()]
    return float(lo), float(hi)


@pytest.mark.parametrize("seed", range(8))
def test_rank_windows_are_the_looked_up_bounds(seed: int) -> None:
    """The bounds summed from each partition's steps are the per-candidate look-ups', for
    ties, empty partitions, infinities and every rank."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 30_000))
    values = rng.standard_normal(n) * 100
    if seed % 2:
        values = np.round(values / 40)
        values[rng.random(n) < 0.2] = np.nan
    if seed % 3 == 0:
        values[rng.random(n) < 0.01] = rng.choice([-np.inf, np.inf])
    parts = _splits(n, int(rng.integers(1, min(n, 30) + 1)), rng) if n > 1 else [slice(0, 1)]
    summaries = [agg.summary_of(values[p], int(rng.choice([2, 5, agg.SUMMARY_POINTS])))
                 for p in parts]  # fmt: skip
    total = sum(s.count for s in summaries)
    if total == 0:
        return
    ranks = sorted({0, total - 1, (total - 1) // 2, *rng.integers(0, total, 5).tolist()})
    pairs = [(r, r) for r in ranks] + [((total - 1) // 2, total // 2)]
    ordered = np.sort(values[~np.isnan(values)])
    for (first, last), (lo, hi) in zip(pairs, agg.rank_windows(summaries, pairs)):
        assert (lo, hi) == _looked_up_window(summaries, first, last)
        # (a window (lo, hi] cannot hold -inf: the definition's limit, for both)
        assert lo < ordered[first] or ordered[first] == -np.inf
        assert ordered[last] <= hi


@pytest.mark.parametrize("seed", range(6))
def test_order_statistics_from_windows_with_infinities(seed: int) -> None:
    """Every order statistic found through the windows (the two-pass exact median and
    quantiles) is the sorted values' one, also where it is -inf (the window (lo, hi]
    starting at -inf cannot hold it: it is among the values counted below the window)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 5_000))
    values = np.round(rng.standard_normal(n) * 10)
    values[rng.random(n) < rng.choice([0.05, 0.6, 0.95])] = -np.inf
    values[rng.random(n) < 0.05] = np.inf
    values[rng.random(n) < 0.1] = np.nan
    parts = _splits(n, int(rng.integers(1, min(n, 30) + 1)), rng)
    summaries = [agg.summary_of(values[p], agg.SUMMARY_POINTS) for p in parts]
    total = sum(s.count for s in summaries)
    if total == 0:
        return
    ordered = np.sort(values[~np.isnan(values)])
    ranks = sorted({0, total - 1, (total - 1) // 2, total // 2,
                    *rng.integers(0, total, 8).tolist()})  # fmt: skip
    for rank, bounds in zip(ranks, agg.rank_windows(summaries, [(r, r) for r in ranks])):
        windows = [agg.window_of(values[p], *bounds) for p in parts]
        assert agg.value_at(windows, rank) == ordered[rank]

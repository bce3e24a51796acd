"""Exact moments: the same integers from numpy and from the Numba kernel, and the same
fitted mean and variance however the values are split."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from support import REPO

from fastprep.backends import group_moments, moments


def _awkward(rng: np.random.Generator, n: int) -> np.ndarray:
    """Values that make float64 sums depend on their order: a large mean with a tiny
    spread, magnitudes from subnormal to near float64's limit, signed zeros."""
    values = np.concatenate([
        rng.normal(1e6, 1e-3, n),
        rng.standard_normal(n) * 10.0 ** rng.integers(-320, 308, n),
        [0.0, -0.0, 5e-324, -5e-324, 3e-310, 1.7e308 / 4, -1e300, 2.0**400, 2.0**-401],
    ])  # fmt: skip
    rng.shuffle(values)
    return values


def _kernel_sums(values: np.ndarray) -> tuple[int, int]:
    sums, squares = moments.new_bins()
    moments.exact_kernel(sums, squares, values, len(values))
    return moments.from_bins(sums), moments.from_bins(squares)


@pytest.mark.parametrize("seed", range(3))
def test_sums_are_exact_in_numpy_and_numba(seed: int) -> None:
    values = _awkward(np.random.default_rng(seed), 2_000)
    total, squares = moments.exact_sums(values)
    assert Fraction(total, 2**-moments.EMIN) == sum(map(Fraction, values))
    assert Fraction(squares, 2 ** (-2 * moments.EMIN)) == sum(Fraction(v) ** 2 for v in values)
    assert _kernel_sums(values) == (total, squares)


@pytest.mark.parametrize("value", [9.022988041621908e-185, 5e-324, 2.0**500, -1e300, 0.0])
def test_a_lone_extreme_value(value: float) -> None:
    """Only one of the scaled classes (tiny, huge) present: the others are empty."""
    values = np.array([value])
    expected = (Fraction(value) * 2**-moments.EMIN, Fraction(value) ** 2 * 2 ** (-2 * moments.EMIN))
    assert moments.exact_sums(values) == expected == _kernel_sums(values)


def test_kernel_carries_keep_long_runs_exact() -> None:
    """Millions of values of one exponent: the register runs and the carry passes."""
    values = np.full(3_000_000, 1.0 + 2.0**-52)
    values[::7] = 1.5 - 2.0**-50
    assert _kernel_sums(values) == moments.exact_sums(values)


def test_any_split_in_any_order_gives_the_same_fitted_bits() -> None:
    rng = np.random.default_rng(7)
    values = rng.normal(3e7, 0.25, 200_001)
    values[rng.random(len(values)) < 0.05] = np.nan
    whole = moments.of(values)
    for _ in range(5):
        cuts = np.sort(rng.choice(len(values), size=int(rng.integers(1, 40)), replace=False))
        parts = [moments.of(p) for p in np.split(values, cuts)]
        rng.shuffle(parts)
        merged = moments.merge(parts)
        assert merged == whole
        assert moments.standardize_params(merged, "x") == moments.standardize_params(whole, "x")


def test_mean_and_variance_are_rounded_once() -> None:
    values = np.array([0.1] * 1001 + [1e16, 1.0, -1e16])
    m = moments.of(values)
    exact = sum(map(Fraction, values)) / len(values)
    assert m.mean() == float(exact)
    var = sum((Fraction(v) - exact) ** 2 for v in values) / len(values)
    assert m.variance() == float(var)


def test_fill_copies_are_exact() -> None:
    rng = np.random.default_rng(3)
    values = rng.normal(50, 20, 10_001)
    values[rng.random(len(values)) < 0.3] = np.nan
    present = moments.of(values)
    fill = present.mean()
    filled = np.where(np.isnan(values), fill, values)
    assert moments.with_fill(present, fill, len(values)) == moments.of(filled)


def test_an_infinite_value_leaves_no_mean_and_a_clear_fit_error() -> None:
    m = moments.of(np.array([1.0, np.inf, 2.0]))
    assert m.count == 3 and not m.finite and np.isnan(m.mean())
    with pytest.raises(moments.FitError, match="not finite"):
        moments.standardize_params(m, "Standardize() on 'x'")
    sums, squares = moments.new_bins()
    assert moments.exact_kernel(sums, squares, np.array([1.0, np.inf, np.nan]), 3) == 2
    assert sums[0, -1] == 1


def test_group_moments_are_each_groups_exact_sums_whatever_the_split() -> None:
    """Per-group exact sums (numpy's vectorized pass and the compiled one) are each group's
    own ``moments.of``, and partials of a split add up to the whole's bits."""
    import pyarrow.parquet as pq

    table = pq.read_table(REPO / "data_samples" / "flights.parquet",
                          columns=["carrier", "air_time", "distance"])  # fmt: skip
    codes = table["carrier"].dictionary_encode().combine_chunks().indices.to_numpy()
    groups = codes.astype(np.int64)
    n = int(groups.max()) + 1
    for column in ("air_time", "distance"):
        values = table[column].to_numpy(zero_copy_only=False).astype(np.float64) / 7.0
        whole = moments.group_moments(groups, values, n)
        totals, squares = whole.exact()
        for k in range(n):
            one = moments.of(values[groups == k])
            assert (whole.count[k], totals[k], squares[k]) == (one.count, one.total, one.squares)
            assert whole.mean()[k] == one.mean() and whole.variance()[k] == one.variance()
        compiled = group_moments.compiled_group_moments(groups, values, n)
        assert compiled is not None
        assert compiled[0].exact() == (totals, squares)
        cut = len(values) // 3
        halves = [
            (moments.group_moments(groups[s], values[s], n), np.arange(n))
            for s in (slice(cut, None), slice(0, cut))
        ]
        merged = moments.group_merge(halves, n)
        assert np.array_equal(merged.mean(), whole.mean(), equal_nan=True)
        assert np.array_equal(merged.variance(), whole.variance(), equal_nan=True)


def test_group_moments_of_extreme_and_infinite_values() -> None:
    """Squares beyond float64's range take exact_sums' scaled path (the compiled pass
    declines them); an infinite value gives its sign as the mean and no variance."""
    values = np.array([1e300, -3e-310, 2.5, np.nan, np.inf, 1.0, -1e300])
    groups = np.array([0, 0, 0, 1, 1, 1, 2])
    found = moments.group_moments(groups, values, 4)
    assert group_moments.compiled_group_moments(groups, values, 4) is None
    head = moments.of(values[:3])
    totals, squares = found.exact()
    assert totals[0] == head.total and squares[0] == head.squares
    assert found.mean()[1] == np.inf and np.isnan(found.variance()[1])
    assert found.mean()[2] == -1e300 and found.variance()[2] == 0.0
    assert np.isnan(found.mean()[3]) and found.count[3] == 0


def test_compiled_group_moments_on_row_ranges_equal_one_pass(monkeypatch) -> None:
    """The compiled pass split into row ranges on the pool's threads gives one pass's bits:
    counts, sums, extremes (-0.0 against 0.0: the earlier row's) and infinities."""
    from fastprep.native import threads

    rng = np.random.default_rng(5)
    n, n_groups = 50_000, 37
    groups = rng.integers(0, n_groups, n).astype(np.int64)
    values = np.round(rng.normal(10.0, 40.0, n), 1) / 3.0
    values[rng.integers(0, n, 500)] = np.nan
    values[rng.integers(0, n, 200)] = 0.0
    values[rng.integers(0, n, 200)] = -0.0
    values[[7, 40_000]], groups[[7, 40_000]] = (np.inf, -np.inf), (3, 3)
    values[11], groups[11] = np.inf, 4
    monkeypatch.setattr(group_moments, "_PARALLEL_ROWS", 1 << 62)
    one = group_moments.compiled_group_moments(groups, values, n_groups)
    monkeypatch.setattr(group_moments, "_PARALLEL_ROWS", 1)
    monkeypatch.setattr(group_moments, "_ROWS_PER_GROUP", 1)
    for lanes in (2, 3, 8):
        monkeypatch.setattr(threads, "workers", lambda lanes=lanes: lanes)
        assert len(group_moments._ranges(n, n_groups)) == lanes
        split = group_moments.compiled_group_moments(groups, values, n_groups)
        assert one is not None and split is not None
        assert split[0].exact() == one[0].exact()
        assert np.array_equal(split[0].count, one[0].count)
        assert np.array_equal(split[0].infinite, one[0].infinite, equal_nan=True)
        for a, b in zip(split[1:], one[1:]):
            assert np.array_equal(a, b) and np.array_equal(np.signbit(a), np.signbit(b))
        assert np.array_equal(split[0].mean(), one[0].mean(), equal_nan=True)
        assert np.array_equal(split[0].variance(), one[0].variance(), equal_nan=True)


@pytest.mark.parametrize("block", [1, 7, 1 << 11])
@pytest.mark.parametrize("n_groups", [1, 2, 33])
def test_compiled_group_moments_by_segments_equal_numpys(monkeypatch, block, n_groups) -> None:
    """The segments' exact sums equal numpy's integers whatever the block a segment is
    summed in and however the groups are split across threads and into runs: odd sizes,
    a group without values, infinities of both signs, -0.0, a value needing several
    rounds."""
    from fastprep.native import threads

    rng = np.random.default_rng(block + n_groups)
    n = 4_001
    groups = rng.integers(0, n_groups, n).astype(np.int64)
    values = rng.normal(0.0, 50.0, n) * np.exp2(rng.integers(-30, 30, n))
    values[rng.random(n) < 0.1] = np.nan
    values[:3] = (np.inf, -0.0, 1e-12)
    values[rng.integers(0, n, 5)] = -np.inf
    width = n_groups + 1  # the last group has no value
    monkeypatch.setattr(group_moments, "_SEGMENT_BLOCK", block)
    monkeypatch.setattr(group_moments, "_CACHED_VALUES", 3 * block + 1)  # runs of groups
    want = moments.group_moments(groups, values, width)
    outcomes = []
    for lanes, parallel in ((1, 1 << 62), (2, 1), (3, 1)):
        monkeypatch.setattr(threads, "workers", lambda lanes=lanes: lanes)
        monkeypatch.setattr(group_moments, "_PARALLEL_ROWS", parallel)
        monkeypatch.setattr(group_moments, "_ROWS_PER_GROUP", 1)
        laid_out: list = []
        found = group_moments.compiled_group_moments(
            groups,
            values,
            width,
            lambda o, s, a, b, kept=laid_out: kept.append((a, o[s[a] : s[b]], s)),
        )
        assert found is not None
        got, low, high = found
        assert got.exact() == want.exact()
        assert np.array_equal(got.count, want.count)
        assert np.array_equal(got.infinite, want.infinite, equal_nan=True)
        assert np.array_equal(got.mean(), want.mean(), equal_nan=True)
        assert np.array_equal(got.variance(), want.variance(), equal_nan=True)
        present = ~np.isnan(values)
        laid_out.sort(key=lambda part: part[0])  # the group ranges ran on threads
        ordered, start = np.concatenate([o for _, o, _ in laid_out]), laid_out[0][2]
        by_group = np.argsort(groups[present], kind="stable")
        assert np.array_equal(ordered, values[present][by_group])
        assert np.array_equal(np.diff(start), want.count)
        assert low[-1] == np.inf and high[-1] == -np.inf
        outcomes.append((low, high))
    for low, high in outcomes[1:]:
        assert np.array_equal(low, outcomes[0][0]) and np.array_equal(high, outcomes[0][1])
        assert np.array_equal(np.signbit(low), np.signbit(outcomes[0][0]))


def test_compiled_group_moments_decline_values_needing_many_rounds() -> None:
    """Values spread over more bits than the pass's rounds hold: the numpy pass's integers."""
    values = np.array([2.0**390, 3.0 * 2.0**-390, 1.0, 5.0, np.nan])
    groups = np.array([0, 0, 1, 1, 1])
    assert group_moments.compiled_group_moments(groups, values, 2) is None
    found = group_moments.grouped(groups, values, 2)[0]
    assert found.exact() == moments.group_moments(groups, values, 2).exact()
    assert found.mean()[1] == 3.0


@pytest.mark.parametrize("lanes", [1, 2])
def test_compiled_extremes_equal_a_scan_in_row_order(monkeypatch, lanes) -> None:
    """Each group's min and max are a row-order scan's, which keeps the earlier of equal
    values: a zero extreme has the sign of the group's first zero, wherever the four
    chains of the segment pass met it (segments of 1 to 41 values, blocks of 1 to 2,048)."""
    from fastprep.native import threads

    rng = np.random.default_rng(lanes)
    n_groups = 41
    sizes = np.arange(1, n_groups + 1)
    groups = rng.permutation(np.repeat(np.arange(n_groups), sizes)).astype(np.int64)
    values = rng.choice([0.0, -0.0, 1.5, -1.5, 3.0], len(groups))
    values[rng.random(len(groups)) < 0.3] = rng.choice([0.0, -0.0], 1)[0]
    monkeypatch.setattr(threads, "workers", lambda: lanes)
    monkeypatch.setattr(group_moments, "_PARALLEL_ROWS", 1)
    monkeypatch.setattr(group_moments, "_ROWS_PER_GROUP", 1)
    for block in (1, 3, 1 << 11):
        monkeypatch.setattr(group_moments, "_SEGMENT_BLOCK", block)
        found = group_moments.compiled_group_moments(groups, values, n_groups)
        assert found is not None
        for g in range(n_groups):
            low, high = np.inf, -np.inf
            for x in values[groups == g]:
                low = x if x < low else low
                high = x if x > high else high
            assert found[1][g] == low and np.signbit(found[1][g]) == np.signbit(low), (g, block)
            assert found[2][g] == high and np.signbit(found[2][g]) == np.signbit(high), (g, block)

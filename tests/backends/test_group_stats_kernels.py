"""The Numba GroupStats kernels equal their numpy twins exactly: statistics with many
ties, groups with no present value, the median's selection on several threads or one,
row ranges on several threads, numeric key levels from a presence table or a sort."""

from __future__ import annotations

import numpy as np
import pytest
from support import text_key_parts

from fastprep.backends import group_moments
from fastprep.backends.numba import group_keys as numba_keys
from fastprep.backends.numba import group_rows as numba_rows
from fastprep.backends.numba import group_stats as numba_gs
from fastprep.backends.reference import group_stats as numpy_gs

STATS = ("mean", "std", "count", "min", "max", "median")


def rows(n: int, groups: int, seed: int, ties: bool) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    index = rng.integers(0, groups, n)
    values = rng.normal(10, 30, n)
    if ties:
        values = np.round(values / 20)  # a few distinct values: long runs of equal ones
    values[rng.random(n) < 0.05] = np.nan
    values[index == groups - 1] = np.nan  # a group with no present value
    return index, values


@pytest.fixture(params=["one thread", "several threads"])
def lanes(request, monkeypatch):
    if request.param == "several threads":
        monkeypatch.setattr(group_moments, "_PARALLEL_ROWS", 1)
        monkeypatch.setattr(group_moments, "_ROWS_PER_GROUP", 1)
        monkeypatch.setattr(numba_keys, "PARALLEL_ROWS", 1)
    else:
        monkeypatch.setattr(group_moments, "_PARALLEL_ROWS", 1 << 60)
        monkeypatch.setattr(numba_keys, "PARALLEL_ROWS", 1 << 60)
    return request.param


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("groups", [1, 7, 3000])
def test_statistics_equal_the_numpy_twin(groups, ties, lanes):
    index, values = rows(40_000, groups + 1, groups, ties)
    got = numba_gs.group_statistics(index, values, groups + 1, STATS)
    want = numpy_gs.group_statistics(index, values, groups + 1, STATS)
    for stat in STATS:
        np.testing.assert_allclose(got[stat], want[stat], rtol=1e-12, err_msg=stat)
        assert np.array_equal(np.isnan(got[stat]), np.isnan(want[stat])), stat
    np.testing.assert_array_equal(got["median"], want["median"])  # selected, not computed


@pytest.mark.parametrize("size", [1, 2, 3, 16, 17, 18, 33, 512, 513, 1000, 4_096, 100_001])
def test_medians_of_small_large_constant_and_ordered_segments(size):
    rng = np.random.default_rng(size)
    sorted_ = np.sort(rng.normal(size=size))
    for values in (rng.normal(size=size), np.full(size, 2.5), rng.integers(0, 3, size) * 1.0,
                   sorted_, sorted_[::-1].copy(), np.where(rng.random(size) < 0.5, -np.inf, np.inf)):  # fmt: skip
        start = np.array([0, size], dtype=np.int64)
        got = numba_gs.medians(values.copy(), start)
        with np.errstate(invalid="ignore"):  # -inf and inf in the middle: NaN, as numpy's
            np.testing.assert_equal(got[0], np.median(values))


def test_row_ranges_give_the_serial_gathers(lanes):
    rng = np.random.default_rng(3)
    index = rng.integers(-1, 50, 100_000)
    per_group = rng.normal(size=(51, 6)).astype(np.float32)
    out = np.empty((len(index), 6), np.float32)
    numba_rows.put_rows(out, per_group, index)
    np.testing.assert_array_equal(out, per_group[index])
    lookup = rng.integers(-1, 50, 61)
    combined = rng.integers(-1, 60, 100_000)
    np.testing.assert_array_equal(numba_rows.take(lookup, combined), lookup[combined])
    codes = rng.integers(-1, 9, 100_000).astype(np.int32)
    lut = np.append(np.arange(9, dtype=np.int64), np.int64(9))
    first = numba_keys.accumulate(None, codes, lut, 10)
    np.testing.assert_array_equal(first, numpy_gs.accumulate(None, codes, lut, 10))
    both = numba_keys.accumulate(first.copy(), codes, lut, 10)
    np.testing.assert_array_equal(both, numpy_gs.accumulate(first, codes, lut, 10))


@pytest.mark.parametrize(
    "values",
    [
        [3.0, 1.0, np.nan, 3.0, -2.0, 0.0, -0.0],  # whole: a presence table
        [0.5, 1.0, np.nan, 0.5],  # fractional: a sort
        [1.0, 2.0**40],  # whole, but too wide a span for a table
        [np.inf, 1.0, -np.inf, 1.0],
        [np.nan, np.nan],
        [],
        [-(2.0**60), 5.0],
    ],
)
@pytest.mark.parametrize("split", [False, True])
def test_number_levels_equal_a_sort(values, split, monkeypatch):
    if split:  # row ranges on three threads, each with its own presence table
        from fastprep.native import threads

        monkeypatch.setattr(numba_keys, "PARALLEL_ROWS", 1)
        monkeypatch.setattr(threads, "workers", lambda: 3)
    values = np.asarray(values, dtype=np.float64)
    got = numba_keys.number_levels(values)
    want = numpy_gs.number_levels(values)
    np.testing.assert_array_equal(got, want)
    assert got.dtype == np.float64


@pytest.mark.parametrize("backend", ["pandas", "numba"])
def test_rows_read_a_small_key_space_table_as_the_group_index(flights_sample, backend, monkeypatch):
    import fastprep as fp

    frame = flights_sample[["carrier", "origin", "hour", "dep_delay"]]
    train, other = frame[frame["hour"] < 18], frame  # later hours: groups unseen at fit
    pipe = fp.Pipeline(fp.Schema.infer(frame), [
        fp.cols("carrier", "origin", "hour") >> fp.GroupStats("dep_delay", stats=STATS),
        fp.cols("carrier", "origin") >> fp.GroupStats("dep_delay", stats=("mean",))
        >> fp.FillMissing(0),
    ])  # fmt: skip
    fitted = pipe.fit(train, backend=backend)
    by_table = fitted.transform(other, backend=backend).X
    monkeypatch.setattr(numpy_gs, "SMALL_KEY_SPACE", 0)  # every row's group index first
    by_index = fitted.transform(other, backend=backend).X
    np.testing.assert_array_equal(by_table, by_index)
    assert len(by_table) < len(other)  # rows of groups unseen at fit: missing, quarantined


def test_number_codes_on_row_ranges_equal_the_numpy_twin(lanes):
    rng = np.random.default_rng(5)
    values = rng.integers(0, 30, 50_000).astype(np.float64)
    values[::11] = np.nan
    values[::13] = 2.5  # not a level
    for levels in (np.arange(0, 24, dtype=np.float64), np.array([0.5, 2.5, 7.0])):
        np.testing.assert_array_equal(
            numba_keys.number_codes(values, levels), numpy_gs.number_codes(values, levels)
        )


@pytest.mark.parametrize("space", [1, 9, 5_000, 400_000])
def test_present_codes_equal_the_numpy_twin(space, lanes):
    rng = np.random.default_rng(space)
    combined = rng.integers(0, space, 100_000) // 3 * 3  # some codes absent
    got = numba_keys.present(combined, space)
    np.testing.assert_array_equal(got, numpy_gs.present(combined, space))
    empty = np.empty(0, np.int64)
    np.testing.assert_array_equal(numba_keys.present(empty, space), np.zeros(space, bool))


def test_segments_on_row_ranges_keep_each_group_in_row_order(lanes, monkeypatch):
    monkeypatch.setattr(group_moments, "_PARALLEL_ROWS", 1)
    index, values = rows(100_000, 40, 5, ties=False)
    present = ~np.isnan(values)
    start = np.zeros(41, np.int64)
    np.cumsum(np.bincount(index[present], minlength=40), out=start[1:])
    by_group = np.argsort(index[present], kind="stable")
    want = values[present][by_group]
    np.testing.assert_array_equal(numba_gs.segments(index, values, start), want)
    counted = [
        ((0, 30_000), np.bincount(index[:30_000][present[:30_000]], minlength=40)),
        ((30_000, 100_000), np.bincount(index[30_000:][present[30_000:]], minlength=40)),
    ]
    np.testing.assert_array_equal(numba_gs.segments(index, values, start, counted), want)
    seen = []  # the moments' passes lay the values out for a median, a range at a time

    def then(ordered, laid_start, g0, g1):
        np.testing.assert_array_equal(laid_start, start)
        seen.append((g0, ordered[start[g0] : start[g1]].copy()))

    group_moments.compiled_group_moments(index, values, 40, then)
    np.testing.assert_array_equal(np.concatenate([o for _, o in sorted(seen)]), want)


def test_statistics_where_the_compiled_moments_decline(lanes):
    """Values whose squares leave float64's range, or spread over too many bits: numpy's
    moments, and the median from a layout of its own."""
    index, values = rows(20_000, 9, 3, ties=False)
    for odd in (1e300, 2.0**390):
        spread = values.copy()
        spread[[5, 17]] = (odd, 3.0 / odd)
        got = numba_gs.group_statistics(index, spread, 9, STATS)
        want = numpy_gs.group_statistics(index, spread, 9, STATS)
        for stat in STATS:
            np.testing.assert_array_equal(got[stat], want[stat], err_msg=stat)


@pytest.mark.parametrize("n_keys", [2, 3])
def test_text_keys_combined_in_one_pass_equal_key_by_key(n_keys, lanes):
    """Text keys' codes (-1: missing) through their luts (-1: unseen), combined in one
    pass: the numpy twin's key-by-key mixed radix, -1 where any key is unseen."""
    rng = np.random.default_rng(n_keys)
    n, parts, sizes = 50_001, [], []
    for k in range(n_keys):
        uniques = 5 + 7 * k
        codes = rng.integers(-1, uniques, n).astype(np.int32)
        lut = rng.permutation(uniques + 1).astype(np.int64)  # the last slot: missing
        lut[rng.integers(0, uniques)] = -1  # a value unseen at fit
        parts.append((codes, lut))
        sizes.append(uniques + 1)
    parts[0][0].flags.writeable = False  # codes over Arrow's buffers beside written ones
    got = numba_keys.combine_texts(parts, sizes)
    want = numpy_gs.combine(parts, sizes)
    np.testing.assert_array_equal(got, want)
    assert (want == -1).any() and (want >= 0).any()
    np.testing.assert_array_equal(numpy_gs.combine(parts, sizes, numba_gs.NUMBA), want)


@pytest.mark.parametrize("uniques", [(5, 12), (260, 260)])
def test_fit_keys_combined_and_marked_in_one_pass_equal_the_two_passes(uniques, lanes):
    """A fit's keys (every value a level) combined while the codes present are marked:
    the numpy twin's codes and presence, in uint16 (a key space up to 65,535) or uint32;
    a row whose key has no level, or a space too large beside the rows, declines."""
    rng = np.random.default_rng(uniques[0])
    n, parts, sizes = 600_001, [], []
    for size in uniques:
        codes = rng.integers(-1, size, n).astype(np.int32)
        lut = np.append(rng.permutation(size), size).astype(np.int64)  # last slot: missing
        parts.append((codes, lut))
        sizes.append(size + 1)
    parts[1][0][parts[0][0] == 0] = 0  # the first key's first value has one partner
    space = sizes[0] * sizes[1]
    got = numba_keys.combine_present(parts, sizes, space)
    want = numpy_gs.combine(parts, sizes)
    assert got is not None
    assert got[0].dtype == (np.uint16 if space < 1 << 16 else np.uint32)
    np.testing.assert_array_equal(got[0].astype(np.int64), want)
    np.testing.assert_array_equal(got[1], numpy_gs.present(want, space))
    assert not got[1].all()  # some combinations absent
    groups = np.flatnonzero(got[1])
    to_group = np.full(space + 1, -1, np.int64)
    to_group[groups] = np.arange(len(groups))
    values = rng.normal(size=n)
    values[rng.random(n) < 0.1] = np.nan
    read = numba_gs.group_statistics(got[0], values, len(groups), STATS, to_group)
    spelled = numpy_gs.group_statistics(to_group[want], values, len(groups), STATS)
    for stat in STATS:  # the narrow codes read as the int64 ones
        np.testing.assert_array_equal(read[stat], spelled[stat], err_msg=stat)
    unseen = [(parts[0][0], np.where(parts[0][1] == 2, -1, parts[0][1])), parts[1]]
    assert numba_keys.combine_present(unseen, sizes, space) is None
    assert numba_keys.combine_present(parts, sizes, n) is None


@pytest.mark.parametrize("stats", [STATS, ("median", "count"), ("min", "max")])
def test_statistics_read_through_a_lut_equal_the_groups_spelled_out(stats, lanes):
    """Rows given as int32 codes (-1: the lut's last slot) and a lut from code to group:
    the statistics of the groups spelled out row by row, in both twins."""
    index, values = rows(30_000, 12, 4, ties=False)
    codes = (index - 1).astype(np.int32)  # -1 .. 10, code -1 reads the last slot
    lut = np.array([3, 0, 7, 1, 2, 5, 4, 6, 8, 10, 11, 9], dtype=np.int64)
    want = numpy_gs.group_statistics(lut[codes], values, 12, stats)
    for twin in (numba_gs, numpy_gs):
        got = twin.group_statistics(codes, values, 12, stats, lut)
        for stat in stats:
            np.testing.assert_array_equal(got[stat], want[stat], err_msg=stat)


def test_rows_written_through_text_keys_equal_the_combined_gather(lanes):
    """The gather combining text keys' codes as it writes each row (into a view of a wider
    block, as X's columns are) equals the gather of the combined codes."""
    n = 40_001
    rng = np.random.default_rng(9)
    parts, sizes = text_key_parts(rng, n)
    per_code = rng.normal(size=(sizes[0] * sizes[1] + 1, 3)).astype(np.float32)
    want = np.zeros((n, 5), np.float32)
    numba_rows.put_rows(want[:, 1:4], per_code, numpy_gs.combine(parts, sizes))
    got = np.zeros((n, 5), np.float32)
    numba_rows.put_rows_texts(got[:, 1:4], per_code, parts, sizes)
    np.testing.assert_array_equal(got, want)
    assert (numpy_gs.combine(parts, sizes) == -1).any()


@pytest.mark.parametrize("case", ["hours", "negative", "one value", "all missing", "spread"])
def test_number_levels_and_codes_in_one_go_equal_the_twins_steps(case, lanes):
    """A number key's levels and codes from the same passes: the numpy twin's levels, and
    through the lut its codes (missing: the code after the levels); None where the values
    are not whole numbers close together."""
    rng = np.random.default_rng(7)
    values = {
        "hours": rng.integers(5, 24, 30_000).astype(float),
        "negative": rng.integers(-40, 3, 30_000) * 1.0,
        "one value": np.full(30_000, 7.0),
        "all missing": np.full(30_000, np.nan),
        "spread": rng.integers(0, 3, 30_000) * 2.0**40,
    }[case]
    if case != "all missing":
        values[rng.random(30_000) < 0.1] = np.nan
    found = numba_keys.number_levels_codes(values)
    if case in ("all missing", "spread"):
        assert found is None
        return
    levels, (codes, lut) = found
    np.testing.assert_array_equal(levels, numpy_gs.number_levels(values))
    np.testing.assert_array_equal(lut[codes], numpy_gs.number_codes(values, levels))


def test_number_key_codes_against_fitted_levels_equal_the_twins_codes(lanes):
    """A number key at transform as int32 offsets and a lut: through the lut, the numpy
    twin's codes (missing: the code after the levels; unseen: -1), for values in the
    levels' range but not a level, outside it, not whole, infinite or missing."""
    rng = np.random.default_rng(11)
    levels = np.array([-3.0, 0.0, 1.0, 5.0, 6.0, 20.0])
    values = rng.choice([-3.0, 0.0, 1.0, 5.0, 6.0, 20.0, 2.0, -4.0, 21.0, 2.5, np.inf,
                         -np.inf, np.nan, 1e300], 30_000)  # fmt: skip
    codes, lut = numba_keys.number_key_codes(values, levels)
    assert codes.dtype == np.int32
    np.testing.assert_array_equal(lut[codes], numpy_gs.number_codes(values, levels))
    assert numba_keys.number_key_codes(values, np.array([0.5, 1.0])) is None
    assert numba_keys.number_key_codes(values, np.array([0.0, 2.0**40])) is None
    assert numba_keys.number_key_codes(values, np.empty(0)) is None


@pytest.mark.parametrize("kind", [np.int64, np.int32, np.int8, np.uint16])
def test_integer_keys_read_as_stored_equal_their_float64_copies(kind, lanes):
    """A number key a table stores as integers is coded from them: the levels, codes and
    luts of its float64 copy, at fit and against fitted levels (values outside them
    unseen); integers beyond +-2**52 or spread wide decline as their copies do."""
    rng = np.random.default_rng(np.dtype(kind).itemsize)
    low = 0 if np.dtype(kind).kind == "u" else -40
    values = rng.integers(low, 90, 30_001).astype(kind)
    as_float = values.astype(np.float64)
    got, want = numba_keys.number_levels_codes(values), numba_keys.number_levels_codes(as_float)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1][1][got[1][0]], want[1][1][want[1][0]])
    levels = np.unique(as_float[::3])[::2]  # every other value unseen at transform
    got, want = (
        numba_keys.number_key_codes(values, levels),
        numba_keys.number_key_codes(as_float, levels),
    )
    np.testing.assert_array_equal(got[1][got[0]], want[1][want[0]])
    np.testing.assert_array_equal(got[1][got[0]], numpy_gs.number_codes(as_float, levels))
    for column in (values, as_float):  # the reference's key coding, either kernels
        for kernels in (numba_gs.NUMBA, numpy_gs.NUMPY):
            codes, lut = numpy_gs.key_parts(column, levels, kernels)
            np.testing.assert_array_equal(codes if lut is None else lut[codes],
                                          numpy_gs.number_codes(as_float, levels))  # fmt: skip
    if np.dtype(kind).itemsize == 8:
        wide = np.array([0, 3, 2**53 + 1, -(2**60)], dtype=kind)
        assert numba_keys.number_levels_codes(wide) is None
        assert numba_keys.number_key_codes(wide, np.array([0.0, 2.0**40])) is None


def test_text_levels_and_codes_together_equal_the_two_steps():
    """A text key's levels and lut from one sort equal ``fit_levels`` then ``key_parts``:
    values unused by the rows left out, missing in the lut's last slot."""
    from fastprep.data.columns import TextColumn

    uniques = np.array(["b", "a", "zz", "Z", "é", "unused", "a b"], dtype=object)
    codes = np.array([0, 1, 2, 3, 4, -1, 6, 0, -1, 2], dtype=np.int32)
    column = TextColumn(codes, uniques)
    levels, (got_codes, lut) = numpy_gs.text_levels_parts(column)
    want_levels = numpy_gs.fit_levels(TextColumn(codes, uniques))
    assert levels == want_levels and "unused" not in levels
    want_codes, want_lut = numpy_gs.key_parts(TextColumn(codes, uniques), want_levels)
    np.testing.assert_array_equal(lut[got_codes], want_lut[want_codes])

"""GroupStats' large writes by non-temporal stores equal the plain kernels bit for bit: the
counting sort by code (whole lines streamed; any alignment of the target, code -1, one or
several threads, 0 to 4,099 rows), the layout by code equal to the layout by group, and
the gather of the groups' rows onto every row (any width, float32 or float64, unseen
groups, text keys combined as rows are written)."""

from __future__ import annotations

import numpy as np
import pytest
from support import text_key_parts

from fastprep.backends import group_moments
from fastprep.backends.numba import group_keys as numba_keys
from fastprep.backends.numba import group_rows as numba_rows
from fastprep.backends.numba import group_stats as numba_gs
from fastprep.backends.reference import group_stats as numpy_gs

SIZES = [0, 1, 7, 8, 9, 63, 64, 65, 1000, 4099]
STATS = ("mean", "std", "count", "min", "max", "median")


@pytest.fixture(params=["one thread", "two threads"])
def lanes(request, monkeypatch):
    many = request.param == "two threads"
    monkeypatch.setattr(group_moments, "_PARALLEL_ROWS", 1 if many else 1 << 60)
    monkeypatch.setattr(group_moments, "_ROWS_PER_GROUP", 1 if many else 64)
    monkeypatch.setattr(numba_keys, "PARALLEL_ROWS", 1 if many else 1 << 60)
    return request.param


@pytest.fixture
def streamed(monkeypatch):
    """Every size streamed, as 3.4M rows are."""
    monkeypatch.setattr(group_moments, "STREAM_BYTES", 0)
    monkeypatch.setattr(numba_rows, "STREAM_BYTES", 0)


def coded(n: int, groups: int, seed: int, missing: bool) -> tuple:
    """Rows as a text key's int32 codes (-1: missing, the lut's last slot) read through a
    lut to their groups, and values with NaN, ±inf and ±0 (group 1: all missing)."""
    rng = np.random.default_rng(seed)
    codes = rng.integers(-1 if missing else 0, groups - int(missing), n).astype(np.int32)
    lut = np.full(groups + int(not missing), -1, dtype=np.int64)
    order = rng.permutation(groups)
    if missing:
        lut[: groups - 1], lut[-1] = order[: groups - 1], order[-1]
    else:  # no missing row: the last slot is past the groups, never read
        lut[:groups], lut[-1] = order, groups
    values = np.round(rng.normal(0, 3, n), 1)
    kind = rng.random(n)
    values[kind < 0.08] = np.nan
    values[(kind > 0.98)] = -0.0
    values[(kind > 0.99)] = np.inf
    if groups > 2:
        values[lut[codes] == 1] = np.nan  # a group with rows but no present value
    return codes, lut, values


def laid_out_by_hand(codes, lut, values, groups):
    present = ~np.isnan(values)
    by_group = lut[codes]
    start = np.zeros(groups + 1, np.int64)
    np.cumsum(np.bincount(by_group[present], minlength=groups), out=start[1:])
    return start, values[present][np.argsort(by_group[present], kind="stable")]


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("groups", [1, 3, 100])
def test_streamed_counting_sort_keeps_each_group_in_row_order(n, groups, lanes, streamed):
    for missing in [False, True][: 1 + (groups > 1)]:
        codes, lut, values = coded(n, groups, n + groups, missing)
        start, want = laid_out_by_hand(codes, lut, values, groups)
        got = group_moments.segments(codes, values, start, None, lut)
        assert got.tobytes() == want.tobytes()  # -0.0 and 0.0 in their rows' order


@pytest.mark.parametrize("phase", range(8))
def test_streamed_lines_at_every_alignment_leave_the_neighbours_alone(phase):
    codes, lut, values = coded(5_000, 37, phase, missing=True)
    start, want = laid_out_by_hand(codes, lut, values, 37)
    raw = np.zeros(len(want) + 16)
    ordered = raw[phase : phase + len(want)]
    fill = start[lut]
    lines = np.empty(len(fill) * 8)
    at = np.int64(ordered.ctypes.data // 8 % 8)
    half = len(codes) // 2  # two calls, as two threads: each from where the other ends
    second = fill + np.bincount(np.where(codes[:half] < 0, len(lut) - 1, codes[:half]),
                                ~np.isnan(values[:half]), minlength=len(lut)).astype(np.int64)  # fmt: skip
    group_moments._code_segments_streamed(codes[:half], values[:half], fill, ordered, at, lines)
    group_moments._code_segments_streamed(codes[half:], values[half:], second, ordered, at, lines)
    assert ordered.tobytes() == want.tobytes()
    assert not raw[:phase].any() and not raw[phase + len(want) :].any()


@pytest.mark.parametrize("by_code", [True, False])
def test_layout_by_code_equals_the_layout_by_group(by_code, lanes):
    codes, lut, values = coded(30_000, 500, 5, missing=True)
    start, want = laid_out_by_hand(codes, lut, values, 500)
    layout = group_moments.Layout(codes, lut, values, 500, by_code=by_code)
    ranges = [(0, 10_000), (10_000, 30_000)]
    per_range = [layout.count(r) for r in ranges]
    np.testing.assert_array_equal(layout.per_group(per_range[0] + per_range[1]), np.diff(start))
    assert layout.lay_out(start, ranges, per_range).tobytes() == want.tobytes()


@pytest.mark.parametrize("n", [0, 1, 65, 4099, 40_000])
def test_streamed_statistics_equal_the_numpy_twin(n, lanes, streamed):
    """Exact moments, extremes (the first zero's sign), medians (a zero's sign aside: the
    twins pick among equal values differently): as numpy's."""
    codes, lut, values = coded(n, 12, n, missing=True)
    values[np.isinf(values)] = 7.5  # the median of inf and -inf is NaN in both, the std too
    got = numba_gs.group_statistics(codes, values, 12, STATS, lut)
    want = numpy_gs.group_statistics(lut[codes], values, 12, STATS)
    for stat in STATS[:-1]:
        assert got[stat].tobytes() == want[stat].tobytes(), stat
    np.testing.assert_array_equal(got["median"], want["median"])
    found = group_moments.compiled_group_moments(codes, values, 12, None, lut)
    assert found is not None
    assert found[0].exact() == group_moments.group_moments(lut[codes], values, 12).exact()


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("width", [1, 2, 6, 7])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_streamed_gather_equals_the_plain_one(n, width, dtype, lanes, streamed):
    rng = np.random.default_rng(n + width)
    index = rng.integers(-1, 50, n).astype(np.int32)  # -1: the unseen group, the last row
    per_group = rng.normal(size=(51, width)).astype(dtype)
    out = np.full((n, width), 9, dtype)
    numba_rows.put_rows(out, per_group, index)
    np.testing.assert_array_equal(out, per_group[index])
    block = np.full((n, width + 2), 9, dtype)  # columns of a wider X: plain stores
    numba_rows.put_rows(block[:, 1 : width + 1], per_group, index)
    np.testing.assert_array_equal(block[:, 1 : width + 1], per_group[index])
    assert (block[:, [0, width + 1]] == 9).all()


@pytest.mark.parametrize("n", [0, 9, 4099])
def test_streamed_gather_through_text_keys_equals_the_combined_one(n, lanes, streamed):
    rng = np.random.default_rng(n)
    parts, sizes = text_key_parts(rng, n)
    per_code = rng.normal(size=(sizes[0] * sizes[1] + 1, 6)).astype(np.float32)
    got = np.zeros((n, 6), np.float32)
    numba_rows.put_rows_texts(got, per_code, parts, sizes)
    np.testing.assert_array_equal(got, per_code[numpy_gs.combine(parts, sizes)])


def test_codes_sharing_a_group_are_laid_out_by_group(lanes, streamed):
    """A lut reading two codes as one group (the same value under two codes): the
    counting sort fills per group, not per code (which would write the group twice)."""
    codes, lut, values = coded(20_000, 50, 6, missing=True)
    lut[3] = lut[4]  # codes 3 and 4: one group; lut[3]'s old group gets no row
    start, want = laid_out_by_hand(codes, lut, values, 50)
    assert not group_moments.Layout(codes, lut, values, 50).by_code
    assert group_moments.segments(codes, values, start, None, lut).tobytes() == want.tobytes()


@pytest.mark.parametrize("keys", [["tailnum"], ["dest", "hour"], ["carrier", "origin"]])
def test_streamed_pipeline_equals_pandas(flights_sample, keys, streamed):
    """The Numba backend's fit, transform and fit_transform with every write streamed, on
    the flights sample: pandas ``groupby`` mapped onto the rows (unseen groups missing,
    then filled)."""
    import pandas as pd

    import fastprep as fp

    train = flights_sample.iloc[:12_000]
    test = flights_sample.iloc[12_000:].reset_index(drop=True)
    pipeline = fp.Pipeline(
        fp.Schema.infer(flights_sample),
        [fp.cols(*keys) >> fp.GroupStats("dep_delay", stats=STATS) >> fp.FillMissing(-1.0)],
    )

    def peer(data: pd.DataFrame) -> np.ndarray:
        grouped = train.groupby(keys, dropna=False)["dep_delay"]
        table = pd.DataFrame({s: grouped.std(ddof=0) if s == "std" else getattr(grouped, s)()
                              for s in STATS}).reset_index()  # fmt: skip
        joined = data[keys].merge(table, on=keys, how="left")
        return np.nan_to_num(joined[list(STATS)].to_numpy(np.float64), nan=-1.0)

    fitted = pipeline.fit(train, backend="numba")
    for data, X in ((test, fitted.transform(test, backend="numba").X),
                    (train, pipeline.fit_transform(train, backend="numba").X)):  # fmt: skip
        np.testing.assert_allclose(X, peer(data).astype(np.float32), rtol=1e-6, atol=1e-6)

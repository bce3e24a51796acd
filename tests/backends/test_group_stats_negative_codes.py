"""The GroupStats kernels index with unsigned integers, where -1 (a missing key's code, a
group unseen at fit, a code of no group) must still read the last slot: each such path
against numpy's indexing (whose -1 reads the last element), at sizes 0, 1 and odd, on
sliced views, one thread and several, plain and streamed stores."""

from __future__ import annotations

import numpy as np
import pytest

from fastprep.backends import group_moments
from fastprep.backends.numba import group_keys as numba_keys
from fastprep.backends.numba import group_rows as numba_rows
from fastprep.backends.numba import group_stats as numba_gs
from fastprep.backends.reference import group_stats as numpy_gs

STATS = ("mean", "std", "count", "min", "max", "median")
SIZES = [0, 1, 7, 40_001]


@pytest.fixture(params=["one thread", "several threads"])
def lanes(request, monkeypatch):
    many = request.param == "several threads"
    monkeypatch.setattr(group_moments, "_PARALLEL_ROWS", 1 if many else 1 << 60)
    monkeypatch.setattr(group_moments, "_ROWS_PER_GROUP", 1)
    monkeypatch.setattr(numba_keys, "PARALLEL_ROWS", 1 if many else 1 << 60)
    return request.param


@pytest.fixture(params=["plain", "streamed"])
def stores(request, monkeypatch):
    if request.param == "streamed":  # non-temporal stores from the smallest outputs on
        monkeypatch.setattr(group_moments, "STREAM_BYTES", 0)
        monkeypatch.setattr(numba_rows, "STREAM_BYTES", 0)
    return request.param


def sliced(codes: np.ndarray) -> np.ndarray:
    """``codes`` as a strided view of a larger array (every other element)."""
    wide = np.full(2 * len(codes) + 1, 12345, dtype=codes.dtype)
    wide[1::2] = codes
    return wide[1::2]


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("kind", [np.int32, np.int64, np.uint16, np.uint32])
def test_take_reads_minus_one_as_the_last_slot(n, kind, lanes):
    rng = np.random.default_rng(n)
    low = -1 if np.dtype(kind).kind == "i" else 0
    combined = sliced(rng.integers(low, 9, n).astype(kind))
    lookup = rng.integers(-1, 50, 10).astype(np.int64)
    np.testing.assert_array_equal(numba_rows.take(lookup, combined), lookup[combined])


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("kind", [np.int32, np.int64, np.uint16])
def test_rows_of_unseen_groups_get_the_last_row(n, kind, lanes, stores):
    rng = np.random.default_rng(n + 1)
    low = -1 if np.dtype(kind).kind == "i" else 0
    index = sliced(rng.integers(low, 6, n).astype(kind))
    per_group = rng.normal(size=(7, 2))  # the last row: an unseen group's (missing) values
    for out_type, width in ((np.float64, 2), (np.float32, 2)):
        table = per_group.astype(out_type)[:, :width]
        got = np.zeros((n, width), out_type)
        numba_rows.put_rows(got, table, index)
        np.testing.assert_array_equal(got, table[index])
    into = np.zeros((n, 5), np.float32)  # a view with other columns between the rows
    numba_rows.put_rows(into[:, 1:3], per_group.astype(np.float32), index)
    np.testing.assert_array_equal(into[:, 1:3], per_group.astype(np.float32)[index])
    assert not into[:, [0, 3, 4]].any()


@pytest.mark.parametrize("n", SIZES)
def test_text_keys_missing_and_unseen_read_the_last_row(n, lanes, stores):
    rng = np.random.default_rng(n + 2)
    parts, sizes = [], []
    for uniques in (3, 5):
        codes = sliced(rng.integers(-1, uniques, n).astype(np.int32))  # -1: missing
        lut = np.append(np.arange(uniques), uniques).astype(np.int64)
        lut[0] = -1  # a level unseen at fit
        parts.append((codes, lut))
        sizes.append(uniques + 1)
    per_code = rng.normal(size=(sizes[0] * sizes[1] + 1, 2))
    got = np.zeros((n, 2))
    numba_rows.put_rows_texts(got, per_code, parts, sizes)
    combined = numpy_gs.combine([(np.asarray(c), lut) for c, lut in parts], sizes)
    np.testing.assert_array_equal(got, per_code[combined])
    np.testing.assert_array_equal(numba_keys.combine_texts(parts, sizes), combined)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("layout", ["by code", "by group"])
@pytest.mark.parametrize("stats", [STATS, ("min", "max", "count")])
def test_missing_key_codes_are_their_own_group(n, layout, stats, lanes, stores, monkeypatch):
    """int32 codes with -1 (a missing key: the lut's last slot), read by code or by group,
    through the counting sort's plain or streamed stores (without mean or std: the one
    serial pass over the rows' groups)."""
    if layout == "by group":
        monkeypatch.setattr(group_moments, "_BY_CODE_SLACK", -(1 << 40))
    rng = np.random.default_rng(n + 3)
    codes = sliced(rng.integers(-1, 6, n).astype(np.int32))
    values = rng.normal(5, 20, n)
    values[rng.random(n) < 0.1] = np.nan
    lut = np.array([2, 0, 5, 1, 3, 4, 6], dtype=np.int64)  # code -1: group 6 (missing)
    want = numpy_gs.group_statistics(lut[codes], values, 7, stats)
    got = numba_gs.group_statistics(codes, values, 7, stats, lut)
    for stat in stats:
        np.testing.assert_array_equal(got[stat], want[stat], err_msg=stat)


@pytest.mark.parametrize("n", SIZES)
def test_fit_codes_of_a_small_key_space_count_and_lay_out_as_int64(n, lanes, stores):
    """The fit's combined uint16 codes (no -1) give the statistics of the same codes as
    int64."""
    rng = np.random.default_rng(n + 4)
    index = rng.integers(0, 11, n)
    values = rng.normal(size=n)
    want = numpy_gs.group_statistics(index, values, 11, STATS)
    got = numba_gs.group_statistics(sliced(index.astype(np.uint16)), values, 11, STATS)
    for stat in STATS:
        np.testing.assert_array_equal(got[stat], want[stat], err_msg=stat)
    np.testing.assert_array_equal(numba_keys.present(index, 11), numpy_gs.present(index, 11))

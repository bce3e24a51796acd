"""Reading an Arrow number column and scanning it in one pass gives what converting it
(``to_numpy``) and then scanning the array gives, bit for bit."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from fastprep.validate import arrow_scan
from fastprep.validate import number_checks as nc
from fastprep.validate.coerce import arrow_numbers

N = nc.PARALLEL_MIN + 4099  # odd: the last task's chunks are short


def _floats(n: int, seed: int) -> pa.Array:
    rng = np.random.default_rng(seed)
    values = rng.normal(1e6, 50.0, n)
    values[rng.random(n) < 0.01] = np.inf
    values[rng.random(n) < 0.002] = np.nan  # a NaN that is not a null
    missing = rng.random(n) < 0.05
    return pa.array(values, mask=missing)


def _columns() -> dict[str, pa.ChunkedArray]:
    whole = _floats(N, 1)
    sliced = _floats(N + 700, 2).slice(333, N)  # a chunk that starts inside its buffers
    ints = np.random.default_rng(3).integers(-(2**60), 2**60, N)
    return {
        "one chunk with nulls": pa.chunked_array([whole]),
        "chunks at odd places": pa.chunked_array(
            [whole.slice(0, 1), whole.slice(1, 70_001), whole.slice(70_002)]
        ),
        "sliced": pa.chunked_array([sliced]),
        "all null chunk": pa.chunked_array(
            [pa.nulls(5000, pa.float64()), whole.slice(0, N - 5000)]
        ),
        "no nulls, chunked": pa.chunked_array(
            [pa.array(np.arange(N // 2, dtype=float)), pa.array(np.arange(N - N // 2, dtype=float))]
        ),
        "int64 chunked": pa.chunked_array([pa.array(ints[:12345]), pa.array(ints[12345:])]),
        "small int64 chunked": pa.chunked_array(  # summed in integers
            [pa.array(ints[:12345] % 24), pa.array(ints[12345:] % 24 - 7)]
        ),
    }


@pytest.mark.parametrize("name", list(_columns()))
@pytest.mark.parametrize("rules", [(-np.inf, np.inf, False, False), (0.0, 1e6, True, True)])
def test_read_and_scanned_in_one_pass_equals_convert_then_scan(name, rules, monkeypatch) -> None:
    monkeypatch.setenv("FASTPREP_KERNEL_PATH", "numba")
    column = _columns()[name]
    assert arrow_scan.takes(column)
    got = arrow_scan.read_scanned(column, *rules)
    assert got is not None
    values, scanned = got
    want = arrow_numbers(column)[0]
    assert values.dtype == want.dtype
    assert values.tobytes() == want.tobytes()
    for path in ("numba", "numpy"):  # the scan of the converted array, on either path
        monkeypatch.setenv("FASTPREP_KERNEL_PATH", path)
        expected = nc.scan_column(want, *rules)
        assert np.array_equal(scanned.counts, expected.counts), path
        assert (scanned.smallest, scanned.largest, scanned.finite, scanned.shift, scanned.n) == (
            expected.smallest, expected.largest, expected.finite, expected.shift, expected.n,
        ), path  # fmt: skip
        assert (
            np.array([scanned.total, scanned.squares]).tobytes()
            == np.array([expected.total, expected.squares]).tobytes()
        ), path


def test_zero_copy_small_and_other_columns_are_left_to_the_conversion() -> None:
    floats = np.arange(N, dtype=float)
    assert not arrow_scan.takes(pa.chunked_array([pa.array(floats)]))  # read without copy
    assert not arrow_scan.takes(pa.chunked_array([_floats(1000, 4)]))  # small
    assert not arrow_scan.takes(pa.chunked_array([pa.array(floats.astype(np.float32))]))
    with_null = pa.array(np.arange(N), mask=np.arange(N) == 5)
    assert not arrow_scan.takes(pa.chunked_array([with_null, with_null]))  # int64 with nulls


def test_numpy_path_leaves_the_column_to_the_conversion(monkeypatch) -> None:
    monkeypatch.setenv("FASTPREP_KERNEL_PATH", "numpy")
    assert arrow_scan.read_scanned(_columns()["sliced"], -np.inf, np.inf, False, False) is None

"""The one-pass column scan (validation + drift moments) and the numeric shortcuts: lazy row
ranges, value tables for small-range integers, the parallel median, zero-copy reads."""

import numpy as np
import pandas as pd
import pytest

import fastprep as fp
from fastprep.backends.numba import backend as numba_
from fastprep.backends.numba import kernels as numba_kernels
from fastprep.data.columns import Table, row_range
from fastprep.validate import drift
from fastprep.validate import number_checks as nc


def _values(kind: str, n: int) -> np.ndarray:
    rng = np.random.default_rng(7)
    if kind == "int":
        return rng.integers(-(2**40), 2**40, size=n)
    values = rng.normal(1e9, 1.0, size=n)  # far from zero: the naive variance breaks here
    values[rng.random(n) < 0.1] = np.nan
    values[rng.random(n) < 0.01] = np.inf
    return values


@pytest.mark.parametrize("kind", ["float", "int"])
def test_parallel_and_serial_scans_agree_and_count_right(kind: str) -> None:
    values = _values(kind, nc.PARALLEL_MIN + 12345)
    parallel = nc.scan_column(values, -np.inf, 1e9, kind == "int", False)
    small = values[: nc.PARALLEL_MIN - 1]
    serial = nc.scan_column(small, -np.inf, 1e9, kind == "int", False)
    as_float = values.astype(np.float64)
    finite = np.isfinite(as_float)
    assert parallel.counts[nc.NULL] == np.isnan(as_float).sum()
    assert parallel.counts[nc.INF] == np.isinf(as_float).sum()
    assert parallel.counts[nc.ABOVE] == (as_float[finite] > 1e9).sum()
    assert parallel.finite == finite.sum()
    assert parallel.smallest == as_float[finite].min()
    mean = parallel.shift + parallel.total / parallel.finite
    assert mean == pytest.approx(as_float[finite].mean(), abs=1e-9 * as_float[finite].std())
    small_f = small.astype(np.float64)
    assert serial.finite == np.isfinite(small_f).sum()
    assert serial.largest == small_f[np.isfinite(small_f)].max()


def test_int64_beyond_2_53_is_counted_exactly() -> None:
    values = np.array([1, 2**53, 2**53 + 1, -(2**53) - 1, 5], dtype=np.int64)
    scanned = nc.scan_column(values, -np.inf, np.inf, False, False)
    assert scanned.counts[nc.TOO_BIG] == 2  # 2**53 itself is exact
    masks = nc.rule_masks(values, scanned.counts, -np.inf, np.inf, False, False)
    assert masks[nc.TOO_BIG].tolist() == [False, False, True, True, False]


@pytest.mark.parametrize("kept_share", [0.97, 0.3])
def test_drift_profile_of_a_selection_matches_numpy(kept_share: float) -> None:
    values = _values("float", 200_000)
    table = Table(row_range(0, len(values)), {"x": values})
    table.remember(("scan", "x"), values, nc.moments_only(values))
    keep = np.random.default_rng(3).random(len(values)) < kept_share
    profiled = drift.profile(table.take(keep))["x"]
    chosen = values[keep]
    finite = chosen[np.isfinite(chosen)]
    assert profiled["rows"] == keep.sum()
    assert profiled["null_rate"] == pytest.approx(1 - len(finite) / keep.sum())
    assert profiled["mean"] == pytest.approx(finite.mean(), rel=1e-14)
    assert profiled["std"] == pytest.approx(finite.std(), rel=1e-6)


def test_row_range_is_a_read_only_range() -> None:
    ids = row_range(5, 10)
    assert ids.tolist() == list(range(5, 15)) and not ids.flags.writeable
    assert row_range(0, 3).tolist() == [0, 1, 2]


def test_small_range_int_value_table_is_bit_identical() -> None:
    """A function of an int column looked up in its table of values (``hk[c[r] - hl]`` in
    the kernels) equals the function of the column as float64, value by value."""
    rng = np.random.default_rng(11)
    values = rng.integers(-50, 5000, size=100_007)
    for func in ("log1p", "exp", "sqrt", "log"):
        with np.errstate(all="ignore"):
            want = getattr(np, func)(values.astype(np.float64))
        lowest, table = numba_._value_table(func, (int(values.min()), int(values.max())))
        assert np.array_equal(table[values - lowest], want, equal_nan=True), func


def test_tabled_columns_are_small_range_exact_int_columns() -> None:
    rng = np.random.default_rng(3)
    n = 80_000
    columns = {
        "hour": rng.integers(0, 24, n),
        "wide": rng.integers(0, 10**9, n),  # range far above the row count
        "huge": 2**60 + rng.integers(0, 5, n),  # float64 cannot tell these apart
        "real": rng.normal(size=n),
    }
    from fastprep.backends.numba.codegen import Chain
    from fastprep.plan.expr import Col

    table = Table(row_range(0, n), dict(columns))
    chains = [Chain(0, i, name, Col(name), True, ()) for i, name in enumerate(columns)]
    assert numba_._tabled(table, chains) == {"hour"}


def test_parallel_median_is_numpys_nanmedian() -> None:
    rng = np.random.default_rng(2)
    n = numba_kernels.PARALLEL_MEDIAN_MIN + 1001
    for values in (rng.normal(400, 100, n), np.round(rng.normal(size=n) * 3),
                   np.r_[np.full(n // 2, 1.0), np.full(n - n // 2, 1e10)]):  # fmt: skip
        values[rng.random(n) < 0.2] = np.nan
        median, count = numba_kernels.nanmedian(values.copy())
        assert median == np.nanmedian(values)
        assert count == np.count_nonzero(~np.isnan(values))


def test_pipeline_on_a_frame_with_an_offset_index_reads_without_copy(flights_sample) -> None:
    frame = flights_sample.iloc[100:].copy()
    pipeline = fp.Pipeline(
        schema=fp.Schema({"distance": fp.Float(min=0)}),
        features=[fp.col("distance") >> fp.Standardize()],
    )
    out = pipeline.fit_transform(frame, backend="numba")
    want = frame["distance"].to_numpy(np.float64)
    assert out.row_ids.tolist() == list(range(len(frame)))
    assert np.allclose(out.X[:, 0], (want - want.mean()) / want.std(), atol=1e-6)
    assert isinstance(frame.index, pd.RangeIndex) and frame.index.start == 100


@pytest.mark.parametrize("n", [0, 1, 3, 63, 64, 65, 255, 257, 4099])
@pytest.mark.parametrize("kind", ["float", "int"])
def test_scan_tasks_on_one_or_many_threads_equal_numpy_at_odd_sizes(kind: str, n: int) -> None:
    """The chunks a task reads side by side end at odd places (the last ones short or
    empty): the pool's tasks, one thread's loop and numpy give the same bits."""
    values = _values(kind, n)
    for rules in ((-np.inf, 1e9, False, False), (0.0, 2e9, True, True)):
        shift = nc.first_finite(values)
        args = (values, *rules, kind == "int", shift, nc.N_CHUNKS)
        by_numpy, serial, pooled = nc.scan_numpy(*args), nc._serial(*args), nc._parallel(*args)
        for got in (serial, pooled):
            assert np.array_equal(got[0], by_numpy[0])
            assert got[1].tobytes() == by_numpy[1].tobytes()
        as_float = values.astype(np.float64)
        assert by_numpy[0][:, nc.NULL].sum() == np.isnan(as_float).sum()
        assert by_numpy[0][:, nc.FINITE].sum() == np.isfinite(as_float).sum()


def _small_range_ints(case: str, n: int) -> np.ndarray:
    rng = np.random.default_rng(5)
    if case == "hours":
        return rng.integers(0, 24, n)
    if case == "negative":
        return rng.integers(-(10**6), 10**3, n)
    if case == "edge":  # the farthest from the shift a chunk's squares stay exact
        far = int(np.sqrt(nc.EXACT_INT_I // max(1, -(-n // nc.N_CHUNKS))))
        values = rng.integers(-far, far + 1, n)
        values[0] = 0
        return values
    values = rng.integers(0, 100, n)  # one chunk beyond 2**53: that task's float loop
    values[n // 2] = 2**53 + 1
    return values


@pytest.mark.parametrize("n", [1, 63, 65, 4099, nc.PARALLEL_MIN + 77])
@pytest.mark.parametrize("case", ["hours", "negative", "edge", "beyond"])
def test_small_range_int_columns_take_the_integer_loop_bit_for_bit(case: str, n: int) -> None:
    """An int64 column of a moderate range is summed in integers: the same counts and
    moments, bit for bit, as numpy's twin (the float loop's order), with and without
    bounds; a chunk whose sums could round leaves its task to the float loop."""
    values = _small_range_ints(case, n)
    shift = nc.first_finite(values)
    size = (n + nc.N_CHUNKS - 1) // nc.N_CHUNKS
    counts = np.zeros((nc.N_CHUNKS // nc.LANES, 7), np.int64)
    stats = np.zeros((nc.N_CHUNKS, 4))
    taken = nc._int_task(values, 0, size, -np.inf, np.inf, shift, counts, stats)
    assert taken == (case != "beyond" or n // 2 >= nc.LANES * size)
    for rules in ((-np.inf, np.inf, True, False), (5.0, 20.0, True, False),
                  (-np.inf, 1e9, False, False)):  # fmt: skip
        args = (values, *rules, True, shift, nc.N_CHUNKS)
        by_numpy, serial, pooled = nc.scan_numpy(*args), nc._serial(*args), nc._parallel(*args)
        for got in (serial, pooled):
            assert np.array_equal(got[0], by_numpy[0])
            assert got[1].tobytes() == by_numpy[1].tobytes()
        assert by_numpy[0][:, nc.BELOW].sum() == (values < rules[0]).sum()
        assert by_numpy[0][:, nc.TOO_BIG].sum() == (case == "beyond")

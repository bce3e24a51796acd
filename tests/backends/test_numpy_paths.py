"""The no-compile numpy paths equal the Numba kernels bit for bit (validation scan, drift
sums, CSR assembly, row compaction), the reference hasher equals sklearn's FeatureHasher,
and ``kernel_files`` knows what is in Numba's disk cache without importing Numba."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp
from sklearn.feature_extraction import FeatureHasher

from fastprep.backends.reference import backend as reference
from fastprep.backends.reference import hashing as hash_reference
from fastprep.data.columns import TextColumn
from fastprep.emit import csr_kernels, sink
from fastprep.native import kernel_files
from fastprep.plan.steps import Hash
from fastprep.planning import planner
from fastprep.validate import drift
from fastprep.validate import number_checks as nc


@pytest.fixture(scope="module")
def flights(flights_parquet):
    return pq.read_table(flights_parquet)


def _columns(flights) -> dict[str, np.ndarray]:
    out = {}
    for name in ("dep_delay", "arr_delay", "air_time", "distance", "hour", "minute"):
        column = flights.column(name)
        if column.null_count or column.type.id in (10, 11, 12):  # floats: NaN for missing
            out[name] = column.to_numpy(zero_copy_only=False).astype(np.float64)
        else:
            out[name] = column.to_numpy()
    return out


EDGE = {
    "empty": np.zeros(0),
    "all_nan": np.full(37, np.nan),
    "infs": np.array([np.inf, -np.inf, 1.0, np.nan, -5.0, 3.5, np.inf]),
    "signed_zeros": np.array([-0.0, 0.0, -0.0, np.nan, -0.0]),
    "one": np.array([2.5]),
    "ints_huge": np.array([2**53 + 1, -(2**53) - 7, 3, 0, 2**62], dtype=np.int64),
    "float32": np.linspace(-3, 3, 101, dtype=np.float32),
    "fractions": np.array([0.5, 1.0, 2.0, -1.5, 1e300, -1e300, 2.0**60]),
}


def _scan_both(values, lo, hi, integral, range_on_inf):
    int_source = values.dtype.kind == "i"
    shift = nc.first_finite(values)
    assert shift == float(nc._first_finite(values)) or (shift == 0.0 and len(values) == 0)
    args = (values, float(lo), float(hi), integral, range_on_inf, int_source, shift, nc.N_CHUNKS)
    return nc.scan_numpy(*args), nc._serial(*args), nc._parallel(*args)


@pytest.mark.parametrize("rules", [(-120, 2000, False, False), (0, 24, True, True),
                                   (-np.inf, np.inf, False, True), (1, 2, True, False)])  # fmt: skip
def test_scan_numpy_equals_kernels(flights, rules) -> None:
    for name, values in [*_columns(flights).items(), *EDGE.items()]:
        (counts, stats), (k_counts, k_stats), (p_counts, p_stats) = _scan_both(values, *rules)
        assert np.array_equal(counts, k_counts) and np.array_equal(counts, p_counts), name
        assert stats.tobytes() == k_stats.tobytes() == p_stats.tobytes(), name


def test_scan_column_paths_agree(flights, monkeypatch) -> None:
    values = _columns(flights)["dep_delay"]
    monkeypatch.setenv("FASTPREP_KERNEL_PATH", "numpy")
    by_numpy = nc.scan_column(values, -120, 2000, False, False)
    monkeypatch.setenv("FASTPREP_KERNEL_PATH", "numba")
    by_numba = nc.scan_column(values, -120, 2000, False, False)
    assert np.array_equal(by_numba.counts, by_numpy.counts)
    assert (by_numba.smallest, by_numba.largest, by_numba.finite, by_numba.shift) == (
        by_numpy.smallest,
        by_numpy.largest,
        by_numpy.finite,
        by_numpy.shift,
    )
    assert (
        np.array([by_numba.total, by_numba.squares]).tobytes()
        == np.array([by_numpy.total, by_numpy.squares]).tobytes()
    )
    assert planner.PATHS["scan"].startswith("numba: forced")


@pytest.mark.parametrize("share", [0.0, 0.03, 0.5, 0.97, 1.0])
def test_drift_sums_numpy_equals_kernel(flights, monkeypatch, share) -> None:
    rng = np.random.default_rng(7)
    for name, values in [*_columns(flights).items(), *EDGE.items()]:
        rows = np.flatnonzero(rng.random(len(values)) < share).astype(np.int64)
        shift = nc.first_finite(values)
        monkeypatch.setenv("FASTPREP_KERNEL_PATH", "numpy")
        count, total, squares = drift.sums_over(values, rows, shift)
        k_count, k_total, k_squares = drift._sums_over(values, rows, shift)
        assert count == k_count, name
        assert np.float64(total).tobytes() == np.float64(k_total).tobytes(), name
        assert np.float64(squares).tobytes() == np.float64(k_squares).tobytes(), name


def _blocks(n_rows: int, rng):
    dense = rng.normal(size=(n_rows, 5)).astype(np.float32)
    dense[rng.random(dense.shape) < 0.2] = 0.0
    dense[rng.random(dense.shape) < 0.05] = -0.0
    dense[rng.random(dense.shape) < 0.02] = np.nan
    codes = [
        rng.integers(-1, 4, n_rows).astype(np.int32),
        rng.integers(-1, 9, n_rows).astype(np.int64),
    ]
    hashed = sp.random(n_rows, 50, density=0.05, format="csr", dtype=np.float32, random_state=3)
    hashed.sort_indices()
    return dense, [("dense", 0, 0, 3), ("codes", 3, codes, [4, 9]), ("dense", 16, 3, 5),
                   ("sparse", 18, hashed)]  # fmt: skip


@pytest.mark.parametrize("n_rows", [0, 1, 17, 2000])
@pytest.mark.parametrize("select", [False, True])
def test_csr_assembly_numpy_equals_kernels(n_rows, select) -> None:
    rng = np.random.default_rng(n_rows)
    dense, blocks = _blocks(n_rows, rng)
    rows = np.flatnonzero(rng.random(n_rows) < 0.7).astype(np.int64) if select else None
    layout, arrays = csr_kernels._layout(blocks), csr_kernels._arguments(blocks, np.float32)
    module = kernel_files.load_module(csr_kernels._source(layout, rows is not None), prefix="csr")
    n_out = n_rows if rows is None else len(rows)
    head = [n_out, rows if rows is not None else csr_kernels._NO_ROWS, dense, *arrays]
    counts = np.zeros(n_out + 1, np.int64)
    module.count_serial(*head, counts[1:])
    np.cumsum(counts, out=counts)
    indices = np.empty(int(counts[-1]), np.int32)
    data = np.empty(int(counts[-1]), np.float32)
    module.fill_serial(*head, counts, indices, data)
    got = csr_kernels.assemble_numpy(blocks, rows, 68, dense, np.dtype(np.float32))
    assert got[2].dtype == np.int32 and np.array_equal(got[2], counts)
    assert np.array_equal(got[1], indices)
    assert got[0].tobytes() == data.tobytes()


def test_row_compaction_paths_agree(monkeypatch) -> None:
    rng = np.random.default_rng(1)
    keep = rng.random(500) < 0.8
    original = rng.normal(size=(500, 7)).astype(np.float32)
    results = []
    for path in ("numpy", "numba"):
        monkeypatch.setenv("FASTPREP_KERNEL_PATH", path)
        results.append(sink._compact_rows(original.copy(), keep).copy())
    assert results[0].tobytes() == results[1].tobytes()
    assert np.array_equal(results[0], original[keep])


# ---------------------------------------------------------------- reference hashing


def _text(values: list[str | None]) -> TextColumn:
    uniques = sorted({v for v in values if v is not None})
    position = {u: i for i, u in enumerate(uniques)}
    codes = np.array([-1 if v is None else position[v] for v in values], dtype=np.int32)
    return TextColumn(codes, np.array(uniques, dtype=object))


def _sklearn(rows, n_features, alternate_sign):
    hasher = FeatureHasher(n_features, input_type="pair", alternate_sign=alternate_sign,
                           dtype=np.float32)  # fmt: skip
    return sp.csr_matrix(hasher.transform(rows))


def _assert_identical(a, b) -> None:
    assert a.shape == b.shape and a.dtype == b.dtype
    assert a.indices.dtype == b.indices.dtype and a.indptr.dtype == b.indptr.dtype
    assert np.array_equal(a.indptr, b.indptr) and np.array_equal(a.indices, b.indices)
    assert a.data.tobytes() == b.data.tobytes()


@pytest.mark.parametrize("n_features", [2**18, 7, 1])
@pytest.mark.parametrize("alternate_sign", [True, False])
def test_reference_hash_equals_feature_hasher_on_flights(flights, n_features, alternate_sign):
    tail = flights.column("tailnum").to_pylist()
    dest = flights.column("dest").to_pylist()
    delay = flights.column("dep_delay").to_numpy(zero_copy_only=False).astype(np.float64)
    step = Hash(n_features=n_features, alternate_sign=alternate_sign)
    values = {"tailnum": _text(tail), "dest": _text(dest), "dep_delay": delay}
    got = reference.hash_features(step, values, len(tail))
    rows = [
        [p for p in (("tailnum", t) if t is not None else None, ("dest", d) if d is not None
                     else None, None if x != x else ("dep_delay", x)) if p is not None]
        for t, d, x in zip(tail, dest, delay.tolist())
    ]  # fmt: skip
    _assert_identical(got, _sklearn(rows, n_features, alternate_sign))
    crossed = reference.hash_features(step, {"tailnum": values["tailnum"], "dest": values["dest"]},
                                      len(tail), cross=True)  # fmt: skip
    cross_rows = [
        [] if t is None or d is None else [(f"tailnum={t}^dest={d}", 1)] for t, d in zip(tail, dest)
    ]
    _assert_identical(crossed, _sklearn(cross_rows, n_features, alternate_sign))


@pytest.mark.parametrize("n_features", [2**18, 7, 1])
@pytest.mark.parametrize("alternate_sign", [True, False])
def test_reference_hash_of_two_inputs_is_finished_without_scipy(
    flights, n_features, alternate_sign
):
    """Two inputs per row (the bundled pipeline's ``tailnum, dest``; two numbers that may
    land in one column, sum or cancel to an explicit 0) are finished in numpy, not by
    scipy: still bit-identical to sklearn's FeatureHasher."""
    tail = flights.column("tailnum").to_pylist()
    dest = flights.column("dest").to_pylist()
    step = Hash(n_features=n_features, alternate_sign=alternate_sign)
    got = reference.hash_features(step, {"tailnum": _text(tail), "dest": _text(dest)}, len(tail))
    assert not sp.issparse(got)  # the arrays alone
    rows = [
        [p for p in (("tailnum", t) if t is not None else None,
                     ("dest", d) if d is not None else None) if p is not None]
        for t, d in zip(tail, dest)
    ]  # fmt: skip
    _assert_identical(got, _sklearn(rows, n_features, alternate_sign))
    delay = flights.column("dep_delay").to_numpy(zero_copy_only=False).astype(np.float64)
    delay[:50] = [-1.5, 1.5] * 25  # equal magnitudes: a row's pair may cancel
    twin = np.where(np.arange(len(delay)) % 3 == 0, -delay, delay)
    got = reference.hash_features(step, {"a": delay, "b": twin}, len(delay))
    rows = [
        [p for p in (None if x != x else ("a", x), None if y != y else ("b", y)) if p is not None]
        for x, y in zip(delay.tolist(), twin.tolist())
    ]
    _assert_identical(got, _sklearn(rows, n_features, alternate_sign))


def test_reference_hash_cross_of_many_distinct_values_per_input() -> None:
    """Four inputs of 60,000 distinct values each: the product of their distinct counts
    passes int64, so combinations cannot be numbered by their position in that product."""
    n_unique = 60_000
    members = {}
    rows = [[0, 1, 59_999, 3], [5, 5, 5, 5], [0, 1, 59_999, 3], [7, -1, 7, 7], [1, 2, 3, 59_998]]
    for i, name in enumerate("abcd"):
        codes = np.array([row[i] for row in rows], dtype=np.int32)
        members[name] = TextColumn(codes, np.array([f"v{j}" for j in range(n_unique)], object))
    step = Hash(n_features=2**10)
    got = reference.hash_features(step, members, len(rows), cross=True)
    expected = [
        [] if -1 in row else [("^".join(f"{n}=v{c}" for n, c in zip("abcd", row)), 1)]
        for row in rows
    ]
    _assert_identical(got, _sklearn(expected, 2**10, True))


def test_reference_hash_edge_tokens() -> None:
    """Empty and long tokens, non-ASCII text, embedded NULs, a token hashing to -2**31,
    zeros (skipped), infinities, and values beyond float32."""
    from sklearn.utils import murmurhash3_32

    tokens = ["", "a", "ab", "abc", "abcd", "é", "日本語テキスト", "x\0y", "z" * 1000, "a\0"]
    assert hash_reference.signed_hashes(tokens).tolist() == [
        murmurhash3_32(t, positive=False) for t in tokens
    ]
    rows = [[("a", 0.0), ("b", "x"), ("c", np.inf)], [], [("d", 1e39), ("e", -2.5), ("b", "x")],
            [("f", "日本"), ("g", -np.inf), ("h", 3.0)]]  # fmt: skip
    for n_features in (2**20, 3):
        for alternate_sign in (True, False):
            got = hash_reference.hash_pairs(rows, n_features, alternate_sign, np.float32)
            _assert_identical(got, _sklearn(rows, n_features, alternate_sign))


def test_hash_int_min_column_rule() -> None:
    hashes = np.array([-(2**31), 5, -5, 0], dtype=np.int64)
    for n_features in (1, 3, 2**18, 2**31 - 1):
        columns, signs = hash_reference.columns_and_signs(hashes.copy(), n_features)
        assert columns[0] == (2**31 - 1 - (n_features - 1)) % n_features
        assert columns[1:].tolist() == [5 % n_features, 5 % n_features, 0]
        assert signs.tolist() == [-1.0, 1.0, -1.0, 1.0]


# -------------------------------------------------- what is in Numba's disk cache


CACHED_AFTER_CALL = """
import sys
from fastprep.native.kernel_files import numba_cached
from fastprep.validate import number_checks as nc
import numpy as np
before = numba_cached(nc._first_finite)
assert "numba" not in sys.modules, "asking imported numba"
nc._first_finite(np.arange(3.0))
print(before, numba_cached(nc._first_finite))
"""


def test_numba_cached_follows_numbas_disk_cache(tmp_path) -> None:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    first = subprocess.run([sys.executable, "-c", CACHED_AFTER_CALL], env=env,
                           capture_output=True, text=True, timeout=300)  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert first.stdout.split() == ["False", "True"]
    second = subprocess.run([sys.executable, "-c", CACHED_AFTER_CALL], env=env,
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    assert second.stdout.split() == ["True", "True"]


def test_small_cold_job_takes_numpy_large_warm_takes_numba(monkeypatch) -> None:
    monkeypatch.delenv("FASTPREP_KERNEL_PATH", raising=False)
    monkeypatch.setattr(planner, "numba_imported", lambda: True)  # a process with Numba loaded
    assert planner.kernel_path("scan", 20_000, cached=False) == "numpy"
    assert "compile" in planner.PATHS["scan"]
    assert planner.kernel_path("scan", 50_000_000, cached=True, loaded=True) == "numba"
    monkeypatch.setattr(planner, "numba_imported", lambda: False)  # a fresh process
    assert planner.kernel_path("scan", 20_000, cached=True) == "numpy"
    assert "would not repay its import" in planner.PATHS["scan"]
    assert planner.kernel_path("scan", 50_000_000, cached=True) == "numba"


def test_compile_ledger_persists_across_processes(tmp_path, monkeypatch) -> None:
    """A job that would save time on a kernel it cannot repay in one run adds the loss to a
    ledger on disk; a later process compiles once the ledger covers the compile."""
    monkeypatch.setenv("FASTPREP_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("FASTPREP_KERNEL_PATH", raising=False)
    monkeypatch.setattr(planner, "numba_imported", lambda: True)
    n = 200_000_000  # numpy 2.0 s vs Numba 0.4 s + a 2.3 s compile (the defaults)
    paths = []
    for _process in range(2):
        monkeypatch.setattr(planner, "_DISK", None)  # as a new process: read from disk
        paths.append(planner.kernel_path("scan", n, cached=False))
    assert paths == ["numpy", "numba"]
    monkeypatch.setattr(planner, "_DISK", None)
    assert planner._disk_forgone("helper:scan") == 0.0  # compiled: the debt is cleared


def test_explain_names_each_helper_path(repo_root) -> None:
    from fastprep.cli import load_pipeline_file

    pipeline = load_pipeline_file(repo_root / "pipelines" / "flights.py")
    text = pipeline.explain(str(repo_root / "data_samples" / "flights.parquet"))
    line = next(x for x in text.splitlines() if "scan: " in x)
    assert line.split("scan: ")[1].split(":")[0] in ("numpy", "numba")


def test_measured_rates_replace_the_generic_ones(tmp_path, monkeypatch, flights_pipeline) -> None:
    """A stage or helper measured slower than the profile's generic rate is predicted by
    its measurement in later processes (large runs only), so a job that keeps paying for
    it reaches its compile in fewer runs."""
    monkeypatch.setenv("FASTPREP_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("FASTPREP_KERNEL_PATH", raising=False)
    monkeypatch.setattr(planner, "numba_imported", lambda: True)
    monkeypatch.setattr(planner, "_DISK", None)
    plan = flights_pipeline.optimized
    n = 1_000_000
    compile_all = lambda _number, _stage: planner.COMPILE  # noqa: E731
    before = planner.choose(plan, n, readiness=compile_all)
    fused = next(c for c in before if c.kind == "elementwise")
    slow = fused.predicted["pandas"] * 4
    ran = [planner.with_measured(c, "fit", slow / 2) for c in before]
    ran = [planner.with_measured(c, "transform", slow / 2) for c in ran]
    planner.note_measured(ran, planner.LEARN_MIN_ROWS - 1)  # a small run teaches nothing
    monkeypatch.setattr(planner, "_DISK", None)
    assert planner.choose(plan, n, readiness=compile_all)[fused.stage].predicted == fused.predicted
    planner.note_measured(ran, n)
    monkeypatch.setattr(planner, "_DISK", None)  # as a new process: read from disk
    after = planner.choose(plan, n, readiness=compile_all)[fused.stage]
    assert after.predicted["pandas"] == pytest.approx(slow)
    assert "measured by earlier runs" in after.reason
    # helpers: numpy's measured rate per value
    generic = planner.HELPERS["scan"].numpy_value_seconds
    planner.note_helper("scan", 2_000_000, 2_000_000 * generic * 3)
    planner._save_forgone()  # what the process's exit does (once, not per noted helper)
    monkeypatch.setattr(planner, "_DISK", None)
    assert planner._learned("rate:helper:scan") == pytest.approx(generic * 3)
    planner.kernel_path("scan", 2_000_000, cached=False)  # numpy: the compile costs more
    assert "run 0.06 s" in planner.PATHS["scan"]  # 2M values at the measured rate

"""The CSR assembly's twins give X bit for bit: the ``parallel=True`` kernels on one and on
two Numba threads (a one-thread Dask worker's task runs them on one), their serial twins
(below ``PARALLEL_MIN_ROWS``) and the numpy path, for sizes around the kernels' chunking,
with and without dropped rows, whole and block by block."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from fastprep.emit import csr_kernels
from fastprep.emit.csr_kernels import CountedCsr, assemble_numpy, count_csr

numba = pytest.importorskip("numba")

WIDTH = 68


def _blocks(n_rows: int) -> tuple[np.ndarray, list[tuple], np.ndarray]:
    """Every kind of block (dense with zeros and NaN, two code columns with missing codes,
    a hashed CSR block), and a selection of about 70% of the rows."""
    rng = np.random.default_rng(n_rows)
    dense = rng.normal(size=(n_rows, 5)).astype(np.float32)
    dense[rng.random(dense.shape) < 0.2] = 0.0
    dense[rng.random(dense.shape) < 0.02] = np.nan
    codes = [rng.integers(-1, 4, n_rows).astype(np.int32), rng.integers(-1, 9, n_rows)]
    hashed = sp.random(n_rows, 50, density=0.05, format="csr", dtype=np.float32,
                       random_state=n_rows)  # fmt: skip
    hashed.sort_indices()
    blocks = [("dense", 0, 0, 3), ("codes", 3, codes, [4, 9]), ("dense", 16, 3, 5),
              ("sparse", 18, hashed)]  # fmt: skip
    rows = np.flatnonzero(rng.random(n_rows) < 0.7).astype(np.int64)
    return dense, blocks, rows


def _compiled(dense, blocks, rows, min_rows: int, threads: int, monkeypatch) -> list[bytes]:
    """X's three arrays (as bytes: NaN compared bit for bit) by the compiled kernels,
    parallel or serial as ``min_rows`` picks, on ``threads`` Numba threads; then its
    entries again block by block (``fill_rows``, a few rows at a time)."""
    monkeypatch.setenv("FASTPREP_KERNEL_PATH", "numba")
    monkeypatch.setattr(csr_kernels, "PARALLEL_MIN_ROWS", min_rows)
    before = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
        counted = count_csr(blocks, rows, WIDTH, dense, np.dtype(np.float32))
        assert isinstance(counted, CountedCsr)
        assert counted.suffix == ("" if counted.n_rows >= min_rows else "_serial")
        data, indices, indptr = counted.fill_all()
        step = max(1, counted.n_rows // 3)
        part_data = np.empty(counted.nnz, np.float32)
        part_indices = np.empty(counted.nnz, counted.index_dtype)
        local = np.empty(step, np.int64)
        for r0 in range(0, counted.n_rows, step):
            r1 = min(r0 + step, counted.n_rows)
            lead = int(counted.starts[r0])
            end = counted.fill_rows(r0, r1, 0, part_indices[lead:], part_data[lead:], local)
            assert end == int(counted.starts[r1]) - lead
    finally:
        numba.set_num_threads(before)
    assert part_data.tobytes() == data.tobytes()
    assert np.array_equal(part_indices, indices)
    return [data.tobytes(), indices.tobytes(), indptr.tobytes()]


@pytest.mark.parametrize("n_rows", [0, 1, 2, 63, 1000, 4099])
@pytest.mark.parametrize("select", [False, True])
def test_parallel_serial_and_numpy_twins_give_the_same_x(n_rows, select, monkeypatch) -> None:
    dense, blocks, rows = _blocks(n_rows)
    rows = rows if select else None
    threads = [1, 2] if numba.config.NUMBA_NUM_THREADS >= 2 else [1]
    made = [
        _compiled(dense, blocks, rows, min_rows, n, monkeypatch)
        for min_rows in (0, 1 << 62)  # every size parallel, every size serial
        for n in threads
    ]
    data, indices, indptr = assemble_numpy(blocks, rows, WIDTH, dense, np.dtype(np.float32))
    expected = [data.tobytes(), indices.tobytes(), indptr.tobytes()]
    assert all(arrays == expected for arrays in made)

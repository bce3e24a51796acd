"""X's CSR made block by block (``PendingCsr``) equals the CSR made at once, bit for bit:
on generated blocks (every kind, with and without dropped rows, any block and alignment
size) and through a real run written to an output folder (flights: one-hot and hashed
blocks, quarantined rows)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from support import REPO

import fastprep as fp
from fastprep.emit import csr_stream
from fastprep.emit.csr_kernels import CountedCsr, count_csr
from fastprep.emit.csr_stream import PendingCsr


def _blocks(n_rows: int, rng: np.random.Generator) -> tuple[np.ndarray, list[tuple]]:
    dense = rng.normal(size=(n_rows, 5)).astype(np.float32)
    dense[rng.random(dense.shape) < 0.2] = 0.0
    dense[rng.random(dense.shape) < 0.02] = np.nan
    codes = [rng.integers(-1, 4, n_rows).astype(np.int32), rng.integers(-1, 9, n_rows)]
    hashed = sp.random(n_rows, 50, density=0.05, format="csr", dtype=np.float32, random_state=3)
    hashed.sort_indices()
    return dense, [("dense", 0, 0, 3), ("codes", 3, codes, [4, 9]), ("dense", 16, 3, 5),
                   ("sparse", 18, hashed)]  # fmt: skip


def _counted(n_rows: int, select: bool, monkeypatch) -> CountedCsr:
    monkeypatch.setenv("FASTPREP_KERNEL_PATH", "numba")  # the compiled kernels, not numpy
    rng = np.random.default_rng(n_rows)
    dense, blocks = _blocks(n_rows, rng)
    rows = np.flatnonzero(rng.random(n_rows) < 0.7).astype(np.int64) if select else None
    counted = count_csr(blocks, rows, 68, dense, np.dtype(np.float32))
    assert isinstance(counted, CountedCsr)
    return counted


@pytest.mark.parametrize("n_rows", [0, 1, 2000])
@pytest.mark.parametrize("select", [False, True])
@pytest.mark.parametrize(("unit", "block_entries"), [(1, 1), (1, 7), (16, 100), (1024, 3000),
                                                     (1, 1 << 20)])  # fmt: skip
def test_pieces_equal_the_whole_csr(n_rows, select, unit, block_entries, monkeypatch) -> None:
    data, indices, indptr = _counted(n_rows, select, monkeypatch).fill_all()
    pending = PendingCsr(_counted(n_rows, select, monkeypatch))
    assert pending.nnz == len(data) and np.array_equal(pending.indptr, indptr)
    got_data, got_indices, sizes = [], [], []
    for piece_data, piece_indices in pending.pieces(unit, block_entries):
        sizes.append(len(piece_data))
        got_data.append(piece_data.copy())  # the buffers are reused by later pieces
        got_indices.append(piece_indices.copy())
    assert all(size % unit == 0 for size in sizes[:-1])
    assert np.concatenate(got_data).tobytes() == data.tobytes()
    assert np.array_equal(np.concatenate(got_indices), indices)
    assert pending.pending  # writing pieces never made the whole arrays
    assert pending.data.tobytes() == data.tobytes()  # made on access, the same
    assert np.array_equal(pending.indices, indices) and not pending.pending
    made = list(pending.pieces(unit, block_entries))  # from the whole arrays now
    assert np.concatenate([d for d, _ in made]).tobytes() == data.tobytes()


def test_run_written_block_by_block_equals_the_in_memory_x(tmp_path, monkeypatch) -> None:
    """The flights pipeline (one-hot and hashed blocks) with a feature infinite where
    ``minute`` is 0, so rows are quarantined after the transform too: what the output folder holds (streamed
    in blocks of ~5,000 entries) is the in-memory run's X, bit for bit."""
    monkeypatch.setenv("FASTPREP_KERNEL_PATH", "numba")
    monkeypatch.setattr(csr_stream, "BLOCK_ENTRIES", 5_000)
    schema = fp.Schema({
        "dep_delay": fp.Float(nullable=True), "air_time": fp.Float(nullable=True),
        "minute": fp.Int(min=0, max=59),
        "distance": fp.Float(min=0), "arr_delay": fp.Float(nullable=True),
        "origin": fp.Category(["EWR", "JFK", "LGA"]), "carrier": fp.Category(),
        "dest": fp.String(), "tailnum": fp.String(nullable=True),
    })  # fmt: skip
    pipeline = fp.Pipeline(
        schema=schema,
        features=[
            fp.cols("dep_delay") >> fp.FillMissing(0) >> fp.Standardize(),
            fp.expr("per_minute = distance / minute"),  # infinite at minute 0: quarantined
            fp.expr("speed = distance / air_time") >> fp.FillMissing(0),
            fp.cols("origin", "carrier") >> fp.OneHot(),
            fp.cols("tailnum", "dest") >> fp.Hash(n_features=2**10),
        ],
        target=fp.expr("late = arr_delay > 15"),
    )
    source = REPO / "data_samples" / "flights.parquet"
    _, written = pipeline.fit_and_transform(source, output_dir=tmp_path / "out")
    assert isinstance(written.matrix, PendingCsr)
    in_memory = pipeline.fit_transform(source)
    reasons = in_memory.quarantine_reason_texts()
    assert any(r.startswith("feature per_minute") for r in reasons)  # dropped after the transform
    opened = fp.open_output(tmp_path / "out")
    X, expected = opened.X, in_memory.X
    assert X.shape == expected.shape and X.nnz == expected.nnz > 0
    assert np.array_equal(X.indptr, expected.indptr)
    assert np.array_equal(X.indices, expected.indices)
    assert X.data.tobytes() == expected.data.tobytes()
    assert np.array_equal(opened.y, in_memory.y)
    assert np.array_equal(opened.row_ids, in_memory.row_ids)
    assert written.X.data.tobytes() == expected.data.tobytes()  # made on access


@pytest.mark.parametrize(("out_dtype", "compress"), [("float16", None), ("float32", "zstd")])
def test_outputs_that_need_the_whole_csr_make_it(tmp_path, monkeypatch, out_dtype,
                                                 compress) -> None:  # fmt: skip
    """A narrower dtype (checked on the whole data) or a compressed output takes X's
    arrays made at once: the folder still holds the in-memory run's X."""
    monkeypatch.setenv("FASTPREP_KERNEL_PATH", "numba")
    pipeline = fp.Pipeline(
        schema=fp.Schema(
            {"distance": fp.Float(min=0), "carrier": fp.Category(), "dest": fp.String()}
        ),
        features=[
            fp.col("distance") >> fp.Log1p(),
            fp.cols("carrier") >> fp.OneHot(),
            fp.cols("dest") >> fp.Hash(n_features=64),
        ],
    )
    source = REPO / "data_samples" / "flights.parquet"
    pipeline.fit_and_transform(source, out_dtype=out_dtype, output_dir=tmp_path / "out",
                               compress=compress)  # fmt: skip
    expected = pipeline.fit_transform(source, out_dtype=out_dtype).X
    X = fp.open_output(tmp_path / "out").X
    assert X.dtype == expected.dtype and np.array_equal(X.indptr, expected.indptr)
    assert np.array_equal(X.indices, expected.indices)
    assert X.data.tobytes() == expected.data.tobytes()

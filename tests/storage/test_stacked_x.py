"""The lazily stacked X of a sharded output: rows are gathered from the shards that hold them
only (a shard no row is asked from is never opened), in the order asked, and stacking all
of it is the same one implementation ``whole()`` uses."""

from __future__ import annotations

import numpy as np
import pytest
from support import assert_same_matrix

import fastprep as fp
from fastprep.storage.shards import ShardWriter, StackedX


@pytest.fixture(scope="module")
def flights_out(repo_root):
    from fastprep.cli import load_pipeline_file

    pipeline = load_pipeline_file(repo_root / "pipelines" / "flights.py")
    return pipeline.fit_transform(repo_root / "data_samples" / "flights.parquet")


def shards_of(X, sizes):
    starts = np.concatenate([[0], np.cumsum(sizes)])
    return [X[a:b] for a, b in zip(starts[:-1], starts[1:])]


def test_a_block_is_opened_only_when_a_row_of_it_is_asked_for(flights_out):
    X = flights_out.X
    sizes = [4_000, 1, 5_000, 0, 3_000, X.shape[0] - 12_001]
    pieces = shards_of(X, sizes)
    opened: list[int] = []

    def loader(i):
        def load():
            opened.append(i)
            return pieces[i]

        return load

    stacked = StackedX([loader(i) for i in range(len(pieces))], X.shape[1], rows=sizes,
                       dtype=X.dtype, sparse=True)  # fmt: skip
    assert stacked.shape == X.shape and opened == []
    rows = np.array([9_500, 4_000, 4_001, 9_001])  # blocks 4, 1, 2, 4: out of order
    assert_same_matrix(stacked[rows], X[rows])
    assert sorted(opened) == [1, 2, 4]
    stacked[9_010]
    assert sorted(opened) == [1, 2, 4]  # opened once, kept
    assert_same_matrix(stacked.materialize(), X)
    assert sorted(opened) == list(range(len(pieces)))


def test_gathers_match_the_matrix_dense_and_csr(flights_out):
    rng = np.random.default_rng(7)
    for X in (flights_out.X, flights_out.X[:, :20].toarray()):
        sizes = [2_500] * 7 + [X.shape[0] - 17_500]
        stacked = StackedX(shards_of(X, sizes), X.shape[1])
        for rows in (rng.permutation(X.shape[0])[:999], np.arange(X.shape[0])[::-3],
                     np.array([], dtype=np.int64), np.array([-1, 0, -2])):  # fmt: skip
            assert_same_matrix(stacked[rows], X[rows])
        assert_same_matrix(stacked[100:7_000], X[100:7_000])
        mask = rng.random(X.shape[0]) < 0.1
        assert_same_matrix(stacked[mask], X[mask])
        assert_same_matrix(stacked.materialize(), X)


def test_whole_and_stacked_x_of_a_compressed_output(flights_out, tmp_path):
    X, y, ids = flights_out.X, flights_out.y, flights_out.row_ids
    sizes = [6_000, 6_000, X.shape[0] - 12_000]
    writer = ShardWriter(tmp_path, flights_out.feature_names, "float32", compress="zstd")
    for a, b in zip(np.cumsum([0, *sizes[:-1]]), np.cumsum(sizes)):
        writer.add(X[a:b], y[a:b], ids[a:b])
    writer.close({})
    opened = fp.open_output(tmp_path)
    stacked = opened.stacked_X
    assert stacked.sparse and stacked.dtype == np.float32 and stacked.shape == X.shape
    assert_same_matrix(stacked[[13_000, 5]], X[[13_000, 5]])
    whole = opened.whole()
    assert_same_matrix(whole.X, X)
    assert np.array_equal(whole.y, y) and np.array_equal(whole.row_ids, ids)

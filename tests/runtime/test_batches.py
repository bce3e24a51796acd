"""``fitted.batches``: every emitted row exactly once per epoch, the rows of a full transform,
a reproducible order per seed that changes per epoch, and pooled dense buffers."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp

import fastprep as fp


def _collect(stream):
    batches = list(stream)
    ids = np.concatenate([b[2] for b in batches])
    y = np.concatenate([b[1] for b in batches])
    if sp.issparse(batches[0][0]):
        X = sp.vstack([b[0] for b in batches], format="csr")
    else:
        X = np.concatenate([b[0] for b in batches])
    return batches, X, y, ids


def _rows_of(full, ids):
    position = {int(r): i for i, r in enumerate(full.row_ids)}
    return np.array([position[int(r)] for r in ids])


@pytest.mark.parametrize("shuffle", [False, True])
def test_sparse_batches_are_the_rows_of_a_full_transform(flights_pipeline, flights_sample, shuffle):
    fitted = flights_pipeline.fit(flights_sample)
    full = fitted.transform(flights_sample)
    stream = fitted.batches(flights_sample, batch_size=1000, shuffle=shuffle, seed=7,
                            rows_per_partition=3000, return_row_ids=True)  # fmt: skip
    batches, X, y, ids = _collect(stream)
    assert sorted(ids.tolist()) == full.row_ids.tolist()  # every emitted row exactly once
    assert [b[0].shape[0] for b in batches] == [1000] * 19 + [430]
    assert all(b[0].format == "csr" for b in batches)
    rows = _rows_of(full, ids)
    expected = full.X[rows]
    assert (expected != X).nnz == 0 and X.dtype == np.float32
    np.testing.assert_array_equal(y, full.y[rows])
    stats = stream.stats
    assert (stats.rows_in, stats.rows_out, stats.rows_quarantined) == (20000, 19430, 570)
    assert stats.partitions == 7 and stats.peak_partition_rows == 3000
    assert sum(len(q) for q in stats.quarantine) == 570
    if not shuffle:
        np.testing.assert_array_equal(ids, full.row_ids)


def test_dense_batches_equal_full_rows_and_reuse_buffers(dense_pipeline, flights_sample):
    fitted = dense_pipeline.fit(flights_sample)
    full = fitted.transform(flights_sample)
    # kept batches (a list) are never overwritten: the pool allocates instead of reusing
    kept = fitted.batches(flights_sample, batch_size=512, shuffle=True, seed=3,
                          rows_per_partition=4096, return_row_ids=True)  # fmt: skip
    batches, X, y, ids = _collect(kept)
    assert sorted(ids.tolist()) == full.row_ids.tolist()
    rows = _rows_of(full, ids)
    np.testing.assert_array_equal(X, full.X[rows])
    np.testing.assert_array_equal(y, full.y[rows])
    assert all(b[0].flags.c_contiguous and b[0].dtype == np.float32 for b in batches)
    assert kept.stats.allocations_avoided == 0 and kept.stats.buffers_allocated == len(batches)
    # consumed one at a time (a training loop): two buffers serve every batch
    stream = fitted.batches(flights_sample, batch_size=512, shuffle=True, seed=3,
                            rows_per_partition=4096, return_row_ids=True)  # fmt: skip
    total, order = np.zeros(full.X.shape[1], np.float64), []
    for Xb, _yb, idb in stream:
        total += Xb.sum(axis=0, dtype=np.float64)
        order.append(idb.copy())
    np.testing.assert_array_equal(np.concatenate(order), ids)  # same seed, same order
    np.testing.assert_allclose(total, full.X.sum(axis=0, dtype=np.float64), rtol=1e-9)
    stats = stream.stats
    assert stats.buffers_allocated == 2
    assert stats.allocations_avoided == stats.batches - 2 == len(batches) - 2
    assert stats.peak_buffer_bytes == 2 * 512 * (full.X.shape[1] * 4 + 8 + 4)


def test_order_is_deterministic_per_seed_and_changes_per_epoch(dense_pipeline, flights_sample):
    fitted = dense_pipeline.fit(flights_sample)

    def order(**options):
        stream = fitted.batches(flights_sample, batch_size=1000, rows_per_partition=5000,
                                return_row_ids=True, **options)  # fmt: skip
        return np.concatenate([b[2].copy() for b in stream])

    first = order(shuffle=True, seed=11, epoch=0)
    np.testing.assert_array_equal(first, order(shuffle=True, seed=11, epoch=0))
    second = order(shuffle=True, seed=11, epoch=1)
    other_seed = order(shuffle=True, seed=12, epoch=0)
    assert sorted(first.tolist()) == sorted(second.tolist()) == sorted(other_seed.tolist())
    assert not np.array_equal(first, second) and not np.array_equal(first, other_seed)
    assert (np.diff(first[:1000]) < 0).any()  # rows are shuffled inside a partition
    # ... and the partitions (4 of 5,000 source rows) come in another order per epoch
    orders = set()
    for epoch in range(4):
        seen = order(shuffle=True, seed=11, epoch=epoch) // 5000
        orders.add(tuple(dict.fromkeys(seen.tolist())))
    assert len(orders) > 1 and all(sorted(o) == [0, 1, 2, 3] for o in orders)
    plain = order(shuffle=False)
    assert (np.diff(plain) > 0).all()


def test_drop_last_counts_the_rows_it_drops(dense_pipeline, flights_sample):
    fitted = dense_pipeline.fit(flights_sample)
    stream = fitted.batches(flights_sample, batch_size=1024, drop_last=True, shuffle=True)
    sizes = [Xb.shape[0] for Xb, _ in stream]
    assert set(sizes) == {1024}
    assert stream.stats.rows_dropped == 19430 - 1024 * len(sizes) == 19430 % 1024


def test_csv_glob_partitions_shuffle_with_their_row_ids(dense_pipeline, flights_sample, tmp_path):
    for k in range(4):
        flights_sample.iloc[k * 5000 : (k + 1) * 5000].to_csv(tmp_path / f"f{k}.csv", index=False)
    source = str(tmp_path / "f*.csv")
    fitted = dense_pipeline.fit(source)
    full = fitted.transform(source)
    stream = fitted.batches(source, batch_size=777, shuffle=True, seed=5, return_row_ids=True)
    _, X, _, ids = _collect(stream)
    assert sorted(ids.tolist()) == full.row_ids.tolist()
    np.testing.assert_array_equal(X, full.X[_rows_of(full, ids)])
    assert stream.stats.partitions == 4
    quarantined = np.concatenate([q["row_id"].to_numpy() for q in stream.stats.quarantine])
    np.testing.assert_array_equal(np.sort(quarantined), np.sort(full.quarantine["row_id"]))


def test_parquet_row_groups_stream_and_narrow(dense_pipeline, flights_sample, tmp_path):
    path = tmp_path / "f.parquet"
    pq.write_table(pa.Table.from_pandas(flights_sample, preserve_index=False), path,
                   row_group_size=2500)  # fmt: skip
    fitted = dense_pipeline.fit(path)
    full = fitted.transform(path, out_dtype="float16")
    stream = fitted.batches(path, batch_size=4096, rows_per_partition=5000,
                            out_dtype="float16", return_row_ids=True)  # fmt: skip
    _, X, _, ids = _collect(stream)
    assert X.dtype == np.float16
    np.testing.assert_array_equal(ids, full.row_ids)
    np.testing.assert_array_equal(X, full.X)
    assert stream.stats.precision["values_inexact"] == full.report.precision["values_inexact"]


def test_bad_batch_size_is_a_definition_error(dense_pipeline, flights_sample):
    fitted = dense_pipeline.fit(flights_sample)
    with pytest.raises(fp.PipelineDefinitionError, match="batch_size"):
        fitted.batches(flights_sample, batch_size=0)


@pytest.mark.parametrize("kind", ["frame", "parquet", "csv"])
def test_a_source_without_the_target_streams_without_y(flights_sample, tmp_path, kind):
    """New rows to predict on have no target column: batches, shards (and the torch dataset
    over them) transform them as ``transform`` does, with ``y`` None (a target encoding
    uses its fitted values), instead of failing on the absent column."""
    pipeline = fp.Pipeline(
        fp.Schema({"carrier": fp.Category(), "arr_delay": fp.Float(nullable=True),
                   "dep_delay": fp.Float(nullable=True)}),
        [fp.cols("carrier") >> fp.TargetEncode(), fp.col("dep_delay") >> fp.FillMissing(0)],
        target=fp.expr("late = arr_delay > 15"),
    )  # fmt: skip
    fitted = pipeline.fit(flights_sample)
    new = flights_sample.drop(columns=["arr_delay"])
    source = {"frame": new, "parquet": tmp_path / "new.parquet", "csv": tmp_path / "new.csv"}[kind]
    new.to_parquet(tmp_path / "new.parquet", row_group_size=4000)
    new.to_csv(tmp_path / "new.csv", index=False)
    full = fitted.transform(new)
    assert full.y is None
    batches = list(fitted.batches(source, batch_size=5000, rows_per_partition=4000))
    assert all(y is None for _, y in batches)
    np.testing.assert_array_equal(np.concatenate([X for X, _ in batches]), full.X)
    fitted.write_shards(source, tmp_path / "shards", rows_per_partition=4000)
    shards = fp.open_output(tmp_path / "shards").whole()
    np.testing.assert_array_equal(np.asarray(shards.X), full.X)
    assert shards.y is None

"""Memory of ``batches`` is bounded by the partition and batch size, not by the source.

Measured with tracemalloc (NumPy and pandas report their buffers to it): the peak while
streaming every batch of a large source is compared with the peak of transforming *one*
partition's worth of rows, and with a whole-source transform.
"""

from __future__ import annotations

import time
import tracemalloc

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest


def _peak(run) -> tuple[int, object]:
    tracemalloc.start()
    try:
        result = run()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, result


def _consume(stream) -> int:
    rows = 0
    for X, y in stream:
        rows += X.shape[0]
        assert y.shape[0] == X.shape[0]
    return rows


def test_batches_memory_is_bounded_by_the_partition(dense_pipeline, flights_full):
    fitted = dense_pipeline.fit(flights_full.iloc[:20000])
    part = 40_000
    one_partition, _ = _peak(lambda: fitted.transform(flights_full.iloc[:part]))
    whole, full = _peak(lambda: fitted.transform(flights_full))
    stream = fitted.batches(flights_full, batch_size=1024, shuffle=True, seed=0,
                            rows_per_partition=part)  # fmt: skip
    streamed, rows = _peak(lambda: _consume(stream))
    assert rows == full.X.shape[0] == stream.stats.rows_out
    buffers = stream.stats.peak_buffer_bytes
    print(f"tracemalloc peak: one {part:,}-row partition {one_partition / 2**20:.1f} MiB, "
          f"streaming {len(flights_full):,} rows {streamed / 2**20:.1f} MiB (buffers "
          f"{buffers / 2**20:.2f} MiB), whole transform {whole / 2**20:.1f} MiB")  # fmt: skip
    assert streamed <= 1.5 * one_partition + buffers
    assert streamed < whole / 3
    assert stream.stats.allocations_avoided == stream.stats.batches - 2


@pytest.mark.slow
def test_batches_over_3_4m_rows_stay_bounded(dense_pipeline, tmp_path):
    from fastprep.bench.data import load_flights, make_rows

    rows_per_group = 262_144
    frame = make_rows(load_flights(), 3_367_760)
    big = tmp_path / "flights_3.4M.parquet"
    table = pa.Table.from_pandas(frame, preserve_index=False)
    pq.write_table(table, big, row_group_size=rows_per_group)
    one = tmp_path / "one_group.parquet"
    pq.write_table(table.slice(0, rows_per_group), one)
    sample = frame.iloc[:20000].copy()
    del frame, table
    fitted = dense_pipeline.fit(sample)
    one_partition, _ = _peak(lambda: fitted.transform(one))
    stream = fitted.batches(big, batch_size=4096, shuffle=True, seed=0,
                            rows_per_partition=rows_per_group)  # fmt: skip
    started = time.perf_counter()
    streamed, rows = _peak(lambda: _consume(stream))
    seconds = time.perf_counter() - started
    stats = stream.stats
    assert stats.rows_in == 3_367_760 and rows == stats.rows_out
    assert stats.partitions == int(np.ceil(3_367_760 / rows_per_group))
    width = len(fitted.transform(sample.head(100)).feature_names)
    whole_x = stats.rows_out * width * 4
    print(f"3.4M rows streamed in {seconds:.1f}s ({stats.batches} batches, "
          f"{stats.allocations_avoided} buffer allocations avoided); tracemalloc peak "
          f"{streamed / 2**20:.1f} MiB vs one partition {one_partition / 2**20:.1f} MiB; "
          f"the whole X alone would be {whole_x / 2**20:.0f} MiB")  # fmt: skip
    assert streamed <= 1.5 * one_partition + stats.peak_buffer_bytes
    assert streamed < whole_x / 2

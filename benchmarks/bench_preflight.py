"""The memory pre-flight: what it costs, and its predicted peak against the measured one.

For each size, in a fresh process: the cheap pre-flight (what every fit runs) and the full
one (what ``explain`` runs: every cardinality sketch), then an in-memory ``fit_transform``
whose peak RSS above the process's baseline is compared with the predicted peak.

    python benchmarks/bench_preflight.py --rows 20000 336776 3367760
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: generated data (bench_cluster.py keeps its own under benchmarks/results/data)
CACHE = Path(tempfile.gettempdir()) / "fastprep-bench"


def measure(n_rows: int) -> dict:
    import psutil

    from fastprep.bench.data import dataset
    from fastprep.cli import load_pipeline_file
    from fastprep.runtime.preflight import run_preflight
    from fastprep.runtime.route import check

    path = str(dataset(n_rows, CACHE))
    pipeline = load_pipeline_file(Path(__file__).resolve().parents[1] / "pipelines/flights.py")
    plan, schema = pipeline.optimized, pipeline.schema
    started = time.perf_counter()
    check(plan, schema, path)
    cheap = time.perf_counter() - started
    started = time.perf_counter()
    full = run_preflight(plan, schema, path)
    full_seconds = time.perf_counter() - started
    baseline = psutil.Process().memory_info().rss
    started = time.perf_counter()
    out = pipeline.fit_transform(path, backend="auto")
    run_seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - baseline
    X = out.X
    return {
        "rows": n_rows,
        "cheap_preflight_s": round(cheap, 4),
        "full_preflight_s": round(full_seconds, 4),
        "fit_transform_s": round(run_seconds, 3),
        "predicted_peak_MB": round(full.peak_bytes / 1e6, 1),
        "measured_peak_above_baseline_MB": round(peak / 1e6, 1),
        "predicted_X_MB": round(full.output_bytes / 1e6, 1),
        "measured_X_MB": round((X.data.nbytes + X.indices.nbytes + X.indptr.nbytes) / 1e6, 1),
        "cardinalities": {k: v.estimate for k, v in full.cardinalities.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, nargs="+", default=[20_000, 336_776])
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one)))
        return
    print("| rows | cheap pre-flight | full pre-flight | fit+transform | predicted peak | "
          "measured peak | predicted X | measured X |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for n in args.rows:
        line = subprocess.run([sys.executable, __file__, "--one", str(n)], check=True,
                              capture_output=True, text=True).stdout.strip().splitlines()[-1]  # fmt: skip
        r = json.loads(line)
        print(f"| {r['rows']:,} | {r['cheap_preflight_s']} s | {r['full_preflight_s']} s | "
              f"{r['fit_transform_s']} s | {r['predicted_peak_MB']} MB | "
              f"{r['measured_peak_above_baseline_MB']} MB | {r['predicted_X_MB']} MB | "
              f"{r['measured_X_MB']} MB |")  # fmt: skip
        print(f"<!-- {r['rows']:,}: cardinalities {r['cardinalities']} -->")


if __name__ == "__main__":
    main()

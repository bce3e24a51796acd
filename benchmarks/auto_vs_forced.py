"""``auto`` against one forced backend in ONE process, runs alternating (A B B A ...).

Why: the main harness times each sample in a fresh process, so a 3-sample median of two
backends that pick nearly the same plan can differ by the machine's ±20% minute-to-minute
noise. Alternating warm runs in one process compare the plans, not the minutes.

    python benchmarks/auto_vs_forced.py --rows 3367760 --backend numba --runs 8
"""

from __future__ import annotations

import argparse
import logging
import runpy
import statistics
import time
from pathlib import Path

import numpy as np

from fastprep.bench.data import load_flights, make_rows

PIPELINE = Path(__file__).resolve().parent.parent / "pipelines" / "flights.py"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3_367_760)
    parser.add_argument("--backend", default="numba", help="the forced backend to compare")
    parser.add_argument("--runs", type=int, default=8, help="timed runs per backend")
    parser.add_argument("--pipeline", default=str(PIPELINE))
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # quarantine alerts on every run
    pipeline = runpy.run_path(args.pipeline)["pipeline"]
    frame = make_rows(load_flights(), args.rows)
    rows = np.asarray(pipeline.fit_transform(frame).row_ids)
    emitted = frame.iloc[rows].reset_index(drop=True)  # the rows every competitor gets
    backends = ("auto", args.backend)
    for backend in backends:  # load kernels, warm the arena
        pipeline.fit_transform(emitted, backend=backend)
    times: dict[str, list[float]] = {b: [] for b in backends}
    for i in range(args.runs):
        for backend in backends if i % 2 else backends[::-1]:
            start = time.perf_counter()
            out = pipeline.fit_transform(emitted, backend=backend)
            times[backend].append(time.perf_counter() - start)
            del out
    for backend, values in times.items():
        print(f"{backend:>8}: median {statistics.median(values):.4f} s, min {min(values):.4f} s"
              f" ({len(values)} runs, {len(emitted):,} rows)")  # fmt: skip


if __name__ == "__main__":
    main()

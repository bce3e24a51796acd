"""Validation's share of a whole flights pipeline run (target: <= 20%).

    python benchmarks/validation_cost.py --rows 336776,3367760 --backend numba --repeat 3

For each size: fit the flights pipeline on the Parquet file, then time ``transform`` of the
same file (warm: kernels compiled, OS cache hot) and report the report's stage times.
Validation = the ``validate`` stage (coerce + every rule + text encoding) plus ``drift``;
the run = the sum of all stages (read, validate, drift, transform, emit). Best of repeats.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from fastprep.bench.data import dataset
from fastprep.cli import load_pipeline_file

REPO = Path(__file__).resolve().parents[1]


def measure(rows: int, backend: str, repeat: int, cache: str) -> dict[str, float]:
    path = dataset(rows, cache)
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    fitted = pipeline.fit(path, backend=backend)
    best: dict[str, float] | None = None
    for _ in range(repeat):
        started = time.perf_counter()
        out = fitted.transform(path, backend=backend)
        wall = time.perf_counter() - started
        stages = dict(out.report.stages)
        stages["wall"] = wall
        if best is None or wall < best["wall"]:
            best = stages
    assert best is not None
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="336776,3367760")
    parser.add_argument("--backend", default="numba")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cache", default=str(REPO / "benchmarks" / ".cache"))
    args = parser.parse_args()
    for rows in (int(r) for r in args.rows.split(",")):
        stages = measure(rows, args.backend, args.repeat, args.cache)
        run = sum(v for k, v in stages.items() if k not in ("wall", "compile"))
        validation = stages.get("validate", 0.0) + stages.get("drift", 0.0)
        timing = ", ".join(f"{k} {v:.3f}s" for k, v in stages.items())
        print(f"{rows:>9,} rows ({args.backend}): {timing}")
        print(f"          validation {validation:.3f}s of {run:.3f}s = {validation / run:.1%}")


if __name__ == "__main__":
    main()

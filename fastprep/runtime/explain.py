"""``explain`` with a source: the memory pre-flight, then the backend per stage and why.

As ``fastprep run`` would run it (the output written to a folder, not gathered): the
pre-flight's lines come first; a run it would refuse, or would not run in memory, stops
there. Otherwise the source is read and validated and the planner's choice per stage is
listed; ``analyze=True`` runs fit + transform too and adds the measured seconds per stage
next to the predictions (like EXPLAIN ANALYZE).

For a cluster source (a ``client=`` or ``scheduler=`` given, or a source of several
partitions) it also shows how the Dask job would run: its partitions, its passes with the
statistics each collects, and each pass's predicted time from the planner's Dask cost model.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fastprep.api.schema import Schema
from fastprep.backends import stages as stage_backends
from fastprep.data.partitions import ROWS_PER_PARTITION, plan_partitions, source_size
from fastprep.data.sources import Source, collect_once, is_path
from fastprep.errors import PipelineDefinitionError
from fastprep.plan.nodes import LogicalPlan
from fastprep.planning.planner import (
    CostProfile,
    busiest_worker_rows,
    dask_job_seconds,
    dask_light_pass_seconds,
    dask_pass_seconds,
    dask_transform_seconds,
    load_profile,
)
from fastprep.runtime import execute, preflight

#: what a fit pass's task returns per fitted step, by the step's partial kind
COLLECTS = {
    "moments": "count, exact sums, min, max",
    "summary": "median summary (exact order statistics at known ranks)",
    "order": "percentile summaries (exact order statistics at known ranks)",
    "unfilled": "moments of the present values (folded into the fill)",
    "vocabulary": "distinct values with counts",
    "values": "the present values (gathered on the client)",
    "groups": "per-group partial statistics",
    "target": "per-category target sums and counts",
    "window": "counts below and values inside the median's window",
    "windows": "counts below and values inside each percentile's window",
}


def explain_source(
    plan: LogicalPlan, schema: Schema, source: Source, *, analyze: bool = False,
    backend: str = "auto", memory_budget: int | str | None = None, client: Any = None,
    scheduler: str | None = None, rows_per_partition: int | None = None,
) -> str:  # fmt: skip
    """The pre-flight's lines, then the Dask job (for a cluster source: see the module
    doc), then (for a run in memory, and not on a cluster named) the backends per stage."""
    from fastprep.runtime.levels import count_order_targets, count_passes

    on_cluster = client is not None or scheduler not in (None, "off")
    if analyze and on_cluster:
        raise PipelineDefinitionError(
            "explain(analyze=True) runs in this process: run the job on the cluster for its "
            "measured times (report.stages, the progress callback's passes)"
        )
    if on_cluster:  # the source is read by the workers: not in this process
        if not is_path(source):
            return (f"Dask job: a {type(source).__name__} source is not planned here (a dask "
                    "DataFrame's partitions are its own; anything else: write it to Parquet)")  # fmt: skip
        return explain_cluster(plan, source, rows_per_partition or ROWS_PER_PARTITION, client,
                               scheduler, schema=schema)  # fmt: skip
    path = source
    source = collect_once(source, schema.read_columns(plan.columns))
    pre = preflight.run_preflight(plan, schema, source, budget=memory_budget,
                                  whole_output=False, passes=count_passes(plan),
                                  order_statistics=count_order_targets(plan))  # fmt: skip
    text = "\n".join(pre.lines())
    if pre.execution == "dask" and is_path(path):  # the pre-flight starts a local cluster
        text += "\n" + explain_cluster(plan, path, pre.rows_per_partition or ROWS_PER_PARTITION,
                                       None, "local", schema=schema)  # fmt: skip
    if any(d.refuse for d in pre.decisions) or pre.execution != "in-memory":
        return text + "\n(backends per stage: not planned in memory; see the pre-flight)"
    return text + "\n" + _backends(plan, schema, source, analyze, backend)


def explain_cluster(
    plan: LogicalPlan, source: Source, rows_per_partition: int, client: Any = None,
    scheduler: str | None = None, profile: CostProfile | None = None,
    schema: Schema | None = None,
) -> str:  # fmt: skip
    """The Dask job: its partitions (as the job plans them for the cluster's worker
    threads), each pass with what its tasks collect and where they take their rows from,
    and the predicted seconds per pass (:func:`fastprep.planning.planner.dask_pass_seconds`).
    ``schema``: the pipeline's (the transform's share of partitions kept by the fit is
    estimated from its columns' types)."""
    from fastprep.runtime import kept_values
    from fastprep.runtime.levels import later_chains, level_targets
    from fastprep.runtime.partition_tasks import kept_split

    profile = profile or load_profile()
    workers, where = _workers(client, scheduler)
    specs = plan_partitions(source, rows_per_partition, workers)
    known = [s.n_rows for s in specs if s.n_rows is not None]
    rows = sum(known) if len(known) == len(specs) else source_size(source).n_rows
    tasks = len(specs)
    largest = max(known, default=0)
    # the first fit pass keeps the values later fit passes need on its worker (8 bytes a
    # row per chain) when a worker's share fits the store: those passes then read nothing
    share = math.ceil(tasks / max(workers, 1)) * max(largest, 1)
    kept = 8 * share * len(later_chains(plan)) <= kept_values.KEPT_BYTES
    later = "from the values kept on the workers, one task per worker" if kept else (
        "read + validate")  # fmt: skip
    # ... and the whole validated partitions for the transform, as many as each worker's
    # store holds
    chains = len(later_chains(plan)) if kept else 0
    in_memory, on_disk = (kept_split(plan, schema, rows, tasks, workers, chains)
                          if schema is not None else (0.0, 0.0))  # fmt: skip
    held = in_memory + on_disk
    # the partitions as planned may be unequal (a file's row groups): the busiest worker's
    # rows as the scheduler hands them out, not equal shares
    busiest = busiest_worker_rows(known, workers) if len(known) == len(specs) else None
    one = dask_pass_seconds(profile, rows, tasks, workers, busiest=busiest)
    light = dask_light_pass_seconds(profile, tasks, workers, rows, busiest=busiest) if kept else one
    passes: list[tuple[str, str, float, list[str]]] = []
    if len(known) != len(specs):
        passes.append(("count rows", "read", one, ["rows per CSV file (row ids need the offsets)"]))
    for level, targets in enumerate(level_targets(plan)):
        read, seconds = ("read + validate", one) if level == 0 else (later, light)
        passes.append((f"fit level {level}", read, seconds, _collects(plan, targets)))
        order = [t for t in targets if t[3] in ("summary", "order")]
        if order:
            windows = [(*t[:3], "window" if t[3] == "summary" else "windows", None) for t in order]
            passes.append((f"fit level {level} median", later, light, _collects(plan, windows)))
    if not any(name.startswith("fit") for name, *_ in passes):
        passes.append(("fit level 0", "read + validate", one,
                       ["the findings only (nothing fitted)"]))  # fmt: skip
    # in memory up to each worker's budget, the rest from its spill files
    where_kept = (f"about {in_memory:.0%} in memory ({kept_values.PARTITION_BYTES / 2**20:.0f} "
                  f"MiB a worker, less its kept values), {held - in_memory:.0%} read back from "
                  "the workers' disks")  # fmt: skip
    if held >= 1:
        taken = ("from the partitions the fit kept on the workers, not read or validated "
                 f"again: {where_kept}")  # fmt: skip
    elif held > 0:
        taken = (f"from the partitions the fit kept on the workers for about {held:.0%} of them "
                 f"({where_kept}), read + validate the others (beyond the disk cap)")  # fmt: skip
    else:
        taken = "read + validate"
    passes.append(("transform", taken, dask_transform_seconds(profile, rows, tasks, workers, held,
                                                               busiest=busiest),
                   [f"{tasks} shard(s) written or gathered"]))  # fmt: skip
    reading = sum(1 for _, read, _, _ in passes[:-1] if read in ("read", "read + validate"))
    lighter = len(passes) - 1 - reading
    total = dask_job_seconds(profile, rows, tasks, workers, reading, light=lighter, kept=held,
                             busiest=busiest)  # fmt: skip
    size = "sizes counted by a first pass"
    if known:
        size = f"{min(known):,}-{largest:,} rows each" if min(known) != largest else (
            f"{largest:,} rows each")  # fmt: skip
        if largest <= rows_per_partition:
            size += f"; rows_per_partition={rows_per_partition:,} the upper bound"
        else:  # a row group is never split
            size += (f"; rows_per_partition={rows_per_partition:,}, below the {largest:,} rows "
                     "of a row group: a partition is at least one whole row group")  # fmt: skip
        if workers > 1 and tasks % workers == 0:
            size += f"; {tasks // workers} per worker thread, balanced"
        elif workers > 1:
            size += (f"; {tasks} is no multiple of the {workers} worker threads: the row "
                     "groups are too coarse to cut evenly")  # fmt: skip
    lines = [
        f"Dask job on {where}, {workers} worker thread(s): {tasks} partition(s) of {rows:,} "
        f"rows ({size}); {len(passes)} pass(es), one task per partition in each reading pass",
    ]
    shown = specs if len(specs) <= 4 else [*specs[:2], None, specs[-1]]
    for spec in shown:
        counted = "rows counted by the job" if spec is None or spec.n_rows is None else (
            f"{spec.n_rows:,} rows")  # fmt: skip
        lines.append("│  …" if spec is None else f"│  {spec.describe()}: {counted}")
    for name, read, seconds, collects in passes:
        lines.append(f"├─ {name}: {read}, {tasks} partition(s), predicted {seconds:.2f} s")
        lines += [f"│    {line}" for line in collects]
    rounds = -(-tasks // max(workers, 1))
    heaviest = rounds * rows / max(tasks, 1) if busiest is None else busiest
    # the fit's largest error on the runs it was fitted to: a prediction is no closer
    margin = (
        f" (±{profile.dask_fit_error:.0%} on the fitted runs)" if profile.dask_fit_error else ""
    )
    lines.append(
        f"└─ predicted {total:.2f} s{margin} on a running cluster: "
        f"{profile.dask_job_seconds:.2f} s on the client + per pass "
        f"{profile.dask_pass_latency_seconds:.3f} s + {rounds} round(s) of the busiest worker x "
        f"{profile.dask_task_seconds:.3f} s + its {round(heaviest):,} rows x "
        f"{profile.dask_row_seconds:.2e} s a row read + validated, "
        f"{profile.dask_transform_row_seconds:.2e} s a row transformed + {tasks} tasks x "
        f"{profile.dask_scheduler_task_seconds:.4f} s on the scheduler ({profile.source} cost "
        "profile; docs/distributed.md)"
    )
    if client is None and scheduler in (None, "local"):
        lines[-1] += f"; + {profile.dask_cluster_start_seconds:.1f} s to start the LocalCluster"
    return "\n".join(lines)


def _collects(plan: LogicalPlan, targets: list[Any]) -> list[str]:
    """What a pass's tasks return, per fitted step and input."""
    out = []
    for f, name, position, kind, _ in targets:
        step = plan.features[f].steps[position]
        out.append(f"{step.describe()} on {name!r}: {COLLECTS.get(kind, kind)}")
    return out or ["the findings only (nothing fitted)"]


def _workers(client: Any, scheduler: str | None) -> tuple[int, str]:
    """Worker threads and where they are: the client's cluster, the scheduler named, or
    the LocalCluster ``scheduler="local"`` would start (one single-threaded worker per core)."""
    from fastprep.runtime.cluster.local import LOCAL, connect, local_workers

    if client is None and scheduler not in (None, LOCAL):
        with connect(scheduler) as (connected, where):
            return max(1, sum(connected.nthreads().values())), where
    if client is not None:
        return max(1, sum(client.nthreads().values())), f"the cluster at {client.scheduler.address}"
    where = "a LocalCluster started for the run" if scheduler == LOCAL else (
        "a LocalCluster (scheduler='local')")  # fmt: skip
    return local_workers(), where


def _backends(
    plan: LogicalPlan, schema: Schema, source: Source, analyze: bool, backend: str
) -> str:
    prepared = execute.prepare(plan, schema, source, phase="fit", backend=backend)
    if analyze:
        params = execute.fit_prepared(plan, prepared, backend)
        execute.transform_prepared(plan, params, prepared, np.float32, backend)
        choices = prepared.report.plan
    else:
        choices = [
            c.to_dict() for c in stage_backends.choose_stage_backends(plan, prepared.table, backend)
        ]
    rows = prepared.table.n_rows
    lines = [f"backends for {rows:,} validated rows ({load_profile().source} cost profile):"]
    for choice in choices:
        lines.append(f"├─ stage {choice['stage']}: {choice['reason']}")
        if choice.get("measured_seconds"):
            measured = ", ".join(
                f"{phase} {seconds:.3g} s" for phase, seconds in choice["measured_seconds"].items()
            )
            lines.append(f"│    measured: {measured}")
    lines += [f"├─ {line}" for line in stage_backends.describe_paths()]
    if analyze:
        stages = ", ".join(f"{k} {v:.3g} s" for k, v in prepared.report.stages.items())
        lines.append(f"└─ run: {stages}")
    return "\n".join(lines)

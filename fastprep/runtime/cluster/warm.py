"""Kernels warm on every worker before a job: a worker plugin that runs the job once on a
small sample in each worker process.

A worker's first task pays what one process pays once: importing Numba and loading (or
compiling) the job's kernels. A job with fewer partitions than workers — a warm-up on a
one-file sample — leaves the other workers cold, and the next job's first pass waits for
them. :func:`warm_workers` registers :class:`WarmKernels` with the cluster: it runs the
fit and the gathered transform of ``sample`` in every worker process now, and in every
worker that joins later (Dask runs a plugin's ``setup`` on them too). The kernels stay
loaded in the process (:mod:`fastprep.native.kernel_files`, Numba's dispatchers), so no
task loads them again. The warm-up runs on the worker's thread budget
(:mod:`fastprep.runtime.cluster.budget`), so the Numba it imports starts with one thread
per task, as the tasks want it.
"""

from __future__ import annotations

import os
import time
from typing import Any

from distributed import Client
from distributed.diagnostics.plugin import WorkerPlugin

from fastprep.api.schema import Schema
from fastprep.data.partitions import ROWS_PER_PARTITION, plan_partitions
from fastprep.plan.nodes import LogicalPlan
from fastprep.runtime.cluster.budget import fit_to_worker
from fastprep.runtime.levels import fit_levels
from fastprep.runtime.partition_tasks import Job, fit_partials, transform_partition


def warm(job: Job, sample: str) -> float:
    """Fit and transform ``sample`` in this process with ``job``'s plan, schema and backend
    (Numba imported by the job's rows, as its tasks will); returns the seconds it took."""
    started = time.perf_counter()
    specs = plan_partitions(sample, ROWS_PER_PARTITION)

    def run_pass(learned: Any, targets: Any, stage: str) -> list[dict[str, Any]]:
        return [fit_partials(job, spec, learned, targets) for spec in specs]

    params, _ = fit_levels(job.plan, sample, run_pass, sum(s.n_rows or 0 for s in specs))
    for spec in specs:
        transform_partition(job, spec, params, "warm-up", None)
    return time.perf_counter() - started


class WarmKernels(WorkerPlugin):
    """Runs :func:`warm` when registered on a worker (now, or when it joins)."""

    def __init__(self, job: Job, sample: str) -> None:
        self.job = job
        self.sample = sample

    def setup(self, worker: Any) -> None:
        # the warm-up computes as the worker's tasks will: on its threads' budget (and a
        # Numba imported here starts with it)
        fit_to_worker(worker)
        warm(self.job, self.sample)


def warm_workers(
    client: Client, plan: LogicalPlan, schema: Schema, sample: str | os.PathLike[str], *,
    backend: str = "auto", rows: int = 0,
) -> None:  # fmt: skip
    """Warm every worker of ``client``'s cluster (and those that join later) for jobs of
    ``plan``: ``sample`` (a path every worker can read) is fitted and transformed once in
    each worker process. ``rows``: the rows of the jobs to come, which decide whether their
    tasks import Numba (as one process running them would)."""
    job = Job(plan, schema, backend, rows=rows)
    client.register_plugin(WarmKernels(job, os.fspath(sample)), name="fastprep-warm-kernels")

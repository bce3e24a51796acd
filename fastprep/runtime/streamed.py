"""Streamed execution in this process: a source larger than the memory budget, fitted and
transformed one partition at a time, its output written shard by shard.

The fit runs the cluster fit's passes (:func:`fastprep.runtime.levels.fit_levels`:
one per level of fitted steps, one more per level with a median), each pass reading,
validating and summarizing one partition at a time with the very per-partition function a
Dask worker runs (:func:`fastprep.runtime.partition_tasks.fit_partials`), the partial aggregates
merged in partition order: the fitted state is the cluster fit's. The transform reads,
validates and transforms one partition at a time with the compiled kernels
(:func:`fastprep.runtime.partition_tasks.transform_partition`; their ``prange`` loops use every
core) and writes it as a shard of the one output format (:class:`ShardWriter`) before the
next is read. So nothing holds all of the input or all of X: the memory is the
interpreter's and one partition's (predicted with
:data:`fastprep.runtime.preflight.STREAM_WORKING_COPIES`). The drift profile and drift
measures are taken per partition and merged (:func:`fastprep.validate.drift.merge_profiles`),
as the fit's statistics are.

Row ids and the quarantine are the in-memory run's: a partition's rows are numbered from its
offset in the source (a CSV file's, once the files before it were read).
"""

from __future__ import annotations

import gc
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from fastprep.api.schema import Schema
from fastprep.data.partitions import (
    ROWS_PER_PARTITION,
    PartitionSpec,
    plan_partitions,
    read_partition,
)
from fastprep.data.sources import Source, is_path, source_columns
from fastprep.emit import make_layout
from fastprep.emit.precision import Precision
from fastprep.plan.nodes import LogicalPlan
from fastprep.runtime import execute
from fastprep.runtime.cross_fit import CrossFit
from fastprep.runtime.levels import (
    Learned,
    check_fittable,
    count_order_targets,
    fit_levels,
    retry_notes,
)
from fastprep.runtime.partition_tasks import (
    Job,
    RetryPolicy,
    Target,
    fit_partials,
    numba_for_the_job,
    partials_of,
    read_columns,
    read_with_retries,
    transform_partition,
)
from fastprep.runtime.report import Report
from fastprep.validate import drift
from fastprep.validate.table_checks import unexpected_column_findings

if TYPE_CHECKING:
    import pandas as pd


class Partitions:
    """A source's partitions, read in order; each spec's offset is filled in as the
    partitions before it are read (a CSV file's row count is only known then).

    The next file partition is read on a background thread while the current one is
    validated and computed (Arrow's decoding releases the GIL): one more partition's raw
    columns in memory (:data:`fastprep.runtime.preflight.STREAM_PREFETCH_COPIES`), a read's time
    saved per partition and pass."""

    def __init__(self, source: Source, rows_per_partition: int, job: Job) -> None:
        self.source = source
        self.specs = plan_partitions(source, rows_per_partition)
        self.job = job

    def _read(self, spec: PartitionSpec) -> tuple[Any, int]:
        """One partition's columns and how many transient errors its read retried: a
        file's read with retries; a table in memory sliced."""
        columns, text = read_columns(self.job)
        if is_path(self.source):
            return read_with_retries(spec, columns, text, self.job.retry)
        return read_partition(spec, columns, text, self.source), 0

    def each(self, run: Any) -> list[Any]:
        """``run(spec, part)`` per partition in order; returns the results. ``run`` must
        return a dict with ``rows_in`` (to number the next partition's rows); the read's
        retries are added to its ``retries`` (as a worker's task counts its own)."""
        results, offset = [], 0
        with ThreadPoolExecutor(1, thread_name_prefix="fastprep-prefetch") as pool:
            ahead = pool.submit(self._read, self.specs[0]) if self.specs else None
            for i, spec in enumerate(self.specs):
                if spec.row_offset is None:
                    spec = self.specs[i] = replace(spec, row_offset=offset)
                assert ahead is not None
                part, retries = ahead.result()
                ahead = pool.submit(self._read, self.specs[i + 1]) if i + 1 < len(
                    self.specs) else None  # fmt: skip
                result = run(spec, part)
                del part
                counts = result.get("entry", result)
                counts["retries"] = counts.get("retries", 0) + retries
                offset = spec.row_offset + _rows_in(result)
                results.append(result)
                del result
                gc.collect(0)
        return results


def _rows_in(result: dict[str, Any]) -> int:
    if "rows_in" in result:
        return int(result["rows_in"])
    return int(result["entry"]["rows_in"])


def fit(
    plan: LogicalPlan, schema: Schema, source: Source, *, backend: str = "auto",
    rows_per_partition: int = ROWS_PER_PARTITION, partitions: Partitions | None = None,
    spare_bytes: int = 0,
) -> tuple[execute.Params, Report]:  # fmt: skip
    """:func:`fit_with_profile` without the drift profile."""
    params, report, _ = fit_with_profile(
        plan, schema, source, backend=backend, rows_per_partition=rows_per_partition,
        partitions=partitions, spare_bytes=spare_bytes,
    )  # fmt: skip
    return params, report


def fit_with_profile(
    plan: LogicalPlan, schema: Schema, source: Source, *, backend: str = "auto",
    rows_per_partition: int = ROWS_PER_PARTITION, partitions: Partitions | None = None,
    spare_bytes: int = 0, cross_fit: CrossFit | None = None,
) -> tuple[execute.Params, Report, dict[str, Any]]:  # fmt: skip
    """The cluster fit's passes, one partition at a time in this process; the fitted
    parameters, the fit's report and the drift profile of the source (each partition's,
    profiled in the first pass, merged: what a later transform's drift is measured against).

    ``spare_bytes``: memory the budget leaves beside the partitions. When the values behind
    the order statistics (a median fill: 8 bytes a row per column) fit in it, the first
    pass keeps them and the windows around the ranks are taken from them: one read of the
    source fewer (the same partials, so the same fitted state). ``cross_fit``: a
    fit_transform's fit, which collects the fit rows' out-of-fold encodings."""
    check_fittable(plan)
    unexpected = unexpected_column_findings(schema, source_columns(source), "fit")
    job = job_for(plan, schema, backend)
    parts = partitions or Partitions(source, rows_per_partition, job)
    rows = sum(s.n_rows or 0 for s in parts.specs)
    numba_for_the_job(rows)
    kept: list[dict[Any, Any]] = []
    keep = bool(rows) and 8 * rows * count_order_targets(plan) <= spare_bytes
    profiles: list[dict[str, Any]] = []

    def run_pass(learned: Learned, targets: list[Target], stage: str) -> list[dict[str, Any]]:
        if kept and targets and all(t[3] in ("window", "windows") for t in targets):
            results = [{"partials": partials_of(values, targets), "retries": 0}
                       for values in kept]  # fmt: skip
            kept.clear()
            return results
        hold = keep and any(t[3] in ("summary", "order") for t in targets)
        first = not profiles  # the first pass profiles each partition (validation's scan)

        def one(spec: PartitionSpec, part: Any) -> dict[str, Any]:
            return fit_partials(job, spec, learned, targets, part, keep=hold, profile=first)

        results = parts.each(one)
        if hold:
            kept[:] = [r.pop("values") for r in results]
        if first:
            profiles[:] = [r.pop("profile") for r in results] or [{}]
        return results

    params, report = fit_levels(plan, source, run_pass, rows, cross_fit, unexpected)
    report.backend = "streamed"
    held = ""
    if keep:
        size = 8 * rows * count_order_targets(plan) / 1e6
        held = f"; order statistics from values kept in memory ({size:.0f} MB), one read fewer"
    report.notes.append(f"streamed in one process: {len(parts.specs)} partition(s){held}")
    return params, report, drift.merge_profiles([p for p in profiles if p])


def transform(
    plan: LogicalPlan, schema: Schema, params: execute.Params, source: Source,
    output_dir: str | os.PathLike[str], *, backend: str = "auto", out_dtype: str = "float32",
    rows_per_partition: int = ROWS_PER_PARTITION, compress: str | bool | None = None,
    pipeline: Any = None, partitions: Partitions | None = None, notes: tuple[str, ...] = (),
    profile: dict[str, Any] | None = None, drift_thresholds: dict[str, float] | None = None,
    cross_fit: CrossFit | None = None,
) -> Any:  # fmt: skip
    """Each partition transformed and written as a shard as it finishes; the output is
    published when every shard is on disk and returned mapped (``fp.open_output``).
    ``pipeline``: a fitted pipeline published with the shards. ``profile``: the fit's drift
    profile: each partition is measured against it and the merged measures are the report's
    ``drift``, as an in-memory transform's (``drift_thresholds`` as there). ``cross_fit``:
    the source is the fit's own (a fit_transform): its rows get out-of-fold encodings."""
    from fastprep.runtime.shards import add_drift, combine_reports
    from fastprep.storage.shards import ShardWriter, open_output

    Precision(out_dtype)  # an unknown type is refused before anything is read
    unexpected = unexpected_column_findings(schema, source_columns(source), "transform")
    job = job_for(plan, schema, backend)
    parts = partitions or Partitions(source, rows_per_partition, job)
    numba_for_the_job(sum(s.n_rows or 0 for s in parts.specs))
    names = make_layout(plan, params).names(plan, params)
    writer = ShardWriter(output_dir, names, out_dtype, compress=compress)

    def one(spec: PartitionSpec, part: pd.DataFrame | None) -> dict[str, Any]:
        folded = None if cross_fit is None else cross_fit.for_partition(spec.index)
        result = transform_partition(job, spec, params, "", None, out_dtype, part,
                                     profile=profile, folded=folded)  # fmt: skip
        output = result.pop("output")
        writer.add(output.X, output.y, output.row_ids, output.quarantine_to_write())
        return result

    try:
        entries = [r["entry"] for r in parts.each(one)]
        retried = retry_notes(sum(int(e["retries"]) for e in entries))
        report = combine_reports([e["report"] for e in entries], [*notes, *retried], str(source),
                                 unexpected)  # fmt: skip
        add_drift(report, profile, [e.get("drift") for e in entries], drift_thresholds)
        report.backend = "streamed"
        rows = sum(int(e["shape"][0]) for e in entries)
        layout = entries[0]["layout"] if entries else "dense"
        report.output = {"shape": [rows, len(names)], "layout": layout, "dtype": out_dtype,
                         "shards": len(entries)}  # fmt: skip
        if layout == "csr":
            report.output["nnz"] = sum(int(e["nnz"]) for e in entries)
        writer.close(report.to_dict(), pipeline=pipeline)
    except BaseException:
        writer.discard()
        raise
    opened = open_output(output_dir)
    opened.notes.extend(report.notes)
    return opened


def job_for(plan: LogicalPlan, schema: Schema, backend: str = "auto") -> Job:
    """What a partition's task needs besides the partition (shared by the passes)."""
    return Job(plan, schema, backend, RetryPolicy())

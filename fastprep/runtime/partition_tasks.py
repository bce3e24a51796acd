"""The functions Dask runs on workers, one call per partition.

Every task loads its partition from the source itself (never data sent with ``scatter``,
which dies with its worker), is pure (same arguments, same result), and writes its files
under names of its own (a fresh token per run of the task; the partition's record last).
Dask may run a task twice — after a worker died, or speculatively — and the two runs never
write the same file; the job's manifest names the files of the run whose result it got.
"""

from __future__ import annotations

import errno
import functools
import importlib.util
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from fastprep.api.schema import Schema
from fastprep.backends.reference import backend as reference
from fastprep.backends.reference import group_stats
from fastprep.backends.reference.tags import is_tags, tag_values
from fastprep.data.columns import FitTarget, FoldedRows, TextColumn
from fastprep.data.pandas_objects import is_pandas_frame
from fastprep.data.partitions import PartitionSpec, file_identity, read_partition
from fastprep.data.sources import source_columns
from fastprep.emit.csr import is_csr
from fastprep.emit.precision import Precision
from fastprep.errors import FastprepError, JobError, Reason, SourceError
from fastprep.plan.dtypes import LType
from fastprep.plan.nodes import LogicalPlan
from fastprep.plan.steps import Step
from fastprep.planning import planner
from fastprep.runtime import aggregates as agg
from fastprep.runtime import execute, kept_rows, kept_values, memory, shards
from fastprep.validate import drift

if TYPE_CHECKING:
    import pandas as pd

R = TypeVar("R")


@dataclass(frozen=True)
class RetryPolicy:
    """Transient read errors (``OSError``) are retried ``tries`` times in all, sleeping
    ``base_delay * 2**attempt`` seconds between tries (exponential backoff)."""

    tries: int = 5
    base_delay: float = 0.1


@dataclass(frozen=True)
class Job:
    """Everything a task needs besides its partition (small: plan, schema, fitted state)."""

    plan: LogicalPlan
    schema: Schema
    backend: str = "auto"
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    #: the whole job's rows (0: unknown): a task's process imports Numba when they repay
    #: it, as one process running the whole job would (:func:`numba_for_the_job`)
    rows: int = 0


def numba_for_the_job(rows: int) -> None:
    """Import Numba up front when the whole job's rows repay it, as an in-memory run of the
    same source decides: the planner decides per table, and a partition alone is below its
    threshold, so every kernel of a big partitioned job would otherwise stay on numpy.
    Once per process (a worker's later tasks find it imported)."""
    if (rows and not planner.numba_imported() and planner.job_imports_numba(rows)
            and importlib.util.find_spec("numba") is not None):  # fmt: skip
        import numba  # noqa: F401


def read_with_retries(
    spec: PartitionSpec, columns: list[str], text: list[str], retry: RetryPolicy,
    frame: pd.DataFrame | None = None,
) -> tuple[pd.DataFrame, int]:  # fmt: skip
    """Read a partition, retrying I/O errors with backoff; returns the frame and retries.

    ``frame`` is a dask DataFrame's partition, computed by Dask from its graph as this
    task's dependency (recomputed, not lost, when a worker dies).
    """
    if frame is not None:
        if is_pandas_frame(frame):
            present = [c for c in columns if c in frame.columns]
            return frame.loc[:, present].reset_index(drop=True), 0
        # an Arrow table read ahead by the caller (a streamed run in one process)
        return frame.select([c for c in columns if c in frame.column_names]), 0
    for attempt in range(retry.tries):
        try:
            return read_partition(spec, _present_columns(spec, columns), text), attempt
        except (SourceError, OSError) as exc:
            cause = exc.__cause__ if isinstance(exc, SourceError) else exc
            if not _transient(exc, cause):
                raise
            if attempt + 1 == retry.tries:
                raise SourceError(
                    f"reading {spec.path!r} ({spec.describe()}) failed {retry.tries} times; "
                    f"last cause: {type(cause).__name__}: {cause}"
                ) from cause
            time.sleep(retry.base_delay * 2**attempt)
    raise AssertionError("unreachable")


def _transient(exc: BaseException, cause: BaseException | None) -> bool:
    """An I/O error (a flaky file system or object store), not bad content."""
    if isinstance(exc, OSError) and not isinstance(exc, SourceError):
        return True
    return isinstance(cause, OSError) and getattr(cause, "errno", None) != errno.EISDIR


def load_prepared(
    job: Job, spec: PartitionSpec, phase: str, part: pd.DataFrame | None = None
) -> tuple[execute.Prepared, int]:
    """Read and validate one partition (row ids are global: ``spec.row_offset`` + position)."""
    plan, schema = job.plan, job.schema
    numba_for_the_job(job.rows)
    memory.settle_heap()
    columns, text = read_columns(job)
    frame, retries = read_with_retries(spec, columns, text, job.retry, part)
    try:
        prepared = execute.prepare(plan, schema, frame, phase=phase, backend=job.backend,
                                   row_offset=spec.row_offset or 0)  # fmt: skip
    except FastprepError as exc:
        raise type(exc)(f"{spec.describe()}: {exc}") from None
    prepared.report.source = spec.describe()
    return prepared, retries


def read_columns(job: Job) -> tuple[list[str], list[str]]:
    """The columns a partition's task reads (+ key columns), and which of them are text."""
    columns = job.schema.read_columns(job.plan.columns)
    text = [c for c in columns if job.schema[c].ltype in (LType.CATEGORY, LType.STRING)]
    return columns, text


def _present_columns(spec: PartitionSpec, columns: list[str]) -> list[str]:
    """The target's columns may be absent (new data to transform): read what exists;
    ``prepare`` then says the output has no y (and fit fails naming the column)."""
    if spec.kind not in ("parquet", "csv") or spec.path is None:
        return columns
    names = set(source_columns(spec.path) or columns)  # a Parquet footer, a CSV header
    return [c for c in columns if c in names] or columns


def part_of_job(task: Callable[..., R]) -> Callable[..., R]:
    """``task(job, spec, ...)`` choosing its kernel paths as the whole job would
    (:func:`fastprep.planning.planner.part_of_job`): a kernel loaded once in a worker
    serves the job's every partition there, so a partition's helpers run on Numba where
    one process over the whole source would."""

    @functools.wraps(task)
    def run(job: Job, spec: PartitionSpec, *args: Any, **kwargs: Any) -> R:
        with planner.part_of_job(job.rows, spec.n_rows or 0):
            return task(job, spec, *args, **kwargs)

    return run


# ---------------------------------------------------------------- fit


#: one statistic to compute: (feature index, input name, step position, kind, extra)
Target = tuple[int, str, int, str, Any]


@part_of_job
def fit_partials(
    job: Job, spec: PartitionSpec, learned: dict[tuple[int, str], list[dict[str, Any]]],
    targets: list[Target], part: pd.DataFrame | None = None, keep: bool = False,
    profile: bool = False, keep_as: str | None = None, reuse: str | None = None,
    inputs: tuple[tuple[int, str], ...] = (), whole: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    """One fit pass over one partition: a partial aggregate per target, plus row counts.
    ``keep``: also return the values behind each order-statistic target (``"values"``), so
    that a caller holding them can compute the next pass's windows without a re-read.
    ``keep_as``: keep the input values of the chains ``inputs`` (feature, input name) in
    this process under that key (:mod:`~fastprep.runtime.kept_values`; ``"kept"`` says
    whether they were), for the passes after this one. ``reuse``: the key an earlier pass
    kept them under — when every target's chain is there, this pass's partials come from
    them without reading the partition (``"reused"`` True); else the partition is read.
    ``whole``: the fit's token: also keep the whole validated partition under ``keep_as``
    for that fit's transform (``"whole"`` says whether it was; a pass after the first
    then computes from it too when its input values are not here).
    ``profile``: also return the partition's drift profile (``"profile"``; the
    partitions' merge is the whole source's, :func:`drift.merge_profiles`)."""
    held_rows = None
    if reuse is not None:
        entry = kept_values.get(reuse)
        if entry is not None and all(_from_inputs(t, entry["inputs"]) for t in targets):
            partials = _partials_from_inputs(job, learned, targets, entry["inputs"])
            return entry["counts"] | {"index": spec.index, "findings": [], "retries": 0,
                                      "partials": partials, "reused": True,
                                      "worker": worker_address()}  # fmt: skip
        held_entry = _held_partition(reuse, spec, take=False)
        if profile and isinstance(held_entry, kept_rows.KeptRows) and held_entry.left_out:
            held_entry = None  # a profile measures every column: some were left out
        held_rows = None if held_entry is None else _unpacked(held_entry)
    if held_rows is not None:
        prepared, retries = held_rows, 0
    else:
        prepared, retries = load_prepared(job, spec, "fit", part)
    table = prepared.table
    drift_profile = drift.profile(table) if profile else None
    repairs = reference.Repairs()
    starts: dict[tuple[int, str], Any] = {}  # each chain's input values, evaluated once

    def start(feature_index: int, name: str) -> Any:
        if (feature_index, name) not in starts:
            feature = job.plan.features[feature_index]
            item = next(i for i in feature.inputs if i.name == name)
            starts[(feature_index, name)] = reference.input_values(item, table, repairs)
        return starts[(feature_index, name)]

    partials: dict[tuple[int, str, int], Any] = {}
    kept: dict[tuple[int, str, int], np.ndarray] = {}
    grouped: dict[int, Any] = {}  # a GroupStats partial serves all its output columns
    fused = _fused_moments(job, table, learned, targets)
    for feature_index, name, position, kind, extra in targets:
        feature = job.plan.features[feature_index]
        before = position - 1 if kind == "unfilled" else position
        if kind in ("moments", "unfilled") and (feature_index, name, before) in fused:
            partials[(feature_index, name, position)] = fused[(feature_index, name, before)]
            continue
        if kind == "groups":
            if feature_index not in grouped:
                grouped[feature_index] = group_stats.partial_of(
                    feature.steps[position], table, _group_kernels(job.backend)
                )
            partials[(feature_index, name, position)] = grouped[feature_index]
            continue
        item = next(i for i in feature.inputs if i.name == name)
        params = learned[(feature_index, name)]
        # "unfilled": the moments of the step's input *before* the fill just ahead of it
        # (the job folds the fill value in: no pass after the fill's own)
        upto = position - 1 if kind == "unfilled" else position
        if is_tags(feature, table):  # a tags OneHot: the vocabulary of the tags
            values = tag_values(feature, item, table)
        elif _keepable(feature):
            values = reference.chain_from(feature, item, start(feature_index, name), params,
                                          upto, repairs)  # fmt: skip
        else:
            values = reference.chain_values(feature, item, table, params, upto, repairs)
        if kind == "target":  # target encoding: the rows' categories with their target
            extra = table.fit_target
        partials[(feature_index, name, position)] = _partial(kind, values, extra)
        if keep and kind in ("summary", "order"):
            kept[(feature_index, name, position)] = np.array(values, dtype=np.float64)
    report = prepared.report
    counts = {
        "rows_in": report.rows_in,
        "rows_fit": table.n_rows,
        "rows_quarantined": len(prepared.quarantine),
    }
    out = {
        "index": spec.index,
        "partials": partials,
        **counts,
        "findings": list(report.findings),
        "constants": _constant_values(table, report.findings),
        "retries": retries,
    }
    if keep:
        out["values"] = kept
    if keep_as is not None and inputs:
        held = {}
        for f, name in inputs:
            if _keepable(job.plan.features[f]) and not is_tags(job.plan.features[f], table):
                values = start(f, name)
                if isinstance(values, np.ndarray) and values.dtype.kind == "f":
                    held[(f, name)] = values
        out["kept"] = bool(held) and kept_values.keep(
            keep_as, {"inputs": held, "counts": counts}, kept_values.nbytes(held)
        )
    if drift_profile is not None:
        out["profile"] = drift_profile
    if held_rows is not None:
        table.forget_selected()  # kept as it was measured
        out |= {"findings": [], "reused": True}  # findings: the first pass's
    elif whole is not None and keep_as is not None:
        table.forget_selected()
        packed = kept_rows.pack(prepared, {c for f in job.plan.features for c in f.columns})
        if packed is None:  # a caller's frame: kept as it is
            rows: Any = prepared
            size = kept_values.size_of((prepared.raw, table, prepared.quarantine, prepared.y))
        else:
            rows, size = packed, packed.size()
        entry = {"rows": rows, "spec": spec, "file": file_identity(spec)}
        out["whole"] = kept_values.keep_partition(keep_as, entry, size, whole)
    if keep_as is not None or reuse is not None:  # where its kept values are, if any
        out["worker"] = worker_address()
    return out


def _constant_values(table: Any, findings: list[Any]) -> dict[str, tuple[Any, ...]]:
    """Per column this partition finds constant, what the job needs to tell whether the
    whole source's column is: its present values' range (``("number", lo, hi)``), or its
    one value (``("text", value)``). Other kinds of column are left out."""
    out: dict[str, tuple[Any, ...]] = {}
    for finding in findings:
        if finding.rule != Reason.CONSTANT.value or finding.column not in table.columns:
            continue
        column = table.raw(finding.column)
        if isinstance(column, TextColumn):
            if column.n_unique == 1:
                out[finding.column] = ("text", str(column.uniques[0]))
        elif isinstance(column, np.ndarray) and column.dtype.kind in "biuf":
            values = column.astype(np.float64, copy=False)
            present = values[~np.isnan(values)]
            if present.size:
                out[finding.column] = ("number", float(present.min()), float(present.max()))
    return out


def worker_address() -> str | None:
    """The Dask worker running this task (None outside one): a task says where it kept
    what it kept, so that the job need not ask the scheduler where its result is."""
    worker = kept_values.running_worker()
    return None if worker is None else worker.address


def fit_partials_kept(
    job: Job, specs: list[PartitionSpec], learned: dict[tuple[int, str], list[dict[str, Any]]],
    targets: list[Target], keys: list[str], inputs: tuple[tuple[int, str], ...] = (),
    whole: str | None = None,
) -> list[dict[str, Any]]:  # fmt: skip
    """:func:`fit_partials` of a pass after the first for several partitions whose values
    this worker kept (``keys[i]``: ``specs[i]``'s), in one task: each is computed from
    what is kept, or read (and kept again) when it is not here (the task ran on another
    worker, or its values were evicted)."""
    return [fit_partials(job, spec, learned, targets, keep_as=key, reuse=key, inputs=inputs,
                         whole=whole)
            for spec, key in zip(specs, keys)]  # fmt: skip


def drop_kept(keys: list[str], inputs: bool, partitions: bool) -> int:
    """On a worker: let go of what a fit kept under ``keys`` — its input values
    (``inputs``), its whole partitions (``partitions``); returns the entries dropped."""
    dropped = kept_values.drop(keys) if inputs else 0
    return dropped + (kept_values.drop_partitions(keys) if partitions else 0)


async def drop_kept_soon(keys: list[str], inputs: bool, partitions: bool) -> int:
    """:func:`drop_kept` as a coroutine: Dask runs a function it is not to wait for
    (``client.run(..., wait=False)``) only as one, on the worker's event loop."""
    return drop_kept(keys, inputs, partitions)


def _fused_moments(
    job: Job, table: Any, learned: dict[tuple[int, str], list[dict[str, Any]]],
    targets: list[Target],
) -> dict[tuple[int, str, int], Any]:  # fmt: skip
    """The moments targets' partials by the Numba backend's fused fit kernels (one pass
    over the partition's columns for all of them, the steps before each applied in the
    kernel: what one process's fit runs), when the job runs on Numba: asked for, or
    ``"auto"`` with a job whose rows repay Numba (not a small job in a worker that
    imported Numba for an earlier one). Keyed by the value
    measured: (feature, input, the step it is the input of). Empty otherwise: the
    reference computes them."""
    auto = job.backend == "auto" and planner.numba_imported() and planner.repays_numba(job.rows)
    if not (job.backend == "numba" or auto):
        return {}
    wanted = []
    for f, name, position, kind, _ in targets:
        feature = job.plan.features[f]
        if kind in ("moments", "unfilled") and _keepable(feature) and not is_tags(feature, table):
            wanted.append((f, name, position - 1 if kind == "unfilled" else position))
    if not wanted or not table.n_rows:  # no rows: the reference's empty moments
        return {}
    from fastprep.backends.numba.backend import chain_moments

    return chain_moments(job.plan, table, learned, wanted)


def _held_partition(
    key: str, spec: PartitionSpec, take: bool
) -> kept_rows.KeptRows | execute.Prepared | None:
    """The partition a fit's first pass kept under ``key`` (None: not here, or not this
    partition's rows any more: its file changed since)."""
    entry = (kept_values.take_partition if take else kept_values.peek_partition)(key)
    if entry is None or entry["spec"] != spec or entry["file"] != file_identity(spec):
        return None
    return entry["rows"]


def _unpacked(kept: kept_rows.KeptRows | execute.Prepared) -> execute.Prepared:
    return kept.unpack() if isinstance(kept, kept_rows.KeptRows) else kept


def _keepable(feature: Any) -> bool:
    """A chain computed from its input's values alone (a ``GroupStats`` first step reads
    the table's groups)."""
    return not (feature.steps and feature.steps[0].kind == "group")


def _from_inputs(target: Target, inputs: dict[tuple[int, str], np.ndarray]) -> bool:
    """Whether ``target``'s partial can be computed from kept input values."""
    f, name, _, kind, _ = target
    return kind not in ("groups", "target") and (f, name) in inputs


def _partials_from_inputs(
    job: Job, learned: dict[tuple[int, str], list[dict[str, Any]]], targets: list[Target],
    inputs: dict[tuple[int, str], np.ndarray],
) -> dict[tuple[int, str, int], Any]:  # fmt: skip
    """The targets' partials from kept input values: the steps before each target applied
    with the parameters learned so far, as a reading pass applies them."""
    repairs = reference.Repairs()
    out = {}
    for f, name, position, kind, extra in targets:
        feature = job.plan.features[f]
        item = next(i for i in feature.inputs if i.name == name)
        upto = position - 1 if kind == "unfilled" else position
        values = reference.chain_from(feature, item, inputs[(f, name)], learned[(f, name)],
                                      upto, repairs)  # fmt: skip
        out[(f, name, position)] = _partial(kind, values, extra)
    return out


def partials_of(values: dict[tuple[int, str, int], Any], targets: list[Target]) -> dict:
    """A pass's partials from values kept by an earlier pass (``fit_partials(keep=True)``)."""
    return {(f, name, position): _partial(kind, values[(f, name, position)], extra)
            for f, name, position, kind, extra in targets}  # fmt: skip


def _partial(kind: str, values: Any, extra: Any) -> Any:
    if kind in ("moments", "unfilled"):
        return agg.moments_of(values)
    if kind == "vocabulary":
        return agg.vocabulary_of(values)
    if kind in ("summary", "order"):
        return agg.summary_of(values)
    if kind == "windows":
        return agg.windows_of(values, extra)
    if kind == "window":
        return agg.window_of(values, *extra)
    if kind == "values":
        return agg.values_of(values)
    if kind == "target":
        return agg.target_rows_of(values, extra)
    if kind == "counts":
        return agg.counts_of(values)
    raise ValueError(f"unknown partial {kind!r}")


def _group_kernels(backend: str) -> group_stats.GroupKernels | None:
    """``GroupStats``' per-row work on the job's backend: the Numba twin's when asked."""
    if backend != "numba":
        return None
    from fastprep.backends.numba import group_stats as twin

    return twin.NUMBA


def stat_kind(step: Step) -> str:
    """What each partition computes for fitted ``step``: ``"moments"``, ``"median"``,
    ``"order"`` (percentiles: exact order statistics, two passes), ``"values"``
    (gathered), ``"vocabulary"`` — the reference backend's table says."""
    return agg.partial_kind(step)


def count_rows(spec: PartitionSpec, retry: RetryPolicy) -> int:
    """Rows of a partition whose size the source does not say up front (a CSV file), read
    from the file's own first column: a column the pipeline names may be a lookup's (joined
    later) or the target's (absent from new data)."""
    names = source_columns(spec.path) if spec.path is not None else None
    frame, _ = read_with_retries(spec, list(names or ())[:1], [], retry)
    return len(frame)


def kept_row_bytes(plan: LogicalPlan, schema: Schema) -> int:
    """An upper bound of a validated row's bytes when its partition is kept packed for the
    transform (:func:`fastprep.runtime.kept_rows.pack`): per column the features read, 8
    bytes for a number (fewer when its values are whole), the width of a bounded ``Int``,
    1 for a bool or a category of at most 256 listed values, 4 for other text codes; plus
    the row id (4) and ``y`` (8). Flights: 44 (measured 30)."""
    size = 12
    for name in dict.fromkeys(c for f in plan.features for c in f.columns):
        column = schema.get(name)
        ltype = getattr(column, "ltype", LType.FLOAT)
        categories = getattr(column, "categories", None)
        if ltype == LType.BOOL or (categories is not None and len(categories) <= 256):
            size += 1
        elif ltype in (LType.CATEGORY, LType.STRING):
            size += 4
        elif ltype == LType.INT and None not in (column.min, column.max):
            bounds = (np.min_scalar_type(int(column.min)), np.min_scalar_type(int(column.max)))
            size += np.result_type(*bounds).itemsize
        else:
            size += 8
    return size


def kept_split(
    plan: LogicalPlan, schema: Schema, rows: int, tasks: int, workers: int, chains: int = 0
) -> tuple[float, float]:
    """The shares of a job's partitions its fit keeps in its workers' memory and in their
    spill files (:func:`~fastprep.runtime.kept_values.placement`: a worker's memory budget
    less the input values its fit keeps for the later passes, 8 bytes a row for each of
    ``chains``, then the disk cap), packed: :func:`kept_row_bytes` a row at most."""
    if rows <= 0 or tasks <= 0:
        return 0.0, 0.0
    per_worker = -(-tasks // max(1, workers))
    partition = kept_row_bytes(plan, schema) * rows / tasks
    inputs = 8 * chains * rows / tasks * per_worker
    memory, disk = kept_values.placement(partition, per_worker, inputs)
    return memory / per_worker, disk / per_worker


# ---------------------------------------------------------------- transform


@part_of_job
def transform_partition(
    job: Job, spec: PartitionSpec, params: execute.Params, fingerprint: str,
    output_dir: str | None, dtype_name: str = "float32", part: pd.DataFrame | None = None,
    codec: str | None = None, profile: dict[str, Any] | None = None,
    folded: FoldedRows | tuple[dict[Any, np.ndarray], dict[str, Any]] | None = None,
    reuse: str | None = None, batch: shards.ShardBatch | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Transform one partition; write its shard (or return its arrays when gathering).
    ``profile``: the fit's drift profile; the partition's measures against it are the
    entry's ``"drift"`` (merged over partitions by :func:`drift.merge_profiles`).
    ``folded``: the partition's rows are the fit's own (a fit_transform): their folds and
    the out-of-fold encodings (:mod:`fastprep.runtime.cross_fit`; on Dask as ``(folds,
    tables)``, the tables scattered once to every worker).
    ``reuse``: the key the fit's first pass kept this partition under
    (``fit_partials(whole=)``): when it is in this process, the partition is transformed
    from it, not read and validated again (the result's ``"reused"``).
    ``batch``: the shard is written into it (its entry gets its record when the batch
    writes it, see :class:`shards.ShardBatch`), not on its own."""
    memory.settle_heap()
    held = None if reuse is None else _held_partition(reuse, spec, take=True)
    if held is not None:
        prepared, retries = execute.for_transform(_unpacked(held)), 0
    else:
        prepared, retries = load_prepared(job, spec, "transform", part)
    output, measures = _transform(job, params, prepared, dtype_name, output_dir, profile, folded)
    if isinstance(held, kept_rows.KeptRows) and measures is not None:
        measures = held.drift(measures, profile)
    if isinstance(held, kept_rows.KeptRows) and not held.covers(prepared):
        # the transform quarantined rows (non-finite results) whose values as read were
        # not kept: the partition is read, and transformed from that
        held = None
        prepared, retries = load_prepared(job, spec, "transform", part)
        output, measures = _transform(job, params, prepared, dtype_name, output_dir, profile,
                                      folded)  # fmt: skip
    # X as the run made it: a CSR output written next stays pending (its blocks made as
    # the shard's writer streams them past the page cache), not a scipy matrix made whole
    # and written through the page cache
    X, csr = output.matrix, is_csr(output.matrix)
    entry: dict[str, Any] = {
        "index": spec.index,
        "partition": spec.describe(),
        "fingerprint": fingerprint,
        "row_offset": spec.row_offset,
        "rows_in": output.report.rows_in,
        "rows_out": output.report.rows_out,
        "rows_quarantined": output.report.rows_quarantined,
        "shape": [int(n) for n in X.shape],
        "layout": "csr" if csr else "dense",
        "nnz": int(X.nnz if csr else np.count_nonzero(X)),
        "retries": retries,
        "pid": os.getpid(),
        "report": output.report.to_dict(),
    }
    if measures is not None:
        entry["drift"] = measures
    reused = {"reused": True} if held is not None else {}
    if getattr(held, "spilled", False):
        reused["spilled"] = True  # read back from the worker's disk, not its memory
    if output_dir is None:
        # sent back to the client: with its rejected rows, not the partition they are in
        output.detach_quarantine()
        return {"entry": entry, "output": output, **reused}
    if batch is not None:
        return {"entry": batch.add(entry, output, spec.describe()), **reused}
    return {"entry": shards.write_partition(Path(output_dir), entry, output, codec), **reused}


def transform_partitions(
    job: Job, specs: list[PartitionSpec], params: execute.Params, fingerprint: str,
    output_dir: str, dtype_name: str, codec: str | None, keys: list[str],
    profile: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:  # fmt: skip
    """:func:`transform_partition` of several partitions this worker kept from the fit
    (``keys[i]``: ``specs[i]``'s), in one task, each shard written to ``output_dir`` as
    it is done: the scheduler and the client spend ~10 ms of CPU on a task and its
    result, about what a partition's transform from memory spends outside its kernels.
    A partition not here any more (the task ran on another worker, its spill file went)
    is read and validated, as its own task would. The shards are one
    :class:`shards.ShardBatch`: a partition's file syncs run while the next one is
    transformed."""
    done = []
    batch = shards.ShardBatch(Path(output_dir), codec)
    try:
        for spec, key in zip(specs, keys):
            try:
                done.append(transform_partition(job, spec, params, fingerprint, output_dir,
                                                dtype_name, codec=codec, reuse=key,
                                                batch=batch, profile=profile))  # fmt: skip
            except FastprepError:
                raise  # names its partition itself
            except Exception as exc:
                # the client sees one task of several partitions: say which one failed
                raise PartitionFailed(spec.describe(), f"{type(exc).__name__}: {exc}") from exc
    except BaseException:
        batch.abandon()  # the partitions written before stay done (their records)
        raise
    batch.close()
    return done


class PartitionFailed(JobError):
    """One partition of a task of several failed with an error that does not name it:
    ``args`` are the partition (:meth:`PartitionSpec.describe`) and the error's text
    (plain strings: the exception travels from the worker to the client)."""

    @property
    def partition(self) -> str:
        return str(self.args[0])

    @property
    def reason(self) -> str:
        return str(self.args[1])

    def __str__(self) -> str:
        return f"{self.partition} failed: {self.reason}"


def _transform(
    job: Job, params: execute.Params, prepared: execute.Prepared, dtype_name: str,
    output_dir: str | None, profile: dict[str, Any] | None,
    folded: FoldedRows | tuple[dict[Any, np.ndarray], dict[str, Any]] | None,
) -> tuple[execute.Output, Any]:  # fmt: skip
    """The output of one partition's validated rows, and their drift measures (if asked)."""
    if folded is not None:
        rows = folded if isinstance(folded, FoldedRows) else FoldedRows(*folded)
        prepared.table.fit_target = FitTarget(np.empty(0), False, folded=rows)
    measures = None
    if profile is not None:
        with prepared.report.stage("drift"):
            measures = drift.profile_for_drift(prepared.table, profile)
    precision = Precision(dtype_name)
    output = execute.transform_prepared(
        job.plan, params, prepared, precision.compute_dtype, job.backend,
        defer_quarantine=output_dir is not None,  # the rows built by the shard's writer
    )  # fmt: skip
    execute.apply_precision(output, precision)
    return output, measures


def worker_peak_mib() -> float:
    """This process's peak resident memory in MiB (``client.run(worker_peak_mib)`` gives
    each worker's).

    Linux: ``VmHWM`` of ``/proc/self/status``, the high-water mark of this process's own
    address space. Not ``ru_maxrss``: that survives ``fork`` + ``exec``, so a worker started
    by a big parent process reports the parent's peak.
    """
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

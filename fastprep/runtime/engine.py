"""The run sequence, written once: where a run executes, then read → validate → fit /
transform → precision → alerts.

Every entry point (``Pipeline.fit`` / ``fit_transform`` / ``fit_and_transform``,
``FittedPipeline.transform`` / ``write_shards``, the CLI) calls one function here, with a
:class:`Run` (what the caller asked for). Each first decides where the run goes
(:func:`placed`): on the Dask ``client`` the caller gave; else the memory pre-flight
(:mod:`fastprep.runtime.route`) picks in memory, streamed partition by partition in this
process (:mod:`fastprep.runtime.streamed`) or Dask partitions
(:mod:`fastprep.runtime.cluster`). A run in memory pauses the cyclic garbage collector,
reads and validates once (``execute.prepare``), fits and/or transforms, then narrows or
quantizes X (``execute.apply_precision``); every run ends by sending its alerts, once per
rule. The fitted result is a :class:`~fastprep.runtime.fitted.FittedState`; the caller's
``wrap`` turns it into its own fitted object (the ``FittedPipeline``), which is what is
returned and published with an output folder.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fastprep.api.lookup import JoinedSchema
from fastprep.api.schema import Schema
from fastprep.data.sources import Source, collect_once
from fastprep.emit.precision import Precision
from fastprep.errors import MemoryBudgetError, PipelineDefinitionError
from fastprep.plan.nodes import LogicalPlan
from fastprep.runtime import execute, route
from fastprep.runtime.cross_fit import CrossFit, check_collected
from fastprep.runtime.cross_fit import needed as cross_fit_needed
from fastprep.runtime.fitted import FittedState
from fastprep.runtime.preflight import Preflight
from fastprep.runtime.report import Report
from fastprep.storage.output_format import check_folder
from fastprep.validate import alerts as alerting
from fastprep.validate import drift

#: a step class setting this attribute to True gives its fit's own rows other values in
#: ``fit_transform`` than ``transform`` after ``fit`` would (an out-of-fold encoding: each
#: fit row gets a value learned without it); see :func:`transform_fitted_rows`
FIT_OUTPUT_DIFFERS = "fit_transform_differs"


@dataclass
class Run:
    """What the caller asked of one run: where it may execute and how X is made."""

    #: a backend name or "auto"; None at transform: the one the fit used
    backend: str | None = "auto"
    precision: Precision = field(default_factory=Precision)
    #: a ``distributed.Client``: the run executes on that cluster, no pre-flight
    client: Any = None
    rows_per_partition: int | None = None
    memory_budget: int | str | None = None
    scheduler: str | None = None
    #: where the output is written (a run over the budget needs it: never gathered)
    output_dir: str | os.PathLike[str] | None = None
    compress: str | bool | None = None
    on_alert: alerting.AlertCallback | None = None
    #: a cluster run's progress bars (see :mod:`fastprep.runtime.cluster.progress`)
    progress: Any = False


@dataclass
class Place:
    """Where a run executes: ``"memory"``, ``"streamed"`` or ``"cluster"``."""

    kind: str
    #: the source to read (a LazyFrame's query collected once, shared by the pre-flight)
    source: Source
    client: Any = None
    #: the memory pre-flight (None with a caller's client, or when it was skipped)
    pre: Preflight | None = None

    def rows(self, run: Run) -> int | None:
        """Rows per partition: the caller's, else the pre-flight's; never more than the
        pre-flight's when it partitioned the run for the memory budget (a larger partition
        would not fit it)."""
        if self.pre is None:
            return run.rows_per_partition
        if not run.rows_per_partition:
            return self.pre.rows_per_partition
        if self.kind == "memory":
            return run.rows_per_partition
        return min(run.rows_per_partition, self.pre.rows_per_partition)

    def notes(self) -> tuple[str, ...]:
        """The pre-flight's line for the report, when it decided."""
        return () if self.pre is None else (route.note(self.pre),)


@contextmanager
def placed(
    plan: LogicalPlan, schema: Schema, source: Source, run: Run, *, whole_output: bool,
    fit_only: bool = False, transform_only: bool = False,
) -> Iterator[Place]:  # fmt: skip
    """The one place that decides where a run executes (a cluster the pre-flight started
    lives until the block ends)."""
    if run.output_dir is not None:  # said before the run's work, not after it
        check_folder(run.output_dir)
    if run.client is not None:
        yield Place("cluster", source, run.client)
        return
    source = collect_once(source, schema.read_columns(plan.columns))  # read once, shared
    # X is made in the output's computing type (float64 output: 8 bytes a value)
    value_bytes = max(4, np.dtype(run.precision.compute_dtype).itemsize)
    with route.route(plan, schema, source, budget=run.memory_budget, scheduler=run.scheduler,
                     whole_output=whole_output, fit_only=fit_only,
                     transform_only=transform_only,
                     value_bytes=value_bytes) as (pre, client):  # fmt: skip
        if client is not None:
            kind = "cluster"
        elif pre is not None and pre.execution == "streamed":
            kind = "streamed"
        else:
            kind = "memory"
        yield Place(kind, source, client, pre)


# --- fit ------------------------------------------------------------------------------


def with_side_tables(schema: Schema, plan: LogicalPlan) -> Schema:
    """The schema a fit runs with: with lookups, bound to their side tables, read afresh
    (the run is placed first: the pre-flight counts a side table before it is read)."""
    if not isinstance(schema, JoinedSchema):
        return schema  # no side tables: the lookup machinery is not even imported
    from fastprep.runtime.lookups import schema_for_fit

    return schema_for_fit(schema, plan.columns)


def fit(
    plan: LogicalPlan, schema: Schema, source: Source, run: Run, *, name: str | None = None
) -> FittedState:
    """Learn every statistic from ``source``; alerts sent for the fit's findings."""
    with placed(plan, schema, source, run, whole_output=False, fit_only=True) as place:
        state = _fit_at(place, plan, with_side_tables(schema, plan), run, name, place.rows(run))
    _send(state, run.on_alert, "fit", state.fit_report)
    return state


def _fit_at(
    place: Place, plan: LogicalPlan, schema: Schema, run: Run, name: str | None,
    rows: int | None, partitions: Any = None, cross_fit: CrossFit | None = None,
) -> FittedState:  # fmt: skip
    backend = run.backend or "auto"
    if place.kind == "memory":
        return _fit_in_memory(plan, schema, place.source, backend, name)
    if place.kind == "cluster":
        from fastprep.runtime import cluster

        # the drift profile: the partitions' profiles, merged
        params, report, profile = cluster.fit_with_profile(
            place.client, plan, schema, place.source, backend=backend, progress=run.progress,
            cross_fit=cross_fit, **_partition_size(rows),
        )  # fmt: skip
    else:
        from fastprep.runtime import streamed

        assert place.pre is not None and rows is not None  # the pre-flight chose streaming
        spare = place.pre.chosen.kept_bytes if place.pre.chosen is not None else 0
        # the drift profile: the partitions' profiles, merged
        params, report, profile = streamed.fit_with_profile(
            plan, schema, place.source, backend=backend, rows_per_partition=rows,
            partitions=partitions, spare_bytes=spare, cross_fit=cross_fit,
        )  # fmt: skip
    report.notes.extend(place.notes())
    return FittedState(plan, schema, params, backend, report, profile, name=name)


def _fit_in_memory(
    plan: LogicalPlan, schema: Schema, source: Source, backend: str, name: str | None
) -> FittedState:
    with execute.cyclic_gc_paused():
        prepared = execute.prepare(plan, schema, source, phase="fit", backend=backend)
        profile = _profile(prepared)
        params = execute.fit_prepared(plan, prepared, backend)
        fit_report = execute.snapshot_fit_report(prepared)
    return FittedState(plan, schema, params, backend, fit_report, profile, name=name)


# --- fit and transform ----------------------------------------------------------------


def fit_transform(
    plan: LogicalPlan, schema: Schema, source: Source, run: Run, *, name: str | None = None,
    wrap: Callable[[FittedState], Any], save: bool = True,
) -> tuple[Any, Any]:  # fmt: skip
    """Fit and transform the same source (read and validated once, in memory); returns
    ``(wrap(state), output)``. Over the memory budget the output is written to
    ``run.output_dir`` shard by shard and returned mapped. ``save=False``: an output in
    memory is returned unsaved (the caller writes it)."""
    with placed(plan, schema, source, run, whole_output=run.output_dir is None) as place:
        schema = with_side_tables(schema, plan)
        if place.kind != "memory":
            return _fit_transform_partitioned(place, plan, schema, run, name, wrap)
        backend = run.backend or "auto"
        with execute.cyclic_gc_paused():
            prepared = execute.prepare(plan, schema, place.source, phase="fit", backend=backend)
            profile = _profile(prepared)
            params = execute.fit_prepared(plan, prepared, backend)
            fit_report = execute.snapshot_fit_report(prepared)
            output = transform_fitted_rows(
                plan, params, prepared, run.precision.compute_dtype, backend,
                defer_quarantine=run.output_dir is not None,
            )  # fmt: skip
            execute.apply_precision(output, run.precision)
    _record_anomaly_patterns(output)
    state = FittedState(plan, schema, params, backend, fit_report, profile, name=name)
    _send(state, run.on_alert, "fit", output.report)
    fitted = wrap(state)
    if run.output_dir is not None and save:
        output.save(run.output_dir, compress=run.compress, pipeline=fitted)
    return fitted, output


def transform_fitted_rows(
    plan: LogicalPlan, params: execute.Params, prepared: execute.Prepared, dtype: Any,
    backend: str, *, defer_quarantine: bool = False,
) -> execute.Output:  # fmt: skip
    """X of the rows the fit has just learned from, in a ``fit_transform``.

    The engine asks for it here, never as ``transform(fit(...))`` spelled out: today every
    step transforms its own fit rows as it transforms any rows, so this is that; a step
    that gives its fit rows other values (``FIT_OUTPUT_DIFFERS``) is computed here: the
    prepared table of a fit carries the fit's target (``Table.fit_target``), from which
    such a step (target encoding) encodes these rows out of fold."""
    return execute.transform_prepared(
        plan, params, prepared, dtype, backend, defer_quarantine=defer_quarantine
    )


def _fit_transform_partitioned(
    place: Place, plan: LogicalPlan, schema: Schema, run: Run, name: str | None,
    wrap: Callable[[FittedState], Any],
) -> tuple[Any, Any]:  # fmt: skip
    """Fit, then transform into ``run.output_dir`` shard by shard, partition by partition
    (streamed here, or on the Dask cluster); the output comes back mapped."""
    from fastprep.storage.shards import open_output

    if run.output_dir is None:  # over the budget, the pre-flight refuses this before here
        raise PipelineDefinitionError(
            "a fit_transform on a Dask cluster writes its output shard by shard: pass "
            "output_dir= (or fit on the cluster, then transform without output_dir to "
            "gather the output)"
            if place.kind == "cluster"
            else "an output over the memory budget needs output_dir="
        )
    backend = run.backend or "auto"
    rows = place.rows(run)
    # out-of-fold encodings of the fit's rows: collected by the fit, read by the transform
    check_collected(plan, place.kind)
    folds = CrossFit() if cross_fit_needed(plan) else None
    if place.kind == "streamed":
        from fastprep.runtime import streamed

        assert rows is not None
        parts = streamed.Partitions(place.source, rows, streamed.job_for(plan, schema, backend))
        check_partitionable(run.precision)  # before the fit's passes, not after them
        state = _fit_at(place, plan, schema, run, name, rows, parts, folds)
        fitted = wrap(state)
        opened = streamed.transform(
            plan, schema, state.params, place.source, run.output_dir, backend=backend,
            out_dtype=run.precision.out_dtype, compress=run.compress, pipeline=fitted,
            partitions=parts, notes=place.notes(), cross_fit=folds,
        )  # fmt: skip
    else:
        # the fit's report does not repeat the pre-flight's line: the output's has it
        bare = Place("cluster", place.source, place.client)
        state = _fit_at(bare, plan, schema, run, name, rows, None, folds)
        fitted = wrap(state)
        options = {"progress": run.progress} | ({} if folds is None else {"cross_fit": folds})
        _cluster_transform(state, bare, run, backend, rows, fitted, options)
        opened = open_output(run.output_dir)
        opened.notes.extend(place.notes())
    # the fit's report holds what only the fit finds (a constant column...), the
    # published output's the transform's: a rule in both is sent once
    _send(state, run.on_alert, "fit", state.fit_report, _run_report(opened))
    return fitted, opened


# --- transform ------------------------------------------------------------------------


def transform(
    state: FittedState, source: Source, run: Run, *,
    drift_thresholds: dict[str, float] | None = None, publish: Any = None,
    cluster_options: dict[str, Any] | None = None, alert: bool = True,
) -> Any:  # fmt: skip
    """Apply a fitted state to ``source`` (statistics are never re-learned here).

    An :class:`~fastprep.runtime.execute.Output`; with ``run.output_dir`` also written
    there (``publish``: the fitted object published with it), or, over the memory budget
    or on a cluster, written shard by shard and returned as the folder's manifest.
    ``cluster_options``: ``retry=``, ``partitions=``, ``progress=`` of a cluster run.
    ``alert=False``: no alerts (the caller sends them)."""
    out = _transform(state, source, run, drift_thresholds, publish, cluster_options or {})
    if alert:
        _send(state, run.on_alert, "transform", _run_report(out))
    return out


def _transform(
    state: FittedState, source: Source, run: Run, drift_thresholds: dict[str, float] | None,
    publish: Any, cluster_options: dict[str, Any],
) -> Any:  # fmt: skip
    backend = run.backend or state.backend
    plan, schema = state.plan, state.schema
    with placed(plan, schema, source, run, whole_output=run.output_dir is None,
                transform_only=True) as place:  # fmt: skip
        rows = place.rows(run)
        if place.kind == "cluster":
            drifting = {"profile": state.profile, "drift_thresholds": drift_thresholds}
            out = _cluster_transform(state, place, run, backend, rows, publish,
                                     cluster_options | drifting)  # fmt: skip
            out.report.notes.extend(place.notes())
            return out
        if place.kind == "streamed" and run.output_dir is not None:
            from fastprep.runtime import streamed

            assert rows is not None
            check_partitionable(run.precision)
            return streamed.transform(
                plan, schema, state.params, place.source, run.output_dir, backend=backend,
                out_dtype=run.precision.out_dtype, compress=run.compress, pipeline=publish,
                rows_per_partition=rows, notes=place.notes(), profile=state.profile,
                drift_thresholds=drift_thresholds,
            )  # fmt: skip
        source = place.source
    with execute.cyclic_gc_paused():
        prepared = execute.prepare(plan, schema, source, phase="transform", backend=backend)
        if state.profile is not None:
            with prepared.report.stage("drift"):
                prepared.report.drift = drift.compare(
                    state.profile, prepared.table, drift_thresholds
                )
        output = execute.transform_prepared(
            plan, state.params, prepared, run.precision.compute_dtype, backend,
            defer_quarantine=run.output_dir is not None,  # saved below: the writer builds it
        )  # fmt: skip
        execute.apply_precision(output, run.precision, state.quantization)
    _record_anomaly_patterns(output)
    if run.output_dir is not None:  # it fitted in memory: the folder a cluster run writes
        output.save(run.output_dir, compress=run.compress, pipeline=publish)
    return output


def _cluster_transform(
    state: FittedState, place: Place, run: Run, backend: str, rows: int | None,
    publish: Any, cluster_options: dict[str, Any],
) -> Any:  # fmt: skip
    from fastprep.runtime import cluster

    precision = run.precision
    if precision.quantized or precision.on_overflow != "raise":
        raise PipelineDefinitionError(
            f"out_dtype={precision.out_dtype!r} with on_overflow={precision.on_overflow!r} is "
            "not supported on a cluster yet: use float32/float64/float16/bfloat16 with 'raise'"
        )
    output_dir = None if run.output_dir is None else os.fspath(run.output_dir)
    return cluster.transform(
        place.client, state.plan, state.schema, state.params, place.source,
        output_dir=output_dir, backend=backend, out_dtype=precision.out_dtype,
        compress=run.compress, pipeline=publish, **_partition_size(rows), **cluster_options,
    )  # fmt: skip


# --- shards, validation ---------------------------------------------------------------


def write_shards(
    state: FittedState, source: Source, folder: str | os.PathLike[str], *,
    compress: str | bool | None = None, publish: Any = None, **options: Any,
) -> Any:  # fmt: skip
    """Transform ``source`` partition by partition (:class:`~fastprep.runtime.batches.
    BatchStream`, ``options`` as its) into memory-mappable shards, published atomically;
    returns the pass's :class:`~fastprep.runtime.batches.BatchStats`."""
    from fastprep.runtime.batches import BatchStream
    from fastprep.storage.shards import ShardWriter

    check_folder(folder)
    stream = BatchStream(state, source, **options)
    writer: ShardWriter | None = None
    try:
        for output in stream.partition_outputs():
            if writer is None:
                writer = ShardWriter(folder, output.feature_names,
                                     stream.precision.out_dtype, compress=compress)  # fmt: skip
            writer.add(output.X, output.y, output.row_ids, output.quarantine_to_write())
        assert writer is not None  # a source has at least one partition
        stats = stream.stats
        counts = {"rows_in": stats.rows_in, "rows_out": stats.rows_out,
                  "rows_quarantined": stats.rows_quarantined}  # fmt: skip
        summary = stats.to_dict()  # findings totalled over the partitions, as a run's
        writer.close({**counts, "findings": summary["findings"], "batches": summary},
                     pipeline=publish)  # fmt: skip
    except BaseException:
        if writer is not None:
            writer.discard()  # never published: the folder keeps its earlier output
        raise
    return stream.stats


def validate_only(
    plan: LogicalPlan, schema: Schema, source: Source, *, phase: str = "fit",
    memory_budget: int | str | None = None,
) -> Report:  # fmt: skip
    """Read and validate ``source`` as a run at ``phase`` would, fitting nothing: the
    report counts the rows that would be used and quarantined, and the quarantine's
    patterns. A failed ``raise`` rule raises :class:`~fastprep.errors.DataValidationError`.
    The source is read whole: over ``memory_budget`` (default as a run's) that is a
    :class:`~fastprep.errors.MemoryBudgetError` before anything is read."""
    pre = route.check(plan, schema, source, budget=memory_budget, scheduler="off",
                      whole_output=False, fit_only=True)  # fmt: skip
    if pre is not None and pre.execution != "in-memory":
        raise MemoryBudgetError(
            f"validating {source} reads it whole, over the memory budget ({route.note(pre)}); "
            "a streamed run validates it partition by partition, with the same counts and "
            "findings in its report: fastprep run --memory-budget ... (or fit with "
            "memory_budget=)"
        )
    with execute.cyclic_gc_paused():
        prepared = execute.prepare(plan, schema, source, phase=phase, backend="pandas")
    report = prepared.report
    report.rows_out = prepared.table.n_rows
    report.rows_quarantined = len(prepared.quarantine)
    report.check_accounting()
    report.anomaly_patterns = alerting.anomaly_patterns(prepared.quarantine.reason_arrays()[1])
    return report


# --- helpers --------------------------------------------------------------------------


def check_partitionable(precision: Precision) -> None:
    """Partitioned runs do not quantize or clip on overflow yet: refused before any pass."""
    if precision.quantized or precision.on_overflow != "raise":
        raise PipelineDefinitionError(
            f"out_dtype={precision.out_dtype!r} with on_overflow={precision.on_overflow!r} "
            "is not supported when the run is partitioned (over the memory budget) yet: use "
            "float32/float64/float16/bfloat16 with 'raise', or raise memory_budget="
        )


def _profile(prepared: execute.Prepared) -> dict[str, Any]:
    """The fit's drift reference, timed as its own report stage."""
    with prepared.report.stage("profile"):
        return drift.profile(prepared.table)


def _record_anomaly_patterns(output: execute.Output) -> None:
    """Patterns among the quarantined rows' reasons, in the report (none to look for, and
    no quarantine frame built, when no row was quarantined)."""
    if output.report.rows_quarantined:
        output.report.anomaly_patterns = alerting.anomaly_patterns(output.quarantine_reason_texts())


def _run_report(out: Any) -> Any:
    """The run's report object: a published output keeps it as a dict (``to_dict()``)."""
    if not isinstance(out.report, dict):
        return out.report
    from fastprep.runtime.shards import combine_reports

    report = combine_reports([out.report], [], str(out.report.get("source", "")))
    report.drift = dict(out.report.get("drift", {}))  # its drift alerts are sent too
    return report


def _send(
    state: FittedState, on_alert: alerting.AlertCallback | None, phase: str, *reports: Any
) -> None:
    """Send the run's alerts: one per rule, every run (see :mod:`fastprep.validate.alerts`);
    several reports of one run (a fit's and its output's) send a rule in both once."""
    seen: set[tuple[str, str, str]] = set()
    for report in reports:
        alerting.send(state, report, on_alert, phase, seen)


def _partition_size(rows: int | None) -> dict[str, int]:
    return {} if rows is None else {"rows_per_partition": rows}

"""``fp.Pipeline``: the declared pipeline, and ``FittedPipeline``: it plus fitted state.

This module sits at the orchestration layer (it calls :mod:`fastprep.runtime.execute`), so the
DSL builders below it never import a backend.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from fastprep.api import pipeline_file
from fastprep.api.builders import FeatureBuilder
from fastprep.api.check import check_plan
from fastprep.api.lookup import (
    JoinedSchema,
    Lookup,
    check_qualified_names,
    describe_lookups,
    schema_from_dict,
)
from fastprep.api.resolve import resolve_plan
from fastprep.api.schema import Schema, column_facts
from fastprep.backends import stages as stage_backends
from fastprep.data.sources import Source, collect_once
from fastprep.emit.precision import Precision
from fastprep.emit.quantize import Quantization, calibrate
from fastprep.errors import PipelineDefinitionError, StateFormatError
from fastprep.optimize import optimize
from fastprep.plan.expr import Col, to_source
from fastprep.plan.nodes import Feature, Input, LogicalPlan
from fastprep.plan.params import check_step_params
from fastprep.planning.planner import load_profile
from fastprep.runtime import execute, preflight
from fastprep.runtime import route as auto_cluster
from fastprep.storage.output_format import published_pipeline
from fastprep.storage.state import (
    decode_floats,
    encode_floats,
    join_arrays,
    read_state,
    split_arrays,
    write_state,
)
from fastprep.validate import alerts as alerting
from fastprep.validate import drift


class Pipeline:
    """A declared preprocessing pipeline: schema, features in output order, optional target."""

    def __init__(
        self,
        schema: Schema,
        features: Sequence[FeatureBuilder | Feature],
        target: FeatureBuilder | str | None = None,
        *,
        sample: str | os.PathLike[str] | None = None,
        name: str | None = None,
        optimize: bool = True,
        lookups: dict[str, Lookup] | None = None,
    ) -> None:
        if not isinstance(schema, Schema):
            raise PipelineDefinitionError("Pipeline(schema=...) needs an fp.Schema({...})")
        if isinstance(features, (FeatureBuilder, Feature)) or not isinstance(features, Sequence):
            raise PipelineDefinitionError("Pipeline(features=[...]) takes a list of features")
        if not features:
            raise PipelineDefinitionError("Pipeline(features=[...]) needs at least one feature")
        built = tuple(_as_feature(f, i) for i, f in enumerate(features))
        if lookups:  # ``planes.year`` then reads like a (nullable) source column
            schema = JoinedSchema(schema, lookups)
        self.schema = schema
        self.plan = resolve_plan(LogicalPlan(built, _as_target(target)), dict(schema.items()))
        self.sample = None if sample is None else os.fspath(sample)
        self.name = name
        self.optimize = optimize
        check_qualified_names(self.plan.columns, schema)
        check_plan(self.plan, {col: spec.ltype for col, spec in schema.items()})

    @property
    def optimized(self) -> LogicalPlan:
        """The plan that runs: the optimizer's passes applied (unless ``optimize=False``)."""
        return physical_plan(self.plan, self.schema, self.optimize)

    def __repr__(self) -> str:
        lines = [f"  {f.describe()}" for f in self.plan.features]
        target = "" if self.plan.target is None else f"\n  target: {self.plan.target.name}"
        return "Pipeline(\n" + "\n".join(lines) + target + "\n)"

    def explain(
        self,
        source: Source | None = None,
        *,
        stage: str = "optimized",
        analyze: bool = False,
        backend: str = "auto",
        memory_budget: int | str | None = None,
    ) -> str:
        """The plan as a tree at a named stage: ``"logical"`` (as declared) or
        ``"optimized"`` (after the passes: folded expressions, simplified steps, fused
        stages, column lifetimes), followed by what the passes changed.

        With a ``source``, also the backend the planner picks for each stage on it and why
        (it reads and validates the source); ``analyze=True`` runs fit + transform too and
        adds the measured seconds per stage next to the predictions (like EXPLAIN ANALYZE).
        The memory pre-flight comes first (rows, bytes, cardinality sketches vs
        ``memory_budget``, and what it decided); a run it would refuse is not attempted.
        """
        if isinstance(source, str) and not any(c in source for c in "./*\\"):
            stage, source = source, None  # explain("logical"): a stage name, positionally
        if stage not in ("logical", "optimized"):
            raise PipelineDefinitionError(f"explain(stage={stage!r}): 'logical' or 'optimized'")
        logical = replace(self.plan, facts=column_facts(self.schema))
        if stage == "logical":
            return logical.tree() + describe_lookups(self.schema, logical.columns)
        optimized = self.optimized
        text = optimized.tree() + describe_lookups(self.schema, optimized.columns)
        read = None  # with lookups: the source's columns, not the joined ones
        if isinstance(self.schema, JoinedSchema):
            read = self.schema.read_columns(optimized.columns)
        text += "\n" + "\n".join(describe_rewrites(logical, optimized, read))
        if source is None:
            return text
        source = collect_once(source, self.schema.read_columns(optimized.columns))
        # as ``fastprep run`` would run it: the output written to a folder, not gathered
        from fastprep.runtime.levels import count_order_targets, count_passes

        pre = preflight.run_preflight(optimized, self.schema, source, budget=memory_budget,
                                      whole_output=False, passes=count_passes(optimized),
                                      order_statistics=count_order_targets(optimized))  # fmt: skip
        text += "\n" + "\n".join(pre.lines())
        if any(d.refuse for d in pre.decisions) or pre.execution != "in-memory":
            return text + "\n(backends per stage: not planned in memory; see the pre-flight)"
        return text + "\n" + self._explain_backends(source, analyze, backend)

    def _explain_backends(self, source: Source, analyze: bool, backend: str) -> str:
        plan = self.optimized
        schema = self._with_lookup_tables().schema
        prepared = execute.prepare(plan, schema, source, phase="fit", backend=backend)
        if analyze:
            params = execute.fit_prepared(plan, prepared, backend)
            execute.transform_prepared(plan, params, prepared, np.float32, backend)
            choices = prepared.report.plan
        else:
            choices = [
                c.to_dict()
                for c in stage_backends.choose_stage_backends(plan, prepared.table, backend)
            ]
        rows = prepared.table.n_rows
        lines = [f"backends for {rows:,} validated rows ({load_profile().source} cost profile):"]
        for choice in choices:
            lines.append(f"├─ stage {choice['stage']}: {choice['reason']}")
            if choice.get("measured_seconds"):
                measured = ", ".join(
                    f"{phase} {seconds:.3g} s"
                    for phase, seconds in choice["measured_seconds"].items()
                )
                lines.append(f"│    measured: {measured}")
        lines += [f"├─ {line}" for line in stage_backends.describe_paths()]
        if analyze:
            stages = ", ".join(f"{k} {v:.3g} s" for k, v in prepared.report.stages.items())
            lines.append(f"└─ run: {stages}")
        return "\n".join(lines)

    def fit(
        self,
        source: Source,
        *,
        backend: str = "auto",
        on_alert: alerting.AlertCallback | None = None,
        client: Any = None,
        rows_per_partition: int | None = None,
        memory_budget: int | str | None = None,
        scheduler: str | None = None,
        progress: Any = False,
    ) -> FittedPipeline:
        """Learn every statistic from ``source`` (a DataFrame, or CSV/Parquet path or glob).

        ``on_alert`` is called with each :class:`~fastprep.validate.alerts.Alert` (also
        logged to ``fastprep.alerts``, which prints nothing unless logging is configured):
        once per rule per run, with the count totalled over the source's partitions.

        With ``client`` (a ``distributed.Client``), the fit runs on that Dask cluster, one
        task per partition of ``source`` (a Parquet/CSV path or glob, or a dask DataFrame),
        and gives the same fitted state as the single-machine fit. ``progress`` (cluster
        only): True / "auto" (if stderr is a terminal) / a callable ``(stage, done, total)``
        shows a bar per pass over completed partitions; off by default.

        Without ``client``, the memory pre-flight (:mod:`fastprep.runtime.preflight`) decides: a
        source whose in-memory fit would exceed ``memory_budget`` (bytes or "2GB"; default
        ``$FASTPREP_MEMORY_BUDGET`` or the available memory less headroom) is fitted on Dask
        partitions (``scheduler``: an address, "local", or "off" to refuse instead).
        """
        bound = self._with_lookup_tables()
        fitted = bound._fit(source, backend, client, rows_per_partition, memory_budget,
                            scheduler, progress)  # fmt: skip
        if bound is not self:  # a later fit of fitted.pipeline reads the side tables again
            bound._fitting = False
        _alert(self, fitted.fit_report, on_alert, "fit")
        return fitted

    def _fit(
        self, source: Source, backend: str, client: Any, rows_per_partition: int | None,
        memory_budget: int | str | None, scheduler: str | None, progress: Any,
    ) -> FittedPipeline:  # fmt: skip
        """:meth:`fit` without sending alerts (the caller sends them once per run)."""
        plan = self.optimized
        if client is None:  # a LazyFrame's query runs once: pre-flight and read share it
            source = collect_once(source, self.schema.read_columns(plan.columns))
            with auto_cluster.route(plan, self.schema, source, budget=memory_budget,
                                    scheduler=scheduler, whole_output=False, fit_only=True,
                                    ) as (pre, auto):  # fmt: skip
                if auto is not None:
                    rows = rows_per_partition or pre.rows_per_partition
                    fitted = self._fit(source, backend, auto, rows, None, None, progress)
                    fitted.fit_report.notes.append(auto_cluster.note(pre))
                    return fitted
                if pre is not None and pre.execution == "streamed":
                    return self._fit_streamed(source, backend, pre, rows_per_partition)
        if client is not None:
            from fastprep.runtime import cluster as distributed

            params, report = distributed.fit(
                client, plan, self.schema, source, backend=backend, progress=progress,
                **_partition_size(rows_per_partition),
            )  # fmt: skip
            return FittedPipeline(self, params, backend=backend, fit_report=report)
        with execute.cyclic_gc_paused():
            prepared = execute.prepare(plan, self.schema, source, phase="fit", backend=backend)
            profile = _profile(prepared)
            params = execute.fit_prepared(plan, prepared, backend)
            fit_report = execute.snapshot_fit_report(prepared)
        return FittedPipeline(self, params, backend=backend, fit_report=fit_report, profile=profile)

    def _fit_streamed(
        self, source: Source, backend: str, pre: Any, rows_per_partition: int | None,
        partitions: Any = None,
    ) -> FittedPipeline:  # fmt: skip
        """The fit streamed partition by partition in this process (the pre-flight's
        choice); no drift profile (it would need the whole validated table)."""
        from fastprep.runtime import streamed

        rows = rows_per_partition or pre.rows_per_partition
        spare = pre.chosen.kept_bytes if pre.chosen is not None else 0
        params, report = streamed.fit(self.optimized, self.schema, source, backend=backend,
                                      rows_per_partition=rows, partitions=partitions,
                                      spare_bytes=spare)  # fmt: skip
        report.notes.append(auto_cluster.note(pre))
        return FittedPipeline(self, params, backend=backend, fit_report=report)

    def fit_transform(
        self,
        source: Source,
        *,
        backend: str = "auto",
        out_dtype: str = "float32",
        on_overflow: str = "raise",
        on_alert: alerting.AlertCallback | None = None,
        memory_budget: int | str | None = None,
        scheduler: str | None = None,
        output_dir: str | os.PathLike[str] | None = None,
        compress: str | bool | None = None,
    ) -> Any:
        """Fit and transform the same source, reading and validating it once (in memory).

        ``output_dir``: also write the output there (with the fitted pipeline). A source
        whose run would not fit ``memory_budget`` (the sum over every process of the job)
        is streamed or run on Dask partitions, its output written to ``output_dir`` shard by
        shard and returned mapped (``fp.open_output``); without ``output_dir`` such a run
        is refused before anything is read (X is never gathered over the budget)."""
        return self.fit_and_transform(
            source,
            backend=backend,
            out_dtype=out_dtype,
            on_overflow=on_overflow,
            on_alert=on_alert,
            memory_budget=memory_budget,
            scheduler=scheduler,
            output_dir=output_dir,
            compress=compress,
        )[1]

    def fit_and_transform(
        self,
        source: Source,
        *,
        backend: str = "auto",
        out_dtype: str = "float32",
        on_overflow: str = "raise",
        on_alert: alerting.AlertCallback | None = None,
        memory_budget: int | str | None = None,
        scheduler: str | None = None,
        output_dir: str | os.PathLike[str] | None = None,
        compress: str | bool | None = None,
        save: bool = True,
    ) -> tuple[FittedPipeline, Any]:
        """Like :meth:`fit_transform`, also returning the fitted pipeline (used by the CLI).

        ``memory_budget`` / ``scheduler``: as :meth:`fit`; ``output_dir`` / ``compress``:
        as :meth:`fit_transform` (an output over the budget is written, never gathered).
        ``save=False``: an in-memory result is returned unsaved (the caller writes it)."""
        bound = self._with_lookup_tables()
        if bound is not self:  # the side tables read once, for this fit
            result = bound.fit_and_transform(
                source, backend=backend, out_dtype=out_dtype, on_overflow=on_overflow,
                on_alert=on_alert, memory_budget=memory_budget, scheduler=scheduler,
                output_dir=output_dir, compress=compress, save=save,
            )  # fmt: skip
            bound._fitting = False
            return result
        precision = Precision(out_dtype, on_overflow)
        dtype = precision.compute_dtype
        plan = self.optimized
        source = collect_once(source, self.schema.read_columns(plan.columns))
        with auto_cluster.route(plan, self.schema, source, budget=memory_budget,
                                scheduler=scheduler, whole_output=output_dir is None,
                                ) as (pre, auto):  # fmt: skip
            if auto is not None or (pre is not None and pre.execution == "streamed"):
                return self._partitioned_fit_transform(
                    source, pre, auto, backend, out_dtype, on_overflow, on_alert, output_dir,
                    compress,
                )  # fmt: skip
        with execute.cyclic_gc_paused():
            prepared = execute.prepare(plan, self.schema, source, phase="fit", backend=backend)
            profile = _profile(prepared)
            params = execute.fit_prepared(plan, prepared, backend)
            fit_report = execute.snapshot_fit_report(prepared)
            output = execute.transform_prepared(plan, params, prepared, dtype, backend)
            execute.apply_precision(output, precision)
        _record_anomaly_patterns(output)
        _alert(self, output.report, on_alert, "fit")
        fitted = FittedPipeline(
            self, params, backend=backend, fit_report=fit_report, profile=profile
        )
        if output_dir is not None and save:
            output.save(output_dir, compress=compress, pipeline=fitted)
        return fitted, output

    def _partitioned_fit_transform(
        self, source: Source, pre: Any, client: Any, backend: str, out_dtype: str,
        on_overflow: str, on_alert: alerting.AlertCallback | None,
        output_dir: str | os.PathLike[str] | None, compress: str | bool | None,
    ) -> tuple[FittedPipeline, Any]:  # fmt: skip
        """Fit, then transform into ``output_dir`` shard by shard, partition by partition
        (streamed here, or on the Dask ``client``); the output comes back mapped."""
        from fastprep.storage.shards import open_output

        if output_dir is None:  # the pre-flight refuses this before routing here
            raise PipelineDefinitionError("an output over the memory budget needs output_dir=")
        rows = pre.rows_per_partition
        if client is None:
            from fastprep.runtime import streamed

            parts = streamed.Partitions(source, rows, streamed.job_for(self.optimized,
                                                                      self.schema, backend))  # fmt: skip
            _check_streamable(out_dtype, on_overflow)  # before the fit's passes, not after
            fitted = self._fit_streamed(source, backend, pre, rows, parts)
            opened = streamed.transform(
                self.optimized, self.schema, fitted.params, source, output_dir,
                backend=backend, out_dtype=out_dtype, compress=compress, pipeline=fitted,
                partitions=parts, notes=(auto_cluster.note(pre),),
            )  # fmt: skip
        else:
            fitted = self._fit(source, backend, client, rows, None, None, False)
            fitted._transform(source, backend=backend, out_dtype=out_dtype,
                              on_overflow=on_overflow, client=client, output_dir=output_dir,
                              rows_per_partition=rows, compress=compress, pipeline=fitted)  # fmt: skip
            opened = open_output(output_dir)
            opened.notes.append(auto_cluster.note(pre))
        # the fit's report holds what only the fit finds (a constant column...), the
        # published output's the transform's: a rule in both is sent once
        _alert(self, fitted.fit_report, on_alert, "fit", _run_report(opened))
        return fitted, opened

    def _with_lookup_tables(self) -> Pipeline:
        """This pipeline with its lookup tables read and validated (a copy that the fitted
        pipeline keeps); itself when it has no lookups or is such a copy already. Each fit
        reads the side tables afresh."""
        if not isinstance(self.schema, JoinedSchema) or getattr(self, "_fitting", False):
            return self
        from fastprep.runtime.lookups import schema_for_fit

        bound = copy.copy(self)
        bound.schema = schema_for_fit(self.schema, self.optimized.columns)
        bound._fitting = True
        return bound

    def transform(self, source: Source, **_: Any) -> execute.Output:
        raise PipelineDefinitionError(
            "this pipeline is not fitted: call pipeline.fit(source) first, "
            "or pipeline.fit_transform(source)"
        )


class FittedPipeline:
    """A pipeline with its fitted statistics; transforms new data the same way every time."""

    def __init__(
        self,
        pipeline: Pipeline,
        params: execute.Params,
        *,
        backend: str = "auto",
        fit_report: Any = None,
        profile: dict[str, Any] | None = None,
    ) -> None:
        self.pipeline = pipeline
        self.params = params
        self.backend = backend
        self.fit_report = fit_report
        #: per input column at fit: null rate, mean/std or vocabulary (drift reference)
        self.profile = profile
        #: per-column int8/uint8 scale and zero point (``calibrate_quantization``), or None
        self.quantization: Quantization | None = None

    @property
    def plan(self) -> LogicalPlan:
        """The plan that runs (optimized unless the pipeline says ``optimize=False``)."""
        return self.pipeline.optimized

    @property
    def schema(self) -> Schema:
        return self.pipeline.schema

    def transform(
        self,
        source: Source,
        *,
        backend: str | None = None,
        out_dtype: str = "float32",
        on_overflow: str = "raise",
        on_alert: alerting.AlertCallback | None = None,
        drift_thresholds: dict[str, float] | None = None,
        client: Any = None,
        output_dir: str | os.PathLike[str] | None = None,
        rows_per_partition: int | None = None,
        memory_budget: int | str | None = None,
        scheduler: str | None = None,
        **distributed_options: Any,
    ) -> Any:
        """Apply the fitted pipeline to ``source``; statistics are never re-learned here.

        ``out_dtype``: "float32", "float64", "float16" or "bfloat16" (uint16 bits); a value
        beyond a narrow type's range raises, or is clipped with ``on_overflow="clip"``.
        The report's ``drift`` compares the validated rows with the fit's profile
        (thresholds: ``fastprep.validate.drift.THRESHOLDS``, overridable here); findings
        and drift beyond a threshold are alerts (logged to ``fastprep.alerts`` and sent
        to ``on_alert``): once per rule per run, totalled over partitions.

        With ``client``, each partition is transformed by a task on that Dask cluster:
        the result is gathered into one :class:`Output`, or, with ``output_dir``, written
        as shards plus a manifest (a :class:`fastprep.runtime.cluster.Manifest`; a re-run
        resumes from the partitions already written); a run without ``client`` that fits
        in memory writes ``output_dir`` with :meth:`Output.save` and returns the Output.
        ``distributed_options`` go to :func:`fastprep.runtime.cluster.transform` (``retry=``,
        ``partitions=``, ``progress=`` as in :meth:`Pipeline.fit`; ``compress=``,
        ``pipeline=`` for the folder).
        """
        out = self._transform(source, backend=backend, out_dtype=out_dtype,
                              on_overflow=on_overflow, drift_thresholds=drift_thresholds,
                              client=client, output_dir=output_dir,
                              rows_per_partition=rows_per_partition,
                              memory_budget=memory_budget, scheduler=scheduler,
                              **distributed_options)  # fmt: skip
        _alert(self.pipeline, _run_report(out), on_alert, "transform")
        return out

    def _transform(
        self, source: Source, *, backend: str | None = None, out_dtype: str = "float32",
        on_overflow: str = "raise", drift_thresholds: dict[str, float] | None = None,
        client: Any = None, output_dir: str | os.PathLike[str] | None = None,
        rows_per_partition: int | None = None, memory_budget: int | str | None = None,
        scheduler: str | None = None, **distributed_options: Any,
    ) -> Any:  # fmt: skip
        """:meth:`transform` without sending alerts (the caller sends them once per run)."""
        backend = backend or self.backend
        precision = Precision(out_dtype, on_overflow)
        plan = self.plan
        if client is None:  # the memory pre-flight: Dask partitions if it would not fit
            source = collect_once(source, self.schema.read_columns(plan.columns))
            with auto_cluster.route(plan, self.schema, source, budget=memory_budget,
                                    scheduler=scheduler, whole_output=output_dir is None,
                                    ) as (pre, auto):  # fmt: skip
                if auto is not None:
                    out = self._transform(source, backend=backend, out_dtype=out_dtype,
                                         on_overflow=on_overflow, client=auto,
                                         output_dir=output_dir,
                                         rows_per_partition=rows_per_partition
                                         or pre.rows_per_partition,
                                         **distributed_options)  # fmt: skip
                    if hasattr(out, "report"):
                        out.report.notes.append(auto_cluster.note(pre))
                    return out
                if pre is not None and pre.execution == "streamed" and output_dir is not None:
                    from fastprep.runtime import streamed

                    _check_streamable(out_dtype, on_overflow)
                    return streamed.transform(
                        plan, self.schema, self.params, source, output_dir, backend=backend,
                        out_dtype=out_dtype, compress=distributed_options.get("compress"),
                        pipeline=distributed_options.get("pipeline"),
                        rows_per_partition=rows_per_partition or pre.rows_per_partition,
                        notes=(auto_cluster.note(pre),),
                    )  # fmt: skip
        if client is not None:
            from fastprep.runtime import cluster as distributed

            if precision.quantized or on_overflow != "raise":
                raise PipelineDefinitionError(
                    f"out_dtype={out_dtype!r} with on_overflow={on_overflow!r} is not supported "
                    "on a cluster yet: use float32/float64/float16/bfloat16 with 'raise'"
                )
            return distributed.transform(
                client, plan, self.schema, self.params, source,
                output_dir=None if output_dir is None else os.fspath(output_dir),
                backend=backend, out_dtype=out_dtype, **_partition_size(rows_per_partition),
                **distributed_options,
            )  # fmt: skip
        with execute.cyclic_gc_paused():
            prepared = execute.prepare(
                plan, self.schema, source, phase="transform", backend=backend
            )
            if self.profile is not None:
                with prepared.report.stage("drift"):
                    prepared.report.drift = drift.compare(
                        self.profile, prepared.table, drift_thresholds
                    )
            output = execute.transform_prepared(
                plan, self.params, prepared, precision.compute_dtype, backend
            )
            execute.apply_precision(output, precision, self.quantization)
        _record_anomaly_patterns(output)
        if output_dir is not None:  # it fitted in memory: the folder a cluster run writes
            output.save(output_dir, compress=distributed_options.get("compress"),
                        pipeline=distributed_options.get("pipeline"))  # fmt: skip
        return output

    def calibrate_quantization(
        self, source: Source, dtype: str = "uint8", *, backend: str | None = None
    ) -> FittedPipeline:
        """Learn each output column's int8/uint8 scale and zero point from ``source``'s
        transformed rows (dense output only); kept in the fitted state, so that
        ``transform(..., out_dtype=dtype)`` quantizes every later source the same way."""
        out = self._transform(source, backend=backend)
        self.quantization = calibrate(out.X, dtype)
        return self

    def batches(self, source: Source, **options: Any) -> Any:
        """``(X_batch, y_batch)`` streamed over ``source``'s partitions, never the whole matrix.

        Options: ``batch_size=1024, shuffle=False, seed=0, drop_last=False, epoch=0,
        rows_per_partition, out_dtype, on_overflow, backend, pool_size, return_row_ids,
        on_alert``; the returned :class:`fastprep.runtime.batches.BatchStream` has ``.stats`` after
        a pass (its findings totalled over the partitions; alerts sent once at its end)."""
        from fastprep.runtime.batches import BatchStream

        return BatchStream(self, source, **options)

    def write_shards(
        self, source: Source, folder: str | os.PathLike[str], *,
        compress: str | bool | None = None, **options: Any,
    ) -> Any:  # fmt: skip
        """Transform ``source`` partition by partition into memory-mappable ``.npy`` shards
        (one per partition; never the whole matrix in memory), published atomically like
        :meth:`Output.save`; open with ``fp.open_output``. Options as :meth:`batches`
        (``rows_per_partition``, ``out_dtype``, ...); returns the
        :class:`~fastprep.runtime.batches.BatchStats` of the pass."""
        from fastprep.runtime.batches import BatchStream
        from fastprep.storage.shards import ShardWriter

        stream = BatchStream(self, source, **options)
        writer: ShardWriter | None = None
        try:
            for output in stream.partition_outputs():
                if writer is None:
                    writer = ShardWriter(folder, output.feature_names,
                                         stream.precision.out_dtype, compress=compress)  # fmt: skip
                writer.add(output.X, output.y, output.row_ids, output.quarantine)
            assert writer is not None  # a source has at least one partition
            stats = stream.stats
            counts = {"rows_in": stats.rows_in, "rows_out": stats.rows_out,
                      "rows_quarantined": stats.rows_quarantined}  # fmt: skip
            summary = stats.to_dict()  # findings totalled over the partitions, as a run's
            writer.close({**counts, "findings": summary["findings"], "batches": summary},
                         pipeline=self)  # fmt: skip
        except BaseException:
            if writer is not None:
                writer.discard()  # never published: the folder keeps its earlier output
            raise
        return stream.stats

    def torch_dataset(self, source: Source, **options: Any) -> Any:
        """A ``torch.utils.data.IterableDataset`` over :meth:`batches` (``fastprep[torch]``);
        each pass is a new epoch (reshuffled when ``shuffle=True``)."""
        from fastprep.integrations.torch import BatchDataset

        return BatchDataset(self, source, **options)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Save as JSON + .npz in one zip file (never pickle); load with ``fp.load``."""
        arrays: dict[str, np.ndarray] = {}  # fitted arrays (bin edges) go to the npz file
        doc = {
            "schema": self.schema.to_dict(),
            **_lookup_tables_doc(self.schema, arrays),
            "plan": self.pipeline.plan.to_dict(),
            "params": encode_floats(split_arrays(self.params, arrays)),
            "sample": self.pipeline.sample,
            "name": self.pipeline.name,
            "optimize": self.pipeline.optimize,
            "profile": encode_floats(self.profile),
        }
        if self.quantization is not None:
            doc["quantization"] = self.quantization.to_dict()
        write_state(path, doc, arrays)

    def __repr__(self) -> str:
        return f"Fitted{self.pipeline!r}"


def load(
    path: str | os.PathLike[str], *, functions: dict[str, Callable[[float], float]] | None = None
) -> FittedPipeline:
    """Load a fitted pipeline saved by :meth:`FittedPipeline.save`.

    ``functions`` maps the names of ``fp.Map`` functions to the functions themselves (a
    state file never carries code). For an output folder's ``pipeline.fastprep``, the
    pipeline its ``manifest.json`` names is loaded (the alias can lag behind it).
    """
    doc, arrays = read_state(published_pipeline(path))
    try:
        schema = _with_stored_tables(schema_from_dict(doc["schema"]), doc, arrays)
        plan = resolve_plan(LogicalPlan.from_dict(doc["plan"], functions), dict(schema.items()))
        params = join_arrays(decode_floats(doc["params"]), arrays)
    except (KeyError, TypeError, ValueError) as exc:
        raise StateFormatError(f"{os.fspath(path)!r}: malformed fitted state: {exc}") from None
    if not isinstance(params, list) or len(params) != len(plan.features):
        raise StateFormatError(f"{os.fspath(path)!r}: fitted parameters do not match the plan")
    pipeline = Pipeline.__new__(Pipeline)
    pipeline.schema, pipeline.plan = schema, plan
    pipeline.sample, pipeline.name = doc.get("sample"), doc.get("name")
    pipeline.optimize = bool(doc.get("optimize", True))
    check_plan(plan, {col: spec.ltype for col, spec in schema.items()})
    _check_params_match(pipeline.optimized, params, path)
    profile = decode_floats(doc.get("profile"))
    if profile is not None and not isinstance(profile, dict):
        raise StateFormatError(f"{os.fspath(path)!r}: malformed drift profile")
    fitted = FittedPipeline(pipeline, params, profile=profile)
    if doc.get("quantization") is not None:
        fitted.quantization = Quantization.from_dict(doc["quantization"])
    return fitted


def _lookup_tables_doc(schema: Schema, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    """The fitted side tables for the state file (their arrays go to its npz part)."""
    if not isinstance(schema, JoinedSchema) or schema.tables is None:
        return {}
    tables = {name: table.to_dict() for name, table in schema.tables.items()}
    return {"lookup_tables": split_arrays(tables, arrays)}


def _with_stored_tables(schema: Schema, doc: dict[str, Any], arrays: Any) -> Schema:
    if not isinstance(schema, JoinedSchema):
        return schema
    from fastprep.data.lookup_join import LookupTable

    stored = join_arrays(doc.get("lookup_tables") or {}, arrays)
    if not isinstance(stored, dict):
        raise StateFormatError("malformed lookup tables in the fitted state")
    return schema.bind({str(n): LookupTable.from_dict(t) for n, t in stored.items()})


def _profile(prepared: execute.Prepared) -> dict[str, Any]:
    """The fit's drift reference, timed as its own report stage."""
    with prepared.report.stage("profile"):
        return drift.profile(prepared.table)


def _record_anomaly_patterns(output: execute.Output) -> None:
    """Patterns among the quarantined rows' reasons, in the report (none to look for, and
    no quarantine frame built, when no row was quarantined)."""
    if output.report.rows_quarantined:
        output.report.anomaly_patterns = alerting.anomaly_patterns(output.quarantine_reasons())


def _run_report(out: Any) -> Any:
    """The run's report object: a published output keeps it as a dict (``to_dict()``)."""
    if not isinstance(out.report, dict):
        return out.report
    from fastprep.runtime.shards import combine_reports

    return combine_reports([out.report], [], str(out.report.get("source", "")))


def _alert(
    pipeline: Pipeline, report: Any, on_alert: alerting.AlertCallback | None, phase: str,
    *more: Any,
) -> None:  # fmt: skip
    """Send the run's alerts: one per rule, every run (see :mod:`fastprep.validate.alerts`);
    ``more``: other reports of the same run, a rule in several sent once."""
    seen: set[tuple[str, str, str]] = set()
    for each in (report, *more):
        alerting.send(pipeline, each, on_alert, phase, seen)


def _check_params_match(plan: LogicalPlan, params: Any, path: str | os.PathLike[str]) -> None:
    where = os.fspath(path)
    for feature, fitted in zip(plan.features, params, strict=True):
        for item in feature.inputs:
            steps = fitted.get(item.name) if isinstance(fitted, dict) else None
            if not isinstance(steps, list) or len(steps) != len(feature.steps):
                raise StateFormatError(
                    f"{where!r}: fitted parameters of {item.name!r} do not match its steps"
                )
            for step, step_params in zip(feature.steps, steps, strict=True):
                try:
                    check_step_params(step, step_params, f"{where!r}, input {item.name!r}")
                except ValueError as exc:
                    raise StateFormatError(str(exc)) from None


def describe_rewrites(
    before: LogicalPlan, after: LogicalPlan, read: Sequence[str] | None = None
) -> list[str]:
    """One line per thing the optimizer changed, for ``explain`` (``read``: the source's
    columns read, when they are not the plan's own, e.g. lookup keys)."""
    read = after.columns if read is None else read
    lines = [f"passes: read {len(read)} column(s): {', '.join(read)}"]
    for old, new in zip(before.features, after.features, strict=True):
        for a, b in zip(old.inputs, new.inputs, strict=True):
            if a.expr != b.expr:
                lines.append(f"  folded {a.name}: {to_source(a.expr)}  ->  {to_source(b.expr)}")
        if old.steps != new.steps:
            was = " >> ".join(s.describe() for s in old.steps) or "(none)"
            now = " >> ".join(s.describe() for s in new.steps) or "(none)"
            lines.append(
                f"  simplified [{', '.join(i.name for i in new.inputs)}]: {was}  ->  {now}"
            )
    for stage in after.execution_stages():
        if stage.kind == "fused" and len(stage.features) > 1:
            names = [i.name for f in stage.features for i in after.features[f].inputs]
            lines.append(
                f"  fused {len(names)} element-wise output(s) into one kernel: {', '.join(names)}"
            )
    return lines


def physical_plan(plan: LogicalPlan, schema: Schema, run_optimizer: bool) -> LogicalPlan:
    """Attach the schema's facts and run the optimizer (deterministic: same plan, same result)."""
    annotated = replace(plan, facts=column_facts(schema))
    return optimize(annotated) if run_optimizer else annotated


def _as_feature(item: FeatureBuilder | Feature, index: int) -> Feature:
    if isinstance(item, FeatureBuilder):
        return item.build()
    if isinstance(item, Feature):
        return item
    raise PipelineDefinitionError(
        f"feature {index + 1}: expected fp.cols(...)/fp.col(...)/fp.expr(...) >> ops, got {item!r}"
    )


def _as_target(target: FeatureBuilder | str | None) -> Input | None:
    if target is None:
        return None
    if isinstance(target, str):
        return Input(target, Col(target))
    if isinstance(target, FeatureBuilder):
        if target.steps or len(target.inputs) != 1:
            raise PipelineDefinitionError(
                "target must be one column or expression without steps, e.g. "
                'fp.expr("late = arr_delay > 15")'
            )
        return target.inputs[0]
    raise PipelineDefinitionError(f"target must be a column name or fp.expr(...), got {target!r}")


def _partition_size(rows: int | None) -> dict[str, int]:
    return {} if rows is None else {"rows_per_partition": rows}


def _check_streamable(out_dtype: str, on_overflow: str) -> None:
    """Partitioned runs do not quantize or clip on overflow yet: refused before any pass."""
    if Precision(out_dtype, on_overflow).quantized or on_overflow != "raise":
        raise PipelineDefinitionError(
            f"out_dtype={out_dtype!r} with on_overflow={on_overflow!r} is not supported "
            "when the run is partitioned (over the memory budget) yet: use "
            "float32/float64/float16/bfloat16 with 'raise', or raise memory_budget="
        )


def load_pipeline_file(path: str | os.PathLike[str]) -> Pipeline:
    """Run a pipeline file (the user's own Python) and return its ``fp.Pipeline``.

    The file's variable ``pipeline`` is used; otherwise its only ``Pipeline`` instance.
    A relative ``sample=`` path is resolved against the file's folder.
    """
    return pipeline_file.load_pipeline_file(path, Pipeline)

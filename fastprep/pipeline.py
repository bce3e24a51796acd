"""``fp.Pipeline``: the declared pipeline, and ``FittedPipeline``: it plus fitted state.

A thin façade: declaring and checking a pipeline, saving and loading a fitted one; every run
is delegated to the engine (:mod:`fastprep.runtime.engine`: where it executes, then read →
validate → fit / transform → precision → alerts), which works on a
:class:`~fastprep.runtime.fitted.FittedState` that ``FittedPipeline`` wraps.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
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
from fastprep.api.schema import Schema
from fastprep.data.sources import Source
from fastprep.emit.precision import Precision
from fastprep.emit.quantize import Quantization, calibrate
from fastprep.errors import PipelineDefinitionError, StateFormatError
from fastprep.optimize.explain import explain_plan
from fastprep.plan.expr import Col
from fastprep.plan.nodes import Feature, Input, LogicalPlan
from fastprep.plan.params import check_step_params
from fastprep.planning.physical import annotated_plan, physical_plan
from fastprep.runtime import engine, execute
from fastprep.runtime.fitted import FittedState
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

__all__ = ["FittedPipeline", "Pipeline", "load", "load_pipeline_file"]


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
        client: Any = None,
        scheduler: str | None = None,
        rows_per_partition: int | None = None,
    ) -> str:
        """The plan as a tree at a named stage: ``"logical"`` (as declared) or
        ``"optimized"`` (after the passes: folded expressions, simplified steps, fused
        stages, column lifetimes), followed by what the passes changed.

        With a ``source``, also the backend the planner picks for each stage on it and why
        (it reads and validates the source); ``analyze=True`` runs fit + transform too and
        adds the measured seconds per stage next to the predictions (like EXPLAIN ANALYZE).
        The memory pre-flight comes first (rows, bytes, cardinality sketches vs
        ``memory_budget``, and what it decided); a run it would refuse is not attempted.

        For a cluster source (``client`` or ``scheduler`` given, or a path of several
        partitions of ``rows_per_partition`` rows) it shows the Dask job: its partitions, its
        passes with the statistics each collects, and each pass's predicted time from the
        planner's Dask cost model (with ``client``/``scheduler``, instead of the in-memory
        plan: the workers read the source, not this process).
        """
        if isinstance(source, str) and not any(c in source for c in "./*\\"):
            stage, source = source, None  # explain("logical"): a stage name, positionally
        if stage not in ("logical", "optimized"):
            raise PipelineDefinitionError(f"explain(stage={stage!r}): 'logical' or 'optimized'")
        logical = annotated_plan(self.plan, self.schema)
        if stage == "logical":
            return logical.tree() + describe_lookups(self.schema, logical.columns)
        optimized = self.optimized
        read = None  # with lookups: the source's columns, not the joined ones
        if isinstance(self.schema, JoinedSchema):
            read = self.schema.read_columns(optimized.columns)
        text = explain_plan(logical, optimized, read=read,
                            notes=describe_lookups(self.schema, optimized.columns))  # fmt: skip
        if source is None:
            return text
        from fastprep.runtime.explain import explain_source

        return text + "\n" + explain_source(optimized, self._fit_schema(), source, analyze=analyze,
                                            backend=backend, memory_budget=memory_budget,
                                            client=client, scheduler=scheduler,
                                            rows_per_partition=rows_per_partition)  # fmt: skip

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
        run = engine.Run(backend=backend, on_alert=on_alert, client=client,
                         rows_per_partition=rows_per_partition, memory_budget=memory_budget,
                         scheduler=scheduler, progress=progress)  # fmt: skip
        state = engine.fit(self.optimized, self.schema, source, run, name=self.name)
        return FittedPipeline._wrap(self, state)

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
        client: Any = None,
        rows_per_partition: int | None = None,
        progress: Any = False,
    ) -> tuple[FittedPipeline, Any]:
        """Like :meth:`fit_transform`, also returning the fitted pipeline (used by the CLI).

        ``memory_budget`` / ``scheduler``: as :meth:`fit`; ``output_dir`` / ``compress``:
        as :meth:`fit_transform` (an output over the budget is written, never gathered).
        ``save=False``: an in-memory result is returned unsaved (the caller writes it).
        ``client`` / ``rows_per_partition`` / ``progress``: a run on that Dask cluster, as
        :meth:`fit`'s (the output is written to ``output_dir`` shard by shard)."""
        run = engine.Run(backend=backend, precision=Precision(out_dtype, on_overflow),
                         on_alert=on_alert, memory_budget=memory_budget, scheduler=scheduler,
                         output_dir=output_dir, compress=compress, client=client,
                         rows_per_partition=rows_per_partition, progress=progress)  # fmt: skip
        return engine.fit_transform(self.optimized, self.schema, source, run,
                                    name=self.name,
                                    wrap=lambda state: FittedPipeline._wrap(self, state),
                                    save=save)  # fmt: skip

    def _fit_schema(self) -> Schema:
        """The schema a fit runs with: with lookups, bound to the side tables, read afresh
        by each fit (the fitted state keeps them)."""
        return engine.with_side_tables(self.schema, self.optimized)

    def transform(self, source: Source, **_: Any) -> execute.Output:
        raise PipelineDefinitionError(
            "this pipeline is not fitted: call pipeline.fit(source) first, "
            "or pipeline.fit_transform(source)"
        )


class FittedPipeline:
    """A pipeline with its fitted statistics; transforms new data the same way every time.

    It wraps a :class:`~fastprep.runtime.fitted.FittedState` (``.state``), which the run
    engine, ``batches`` and the torch dataset consume; ``params``, ``backend``,
    ``fit_report``, ``profile`` and ``quantization`` read and write that state."""

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
        self.state = FittedState(pipeline.optimized, pipeline.schema, params, backend,
                                 fit_report, profile, name=pipeline.name)  # fmt: skip

    @classmethod
    def _wrap(cls, pipeline: Pipeline, state: FittedState) -> FittedPipeline:
        fitted = cls.__new__(cls)
        fitted.pipeline, fitted.state = pipeline, state
        return fitted

    @property
    def plan(self) -> LogicalPlan:
        """The plan that runs (optimized unless the pipeline says ``optimize=False``)."""
        return self.state.plan

    @property
    def schema(self) -> Schema:
        return self.state.schema

    @property
    def params(self) -> execute.Params:
        return self.state.params

    @params.setter
    def params(self, params: execute.Params) -> None:
        self.state.params = params

    @property
    def backend(self) -> str:
        return self.state.backend

    @backend.setter
    def backend(self, backend: str) -> None:
        self.state.backend = backend

    @property
    def fit_report(self) -> Any:
        return self.state.fit_report

    @fit_report.setter
    def fit_report(self, report: Any) -> None:
        self.state.fit_report = report

    @property
    def profile(self) -> dict[str, Any] | None:
        """Per input column at fit: null rate, mean/std or vocabulary (drift reference)."""
        return self.state.profile

    @profile.setter
    def profile(self, profile: dict[str, Any] | None) -> None:
        self.state.profile = profile

    @property
    def quantization(self) -> Quantization | None:
        """Per-column int8/uint8 scale and zero point (``calibrate_quantization``), or None."""
        return self.state.quantization

    @quantization.setter
    def quantization(self, quantization: Quantization | None) -> None:
        self.state.quantization = quantization

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
        options = dict(distributed_options)
        compress, publish = options.pop("compress", None), options.pop("pipeline", None)
        run = engine.Run(backend=backend, precision=Precision(out_dtype, on_overflow),
                         on_alert=on_alert, client=client, output_dir=output_dir,
                         rows_per_partition=rows_per_partition, memory_budget=memory_budget,
                         scheduler=scheduler, compress=compress)  # fmt: skip
        return engine.transform(self.state, source, run, drift_thresholds=drift_thresholds,
                                publish=publish, cluster_options=options)  # fmt: skip

    def calibrate_quantization(
        self, source: Source, dtype: str = "uint8", *, backend: str | None = None
    ) -> FittedPipeline:
        """Learn each output column's int8/uint8 scale and zero point from ``source``'s
        transformed rows (dense output only); kept in the fitted state, so that
        ``transform(..., out_dtype=dtype)`` quantizes every later source the same way."""
        out = engine.transform(self.state, source, engine.Run(backend=backend), alert=False)
        self.quantization = calibrate(out.X, dtype)
        return self

    def batches(self, source: Source, **options: Any) -> Any:
        """``(X_batch, y_batch)`` streamed over ``source``'s partitions, never the whole matrix.

        Options: ``batch_size=1024, shuffle=False, seed=0, drop_last=False, epoch=0,
        rows_per_partition, out_dtype, on_overflow, backend, pool_size, return_row_ids,
        on_alert``; the returned :class:`fastprep.runtime.batches.BatchStream` has ``.stats`` after
        a pass (its findings totalled over the partitions; alerts sent once at its end)."""
        from fastprep.runtime.batches import BatchStream

        return BatchStream(self.state, source, **options)

    def write_shards(
        self, source: Source, folder: str | os.PathLike[str], *,
        compress: str | bool | None = None, **options: Any,
    ) -> Any:  # fmt: skip
        """Transform ``source`` partition by partition into memory-mappable ``.npy`` shards
        (one per partition; never the whole matrix in memory), published atomically like
        :meth:`Output.save`; open with ``fp.open_output``. Options as :meth:`batches`
        (``rows_per_partition``, ``out_dtype``, ...); returns the
        :class:`~fastprep.runtime.batches.BatchStats` of the pass."""
        return engine.write_shards(self.state, source, folder, compress=compress, publish=self,
                                   **options)  # fmt: skip

    def torch_dataset(self, source: Source, **options: Any) -> Any:
        """A ``torch.utils.data.IterableDataset`` over :meth:`batches` (``fastprep[torch]``);
        each pass is a new epoch (reshuffled when ``shuffle=True``)."""
        from fastprep.runtime.torch_batches import BatchDataset

        return BatchDataset(self.state, source, **options)

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
    except PipelineDefinitionError as exc:  # e.g. an fp.Map's function, not passed
        raise StateFormatError(f"{os.fspath(path)!r}: {exc}") from None
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


def load_pipeline_file(path: str | os.PathLike[str]) -> Pipeline:
    """Run a pipeline file (the user's own Python) and return its ``fp.Pipeline``.

    The file's variable ``pipeline`` is used; otherwise its only ``Pipeline`` instance.
    A relative ``sample=`` path is resolved against the file's folder.
    """
    return pipeline_file.load_pipeline_file(path, Pipeline)

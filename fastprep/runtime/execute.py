"""Orchestration: read (column-pruned) → validate → fit / transform → emit, with a report."""

from __future__ import annotations

import gc
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from fastprep.api.lookup import JoinedSchema
from fastprep.api.schema import Schema
from fastprep.backends import stages as stage_backends
from fastprep.backends.reference import backend as reference
from fastprep.backends.reference.tags import check_usage as check_tag_usage
from fastprep.backends.registry import resolve
from fastprep.data import reuse
from fastprep.data.columns import FitTarget, RowIds, RowRange, Table
from fastprep.data.sources import (
    Raw,
    Source,
    is_path,
    raw_columns,
    raw_len,
    read_source,
    source_columns,
)
from fastprep.emit import OutputSink, frames, make_layout
from fastprep.emit.csr import CsrArrays, is_csr
from fastprep.emit.precision import Precision, cast_dense, cast_sparse_data
from fastprep.emit.quantize import Quantization, quantize
from fastprep.errors import FitError, PipelineDefinitionError, Reason
from fastprep.plan.dtypes import LType
from fastprep.plan.nodes import LogicalPlan
from fastprep.planning import planner
from fastprep.runtime.fitted import Params
from fastprep.runtime.report import Report
from fastprep.storage.files import write_output
from fastprep.validate import Quarantine, validate_frame
from fastprep.validate.findings import make_finding, merge_findings
from fastprep.validate.table_checks import unexpected_column_findings

if TYPE_CHECKING:
    import pandas as pd
    import scipy.sparse as sp

log = logging.getLogger("fastprep")


@dataclass
class Output:
    """Training-ready output; see the README's output contract."""

    #: X as the run made it: a dense array, or CSR (see ``X``)
    matrix: np.ndarray | sp.csr_matrix | CsrArrays
    y: np.ndarray | None
    feature_names: Sequence[str]
    report: Report
    #: the rejected rows (a frame, or a function building it on first access)
    quarantine_rows: pd.DataFrame | Callable[[], pd.DataFrame]
    #: the row ids, or a range of them materialized on first access (see ``row_ids``)
    row_ids_source: RowIds
    #: the requested ``out_dtype``; "bfloat16" X holds uint16 bit patterns
    out_dtype: str = "float32"

    @property
    def X(self) -> np.ndarray | sp.csr_matrix:
        """The features: a dense array, or a scipy CSR matrix (made over the run's CSR
        arrays on first access: a job that only writes them never imports scipy)."""
        if isinstance(self.matrix, CsrArrays):
            self.matrix = self.matrix.to_scipy()
        return self.matrix

    @X.setter
    def X(self, X: np.ndarray | sp.csr_matrix | CsrArrays) -> None:
        self.matrix = X

    @property
    def row_ids(self) -> np.ndarray:
        """The source position of each row of X (read-only). A run that kept a contiguous
        range of rows builds the array on first access, not during the run."""
        ids = self.row_ids_source
        if isinstance(ids, RowRange):
            ids = ids.materialize()
        elif ids.flags.writeable:
            # a read-only view, whichever way the run built the ids (a mask over the
            # range, a concatenation of partitions): writing through it would silently
            # detach X from its source rows
            ids = ids.view()
            ids.flags.writeable = False
        self.row_ids_source = ids
        return ids

    @row_ids.setter
    def row_ids(self, ids: np.ndarray) -> None:
        self.row_ids_source = ids

    @property
    def quarantine(self) -> pd.DataFrame:
        """The rejected rows as read plus ``row_id`` and ``reason``. For a DataFrame
        source it is gathered on first access (taking rows of Arrow text columns cost ~0.1 s
        at 3.4M rows, paid by every run whether or not the rows were looked at)."""
        if callable(self.quarantine_rows):
            self.quarantine_rows = self.quarantine_rows()
        return self.quarantine_rows

    @quarantine.setter
    def quarantine(self, frame: pd.DataFrame) -> None:
        self.quarantine_rows = frame

    def detach_quarantine(self) -> None:
        """Build a deferred quarantine now and let go of the source rows it was deferred
        over: the output then holds only its rejected rows (what a Dask task's output,
        pickled to the client, should carry; not the whole partition as read)."""
        rows = self.quarantine_rows
        if isinstance(rows, _DeferredQuarantine):
            built = rows.rows_to_write()
            self.quarantine_rows = _ArrowQuarantine(built) if isinstance(built, pa.Table) else built

    def quarantine_reasons(self) -> pd.DataFrame:
        """``row_id`` and ``reason`` of the rejected rows, without gathering the rows."""
        if isinstance(self.quarantine_rows, (_DeferredQuarantine, _ArrowQuarantine)):
            return self.quarantine_rows.reasons()
        return self.quarantine_rows[["row_id", "reason"]]

    def quarantine_reason_texts(self) -> list[str]:
        """Each rejected row's reason, without the rows (nor pandas, for a file source)."""
        rows = self.quarantine_rows
        if isinstance(rows, _ArrowQuarantine):
            return rows.table.column("reason").to_pylist()
        if isinstance(rows, _DeferredQuarantine):  # not gathered yet: from the findings
            return rows.reason_texts()
        return self.quarantine_reasons()["reason"].tolist()

    def to_torch(self, device: str = "cpu") -> tuple[Any, Any]:
        """``(X, y)`` as torch tensors (dense: zero-copy; CSR: ``torch.sparse_csr_tensor``).

        Needs ``pip install fastprep[torch]``; ``device="cuda"`` falls back to CPU with a
        warning when no GPU is available.
        """
        from fastprep.emit.tensors import to_tensors

        return to_tensors(self.X, self.y, self.out_dtype, device)

    def save(
        self,
        folder: str | os.PathLike[str],
        *,
        compress: str | bool | None = None,
        pipeline: Any = None,
    ) -> dict[str, str]:
        """Write X (CSR as data/indices/indptr), y, row_ids, the quarantine, the report
        (and ``pipeline``, a fitted pipeline) as ``.npy``/Parquet/JSON files published by
        one ``manifest.json``: a killed write leaves the folder's earlier output intact.
        ``compress="zstd"|"lz4"`` compresses the arrays. Open with ``fp.open_output``;
        returns name -> path."""
        return write_output(
            folder, self.matrix, self.y, self.feature_names, self.report.to_dict(),
            self.quarantine_to_write(), self.row_ids, out_dtype=self.out_dtype,
            compress=compress, pipeline=pipeline,
        )  # fmt: skip

    def quarantine_to_write(self) -> Any:
        """The rejected rows as the output format's writer takes them: an Arrow table for
        a file source (written without pandas), a function building them (the writer calls
        it on its background thread, beside the arrays' writes), or the frame."""
        rows = self.quarantine_rows
        if isinstance(rows, _ArrowQuarantine):
            return rows.table
        if isinstance(rows, _DeferredQuarantine):
            return rows.rows_to_write
        return rows

    def save_shards(self, folder: str | os.PathLike[str]) -> str:
        """The same folder as :meth:`save` (kept for callers of the shard API); returns
        the manifest's path."""
        self.save(folder)
        return os.path.join(os.fspath(folder), "manifest.json")

    def to_pandas(
        self, target: str | None = None, *, sparse: bool = False, copy: bool = True
    ) -> pd.DataFrame:
        """Dense X as a pandas DataFrame: one column per feature name, X's dtype (float32
        by default; bfloat16 widened to float32), ``row_ids`` as the index (named
        ``row_id``). ``target="late"`` adds y as a last column of that name.

        A CSR X raises :class:`fastprep.errors.SparseOutputError` naming the sparse blocks;
        ``sparse=True`` gives a pandas sparse frame instead (``pd.DataFrame.sparse``, one
        ``SparseArray`` per column: slow for very wide X). ``copy=False`` shares X's memory
        with the frame (a change to one shows in the other).
        """
        return frames.to_pandas(
            self.X, self.y, self.feature_names, self.row_ids, out_dtype=self.out_dtype,
            target=target, sparse=sparse, copy=copy,
        )  # fmt: skip

    def to_polars(self, target: str | None = None, *, row_ids: bool = False) -> Any:
        """Dense X as a Polars DataFrame: one column per feature name, X's dtype.
        ``target="late"`` adds y as a last column, ``row_ids=True`` a first ``row_id``
        column (Polars has no index). A CSR X raises
        :class:`fastprep.errors.SparseOutputError` (Polars has no sparse columns)."""
        return frames.to_polars(
            self.X, self.y, self.feature_names, self.row_ids, out_dtype=self.out_dtype,
            target=target, row_ids_column=row_ids,
        )  # fmt: skip


@dataclass
class Prepared:
    """A source read and validated once, ready to fit and/or transform."""

    table: Table
    #: the columns as read (a pyarrow Table, or a pandas source's DataFrame): what the
    #: quarantine's rows are taken from
    raw: Raw
    quarantine: Quarantine
    report: Report
    #: the target over ``table``'s rows, evaluated once in ``prepare``; None without a
    #: target, or when a transform source has no target column (inference)
    y: np.ndarray | None = None
    #: row id of ``raw``'s first row (non-zero for a partition of a larger source)
    row_offset: int = 0
    #: the row ids of ``raw``'s first rows when it holds only some of the source's rows
    #: (those quarantined, of a partition kept in memory: see ``runtime/kept_rows``)
    raw_ids: np.ndarray | None = None
    #: the backend per stage (planner choices with measured times) and the name asked for
    choices: list[Any] | None = None
    choices_for: str | None = None
    #: the source was the caller's table in memory (its quarantine rows may be gathered
    #: lazily: they are alive anyway)
    source_is_frame: bool = False


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector during an in-memory run (reference counting
    still frees every array at once; only cycles wait until the run ends).

    Why: a run allocates tens of thousands of small container objects (plan nodes,
    generated source, pandas column objects) while the process holds hundreds of thousands
    of long-lived ones (pandas, pyarrow, numba): the collections those allocations trigger
    scanned the whole heap and took ~13 of 78 ms at 3.3M rows (flights numeric part,
    in-process A/B over 20 alternating runs). Nothing changes when the collector is
    already disabled, or with ``FASTPREP_PAUSE_GC=0``; a run on Dask workers is not paused
    (its client's event loop runs for long and makes cycles)."""
    if not gc.isenabled() or os.environ.get("FASTPREP_PAUSE_GC") == "0":
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def prepare(
    plan: LogicalPlan,
    schema: Schema,
    source: Source,
    *,
    phase: str,
    backend: str,
    row_offset: int = 0,
) -> Prepared:
    """Read only the columns ``plan`` uses, then validate them against ``schema``.

    At transform, a source without the target's columns (new data to predict on) is
    transformed without the target: ``y`` is None and the report says so. ``row_offset``
    is the row id of the source's first row, for one partition of a larger source.
    """
    info = resolve(backend)
    # the helper paths a report names are those this run takes, not an earlier run's
    planner.PATHS.clear()
    report = Report(backend="auto" if backend == "auto" else info.name)
    # at transform the target's own columns are read if the source has them (the read
    # tells, without a second look at the source)
    target_only = _target_only(plan) if phase == "transform" else []
    columns = schema.read_columns(plan.columns)  # + key columns, for uniqueness
    target_only = [c for c in target_only if c in columns]  # not a lookup's (joined) column
    text = [c for c in columns if schema[c].ltype in (LType.CATEGORY, LType.STRING)]
    with report.stage("read"):
        raw, source_info = read_source(source, columns, text, optional=target_only)
        if any(c not in raw_columns(raw) for c in target_only):
            plan = replace(plan, target=None)
            report.notes.append("the source has no target column(s): transformed without y")
            columns = schema.read_columns(plan.columns)
            raw = _only(raw, columns)
        present = source_info.columns  # as the read saw them (no second footer read)
        present = list(present) if present is not None else source_columns(source)
        unexpected = unexpected_column_findings(schema, present, phase)
    report.source = source_info.description
    # an in-memory source validated again (fit then transform of one table) reuses the
    # text columns' encodings while the caller holds it (see data/reuse.py)
    with report.stage("validate"), reuse.scope(None if is_path(source) else source):
        ids = RowRange(row_offset, raw_len(raw))
        result = validate_frame(raw, schema, columns, phase=phase, row_ids=ids)
    if isinstance(schema, JoinedSchema):  # lookup columns: joined onto the validated rows
        from fastprep.runtime.lookups import join_lookups

        with report.stage("join"):
            join_lookups(result.table, schema, plan.columns)
    check_tag_usage(plan, result.table)  # a text column whose source holds lists: tags
    report.rows_in = result.rows_in
    report.findings.extend(unexpected + result.findings)
    report.text_encoding = result.text_encoding
    prepared = Prepared(
        result.table, raw, result.quarantine, report, row_offset=row_offset,
        source_is_frame=not is_path(source),
    )  # fmt: skip
    if plan.target is not None:
        _quarantine_missing_target(plan, prepared, backend)
        if phase == "fit" and needs_target(plan):
            prepared.table.fit_target = fit_target(plan, schema, prepared.table)
    return prepared


def for_transform(prepared: Prepared) -> Prepared:
    """Rows read and validated by a fit (``prepare(phase="fit")``), ready to transform as
    if read and validated again for it: the same table, quarantine and ``y``; the report a
    transform's validation gives (its findings, not the fit-only warnings; no stage
    times: nothing was read or validated); no fit target, so a target-fitted step
    encodes these rows as any rows (a fit_transform's own rows get theirs from its
    cross-fit). ``prepared`` itself is used up: transforming drops columns from its table."""
    from fastprep.validate.findings import at_transform

    planner.PATHS.clear()
    report = prepared.report
    fresh = Report(
        source=report.source, backend=report.backend, rows_in=report.rows_in,
        findings=at_transform(report.findings), notes=list(report.notes),
        text_encoding={k: dict(v) for k, v in report.text_encoding.items()},
    )  # fmt: skip
    prepared.table.fit_target = None
    return replace(prepared, report=fresh, choices=None, choices_for=None)


def needs_target(plan: LogicalPlan) -> bool:
    """Some step is fitted against the target (target encoding)."""
    return any(getattr(s, "needs_target", False) for f in plan.features for s in f.steps)


def fit_target(plan: LogicalPlan, schema: Schema, table: Table) -> FitTarget:
    """The target over the fit's rows in float64 (not ``y``'s float32: a step fitted on
    it averages the values as given), and whether it is binary (a ``Bool`` target)."""
    from fastprep.api.check import infer_type

    assert plan.target is not None
    types = {name: spec.ltype for name, spec in schema.items()}
    binary = infer_type(plan.target.expr, types, f"target {plan.target.name!r}") == LType.BOOL
    values = reference.input_values(plan.target, table, reference.Repairs())
    return FitTarget(np.asarray(values, dtype=np.float64), binary)


def without_absent_target(plan: LogicalPlan, schema: Schema, source: Source) -> LogicalPlan:
    """``plan`` without its target when ``source`` lacks a column only the target reads
    (new rows to predict on), as a transform's read decides for one table; for a run that
    reads the source partition by partition (batches, shards), decided once for all."""
    target_only = [c for c in _target_only(plan) if c in schema.read_columns(plan.columns)]
    present = source_columns(source) if target_only else None
    if present is not None and any(c not in present for c in target_only):
        return replace(plan, target=None)
    return plan


def _target_only(plan: LogicalPlan) -> list[str]:
    """The columns only the target reads (a source without one of them has no target)."""
    if plan.target is None:
        return []
    feature_columns = {c for f in plan.features for c in f.columns}
    return [c for c in plan.target.columns if c not in feature_columns]


def _only(raw: Raw, columns: list[str]) -> Raw:
    """``raw`` without the columns not in ``columns`` (a target's, read but unused)."""
    extra = [c for c in raw_columns(raw) if c not in columns]
    if not extra:
        return raw
    return raw.drop_columns(extra) if isinstance(raw, pa.Table) else raw.drop(columns=extra)


def _quarantine_missing_target(plan: LogicalPlan, prepared: Prepared, backend: str) -> None:
    """The target (float32, what ``y`` will hold); rows where it is missing, undefined or
    beyond float32's range go to the quarantine."""
    assert plan.target is not None
    y, bad = stage_backends.target_values(plan, prepared.table, backend)
    if bad is not None:
        name = plan.target.name
        table = prepared.table
        prepared.report.findings.append(
            make_finding(name, Reason.NONFINITE_TARGET.value, bad, table.row_ids, "quarantine",
                         detail="(target is missing or not finite)")
        )  # fmt: skip
        prepared.quarantine.add(table.row_ids[bad], f"target {name}: missing or not finite")
        prepared.table = table.take(~bad)
        y = y[~bad]
    prepared.y = y


def fit_prepared(plan: LogicalPlan, prepared: Prepared, backend: str = "auto") -> Params:
    """Fit every stage's features on the validated rows (on the backend each stage got)."""
    choices = _stage_choices(plan, prepared, backend)
    params: dict[int, Any] = {}
    log = reference.Repairs()
    with prepared.report.stage("fit"), _why_no_rows(prepared):
        for number, stage in enumerate(plan.execution_stages()):
            with stage_backends.timed(choices, number, "fit") as module:
                params.update(module.fit_stage(plan, stage, prepared.table, log))
    _move_compile_time(prepared.report, "fit", log)
    _record_choices(prepared, choices)
    return [params[i] for i in range(len(plan.features))]


@contextmanager
def _why_no_rows(prepared: Prepared) -> Iterator[None]:
    """A statistic that found no rows because validation set every row aside: the
    :class:`FitError` says so and names the rules (the step alone would say "no values")."""
    try:
        yield
    except FitError as exc:
        report = prepared.report
        if prepared.table.n_rows or not report.rows_in:
            raise
        found = [f for f in merge_findings(report.findings) if f.action == "quarantine"]
        rules = "; ".join(f.message() for f in found) or "(no finding recorded)"
        raise FitError(
            f"{exc}: all {report.rows_in:,} rows of the input were quarantined, none is left "
            f"to fit on: {rules}"
        ) from exc


def _move_compile_time(report: Report, stage: str, log: reference.Repairs) -> None:
    """Report one-time JIT compilation apart from the run time of the stage it happened in."""
    if not log.compiled:
        return
    seconds = sum(event["seconds"] for event in log.compiled)
    report.stages[stage] -= seconds
    report.stages["compile"] = report.stages.get("compile", 0.0) + seconds
    report.kernels.extend(log.compiled)


def snapshot_fit_report(prepared: Prepared) -> Report:
    """The fit's own report: rows used for fitting vs quarantined, findings, stage times."""
    report = prepared.report
    fit_report = Report(
        source=report.source,
        backend=report.backend,
        rows_in=report.rows_in,
        rows_out=prepared.table.n_rows,
        rows_quarantined=len(prepared.quarantine),
        findings=list(report.findings),
        stages=dict(report.stages),
        kernels=list(report.kernels),
        text_encoding=dict(report.text_encoding),
        plan=list(report.plan),
    )
    fit_report.check_accounting()
    return fit_report


def transform_prepared(
    plan: LogicalPlan,
    params: Params,
    prepared: Prepared,
    dtype: Any = np.float32,
    backend: str = "auto",
    *,
    defer_quarantine: bool = False,
) -> Output:
    """Run every stage into one preallocated output, quarantine non-finite rows, emit X and y.
    ``defer_quarantine``: the output is saved next, which builds the quarantine's rows (on
    the writer's background thread, beside the arrays' writes) instead of the run, and
    writes a CSR X's entries block by block as they are made (``X`` is made on access)."""
    choices = _stage_choices(plan, prepared, backend)
    report, table, quarantine = prepared.report, prepared.table, prepared.quarantine
    repairs = reference.Repairs()
    layout = make_layout(plan, params)
    y = prepared.y
    with report.stage("transform"):
        sink = OutputSink(layout, table.n_rows, dtype)
        checked: set[int] = set()
        for number, stage in enumerate(plan.execution_stages()):
            with stage_backends.timed(choices, number, "transform") as module:
                checked |= module.run_stage(plan, stage, params, table, sink, repairs)
            for column in _released(plan, number):
                table.drop(column)  # its last consumer has run
        keep = _quarantine_non_finite(plan, sink, checked, table, quarantine, report)
    with report.stage("emit"):
        X = sink.finish(keep, deferred=defer_quarantine)
        row_ids = table.row_ids if keep is None else table.row_ids[keep]
        if y is not None:
            y = (y if keep is None else y[keep]).astype(np.float32, copy=False)
    _move_compile_time(report, "transform", repairs)
    _record_choices(prepared, choices)
    planner.note_measured(choices, table.n_rows)  # a fit + transform teaches pandas' rates
    report.repairs = [
        {"output": output, "rule": rule, "count": count, "action": "set_missing"}
        for (output, rule), count in repairs.counts.items()
    ]
    report.rows_out = len(row_ids)
    report.rows_quarantined = len(quarantine)
    report.output = describe_output(X)
    report.check_accounting()
    names = layout.names(plan, params)
    quarantine_rows = _quarantine_rows(prepared, defer_quarantine)
    return Output(X, y, names, report, quarantine_rows, row_ids)


def _quarantine_rows(
    prepared: Prepared, defer: bool = False
) -> pd.DataFrame | Callable[[], pd.DataFrame]:
    """Eager for a file source (its rows would otherwise be kept alive by the output)
    unless ``defer`` (the output is saved at once, which builds it); deferred for a
    caller's table (a pandas frame over a shallow copy: copy-on-write protects it from
    later changes to the caller's frame; Arrow data is immutable), and for an empty
    quarantine."""
    quarantine, offset, raw = prepared.quarantine, prepared.row_offset, prepared.raw
    ids = prepared.raw_ids
    if len(quarantine) == 0:  # nothing to keep alive: built (empty) when asked, ~3 ms saved
        return _DeferredQuarantine(quarantine, raw.slice(0, 0) if isinstance(raw, pa.Table)
                                   else raw.iloc[:0], offset)  # fmt: skip
    if not prepared.source_is_frame and not defer:
        table = quarantine.to_arrow(raw, offset, ids) if isinstance(raw, pa.Table) else None
        if table is None:
            return quarantine.to_frame(raw, offset, ids)
        return _ArrowQuarantine(table)
    return _DeferredQuarantine(
        quarantine, raw if isinstance(raw, pa.Table) else raw.copy(deep=False), offset, ids
    )


class _ArrowQuarantine:
    """The quarantine of a file source as an Arrow table (gathered without pandas, so a
    job writing it needs none); the pandas frame is made when first asked for."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table

    def __call__(self) -> pd.DataFrame:
        return self.table.to_pandas()

    def reasons(self) -> pd.DataFrame:
        return self.table.select(["row_id", "reason"]).to_pandas()


class _DeferredQuarantine:
    """Builds the quarantine frame when first asked for (see ``Output.quarantine``)."""

    def __init__(
        self, quarantine: Quarantine, raw: Raw, offset: int, ids: np.ndarray | None = None
    ) -> None:
        self._quarantine, self._raw, self._offset, self._ids = quarantine, raw, offset, ids

    def __call__(self) -> pd.DataFrame:
        return self._quarantine.to_frame(self._raw, self._offset, self._ids)

    def reason_texts(self) -> list[str]:
        return [str(reason) for reason in self._quarantine.reason_arrays()[1]]

    def rows_to_write(self) -> Any:
        """The rows for the output's Parquet file: an Arrow table when the source is one
        (no pandas needed), else the frame."""
        table = None
        if isinstance(self._raw, pa.Table):
            table = self._quarantine.to_arrow(self._raw, self._offset, self._ids)
        return self() if table is None else table

    def reasons(self) -> pd.DataFrame:
        import pandas as pd

        reasons = self._quarantine.reasons()
        return pd.DataFrame(
            {"row_id": reasons.index.to_numpy(), "reason": pd.array(reasons, dtype="str")}
        )


def _stage_choices(plan: LogicalPlan, prepared: Prepared, backend: str) -> list[Any]:
    """The planner's choices for these rows, made once per prepared source (a fit_transform
    runs both phases on the same backends)."""
    if prepared.choices is None or prepared.choices_for != backend:
        prepared.choices = stage_backends.choose_stage_backends(plan, prepared.table, backend)
        prepared.choices_for = backend
        planner.note_run(prepared.choices)  # a run, not an explain: the ledger counts it
    return prepared.choices


def _record_choices(prepared: Prepared, choices: list[Any]) -> None:
    prepared.report.plan = [choice.to_dict() for choice in choices]
    prepared.report.backend = stage_backends.describe(choices, prepared.choices_for or "auto")


def apply_precision(
    output: Output, precision: Precision, quantization: Quantization | None = None
) -> Output:
    """Narrow X to float16/bfloat16 (checked; see :mod:`fastprep.emit.precision`) or
    quantize it to int8/uint8 with the fitted ``quantization``, in place of ``output``;
    float32/float64 were computed in their own type and pass through."""
    output.out_dtype = precision.out_dtype
    if not (precision.narrow or precision.quantized):
        return output
    X = output.matrix
    with output.report.stage("cast"):
        if precision.quantized:
            if quantization is None or quantization.dtype != precision.out_dtype:
                raise PipelineDefinitionError(
                    f"out_dtype={precision.out_dtype!r} needs fitted quantization parameters: "
                    f"call fitted.calibrate_quantization(source, dtype={precision.out_dtype!r})"
                )
            X, info = quantize(output.X, quantization, output.feature_names)
        elif is_csr(X):
            data, info = cast_sparse_data(
                X.data, X.indices, X.shape[1], precision, output.feature_names
            )
            X = CsrArrays(data, X.indices, X.indptr, X.shape)
        else:
            X, info = cast_dense(X, precision, output.feature_names)
    output.X = X
    output.report.precision = info
    output.report.output = {**describe_output(X), "dtype": precision.out_dtype}
    return output


def _released(plan: LogicalPlan, stage_number: int) -> tuple[str, ...]:
    return plan.release[stage_number] if plan.release is not None else ()


def _quarantine_non_finite(
    plan: LogicalPlan,
    sink: OutputSink,
    checked: set[int],
    table: Table,
    quarantine: Quarantine,
    report: Report,
) -> np.ndarray | None:
    """Rows whose output would hold NaN/inf leave for the quarantine, named per feature."""
    # made when a row is found: a mask of every row (zeroed pages read by ``any()``)
    # cost ~1 ms a call at 3.4M rows where nothing is ever bad
    bad_any: np.ndarray | None = None
    for feature_index, bad_rows in sink.bad_rows(skip=checked).items():
        feature = plan.features[feature_index]
        view = sink.numeric_view(feature_index)
        for j, item in enumerate(feature.inputs):
            bad = bad_rows & ~np.isfinite(view[:, j])
            if not bad.any():
                continue
            bad_any = bad if bad_any is None else bad_any | bad
            report.findings.append(
                make_finding(item.name, Reason.NONFINITE_FEATURE.value, bad, table.row_ids,
                             "quarantine",
                             detail="(missing or infinite after all steps; add fp.FillMissing)")
            )  # fmt: skip
            quarantine.add(table.row_ids[bad], f"feature {item.name}: missing or not finite")
    for name, bad in sink.bad_sparse_rows().items():  # e.g. a hashed number that is ±inf
        bad_any = bad if bad_any is None else bad_any | bad
        report.findings.append(
            make_finding(name, Reason.NONFINITE_FEATURE.value, bad, table.row_ids, "quarantine",
                         detail="(a hashed value is infinite or beyond float32)")
        )  # fmt: skip
        quarantine.add(table.row_ids[bad], f"feature {name}: not finite")
    return None if bad_any is None else ~bad_any


def describe_output(X: np.ndarray | sp.csr_matrix) -> dict[str, Any]:
    """``report.output``: X's shape, layout and dtype (and ``nnz`` for CSR)."""
    if is_csr(X):
        return {"shape": list(X.shape), "layout": "csr", "dtype": str(X.dtype), "nnz": int(X.nnz)}
    # no nnz for a dense X: counting it was a full extra pass over the output (7 ms at
    # 3.4M x 4), for a figure that only means something for a sparse one
    return {"shape": list(X.shape), "layout": "dense", "dtype": str(X.dtype)}

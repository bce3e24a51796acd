"""Orchestration: read (column-pruned) → validate → fit / transform → emit, with a report."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from fastprep.backends import pandas_ as reference
from fastprep.backends.registry import resolve
from fastprep.columns import Table
from fastprep.emit import assemble
from fastprep.emit.blocks import Block, NumericBlock
from fastprep.emit.files import write_output
from fastprep.errors import Reason
from fastprep.io import Source, read_source
from fastprep.plan.dtypes import LType
from fastprep.plan.nodes import LogicalPlan
from fastprep.report import Report
from fastprep.schema import Schema
from fastprep.validate import Quarantine, validate_frame
from fastprep.validate.findings import make_finding

log = logging.getLogger("fastprep")
Params = list[dict[str, list[dict[str, Any]]]]


@dataclass
class Output:
    """Training-ready output; see the README's output contract."""

    X: np.ndarray | sp.csr_matrix
    y: np.ndarray | None
    feature_names: list[str]
    report: Report
    quarantine: pd.DataFrame
    row_ids: np.ndarray

    def save(self, folder: str | os.PathLike[str]) -> dict[str, str]:
        """Write X.npz/X.npy, y.npy, row_ids.npy, feature_names.json, report.json, quarantine.parquet."""
        return write_output(
            folder, self.X, self.y, self.feature_names, self.report.to_dict(),
            self.quarantine, self.row_ids,
        )  # fmt: skip


@dataclass
class Prepared:
    """A source read and validated once, ready to fit and/or transform."""

    table: Table
    raw: pd.DataFrame
    quarantine: Quarantine
    report: Report


def prepare(
    plan: LogicalPlan, schema: Schema, source: Source, *, phase: str, backend: str
) -> Prepared:
    """Read only the columns ``plan`` uses, then validate them against ``schema``."""
    info = resolve(backend)
    report = Report(backend=info.name)
    columns = plan.columns
    text = [c for c in columns if schema[c].ltype in (LType.CATEGORY, LType.STRING)]
    with report.stage("read"):
        raw, source_info = read_source(source, columns, text)
    report.source = source_info.description
    with report.stage("validate"):
        result = validate_frame(raw, schema, columns, phase=phase)
    report.rows_in = result.rows_in
    report.findings.extend(result.findings)
    prepared = Prepared(result.table, raw, result.quarantine, report)
    if plan.target is not None:
        _quarantine_missing_target(plan, prepared)
    return prepared


def _quarantine_missing_target(plan: LogicalPlan, prepared: Prepared) -> None:
    assert plan.target is not None
    repairs = reference.Repairs()
    y = reference.input_values(plan.target, prepared.table, repairs)
    bad = ~np.isfinite(y)
    if bad.any():
        name = plan.target.name
        table = prepared.table
        prepared.report.findings.append(
            make_finding(name, Reason.NONFINITE_TARGET.value, bad, table.row_ids, "quarantine",
                         detail="(target is missing or not finite)")
        )  # fmt: skip
        prepared.quarantine.add(table.row_ids[bad], f"target {name}: missing or not finite")
        prepared.table = table.take(~bad)


def fit_prepared(plan: LogicalPlan, prepared: Prepared) -> Params:
    """Fit every feature's steps on the validated rows."""
    with prepared.report.stage("fit"):
        return [reference.fit_feature(feature, prepared.table) for feature in plan.features]


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
    )
    fit_report.check_accounting()
    return fit_report


def transform_prepared(
    plan: LogicalPlan, params: Params, prepared: Prepared, dtype: Any = np.float32
) -> Output:
    """Compute every block, quarantine rows with a non-finite value, emit X and y."""
    report, table, quarantine = prepared.report, prepared.table, prepared.quarantine
    repairs = reference.Repairs()
    with report.stage("transform"):
        blocks = [
            reference.transform_feature(feature, fitted, table, repairs)
            for feature, fitted in zip(plan.features, params)
        ]
        y = None
        if plan.target is not None:
            y = reference.input_values(plan.target, table, repairs)
        keep = _quarantine_non_finite(blocks, table, quarantine, report)
        if keep is not None:
            blocks = [block.take(keep) for block in blocks]
            table = table.take(keep)
            y = None if y is None else y[keep]
    with report.stage("emit"):
        X, names = assemble(blocks, table.n_rows, dtype)
        y_out = None if y is None else y.astype(np.float32)
    report.repairs = [
        {"output": output, "rule": rule, "count": count, "action": "set_missing"}
        for (output, rule), count in repairs.counts.items()
    ]
    report.rows_out = table.n_rows
    report.rows_quarantined = len(quarantine)
    report.output = _describe(X)
    report.check_accounting()
    return Output(X, y_out, names, report, quarantine.to_frame(prepared.raw), table.row_ids)


def _quarantine_non_finite(
    blocks: list[Block], table: Table, quarantine: Quarantine, report: Report
) -> np.ndarray | None:
    """Rows whose output would hold NaN/inf leave for the quarantine, named per feature."""
    bad_any = np.zeros(table.n_rows, dtype=bool)
    for block in blocks:
        if not isinstance(block, NumericBlock):
            continue
        for name, bad in block.bad_rows().items():
            bad_any |= bad
            report.findings.append(
                make_finding(name, Reason.NONFINITE_FEATURE.value, bad, table.row_ids, "quarantine",
                             detail="(missing or infinite after all steps; add fp.FillMissing)")
            )  # fmt: skip
            quarantine.add(table.row_ids[bad], f"feature {name}: missing or not finite")
    return ~bad_any if bad_any.any() else None


def _describe(X: np.ndarray | sp.csr_matrix) -> dict[str, Any]:
    if sp.issparse(X):
        return {"shape": list(X.shape), "layout": "csr", "dtype": str(X.dtype), "nnz": int(X.nnz)}
    return {
        "shape": list(X.shape),
        "layout": "dense",
        "dtype": str(X.dtype),
        "nnz": int(np.count_nonzero(X)),
    }

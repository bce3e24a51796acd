"""Validate a raw frame against the schema: coerce, check every rule, apply the policy.

All checks are vectorized masks over the column (text rules run on the distinct values
and are gathered by code). Every broken rule becomes a :class:`Finding`; rows broken
under ``quarantine`` leave the table for the quarantine; under ``raise`` all findings of
the frame are collected first, then one error lists them all.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fastprep.columns import Column, Table, TextColumn
from fastprep.errors import DataValidationError, Reason, SchemaError
from fastprep.schema import Bool, Category, ColumnType, Float, Int, Schema, String
from fastprep.validate.coerce import to_bools, to_numbers, to_text
from fastprep.validate.findings import Finding, Quarantine, make_finding

log = logging.getLogger("fastprep.validate")


@dataclass
class ValidationResult:
    """The clean table (valid rows only), the quarantine so far, and what was found."""

    table: Table
    quarantine: Quarantine
    findings: list[Finding]
    rows_in: int


def validate_frame(
    frame: pd.DataFrame,
    schema: Schema,
    columns: Iterable[str],
    *,
    phase: str = "transform",
    row_ids: np.ndarray | None = None,
) -> ValidationResult:
    """Check ``columns`` of ``frame`` against ``schema``; see the module docstring."""
    columns = list(columns)
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        present = ", ".join(map(str, frame.columns[:30]))
        raise SchemaError(f"source is missing column(s) {missing}; it has: {present}")
    if frame.columns.duplicated().any():
        dupes = sorted(set(frame.columns[frame.columns.duplicated()]))
        raise SchemaError(f"source has duplicated column name(s) {dupes}")
    ids = np.arange(len(frame), dtype=np.int64) if row_ids is None else row_ids
    coerced: dict[str, Column] = {}
    findings: list[Finding] = []
    quarantine = Quarantine()
    to_raise: list[Finding] = []
    for name in columns:
        spec = schema[name]
        values, violations = _check_column(name, frame[name], spec)
        coerced[name] = values
        for rule, mask, detail in violations:
            finding = make_finding(
                name, rule, mask, ids, spec.on_invalid,
                values=frame[name],
                detail=detail, phase=phase,
            )  # fmt: skip
            if finding.count == 0:
                continue
            findings.append(finding)
            if spec.on_invalid == "raise":
                to_raise.append(finding)
            elif spec.on_invalid == "quarantine":
                quarantine.add(ids[mask], f"{name}: {rule}")
            else:
                log.warning(finding.message())
    if to_raise:
        lines = "\n  ".join(f.message() for f in to_raise)
        raise DataValidationError(
            f"{len(to_raise)} rule(s) with on_invalid='raise' failed:\n  {lines}\n"
            "fix the data, widen the rule, or set on_invalid='quarantine'"
        )
    keep = ~np.isin(ids, quarantine.row_ids()) if len(quarantine) else slice(None)
    table = Table(ids, coerced).take(keep) if len(quarantine) else Table(ids, coerced)
    return ValidationResult(table, quarantine, findings, rows_in=len(frame))


Violation = tuple[str, np.ndarray, str]


def _check_column(name: str, series: pd.Series, spec: ColumnType) -> tuple[Column, list[Violation]]:
    if isinstance(spec, (Float, Int)):
        values, bad_type = to_numbers(series)
        _refuse_wrong_type(name, series, bad_type, spec)
        return values, _type_violation(bad_type, spec) + _number_rules(values, bad_type, spec)
    if isinstance(spec, Bool):
        values, bad_type = to_bools(series)
        _refuse_wrong_type(name, series, bad_type, spec)
        missing = np.isnan(values) & ~bad_type
        return values, _type_violation(bad_type, spec) + _null_rule(missing, spec)
    assert isinstance(spec, (Category, String))
    text, _ = to_text(series)
    return text, _null_rule(text.codes < 0, spec) + _text_rules(text, spec)


def _refuse_wrong_type(name: str, series: pd.Series, bad: np.ndarray, spec: ColumnType) -> None:
    """A column whose every present value is of the wrong type is a schema error, not data."""
    present = series.notna().to_numpy()
    if present.any() and bad[present].all():
        examples = ", ".join(repr(v) for v in series[present].head(3).tolist())
        raise SchemaError(
            f"column {name!r} is declared {type(spec).__name__} but none of its values is "
            f"one (dtype {series.dtype}, e.g. {examples}); fix the schema or the source"
        )


def _type_violation(bad: np.ndarray, spec: ColumnType) -> list[Violation]:
    return [(Reason.TYPE.value, bad, f"(not a {type(spec).__name__.lower()})")]


def _null_rule(missing: np.ndarray, spec: ColumnType) -> list[Violation]:
    if spec.nullable:
        return []
    return [(Reason.NULL.value, missing, "(missing value in a non-nullable column)")]


def _number_rules(values: np.ndarray, bad_type: np.ndarray, spec: Float | Int) -> list[Violation]:
    """Null, integrality, finiteness and range rules; each value breaks at most one."""
    with np.errstate(invalid="ignore"):
        infinite = np.isinf(values)
        rules = _null_rule(np.isnan(values) & ~bad_type, spec)
        in_range_checked = (
            values
            if (isinstance(spec, Float) and spec.allow_inf)
            else np.where(infinite, np.nan, values)
        )
        if isinstance(spec, Int):
            finite = np.isfinite(values)
            not_integer = infinite | (finite & (values != np.round(values)))
            too_big = finite & (np.abs(values) > 2**53)
            rules.append((Reason.NOT_INTEGER.value, not_integer, "(not a whole number)"))
            rules.append((Reason.TYPE.value, too_big, "(integer beyond 2**53, not exact)"))
        elif not spec.allow_inf:
            rules.append((Reason.NOT_FINITE.value, infinite, "(±inf; set allow_inf=True)"))
        if spec.min is not None:
            below = in_range_checked < spec.min
            rules.append((Reason.BELOW_MIN.value, below, f"(< min {spec.min})"))
        if spec.max is not None:
            above = in_range_checked > spec.max
            rules.append((Reason.ABOVE_MAX.value, above, f"(> max {spec.max})"))
    return rules


def _text_rules(text: TextColumn, spec: Category | String) -> list[Violation]:
    rules: list[Violation] = []
    if isinstance(spec, Category) and spec.categories is not None:
        bad_unique = ~np.isin(text.uniques, np.asarray(spec.categories, dtype=object))
        detail = f"(not one of {list(spec.categories)})"
        rules.append((Reason.CATEGORY.value, _gather(bad_unique, text.codes), detail))
    if isinstance(spec, String) and spec.max_length is not None:
        lengths = np.fromiter(
            (len(u) for u in text.uniques), dtype=np.int64, count=len(text.uniques)
        )
        detail = f"(longer than {spec.max_length} characters)"
        rules.append(
            (Reason.TOO_LONG.value, _gather(lengths > spec.max_length, text.codes), detail)
        )
    return rules


def _gather(per_unique: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Expand a mask over distinct values to a mask over rows (missing rows: False)."""
    padded = np.append(per_unique, False)  # code -1 indexes the trailing False
    return padded[codes]

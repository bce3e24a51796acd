"""Validate a raw frame against the schema: coerce, check every rule, apply the policy.

All checks are vectorized masks over the column (text rules run on the distinct values
and are gathered by code). Every broken rule becomes a :class:`Finding`; rows broken
under ``quarantine`` leave the table for the quarantine; under ``raise`` all findings of
the frame are collected first, then one error lists them all.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from fastprep.api.schema import (
    Bool,
    Category,
    ColumnType,
    Datetime,
    DictOf,
    Float,
    Int,
    ListOf,
    Schema,
    String,
)
from fastprep.data import arrow_compute as ac
from fastprep.data import reuse
from fastprep.data.arrow_arrays import numeric_array
from fastprep.data.columns import Column, RowIds, RowRange, Table, TextColumn
from fastprep.data.sources import decoded, raw_columns, raw_len
from fastprep.errors import DataValidationError, Reason, SchemaError
from fastprep.validate import number_checks as nc
from fastprep.validate.arrow_scan import read_scanned
from fastprep.validate.coerce import (
    arrow_numbers,
    arrow_text,
    inexact_ints,
    to_bools,
    to_numbers,
    to_text,
)
from fastprep.validate.datetimes import to_epoch_seconds
from fastprep.validate.dict_checks import check_dicts
from fastprep.validate.encoding_savings import text_encoding_bytes
from fastprep.validate.findings import Finding, Quarantine, make_finding
from fastprep.validate.list_checks import check_lists, holds_lists
from fastprep.validate.repair import impute_missing, overflow_mask, repair_values
from fastprep.validate.table_checks import duplicate_key_finding

if TYPE_CHECKING:
    import pandas as pd

#: each call's findings, at DEBUG: a run validates partition by partition, and its findings
#: reach the ``fastprep.alerts`` logger once per rule with the run's total (and the report)
log = logging.getLogger("fastprep.validate")


@dataclass
class ValidationResult:
    """The clean table (valid rows only), the quarantine so far, and what was found."""

    table: Table
    quarantine: Quarantine
    findings: list[Finding]
    rows_in: int
    #: per text column, bytes before/after dictionary encoding (see ``validate/memory.py``)
    text_encoding: dict[str, dict[str, Any]] = field(default_factory=dict)


def validate_frame(
    frame: pd.DataFrame | pa.Table,
    schema: Schema,
    columns: Iterable[str],
    *,
    phase: str = "transform",
    row_ids: RowIds | None = None,
) -> ValidationResult:
    """Check ``columns`` of ``frame`` (a pandas DataFrame or a pyarrow Table, see
    :func:`fastprep.data.sources.read_source`; and the schema's key columns) against ``schema``."""
    columns = schema.read_columns(list(columns))
    names = raw_columns(frame)
    missing = [c for c in columns if c not in names]
    if missing:
        present = ", ".join(map(str, names[:30]))
        raise SchemaError(f"source is missing column(s) {missing}; it has: {present}")
    if len(set(names)) < len(names):
        dupes = sorted({c for c in names if names.count(c) > 1})
        raise SchemaError(f"source has duplicated column name(s) {dupes}")
    n_rows = raw_len(frame)
    frame = _RawColumns(frame)
    ids = RowRange(0, n_rows) if row_ids is None else row_ids
    coerced: dict[str, Column] = {}
    findings: list[Finding] = []
    quarantine = Quarantine()
    to_raise: list[Finding] = []
    text_encoding: dict[str, dict[str, Any]] = {}
    scans: dict[int, tuple[np.ndarray, nc.ColumnScan]] = {}
    for name in columns:
        spec = schema[name]
        values, violations, fit_checks, imputed = _check_column(name, frame, spec, scans)
        if imputed is not None:
            findings.append(make_finding(name, Reason.NULL.value, imputed, ids, "impute",
                                             detail=f"(missing, set to {spec.impute})",
                                             phase=phase))  # fmt: skip
        if isinstance(values, TextColumn):
            text_encoding[name] = text_encoding_bytes(frame.original(name), values)
        for rule, mask, detail in violations:
            action = spec.on_invalid
            if action == "repair" and mask.any():
                values, mask_left, action = repair_values(values, rule, mask, spec)
                if action != "quarantine":  # the repaired values are counted, not rejected
                    findings.append(make_finding(
                        name, rule, mask & ~mask_left, ids, action,
                        values=frame.examples(name), detail=detail, phase=phase,
                    ))  # fmt: skip
                    mask, action = mask_left, "quarantine"
                    detail = f"{detail} (no bound to clip ±inf to)"
            finding = make_finding(
                name, rule, mask, ids, action,
                values=frame.examples(name),
                detail=detail, phase=phase,
            )  # fmt: skip
            if finding.count == 0:
                continue
            findings.append(finding)
            if action == "raise":
                to_raise.append(finding)
            elif action == "quarantine":
                quarantine.add(ids[mask], f"{name}: {rule}")
            else:
                log.debug(finding.message())
        coerced[name] = values
        if phase == "fit":
            findings.extend(_fit_findings(name, fit_checks, ids, n_rows))
    duplicates = duplicate_key_finding(schema, coerced, ids, phase)  # raises under "raise"
    if duplicates is not None:
        findings.append(duplicates[0])
        if schema.on_duplicate == "quarantine":
            quarantine.add(ids[duplicates[1]], f"{duplicates[0].column}: duplicate_key")
    if phase == "fit" and n_rows == 0:  # a statistic to fit will then be a FitError
        findings.append(Finding("*", Reason.EMPTY.value, 0, "warn", detail="(no rows at fit)",
                                phase=phase))  # fmt: skip
        log.debug("empty input: the source has no rows at fit time")
    if to_raise:
        lines = "\n  ".join(f.message() for f in to_raise)
        raise DataValidationError(
            f"{len(to_raise)} rule(s) with on_invalid='raise' failed:\n  {lines}\n"
            "fix the data, widen the rule, or set on_invalid='quarantine'"
        )
    table = Table(ids, coerced)
    for name, values in coerced.items():  # the drift profile reuses them (not if repaired)
        entry = scans.get(id(values))
        if entry is not None and entry[0] is values:
            table.remember(("scan", name), values, entry[1])
    if len(quarantine):
        keep = np.ones(len(ids), dtype=bool)
        keep[_positions(ids, quarantine.row_ids())] = False
        table = table.take(keep)
    return ValidationResult(table, quarantine, findings, n_rows, text_encoding)


Violation = tuple[str, np.ndarray, str]
INEXACT = "(integer beyond 2**53: float64 would round it)"


def _positions(ids: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Positions of ``wanted`` in the ascending ``ids`` (a subtraction when ids are a range,
    the usual case: positions in the source plus an offset)."""
    if len(ids) and int(ids[-1]) - int(ids[0]) == len(ids) - 1:
        return wanted - ids[0]
    return np.searchsorted(ids, wanted)


#: what a fit-time check learned of a column: (all values missing, all present values equal)
FitChecks = tuple[bool, bool]


class _RawColumns:
    """The columns of a raw table, each as validation reads it: an Arrow column straight
    from its buffers where it is plain numbers or text, else as a pandas Series (what the
    checks of other types read). A Series is made from an Arrow column once, and only for
    a column that needs one."""

    def __init__(self, frame: pd.DataFrame | pa.Table) -> None:
        self.frame = frame
        self._series: dict[str, pd.Series] = {}

    def arrow(self, name: str) -> pa.ChunkedArray | None:
        return self.frame.column(name) if isinstance(self.frame, pa.Table) else None

    def __getitem__(self, name: str) -> pd.Series:
        if not isinstance(self.frame, pa.Table):
            return self.frame[name]
        series = self._series.get(name)
        if series is None:  # the table's own conversion: its pandas metadata applies
            series = decoded(self.frame.select([name])).to_pandas()[name]
            self._series[name] = series
        return series

    def original(self, name: str) -> pd.Series | pa.ChunkedArray:
        """The column as the source holds it (for the memory report)."""
        arrow = self.arrow(name)
        return arrow if arrow is not None else self.frame[name]

    def examples(self, name: str) -> Any:
        """What a finding takes its example values from (indexed by row positions)."""
        arrow = self.arrow(name)
        if arrow is None or name in self._series:
            return self[name]
        return _ArrowExamples(arrow)


class _ArrowExamples:
    """Values of an Arrow column by row positions, as Python objects."""

    def __init__(self, column: pa.ChunkedArray) -> None:
        self.column = column

    def __getitem__(self, positions: np.ndarray) -> list[Any]:
        return ac.take(self.column, numeric_array(np.asarray(positions, np.int64))).to_pylist()


def _check_column(
    name: str,
    frame: _RawColumns,
    spec: ColumnType,
    scans: dict[int, tuple[np.ndarray, nc.ColumnScan]] | None = None,
) -> tuple[Column, list[Violation], FitChecks, np.ndarray | None]:
    """Coerced values, the rules broken, what fit checks learned, and the imputed rows;
    ``scans`` collects each number column's one-pass scan, by ``id`` of the array scanned."""
    arrow = frame.arrow(name)
    if arrow is not None and isinstance(spec, (Float, Int)):
        # checked every time, unlike text: Arrow number buffers may be numpy memory the
        # caller still writes to (pa.table({"x": array}) is zero-copy), so equal buffers
        # need not mean equal values, and a scan costs less than the encoding text reuses
        checked = _arrow_numbers_checked(arrow, spec)
        if checked is not None:
            result, scanned = checked
            if scans is not None and scanned is not None:
                scans[id(result[0])] = (result[0], scanned)
            return result
    if isinstance(spec, ListOf) or (
        isinstance(spec, (Category, String)) and holds_lists(arrow, lambda: frame[name])
    ):  # tags (a text column of lists is already split): flattened by Arrow compute
        tags, list_rules, list_checks = check_lists(name, arrow, lambda: frame[name], spec)
        return tags, list_rules, list_checks, None
    if arrow is not None and isinstance(spec, (Category, String)):
        # the same text column checked again by the same type (transform after fit of one
        # in-memory table) reuses the checks and the encoded column (see data/reuse.py):
        # Arrow text is built in Arrow's own memory, never over a caller's writable array
        checked_text = reuse.reuse(arrow, ("text", spec), lambda: _arrow_text_checked(arrow, spec))
        if checked_text is not None:
            return checked_text
    series = frame[name]
    if isinstance(spec, Datetime):
        seconds, bad_type, wrong_zone = to_epoch_seconds(name, series, spec)
        _refuse_wrong_type(name, series, bad_type, spec)
        missing = np.isnan(seconds) & ~bad_type & ~wrong_zone
        present = seconds[~np.isnan(seconds)]
        checks = (len(present) == 0, len(present) > 0 and bool((present == present[0]).all()))
        rules = _type_violation(bad_type, spec) + _null_rule(missing, spec)
        if wrong_zone.any():
            zone = "(has a time zone offset; declared naive)" if spec.tz is None else (
                f"(naive; declared tz={spec.tz!r})")  # fmt: skip
            rules.append((Reason.TIMEZONE.value, wrong_zone, zone))
        return seconds, rules, checks, None
    if isinstance(spec, (Float, Int)):
        values, bad_type = to_numbers(series)
        _refuse_wrong_type(name, series, bad_type, spec)
        # an int64 array is checked exactly for |v| > 2**53 in the scan itself
        inexact = None if values.dtype == np.int64 else inexact_ints(series, values)
        return _checked_numbers(values, bad_type, inexact, spec, scans)
    if isinstance(spec, DictOf):  # flattened once; rules are masks over entries
        column, dict_rules, dict_checks = check_dicts(name, series, spec)
        _refuse_wrong_type(name, series, dict_rules[1 - spec.nullable][1], spec)
        return column, dict_rules, dict_checks, None
    if isinstance(spec, Bool):
        values, bad_type = to_bools(series)
        _refuse_wrong_type(name, series, bad_type, spec)
        missing = np.isnan(values) & ~bad_type
        present = values[~np.isnan(values)]
        checks = (len(present) == 0, len(present) > 0 and bool((present == present[0]).all()))
        return values, _type_violation(bad_type, spec) + _null_rule(missing, spec), checks, None
    assert isinstance(spec, (Category, String))
    text, bad_type, bad_encoding = to_text(series)
    return _checked_text(text, bad_type, bad_encoding, spec)


def _arrow_text_checked(
    arrow: pa.ChunkedArray, spec: Category | String
) -> tuple[Column, list[Violation], FitChecks, np.ndarray | None] | None:
    """An Arrow text column's checks (None: not plain text)."""
    text = arrow_text(arrow)
    if text is None:
        return None
    # plain text (not a dictionary, whose entries may be null) with no null: no row's
    # code is -1, so no mask of missing rows to build and count
    no_null = arrow.null_count == 0 and not pa.types.is_dictionary(arrow.type)
    return _checked_text(text, None, None, spec, no_null=no_null)


def _arrow_numbers_checked(
    arrow: pa.ChunkedArray, spec: Float | Int
) -> (
    tuple[tuple[Column, list[Violation], FitChecks, np.ndarray | None], nc.ColumnScan | None] | None
):
    """An Arrow number column's checks and its scan (None: not plain numbers)."""
    scans: dict[int, tuple[np.ndarray, nc.ColumnScan]] = {}
    # read and scanned in one pass when no imputation changes the values in between
    fused = None if spec.impute is not None else read_scanned(arrow, *_scan_rules(spec))
    if fused is not None:
        result = _checked_numbers(fused[0], None, None, spec, scans, scanned=fused[1])
        return result, fused[1]
    numbers = arrow_numbers(arrow)
    if numbers is None:
        return None
    result = _checked_numbers(numbers[0], None, numbers[1], spec, scans)
    entry = scans.get(id(result[0]))
    return result, entry[1] if entry is not None else None


def _checked_numbers(
    values: np.ndarray,
    bad_type: np.ndarray | None,
    inexact: np.ndarray | None,
    spec: Float | Int,
    scans: dict[int, tuple[np.ndarray, nc.ColumnScan]] | None,
    scanned: nc.ColumnScan | None = None,
) -> tuple[Column, list[Violation], FitChecks, np.ndarray | None]:
    """Number rules over coerced ``values`` (``bad_type`` None: every value is a number;
    ``scanned``: their scan, already made)."""
    values, imputed = impute_missing(values, bad_type, spec)
    rules, fit_checks = _number_rules(values, bad_type, spec, inexact is not None, scans, scanned)
    if inexact is not None:
        detail = "(integer beyond 2**53: float64 would round it)"
        rules.append((Reason.INEXACT_INT.value, inexact, detail))
    if spec.dtype is not None:
        overflow = overflow_mask(values, spec)
        if overflow is not None:
            detail = f"(beyond the range of the declared dtype {spec.dtype})"
            rules.append((Reason.OVERFLOW.value, overflow, detail))
    type_rules = [] if bad_type is None else _type_violation(bad_type, spec)
    return values, type_rules + rules, fit_checks, imputed


def _checked_text(
    text: TextColumn,
    bad_type: np.ndarray | None,
    bad_encoding: np.ndarray | None,
    spec: Category | String,
    *,
    no_null: bool = False,
) -> tuple[Column, list[Violation], FitChecks, np.ndarray | None]:
    """Null, type, encoding and domain rules of an encoded text column (``bad_type`` /
    ``bad_encoding`` None: no such value; ``no_null``: no row is missing)."""
    rules: list[Violation] = []
    if not (spec.nullable or no_null):  # no mask for a rule nothing can break
        missing = text.codes < 0
        for bad in (bad_type, bad_encoding):
            if bad is not None and bad.any():
                missing &= ~bad
        rules += _null_rule(missing, spec)
    if bad_type is not None:
        rules += _type_violation(bad_type, spec)
    if bad_encoding is not None and bad_encoding.any():
        detail = "(not valid Unicode: a lone surrogate, or bytes that are not UTF-8)"
        rules.append((Reason.ENCODING.value, bad_encoding, detail))
    fit_checks = (text.n_unique == 0, text.n_unique == 1)
    return text, rules + _text_rules(text, spec), fit_checks, None


def _fit_findings(name: str, checks: FitChecks, ids: np.ndarray, n_rows: int) -> list[Finding]:
    """Warnings at fit: a column with no value at all, or with a single distinct value."""
    all_null, constant = checks
    if n_rows == 0 or not (all_null or constant):
        return []
    rule, detail = (
        (Reason.ALL_NULL.value, "(every value is missing at fit time)")
        if all_null
        else (
            Reason.CONSTANT.value,
            "(one distinct value at fit time, within rounding: carries no signal)",
        )
    )
    finding = make_finding(
        name, rule, np.ones(n_rows, dtype=bool), ids, "warn", detail=detail, phase="fit"
    )
    log.debug(finding.message())
    return [finding]


def _refuse_wrong_type(name: str, series: pd.Series, bad: np.ndarray, spec: ColumnType) -> None:
    """A column whose every present value is of the wrong type is a schema error, not data."""
    if not bad.any():
        return
    present = series.notna().to_numpy()
    if present.any() and bad[present].all():
        examples = ", ".join(repr(v) for v in series[present].head(3).tolist())
        raise SchemaError(
            f"column {name!r} is declared {type(spec).__name__} but none of its values is "
            f"one (dtype {series.dtype}, e.g. {examples}); fix the schema or the source"
        )


def _type_violation(bad: np.ndarray, spec: ColumnType) -> list[Violation]:
    if not bad.any():
        return []
    return [(Reason.TYPE.value, bad, f"(not a {type(spec).__name__.lower()})")]


def _null_rule(missing: np.ndarray, spec: ColumnType) -> list[Violation]:
    if spec.nullable:
        return []
    return [(Reason.NULL.value, missing, "(missing value in a non-nullable column)")]


def _number_rules(
    values: np.ndarray,
    bad_type: np.ndarray | None,
    spec: Float | Int,
    exact_checked: bool = False,
    scans: dict[int, tuple[np.ndarray, nc.ColumnScan]] | None = None,
    scanned: nc.ColumnScan | None = None,
) -> tuple[list[Violation], FitChecks]:
    """Null, integrality, finiteness and range rules; each value breaks at most one of them.

    One counting pass (which also finds the finite range, for the fit-time checks); masks
    are only built for rules that are actually broken. ``exact_checked``: integers beyond
    2**53 were already found on the source's own integers (see ``coerce.inexact_ints``).
    """
    int_source = values.dtype.kind == "i"
    lo, hi, integral, allow_inf = _scan_rules(spec)
    if scanned is None:
        scanned = nc.scan_column(values, lo, hi, integral, allow_inf)
    if scans is not None:  # holding ``values`` keeps its id from being reused meanwhile
        scans[id(values)] = (values, scanned)
    counts, smallest, largest = scanned.counts.copy(), scanned.smallest, scanned.largest
    fit_checks = (counts[nc.NULL] == len(values), near_equal(smallest, largest, len(values)))
    if spec.nullable:
        counts[nc.NULL] = 0  # allowed: no mask needed
    if allow_inf:
        counts[nc.INF] = 0
    if exact_checked:
        counts[nc.TOO_BIG] = 0
    if not counts.any():
        return [], fit_checks
    masks = nc.rule_masks(values, counts, lo, hi, integral, allow_inf)
    empty = np.zeros(len(values), dtype=bool)
    rules: list[Violation] = []
    if nc.NULL in masks:
        missing = masks[nc.NULL] if bad_type is None else masks[nc.NULL] & ~bad_type
        rules += _null_rule(missing, spec)
    if integral:
        not_integer = masks.get(nc.NOT_INTEGER, empty) | masks.get(nc.INF, empty)
        rules.append((Reason.NOT_INTEGER.value, not_integer, "(not a whole number)"))
        if not int_source:
            rules.append((Reason.INEXACT_INT.value, masks.get(nc.TOO_BIG, empty), INEXACT))
    elif not allow_inf:
        rules.append(
            (Reason.NOT_FINITE.value, masks.get(nc.INF, empty), "(±inf; set allow_inf=True)")
        )
    if spec.min is not None:
        rules.append((Reason.BELOW_MIN.value, masks.get(nc.BELOW, empty), f"(< min {spec.min})"))
    if spec.max is not None:
        rules.append((Reason.ABOVE_MAX.value, masks.get(nc.ABOVE, empty), f"(> max {spec.max})"))
    if int_source and nc.TOO_BIG in masks:  # found exactly on the int64 values
        rules.append((Reason.INEXACT_INT.value, masks[nc.TOO_BIG], INEXACT))
    return rules, fit_checks


def _scan_rules(spec: Float | Int) -> tuple[float, float, bool, bool]:
    """What a number column's scan checks: (lower bound, upper bound, whole numbers,
    infinities allowed and compared with the bounds)."""
    lo = -np.inf if spec.min is None else float(spec.min)
    hi = np.inf if spec.max is None else float(spec.max)
    return lo, hi, isinstance(spec, Int), isinstance(spec, Float) and spec.allow_inf


def near_equal(smallest: float, largest: float, n: int) -> bool:
    """All present values equal within rounding (Standardize's near-constant tolerance):
    a column whose values differ by ~1e-16 is constant, not a signal to scale up."""
    if not (np.isfinite(smallest) and np.isfinite(largest)):
        return bool(smallest == largest)
    eps = float(np.finfo(np.float64).eps)
    return bool(largest - smallest <= n * eps * max(abs(smallest), abs(largest)))


def _text_rules(text: TextColumn, spec: Category | String) -> list[Violation]:
    rules: list[Violation] = []
    arrow = text.arrow_uniques
    if isinstance(spec, Category) and spec.categories is not None:
        if arrow is not None:
            allowed = pa.array(list(spec.categories), type=pa.large_string())
            bad_unique = ~ac.is_in(arrow, allowed).to_numpy(zero_copy_only=False)
        else:
            bad_unique = ~np.isin(text.uniques, np.asarray(spec.categories, dtype=object))
        if bad_unique.any():  # else no per-row gather: every distinct value is allowed
            detail = f"(not one of {list(spec.categories)})"
            rules.append((Reason.CATEGORY.value, _gather(bad_unique, text.codes), detail))
    if isinstance(spec, String) and spec.max_length is not None:
        if arrow is not None:  # characters, like len(str)
            import pyarrow.compute as pc  # on use: a job without max_length needs none of it

            lengths = pc.utf8_length(arrow).to_numpy(zero_copy_only=False)
        else:
            lengths = np.fromiter(
                (len(u) for u in text.uniques), dtype=np.int64, count=len(text.uniques)
            )
        detail = f"(longer than {spec.max_length} characters)"
        too_long = lengths > spec.max_length
        if too_long.any():
            rules.append((Reason.TOO_LONG.value, _gather(too_long, text.codes), detail))
    return rules


def _gather(per_unique: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Expand a mask over distinct values to a mask over rows (missing rows: False)."""
    padded = np.append(per_unique, False)  # code -1 indexes the trailing False
    return padded[codes]

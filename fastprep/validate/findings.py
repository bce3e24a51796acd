"""Findings (what a check found) and the quarantine (rows set aside, with reasons)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from fastprep.data import arrow_compute as ac
from fastprep.data.arrow_arrays import numeric_array
from fastprep.data.pandas_objects import is_pandas_na
from fastprep.data.sources import Raw, decoded, read_as_dictionary, rows_as_read, take_rows
from fastprep.errors import Reason

if TYPE_CHECKING:
    import pandas as pd

FIRST_ROWS = 5
EXAMPLES = 3


@dataclass(frozen=True)
class Finding:
    """One rule broken (or one repair made) on one column, with counts and examples."""

    column: str
    rule: str
    count: int
    action: str  # "quarantine" | "raise" | "warn" | "set_missing" | "coerce"
    first_rows: tuple[int, ...] = ()
    examples: tuple[str, ...] = ()
    detail: str = ""
    phase: str = "transform"

    def message(self) -> str:
        if self.rule == "unexpected_column":  # a whole column, no rows
            return f"column {self.column!r}: not declared in the schema (not read) -> {self.action}"
        rows = ", ".join(str(r) for r in self.first_rows)
        more = ", ..." if self.count > len(self.first_rows) else ""
        examples = f" (e.g. {', '.join(self.examples)})" if self.examples else ""
        detail = f" {self.detail}" if self.detail else ""
        return (
            f"column {self.column!r}: {self.count:,} value(s) broke rule {self.rule!r}{detail}"
            f"{examples}; first rows {rows}{more} -> {self.action}"
        )

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["first_rows"] = list(self.first_rows)
        out["examples"] = list(self.examples)
        return out


def merge_findings(findings: Iterable[Finding]) -> list[Finding]:
    """One finding per (column, rule, action, phase, detail): the same rule broken in
    several partitions of one run is reported once, with the summed count, the run's
    first rows and the first examples.

    ``unexpected_column`` counts a column, not rows: every partition names the same one,
    so it stays 1. Order: each key where it first occurs.
    """
    merged: dict[tuple[str, str, str, str, str], Finding] = {}
    for finding in findings:
        key = (finding.column, finding.rule, finding.action, finding.phase, finding.detail)
        seen = merged.get(key)
        if seen is None:
            merged[key] = finding
            continue
        count = (
            max(seen.count, finding.count)
            if finding.rule == "unexpected_column"
            else seen.count + finding.count
        )
        merged[key] = replace(
            seen,
            count=count,
            # each part's first rows are its smallest ids, so the smallest of their
            # union are the run's first rows, in whatever order the parts arrive
            first_rows=tuple(sorted({*seen.first_rows, *finding.first_rows}))[:FIRST_ROWS],
            examples=(seen.examples + finding.examples)[:EXAMPLES],
        )
    return list(merged.values())


#: warnings only a fit gives (a column with no value, or one value, at fit time; no rows)
FIT_ONLY_RULES = (Reason.ALL_NULL.value, Reason.CONSTANT.value, Reason.EMPTY.value)


def at_transform(findings: Iterable[Finding]) -> list[Finding]:
    """The findings a transform's validation of the same rows gives, from a fit's: the
    same rules broken on the same rows, without the fit-only warnings
    (:data:`FIT_ONLY_RULES`) and tagged with the transform phase."""
    return [
        replace(f, phase="transform") if f.phase == "fit" else f
        for f in findings
        if not (f.phase == "fit" and f.rule in FIT_ONLY_RULES)
    ]


def make_finding(
    column: str,
    rule: str,
    mask: np.ndarray,
    row_ids: np.ndarray,
    action: str,
    *,
    values: Any = None,
    detail: str = "",
    phase: str = "transform",
) -> Finding:
    """Build a finding from a boolean mask over ``row_ids``."""
    positions = np.flatnonzero(mask)
    examples: tuple[str, ...] = ()
    if values is not None and len(positions) and rule != "null":
        head = positions[:EXAMPLES]
        picked = values.iloc[head] if hasattr(values, "iloc") else values[head]
        sample = np.asarray(picked, dtype=object)
        examples = tuple(repr(v) for v in sample)
    return Finding(
        column=column,
        rule=rule,
        count=len(positions),
        action=action,
        first_rows=tuple(int(r) for r in row_ids[positions[:FIRST_ROWS]]),
        examples=examples,
        detail=detail,
        phase=phase,
    )


@dataclass
class Quarantine:
    """Row ids set aside with their reasons; vectorized, so a million bad rows stay cheap."""

    _ids: list[np.ndarray] = field(default_factory=list)
    _reasons: list[str] = field(default_factory=list)
    _unique: np.ndarray | None = None

    def add(self, row_ids: np.ndarray, reason: str) -> None:
        if len(row_ids):
            self._ids.append(np.asarray(row_ids, dtype=np.int64))
            self._reasons.append(reason)
            self._unique = None

    def __len__(self) -> int:
        return len(self.row_ids())

    def row_ids(self) -> np.ndarray:
        """Sorted distinct quarantined row ids (computed once per change)."""
        if self._unique is None:
            if not self._ids:
                self._unique = np.empty(0, dtype=np.int64)
            elif len(self._ids) == 1 and _strictly_increasing(self._ids[0]):
                self._unique = self._ids[0]
            else:
                merged = np.concatenate(self._ids)
                merged.sort(kind="stable")
                keep = np.ones(len(merged), dtype=bool)
                keep[1:] = merged[1:] != merged[:-1]
                self._unique = merged[keep]
        return self._unique

    def reasons(self) -> pd.Series:
        """``"; "``-joined reasons per row id, in the order the rules were added."""
        import pandas as pd

        if not self._ids:
            return pd.Series([], dtype="str", index=pd.Index([], dtype=np.int64))
        unique, out = self.reason_arrays()
        return pd.Series(out, index=pd.Index(unique, dtype=np.int64), dtype=object)

    def reason_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """The sorted distinct row ids and each one's ``"; "``-joined reasons (objects)."""
        if not self._ids:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=object)
        ids = np.concatenate(self._ids)
        codes = np.repeat(np.arange(len(self._reasons)), [len(a) for a in self._ids])
        order = np.lexsort((codes, ids))
        ids, codes = ids[order], codes[order]
        boundary = np.ones(len(ids), dtype=bool)
        boundary[1:] = ids[1:] != ids[:-1]
        first = np.flatnonzero(boundary)
        unique = ids[first]
        counts = np.diff(np.append(first, len(ids)))
        labels = np.asarray(self._reasons, dtype=object)
        out = labels[codes[first]]
        for position in np.flatnonzero(counts > 1):  # rows breaking several rules: few
            start = first[position]
            out[position] = "; ".join(labels[codes[start : start + counts[position]]])
        return unique, out

    def to_frame(
        self, source_rows: Raw | None, first_row_id: int = 0, source_ids: np.ndarray | None = None
    ) -> pd.DataFrame:
        """The rejected rows (as read, when given) plus ``row_id`` and ``reason`` columns.

        ``first_row_id`` is the row id of ``source_rows``' first row (a partition's offset).
        ``source_ids``: the ascending row ids of ``source_rows``' first rows instead, when
        it holds only some rows (every quarantined one among them).
        """
        import pandas as pd

        reasons = self.reasons()
        ids = reasons.index.to_numpy(dtype=np.int64)
        if source_rows is not None:
            frame = rows_as_read(source_rows, _positions(ids, first_row_id, source_ids))
        else:
            frame = pd.DataFrame(index=range(len(ids)))
        frame = _to_text_safe(frame)
        frame.insert(0, "row_id", ids)
        frame["reason"] = pd.array(reasons.to_numpy(dtype=object), dtype="str")
        return frame

    def to_arrow(
        self, source_rows: pa.Table, first_row_id: int = 0, source_ids: np.ndarray | None = None
    ) -> pa.Table | None:
        """What :meth:`to_frame` gives, as an Arrow table built without pandas (the same
        columns, and the values and types ``to_frame(...).to_parquet`` stores: an integer
        column with a missing value anywhere in the source as float64). None where a
        column is of a type ``to_frame`` rewrites (binary, nested, dictionary, a boolean
        with missing values: text or categories in pandas) or a name would collide."""
        names = source_rows.column_names
        if "row_id" in names or "reason" in names:
            return None
        for spec, column in zip(source_rows.schema, source_rows.columns):
            kind = column.type
            if read_as_dictionary(spec):  # text the file stores as strings: decoded below
                continue
            if not (_kept_as_is(kind) or (pa.types.is_boolean(kind) and not column.null_count)):
                return None
        columns: dict[str, pa.ChunkedArray | pa.Array] = {}
        ids, reasons = self.reason_arrays()
        taken = decoded(take_rows(source_rows, _positions(ids, first_row_id, source_ids)))
        columns["row_id"] = numeric_array(ids, pa.int64())
        for name, whole, column in zip(names, source_rows.columns, taken.columns):
            if pa.types.is_integer(whole.type) and whole.null_count:
                column = ac.cast(column, pa.float64())
            columns[name] = column
        columns["reason"] = pa.array(reasons.tolist(), type=pa.large_string())
        return pa.table(columns)


def _positions(ids: np.ndarray, first_row_id: int, source_ids: np.ndarray | None) -> np.ndarray:
    """Where rows ``ids`` are in the source rows (see :meth:`Quarantine.to_frame`)."""
    if source_ids is None:
        return ids - first_row_id
    positions = np.searchsorted(source_ids, ids)
    if len(ids) and (positions.max() >= len(source_ids) or (source_ids[positions] != ids).any()):
        raise ValueError("quarantined rows missing from the source rows given")
    return positions


def _kept_as_is(kind: pa.DataType) -> bool:
    """Types pandas holds in a column of their own (not as Python objects), and a column
    with no value at all (an empty CSV column): its rows joined with another part's keep
    that part's type."""
    return (
        pa.types.is_null(kind)
        or pa.types.is_integer(kind)
        or pa.types.is_floating(kind)
        or pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_timestamp(kind)
    )


def _strictly_increasing(ids: np.ndarray) -> bool:
    return bool(len(ids) < 2 or (ids[1:] > ids[:-1]).all())


def _to_text_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """Mixed-type object columns (e.g. junk text in a number column) as text, for Parquet."""
    for name in frame.columns:
        if frame[name].dtype == object:
            frame[name] = (
                frame[name].map(lambda v: None if _is_missing(v) else _safe_str(v)).astype("str")
            )
    return frame


def _safe_str(value: Any) -> str:
    """Text of a value as read, storable as UTF-8 (bad bytes and surrogates escaped)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="backslashreplace")
    return str(value).encode("utf-8", errors="backslashreplace").decode("utf-8")


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value) or is_pandas_na(value)

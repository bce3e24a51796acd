"""Drift between fit and transform: null rate, mean/std shift and unseen categories.

At fit, :func:`profile` records per input column (over the rows that passed validation)
its null rate and, for numbers, mean and std; for text, the distinct values seen (up to
``MAX_VOCABULARY``). At transform, :func:`compare` measures the same on the new rows and
flags each measure beyond its threshold. Numbers reuse validation's scan of the column (count,
shifted sum, sum of squares); text works on the distinct values and a gather by code.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow as pa

from fastprep.data import arrow_compute as ac
from fastprep.data.arrow_arrays import numeric_array
from fastprep.data.columns import Table, TextColumn
from fastprep.data.dict_column import DictColumn
from fastprep.data.tag_column import TagColumn
from fastprep.data.text_encode import arrow_uniques, count_codes
from fastprep.native.kernel_files import jit as njit
from fastprep.native.kernel_files import numba_cached, numba_loaded
from fastprep.planning.planner import kernel_path
from fastprep.validate import number_checks as nc

#: above this many distinct values a text column's vocabulary is not kept (no unseen share)
MAX_VOCABULARY = 100_000

#: default alert thresholds; override with ``transform(drift_thresholds={...})``
THRESHOLDS = {
    "null_rate_delta": 0.05,  # absolute change in the share of missing values
    "mean_shift": 0.5,  # |mean - fitted mean| / fitted std
    "std_ratio": 2.0,  # std / fitted std, or its inverse
    "unseen_share": 0.05,  # share of present values not seen at fit
}


@njit(cache=True)
def _sums_over(values, rows, shift):  # pragma: no cover - compiled
    """Finite count and sums of ``v - shift``, ``(v - shift)**2`` over ``values[rows]``."""
    count = 0
    total = 0.0
    squares = 0.0
    for k in range(rows.shape[0]):
        v = np.float64(values[rows[k]])
        if v == v and v != np.inf and v != -np.inf:
            count += 1
            d = v - shift
            total += d
            squares += d * d
    return count, total, squares


def sums_over(values: np.ndarray, rows: np.ndarray, shift: float) -> tuple[int, float, float]:
    """:func:`_sums_over` on its kernel, or by numpy (bit-identical: sums added in row
    order) when the planner predicts the kernel does not pay."""
    path = kernel_path(
        "drift", len(rows), cached=numba_cached(_sums_over), loaded=numba_loaded(_sums_over),
        n_rows=len(values),
    )  # fmt: skip
    if path == "numba":
        count, total, squares = _sums_over(values, rows, shift)
        return int(count), float(total), float(squares)
    picked = values[rows].astype(np.float64, copy=False)
    present = picked[np.isfinite(picked)]
    total, squares = nc.sequential_sums(present - shift)
    return len(present), total, squares


def _numeric(table: Table, name: str) -> dict[str, float]:
    """Null rate, mean and std of a number column's selected rows.

    The column's scan over all rows comes from validation (or one pass here); rows the
    selection left out (quarantined) are subtracted from its shifted sums, so a few
    thousand quarantined rows cost a pass over those rows only.
    """
    values = table.raw(name)
    scanned = table.derive(("scan", name), values, lambda: nc.moments_only(values))
    n, count, total, squares = scanned.n, scanned.finite, scanned.total, scanned.squares
    if table.selection is not None and 2 * len(table.selection) < scanned.n:
        n = len(table.selection)  # most rows left: sum the kept ones instead
        count, total, squares = sums_over(values, table.selection, scanned.shift)
    elif table.selection is not None:
        dropped = table.unselected()
        gone, gone_total, gone_squares = sums_over(values, dropped, scanned.shift)
        n, count = n - len(dropped), count - int(gone)
        total, squares = total - gone_total, squares - gone_squares
    mean = scanned.shift + total / count if count else math.nan
    relative = total / count if count else 0.0
    var = max(squares / count - relative * relative, 0.0) if count else math.nan
    return {
        "rows": int(n),
        "null_rate": (n - count) / n if n else 0.0,
        "mean": mean,
        "std": math.sqrt(var),
    }


def profile(table: Table) -> dict[str, dict[str, Any]]:
    """Per column of ``table`` (its selected rows): what drift is measured against."""
    out: dict[str, dict[str, Any]] = {}
    for name, column in table.columns.items():
        if isinstance(column, (DictColumn, TagColumn)):  # no drift measure for these yet
            continue
        if isinstance(column, TextColumn):
            n = table.n_rows
            per_value = table.selected_counts(name, count_codes)  # slot 0: missing
            missing = int(per_value[0])
            entry: dict[str, Any] = {"rows": n, "null_rate": missing / n if n else 0.0}
            if column.n_unique <= MAX_VOCABULARY:
                used = per_value[1:] > 0
                entry["vocabulary"] = sorted(str(v) for v in column.uniques[used])
            out[name] = entry
        else:
            out[name] = _numeric(table, name)
    return out


def compare(
    fitted: dict[str, dict[str, Any]], table: Table, thresholds: dict[str, float] | None = None
) -> dict[str, dict[str, Any]]:
    """Per column: the measures, and ``alerts``: the names of those beyond their threshold."""
    return judge(fitted, profile_for_drift(table, fitted), thresholds)


def judge(
    fitted: dict[str, dict[str, Any]], now: dict[str, dict[str, Any]],
    thresholds: dict[str, float] | None = None,
) -> dict[str, dict[str, Any]]:  # fmt: skip
    """:func:`compare` on measures already taken (:func:`profile_for_drift`, or the merge of
    a partitioned run's, :func:`merge_profiles`)."""
    limits = {**THRESHOLDS, **(thresholds or {})}
    out: dict[str, dict[str, Any]] = {}
    for name, seen in now.items():
        before = fitted[name]
        entry: dict[str, Any] = {
            "null_rate": seen["null_rate"],
            "fitted_null_rate": before["null_rate"],
        }
        alerts = []
        if abs(seen["null_rate"] - before["null_rate"]) > limits["null_rate_delta"]:
            alerts.append("null_rate_delta")
        if "mean" in seen and seen["rows"] and not math.isnan(seen["mean"]):
            scale = before["std"] if before["std"] > 0 else 1.0
            entry["mean_shift"] = abs(seen["mean"] - before["mean"]) / scale
            if entry["mean_shift"] > limits["mean_shift"]:
                alerts.append("mean_shift")
            if before["std"] > 0 and seen["std"] > 0:
                entry["std_ratio"] = seen["std"] / before["std"]
                if max(entry["std_ratio"], 1 / entry["std_ratio"]) > limits["std_ratio"]:
                    alerts.append("std_ratio")
        if "unseen_share" in seen:
            entry["unseen_share"] = seen["unseen_share"]
            entry["unseen_examples"] = seen["unseen_examples"]
            if seen["unseen_share"] > limits["unseen_share"]:
                alerts.append("unseen_share")
        entry["alerts"] = alerts
        out[name] = entry
    return out


def merge_profiles(parts: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """One profile (or one set of measures) from those of consecutive partitions of a
    source, as :func:`profile` / :func:`profile_for_drift` measure the whole: counts summed,
    mean and std merged from each partition's present count, mean and std (Chan's update:
    equal to the whole's up to rounding), vocabularies united (none kept once the union
    passes ``MAX_VOCABULARY`` or a partition kept none), unseen shares weighted by each
    partition's present values, the first examples kept."""
    out: dict[str, dict[str, Any]] = {}
    for name in dict.fromkeys(n for part in parts for n in part):
        entries = [part[name] for part in parts if name in part]
        rows = sum(int(e["rows"]) for e in entries)
        present = [int(e["rows"]) - round(e["null_rate"] * int(e["rows"])) for e in entries]
        merged: dict[str, Any] = {"rows": rows,
                                  "null_rate": (rows - sum(present)) / rows if rows else 0.0}  # fmt: skip
        if all("mean" in e for e in entries):
            merged.update(_merged_moments(entries, present))
        if all("vocabulary" in e for e in entries):
            vocabulary = sorted(set().union(*(e["vocabulary"] for e in entries)))
            if len(vocabulary) <= MAX_VOCABULARY:
                merged["vocabulary"] = vocabulary
        if entries and all("unseen_share" in e for e in entries):
            unseen = sum(round(e["unseen_share"] * n) for e, n in zip(entries, present))
            merged["unseen_share"] = unseen / sum(present) if sum(present) else 0.0
            examples = dict.fromkeys(x for e in entries for x in e["unseen_examples"])
            merged["unseen_examples"] = list(examples)[:3]
        out[name] = merged
    return out


def _merged_moments(entries: list[dict[str, Any]], present: list[int]) -> dict[str, float]:
    counted = [(n, e["mean"], e["std"]) for e, n in zip(entries, present) if n]
    total = sum(n for n, _, _ in counted)
    if not total:
        return {"mean": math.nan, "std": math.nan}
    mean = sum(n * m for n, m, _ in counted) / total
    var = sum(n * (s * s + (m - mean) ** 2) for n, m, s in counted) / total
    return {"mean": mean, "std": math.sqrt(var)}


def profile_for_drift(table: Table, fitted: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Like :func:`profile`, with text measured as the share of values unseen at fit."""
    out: dict[str, Any] = {}
    for name, column in table.columns.items():
        if name not in fitted or isinstance(column, (DictColumn, TagColumn)):
            continue
        if not isinstance(column, TextColumn):
            out[name] = _numeric(table, name)
            continue
        n = table.n_rows
        per_value = table.selected_counts(name, count_codes)  # slot 0: missing
        n_present = n - int(per_value[0])
        entry: dict[str, Any] = {"rows": n, "null_rate": 1 - n_present / n if n else 0.0}
        vocabulary = fitted[name].get("vocabulary")
        if vocabulary is not None:
            known = pa.array(vocabulary, type=pa.large_string())
            uniques = arrow_uniques(column)
            unseen = ~ac.is_in(uniques, known).to_numpy(zero_copy_only=False)
            n_unseen = int(per_value[1:][unseen].sum())
            entry["unseen_share"] = n_unseen / n_present if n_present else 0.0
            picked = ac.take(uniques, numeric_array(np.flatnonzero(unseen)[:3])).to_pylist()
            entry["unseen_examples"] = [str(v) for v in picked]
        out[name] = entry
    return out

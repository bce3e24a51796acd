"""Drift between fit and transform: null rate, mean/std shift and unseen categories.

At fit, :func:`profile` records per input column (over the rows that passed validation)
its null rate and, for numbers, mean and std; for text, the distinct values seen (up to
``MAX_VOCABULARY``). At transform, :func:`compare` measures the same on the new rows and
flags each measure beyond its threshold. Numbers take one compiled pass per column (count,
sum, sum of squares); text works on the distinct values and a gather by code.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

from fastprep.columns import Table, TextColumn
from fastprep.dict_column import DictColumn

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
def _moments(values, selection, use_selection):  # pragma: no cover - compiled
    n = selection.shape[0] if use_selection else values.shape[0]
    count = 0
    total = 0.0
    squares = 0.0
    for k in range(n):
        v = np.float64(values[selection[k]] if use_selection else values[k])
        if v == v and v != np.inf and v != -np.inf:
            count += 1
            total += v
            squares += v * v
    return n, count, total, squares


def _numeric(values: np.ndarray, selection: np.ndarray | None) -> dict[str, float]:
    chosen = np.zeros(0, np.int64) if selection is None else selection
    n, count, total, squares = _moments(values, chosen, selection is not None)
    mean = total / count if count else math.nan
    var = max(squares / count - mean * mean, 0.0) if count else math.nan
    return {
        "rows": int(n),
        "null_rate": (n - count) / n if n else 0.0,
        "mean": mean,
        "std": math.sqrt(var),
    }


def _text_codes(table: Table, name: str) -> tuple[TextColumn, np.ndarray]:
    column = table.raw(name)
    assert isinstance(column, TextColumn)
    codes = column.codes if table.selection is None else column.codes[table.selection]
    return column, codes


def profile(table: Table) -> dict[str, dict[str, Any]]:
    """Per column of ``table`` (its selected rows): what drift is measured against."""
    out: dict[str, dict[str, Any]] = {}
    for name, column in table.columns.items():
        if isinstance(column, DictColumn):  # (#8) no drift measure for dict columns yet
            continue
        if isinstance(column, TextColumn):
            text, codes = _text_codes(table, name)
            n = len(codes)
            missing = int(np.count_nonzero(codes < 0))
            entry: dict[str, Any] = {"rows": n, "null_rate": missing / n if n else 0.0}
            if text.n_unique <= MAX_VOCABULARY:
                used = np.zeros(text.n_unique + 1, dtype=bool)
                used[codes] = True  # code -1 marks the trailing slot
                entry["vocabulary"] = sorted(str(v) for v in text.uniques[used[:-1]])
            out[name] = entry
        else:
            out[name] = _numeric(column, table.selection)
    return out


def compare(
    fitted: dict[str, dict[str, Any]], table: Table, thresholds: dict[str, float] | None = None
) -> dict[str, dict[str, Any]]:
    """Per column: the measures, and ``alerts``: the names of those beyond their threshold."""
    limits = {**THRESHOLDS, **(thresholds or {})}
    now = profile_for_drift(table, fitted)
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


def profile_for_drift(table: Table, fitted: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Like :func:`profile`, with text measured as the share of values unseen at fit."""
    out: dict[str, Any] = {}
    for name, column in table.columns.items():
        if name not in fitted or isinstance(column, DictColumn):
            continue
        if not isinstance(column, TextColumn):
            out[name] = _numeric(column, table.selection)
            continue
        text, codes = _text_codes(table, name)
        n = len(codes)
        per_value = np.bincount(codes + 1, minlength=text.n_unique + 1)  # slot 0: missing
        n_present = n - int(per_value[0])
        entry: dict[str, Any] = {"rows": n, "null_rate": 1 - n_present / n if n else 0.0}
        vocabulary = fitted[name].get("vocabulary")
        if vocabulary is not None:
            known = pa.array(vocabulary, type=pa.large_string())
            uniques = text.arrow_uniques
            if uniques is None:
                uniques = pa.array(list(text.uniques), type=pa.large_string())
            unseen = ~pc.is_in(uniques, value_set=known).to_numpy(zero_copy_only=False)
            n_unseen = int(per_value[1:][unseen].sum())
            entry["unseen_share"] = n_unseen / n_present if n_present else 0.0
            picked = uniques.filter(pa.array(unseen)).slice(0, 3).to_pylist()
            entry["unseen_examples"] = [str(v) for v in picked]
        out[name] = entry
    return out

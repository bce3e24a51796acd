"""The reference backend: numpy-vectorized fit and transform, step by step.

Every other backend must produce the same X as this one. Steps never modify their input
in place (an input may be a column of the validated table, shared by other features).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sklearn.feature_extraction import FeatureHasher

from fastprep.backends.expressions import evaluate
from fastprep.backends.stats import fill_value, minmax_params, standardize_params
from fastprep.columns import Table, TextColumn
from fastprep.emit.blocks import Block, CodesBlock, NumericBlock, SparseBlock
from fastprep.errors import BackendError
from fastprep.plan.nodes import Feature, Input
from fastprep.plan.steps import Clip, FillMissing, Hash, Log1p, MinMax, OneHot, Standardize, Step

#: above this many categories in one input, ``OneHot(sparse=None)`` emits CSR
SPARSE_ONEHOT_MIN_CATEGORIES = 64
MISSING_LABEL = "<missing>"


@dataclass
class Repairs:
    """Values a step turned into missing (e.g. log1p of x < -1), counted per output."""

    counts: dict[tuple[str, str], int] = field(default_factory=dict)

    def add(self, output: str, rule: str, count: int) -> None:
        if count:
            self.counts[(output, rule)] = self.counts.get((output, rule), 0) + count


def input_values(item: Input, table: Table, repairs: Repairs) -> np.ndarray | TextColumn:
    """Evaluate a feature input; infinities/invalid results of an ``expr`` become missing."""
    value = evaluate(item.expr, table)
    if item.is_plain_column or isinstance(value, TextColumn):
        return value
    bad = ~np.isfinite(value)
    inputs_missing = np.zeros(len(value), dtype=bool)
    for name in item.columns:
        column = table[name]
        inputs_missing |= column.codes < 0 if isinstance(column, TextColumn) else np.isnan(column)
    new_missing = bad & ~inputs_missing
    repairs.add(item.name, "expr_not_finite", int(np.count_nonzero(new_missing)))
    if bad.any():
        value = np.where(bad, np.nan, value)
    return value


def fit_feature(feature: Feature, table: Table) -> dict[str, list[dict[str, Any]]]:
    """Learn each step's parameters, input by input, applying earlier steps as it goes."""
    params: dict[str, list[dict[str, Any]]] = {}
    repairs = Repairs()
    for item in feature.inputs:
        values = input_values(item, table, repairs)
        learned: list[dict[str, Any]] = []
        for step in feature.steps:
            what = f"{step.describe()} on {item.name!r}"
            learned.append(fit_step(step, values, what))
            if step.kind != "encoder":
                values = apply_step(step, learned[-1], values, item.name, repairs)
        params[item.name] = learned
    return params


def fit_step(step: Step, values: np.ndarray | TextColumn, what: str) -> dict[str, Any]:
    if isinstance(step, FillMissing):
        if isinstance(step.value, str):
            return {"fill": fill_value(values, step.value, what)}
        return {"fill": step.value}
    if isinstance(step, Standardize):
        return standardize_params(values, what)
    if isinstance(step, MinMax):
        return minmax_params(values, *step.feature_range, what)
    if isinstance(step, OneHot):
        return fit_categories(values)
    if isinstance(step, (Clip, Log1p, Hash)):
        return {}
    raise BackendError(f"pandas backend has no fit for {step.describe()}")


def apply_step(
    step: Step, params: dict[str, Any], values: np.ndarray, output: str, repairs: Repairs
) -> np.ndarray:
    """One element-wise step; returns a new array."""
    if isinstance(step, FillMissing):
        return np.where(np.isnan(values), params["fill"], values)
    if isinstance(step, Clip):
        out = values if step.lower is None else np.maximum(values, step.lower)
        return out if step.upper is None else np.minimum(out, step.upper)
    if isinstance(step, Log1p):
        with np.errstate(invalid="ignore", divide="ignore"):
            out = np.log1p(values)
        bad = ~np.isfinite(out) & ~np.isnan(values)
        repairs.add(output, "log1p_domain", int(np.count_nonzero(bad)))
        out[bad] = np.nan
        return out
    if isinstance(step, Standardize):
        out = values - params["mean"] if step.with_mean else values.copy()
        if step.with_std:
            out /= params["scale"]
        return out
    if isinstance(step, MinMax):
        out = values * params["scale"]
        out += params["min"]
        return out
    raise BackendError(f"pandas backend has no element-wise apply for {step.describe()}")


def fit_categories(values: np.ndarray | TextColumn) -> dict[str, Any]:
    """Sorted categories seen at fit, and whether missing was seen (its own last column)."""
    if isinstance(values, TextColumn):
        present = np.unique(values.codes[values.codes >= 0])
        categories = sorted(str(u) for u in values.uniques[present])
        return {
            "categories": categories,
            "numeric": False,
            "missing": bool((values.codes < 0).any()),
        }
    finite = values[~np.isnan(values)]
    categories = [float(v) for v in np.unique(finite)]
    return {"categories": categories, "numeric": True, "missing": bool(np.isnan(values).any())}


def category_codes(values: np.ndarray | TextColumn, params: dict[str, Any]) -> np.ndarray:
    """Per row, the index of its fitted category, or -1 (unseen → all zeros)."""
    categories = params["categories"]
    missing_code = len(categories) if params["missing"] else -1
    if isinstance(values, TextColumn):
        lookup = {c: i for i, c in enumerate(categories)}
        per_unique = np.array([lookup.get(str(u), -1) for u in values.uniques], dtype=np.int64)
        return np.append(per_unique, missing_code)[values.codes]
    numbers = np.asarray(categories, dtype=np.float64)
    position = np.searchsorted(numbers, values)
    clipped = np.minimum(position, max(len(numbers) - 1, 0))
    found = (
        (position < len(numbers)) & (numbers[clipped] == values) if len(numbers) else position < 0
    )
    codes = np.where(found, position, -1)
    return np.where(np.isnan(values), missing_code, codes)


def category_names(name: str, params: dict[str, Any]) -> list[str]:
    labels = [_label(c) for c in params["categories"]]
    if params["missing"]:
        labels.append(MISSING_LABEL)
    return [f"{name}={label}" for label in labels]


def _label(value: float | str) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def transform_feature(
    feature: Feature, params: dict[str, list[dict[str, Any]]], table: Table, repairs: Repairs
) -> Block:
    """The output block of one feature over every row of ``table``."""
    values = {item.name: input_values(item, table, repairs) for item in feature.inputs}
    numeric_steps = [s for s in feature.steps if s.kind != "encoder"]
    for item in feature.inputs:
        for position, step in enumerate(numeric_steps):
            values[item.name] = apply_step(
                step, params[item.name][position], values[item.name], item.name, repairs
            )
    encoder = feature.encoder
    if encoder is None:
        return NumericBlock(
            [i.name for i in feature.inputs], [values[i.name] for i in feature.inputs]
        )
    if isinstance(encoder, OneHot):
        return onehot_block(feature, params, values)
    if isinstance(encoder, Hash):
        return SparseBlock(hash_prefix(feature), hash_with_sklearn(encoder, values, table.n_rows))
    raise BackendError(f"pandas backend has no encoder {encoder.describe()}")


def onehot_block(
    feature: Feature, params: dict[str, list[dict[str, Any]]], values: dict[str, Any]
) -> CodesBlock:
    names: list[str] = []
    codes: list[np.ndarray] = []
    widths: list[int] = []
    for item in feature.inputs:
        fitted = params[item.name][-1]
        labels = category_names(item.name, fitted)
        names.extend(labels)
        widths.append(len(labels))
        codes.append(category_codes(values[item.name], fitted))
    encoder = feature.encoder
    assert isinstance(encoder, OneHot)
    sparse = (
        encoder.sparse
        if encoder.sparse is not None
        else max(widths, default=0) > SPARSE_ONEHOT_MIN_CATEGORIES
    )
    return CodesBlock(names, codes, widths, sparse)


def hash_prefix(feature: Feature) -> str:
    return "hash:" + ",".join(i.name for i in feature.inputs)


def hash_with_sklearn(step: Hash, values: dict[str, Any], n_rows: int):
    """sklearn ``FeatureHasher`` over each row's ``{name: value}`` pairs (the reference)."""
    per_input = []
    for name, value in values.items():
        if isinstance(value, TextColumn):
            tokens = np.array([f"{name}={u}" for u in value.uniques] + [None], dtype=object)
            per_input.append(
                [(t, 1) if t is not None else None for t in tokens[value.codes].tolist()]
            )
        else:
            per_input.append([None if v != v else (name, v) for v in value.tolist()])
    rows = (
        ([pair for pair in row if pair is not None] for row in zip(*per_input)) if per_input else ()
    )
    hasher = FeatureHasher(
        n_features=step.n_features,
        input_type="pair",
        alternate_sign=step.alternate_sign,
        dtype=np.float32,
    )
    if n_rows == 0:
        import scipy.sparse as sp

        return sp.csr_matrix((0, step.n_features), dtype=np.float32)
    return hasher.transform(rows)
